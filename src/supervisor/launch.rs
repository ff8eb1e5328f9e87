//! What an instance of an application is started with: its program and arguments (rein's preload and Unit's
//! loader names for Node.js, the adapter for Python, PHP-FPM for PHP), environment, user, output files and stop
//! signal, and the address the proxy reaches it at.

use nix::sys::signal::Signal;

use super::Paths;
use super::conf::{AppConf, AppKind};
use super::machine::InstanceId;
use super::php::{self, Launch};
use super::spawn::{AppSocket, Output, SpawnSpec};
use crate::link::ServerAddr;

/// How an instance of application `name` starts: its program, arguments, environment, user and output.
pub(super) fn spec(
    name: &str,
    c: &AppConf,
    paths: &Paths,
    socket: AppSocket,
    instance: InstanceId,
) -> Result<SpawnSpec, php::LaunchError> {
    let Launch {
        program: executable,
        arguments,
        environment,
    } = match &c.kind {
        AppKind::External => Launch {
            program: c.executable.clone(),
            arguments: c.arguments.clone(),
            environment: c.environment.clone(),
        },
        AppKind::Php(php) => php::launch(name, c, php, &socket, &paths.sockets)?,
        AppKind::Python(py) => Launch {
            program: c.executable.clone(),
            arguments: py.arguments(&paths.python_adapter),
            environment: c.environment.clone(),
        },
    };
    let (user, group) = credentials(c);
    // Unit's `stdout` / `stderr` when set, else the app's log.
    let output = |o: &Option<Output>| o.clone().unwrap_or_else(|| Output::Log(paths.log.clone()));
    let node = is_node(&executable, &arguments, c.working_directory.as_deref())
        .then(|| paths.node.clone())
        .flatten();
    let arguments = match &node {
        Some((_, modules)) => unit_loader_arguments(arguments, modules),
        None => arguments,
    };
    Ok(SpawnSpec {
        node,
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
        // PHP-FPM's master must stop its workers itself: killed outright, it would orphan them.
        death_signal: match c.kind {
            AppKind::Php(_) => Signal::SIGTERM,
            _ => Signal::SIGKILL,
        },
    })
}

/// The user and group the process starts as. PHP-FPM's master stays root when rein is: it reads its
/// configuration from rein's private directory, and switches its workers to the pool's `user`/`group` itself
/// (which are the app's). Otherwise (rein not root) the app's `user`/`group` go to the spawn, which accepts
/// only rein's own.
fn credentials(c: &AppConf) -> (Option<String>, Option<String>) {
    match c.kind {
        AppKind::Php(_) if nix::unistd::geteuid().is_root() => (None, None),
        _ => (c.user.clone(), c.group.clone()),
    }
}

pub(super) fn server_addr(addr: &AppSocket) -> ServerAddr {
    match addr {
        AppSocket::Unix(p) => ServerAddr::Unix(p.clone()),
        AppSocket::Tcp(a) => ServerAddr::Tcp(*a),
    }
}

/// Node.js gets rein's preload (its `listen()` takes the passed socket) and the `unit-http` alias. Node
/// runs as `node`, as Unit's loader setup does (`/usr/bin/env node ...`), or as Unit's documentation
/// shows a Node.js app: a `.js` script with a `#!/usr/bin/env node` shebang as the executable.
pub(super) fn is_node(
    executable: &std::path::Path,
    arguments: &[String],
    working_directory: Option<&std::path::Path>,
) -> bool {
    let named_node = |p: &std::path::Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n == "node" || n == "nodejs")
    };
    if named_node(executable) {
        return true;
    }
    if executable.file_name().is_some_and(|n| n == "env") {
        let first = arguments.iter().find(|a| !a.starts_with('-'));
        return first.is_some_and(|a| named_node(std::path::Path::new(a)));
    }
    let script = match working_directory {
        Some(dir) if executable.is_relative() => dir.join(executable),
        _ => executable.to_path_buf(),
    };
    shebang_is_node(&script)
}

/// Unit's Node.js loader setup names `--loader unit-http/loader.mjs`, which Node resolves without
/// `NODE_PATH`: it becomes the absolute path of rein's stand-in (`--require unit-http/loader` resolves
/// through `NODE_PATH` as it is).
fn unit_loader_arguments(arguments: Vec<String>, modules: &std::path::Path) -> Vec<String> {
    arguments
        .into_iter()
        .map(|a| match a.as_str() {
            "unit-http/loader.mjs" => modules.join(&a).display().to_string(),
            _ => a,
        })
        .collect()
}

/// Whether the file starts with a `#!` line whose interpreter, or `env`'s program, is `node`.
fn shebang_is_node(script: &std::path::Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 128];
    let Ok(n) = std::fs::File::open(script).and_then(|mut f| f.read(&mut head)) else {
        return false;
    };
    let Some(line) = head[..n].strip_prefix(b"#!") else {
        return false;
    };
    let line = String::from_utf8_lossy(line);
    let mut words = line.lines().next().unwrap_or("").split_whitespace();
    let interpreter = words.next().map(std::path::Path::new);
    match interpreter {
        Some(i) if i.file_name().is_some_and(|n| n == "env") => {
            let args: Vec<String> = words.map(str::to_owned).collect();
            is_node(i, &args, None)
        }
        Some(i) => i
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n == "node" || n == "nodejs"),
        None => false,
    }
}
