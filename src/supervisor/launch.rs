//! What an instance of an application is started with: its type's program, arguments and environment
//! ([`super::kind`]), and the user, output files, stop signal and socket every app has.

use super::Paths;
use super::conf::AppConf;
use super::kind::{Launch, LaunchError, Launching};
use super::machine::InstanceId;
use super::spawn::{AppSocket, Output, SpawnSpec};
use crate::link::ServerAddr;

/// How an instance of application `name` starts: its program, arguments, environment, user and output.
pub(super) fn spec(
    name: &str,
    c: &AppConf,
    paths: &Paths,
    socket: AppSocket,
    instance: InstanceId,
) -> Result<SpawnSpec, LaunchError> {
    let Launch {
        program: executable,
        arguments,
        environment,
    } = c.kind.launch(&Launching {
        name,
        conf: c,
        socket: &socket,
        dir: &paths.sockets,
        files: &paths.files,
    })?;
    let (user, group) = match c.kind.keeps_root() && nix::unistd::geteuid().is_root() {
        true => (None, None),
        false => (c.user.clone(), c.group.clone()),
    };
    // Unit's `stdout` / `stderr` when set, else the app's log.
    let output = |o: &Option<Output>| o.clone().unwrap_or_else(|| Output::Log(paths.log.clone()));
    Ok(SpawnSpec {
        node: c.kind.node_support(&paths.files),
        executable,
        arguments,
        working_directory: c.working_directory.clone(),
        environment,
        user,
        group,
        socket,
        stdout: output(&c.stdout),
        stderr: output(&c.stderr),
        log_rotation: Default::default(),
        name: name.to_owned(),
        instance,
        isolation: c.isolation.clone(),
        death_signal: c.kind.death_signal(),
    })
}

pub(super) fn server_addr(addr: &AppSocket) -> ServerAddr {
    match addr {
        AppSocket::Unix(p) => ServerAddr::Unix(p.clone()),
        AppSocket::Tcp(a) => ServerAddr::Tcp(*a),
    }
}
