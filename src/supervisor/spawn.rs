//! Starting app processes: the listening socket, the child's environment and credentials, and the exec shim.
//!
//! How a child starts ([`spawn`]):
//! - rein forks and, in the child before exec: `setpgid(0, 0)` (its own process group, so [`signal_group`]
//!   reaches grandchildren), stdin `/dev/null`, stdout/stderr pipes read by rein ([`super::logs`], each line
//!   prefixed with its time and instance by [`super::logline`]; `/dev/null`
//!   for a stream the app's `stdout`/`stderr` discards), the user switch when rein is root (`setgroups` to the
//!   user's groups, `setgid`, `setuid`), then `PR_SET_PDEATHSIG` (SIGKILL unless the spec says otherwise) —
//!   after the switch, because a credential change clears it — and finally the listening socket `dup2`'d to
//!   fd 3 without close-on-exec (and, for a `"handoff": true` app, its Node.js IPC channel to fd 4,
//!   `NODE_CHANNEL_FD`: [`spawn_with`]). The soft descriptor limit goes back to the one rein started with
//!   ([`crate::fd_limit`]).
//! - it execs rein itself (`/proc/self/exe __exec -- PROG ARGS...`, so an upgraded or deleted rein binary still
//!   works) as a shim ([`exec_shim`]) that sets `LISTEN_PID` to its own pid and `execvp`s the app: the pid is
//!   then the app's pid, as the systemd socket-activation protocol requires (`LISTEN_FDS=1`,
//!   `LISTEN_FDNAMES=<app name>`).
//!
//! The parent-death signal belongs to the *thread* that forked: it fires when that thread exits, not the
//! process. tokio's blocking-pool threads come and go, so every fork happens on one dedicated thread that
//! lives as long as rein (see [`spawner`]); a child whose parent process is already gone when it reaches
//! the `prctl` (its parent pid changed) gives up instead of running unguarded.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex, OnceLock, mpsc};

use nix::sys::signal::Signal;
use nix::unistd::{Gid, Group, Pid, Uid, User};
use socket2::{Domain, SockAddr, Socket, Type};
use tokio::task::JoinHandle;

use super::isolation::{self, HostIds, InstanceCgroup, Isolation};
use super::logline::{Lines, Source};
use super::logs::{self, LogFile, Rotation};

/// Which socket an app instance listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketKind {
    /// A Unix socket in the app's runtime directory.
    Unix,
    /// A loopback TCP port chosen by the kernel.
    Tcp,
}

/// The listening socket rein created for one instance slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppSocket {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl std::fmt::Display for AppSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppSocket::Unix(path) => write!(f, "unix:{}", path.display()),
            AppSocket::Tcp(addr) => write!(f, "{addr}"),
        }
    }
}

/// Everything needed to start one app process.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// The program: a path, or a bare name looked up in the child's `PATH` (by the shim's `execvp`).
    pub executable: PathBuf,
    pub arguments: Vec<String>,
    /// The child's working directory; rein's when `None`.
    pub working_directory: Option<PathBuf>,
    /// Added to the child's environment, which otherwise holds only `PATH`, `HOME`, `LANG` and `TZ` from
    /// rein's own (`PATH` defaulting to [`DEFAULT_PATH`]); with a user switch `HOME`, `USER` and `LOGNAME`
    /// are the target user's. rein's variables (`LISTEN_*`, `PORT`, `REIN_SOCKET`) override these.
    pub environment: Vec<(String, String)>,
    /// Run as this user (and its groups); only possible when rein runs as root, otherwise it must be the
    /// user rein runs as.
    pub user: Option<String>,
    /// Run with this primary group (default: the user's).
    pub group: Option<String>,
    /// The listening socket passed as fd 3 (the fd itself is the `listener` argument of [`spawn`]).
    pub socket: AppSocket,
    /// Where the child's standard output and error go (may be the same file).
    pub stdout: Output,
    pub stderr: Output,
    pub log_rotation: Rotation,
    /// Node.js: `(preload.js, NODE_PATH dir)` from [`install_node_support`]; adds `--require preload.js` to
    /// `NODE_OPTIONS` and the dir (holding `unit-http`) to `NODE_PATH`.
    pub node: Option<(PathBuf, PathBuf)>,
    /// The app's name, for logs, errors and `LISTEN_FDNAMES`.
    pub name: String,
    /// The instance this process is, named on each line of its output in the logs.
    pub instance: u64,
    /// The signal the process gets if rein dies (`PR_SET_PDEATHSIG`): SIGKILL, or a signal that lets a
    /// master process take its own workers down (PHP-FPM's workers are not rein's children).
    pub death_signal: Signal,
    /// Unit's `isolation`: the shim confines the instance before it executes the app
    /// ([`super::isolation`]); the user switch and working directory are then the shim's to make.
    pub isolation: Option<Isolation>,
}

/// Where one of a child's output streams goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// A size-rotated file written by rein, through a pipe ([`super::logs`]).
    Log(PathBuf),
    /// Nowhere: the stream is `/dev/null`, and rein reads nothing.
    Discard,
}

impl Output {
    /// The log file, unless the stream is discarded.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Output::Log(path) => Some(path),
            Output::Discard => None,
        }
    }
}

/// `PATH` for children when rein has none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The variables kept from rein's environment.
const KEPT_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TZ"];

/// The listen backlog of app sockets.
const BACKLOG: i32 = 1024;

/// Creates the listening socket of instance slot `instance`: a Unix socket `dir/instance-N.sock` (mode 0660,
/// a stale socket file removed; any other file there is an error) or a loopback TCP port chosen by the
/// kernel. Backlog 1024, close-on-exec, blocking. rein keeps the returned fd for the life of the slot and
/// passes it to every process that fills the slot, so connections queue across restarts instead of failing.
pub fn listen(kind: SocketKind, dir: &Path, instance: u64) -> io::Result<(OwnedFd, AppSocket)> {
    match kind {
        SocketKind::Tcp => {
            let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
            socket.set_reuse_address(true)?;
            socket.bind(&SocketAddr::from((Ipv4Addr::LOCALHOST, 0)).into())?;
            socket.listen(BACKLOG)?;
            let addr = socket
                .local_addr()?
                .as_socket()
                .ok_or_else(|| io::Error::other("TCP socket without an address"))?;
            Ok((socket.into(), AppSocket::Tcp(addr)))
        }
        SocketKind::Unix => {
            let path = dir.join(format!("instance-{instance}.sock"));
            let context =
                |e: io::Error| io::Error::new(e.kind(), format!("socket {}: {e}", path.display()));
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.file_type().is_socket() => {
                    std::fs::remove_file(&path).map_err(context)?
                }
                Ok(_) => {
                    return Err(context(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        "exists and is not a socket",
                    )));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(context(e)),
            }
            let addr = SockAddr::unix(&path).map_err(context)?; // rejects paths over 107 bytes
            let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
            socket.bind(&addr).map_err(context)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o660))
                .map_err(context)?;
            socket.listen(BACKLOG).map_err(context)?;
            Ok((socket.into(), AppSocket::Unix(path)))
        }
    }
}

/// A started app process and the tasks copying its output into its log files.
#[derive(Debug)]
pub struct Spawned {
    /// The process (its stdout/stderr are taken by the pumps). tokio reaps it once waited on or dropped.
    pub child: tokio::process::Child,
    /// The stdout and stderr pumps; each ends (with the bytes copied) when every holder of that pipe — the
    /// process and any grandchildren — has exited or closed it.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the pump runs detached; the tests wait for it")
    )]
    pub stdout: JoinHandle<io::Result<u64>>,
    pub stderr: JoinHandle<io::Result<u64>>,
    /// The last lines the process wrote to its stderr (empty when it is discarded).
    pub stderr_tail: Arc<Mutex<logs::Tail>>,
    /// rein's lines about the instance, into its stderr log (else its stdout log).
    pub notices: logs::Notices,
    /// The instance's own cgroup (`isolation.cgroup`), to remove and to ask about an OOM kill once it exits.
    pub cgroup: Option<InstanceCgroup>,
}

/// Resolved credentials for the child (resolved in the parent: lookups are not async-signal-safe).
#[derive(Debug, Clone)]
struct Credentials {
    uid: Option<Uid>,
    gid: Option<Gid>,
    groups: Vec<libc::gid_t>,
    home: Option<PathBuf>,
    name: Option<String>,
}

/// Starts the process described by `spec` with `listener` as its fd 3. Must be called inside a tokio
/// runtime (the child and its log pumps are registered with it). The calling thread waits for the fork and
/// the exec of the shim on the spawner thread (about a millisecond). Errors name the app; a failure of the
/// *app's* exec (missing program) is not an error here but exit code 127 with the reason in its stderr log
/// (use [`check_executable`] first).
#[cfg(test)]
pub fn spawn(spec: &SpawnSpec, listener: BorrowedFd<'_>) -> io::Result<Spawned> {
    spawn_with(spec, listener, None)
}

/// The fd a Node.js instance's IPC channel is passed as (`NODE_CHANNEL_FD`), after the listening socket.
const CHANNEL_FD: RawFd = 4;

/// [`spawn`], with `channel` (one end of a Unix socket pair) as the instance's Node.js IPC channel on fd 4,
/// for `"handoff": true` ([`crate::handoff`]).
pub fn spawn_with(
    spec: &SpawnSpec,
    listener: BorrowedFd<'_>,
    channel: Option<BorrowedFd<'_>>,
) -> io::Result<Spawned> {
    let context = |e: io::Error| io::Error::new(e.kind(), format!("app {:?}: {e}", spec.name));
    let creds = credentials(spec.user.as_deref(), spec.group.as_deref()).map_err(context)?;
    // Open the logs first, so a bad log path fails here rather than inside a pump.
    let open = |output: &Output| {
        output
            .path()
            .map(|path| logs::shared(path, spec.log_rotation))
            .transpose()
            .map_err(context)
    };
    let (out_log, err_log) = (open(&spec.stdout)?, open(&spec.stderr)?);
    let stdio = |log: &Option<_>| match log {
        Some(_) => Stdio::piped(),
        None => Stdio::null(),
    };

    // An fd below 3 would be clobbered by the stdio setup before it is moved to 3.
    let moved;
    let listen_fd = if listener.as_raw_fd() < 3 {
        moved = listener.try_clone_to_owned().and_then(|fd| {
            // SAFETY: F_DUPFD_CLOEXEC on a valid fd returns a new fd we own.
            let raw = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `raw` is a fresh fd owned by nobody else.
            Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) })
        })?;
        moved.as_raw_fd()
    } else {
        listener.as_raw_fd()
    };
    // Above the fds the child sets up, so that moving the listener to 3 cannot clobber it.
    let channel = channel.map(|c| dup_above(c, CHANNEL_FD + 1)).transpose()?;
    let channel_fd = channel.as_ref().map(|c| c.as_raw_fd());

    let cgroup = match spec.isolation.as_ref().and_then(|i| i.cgroup.as_ref()) {
        Some(cg) => Some(
            InstanceCgroup::create(&spec.name, cg, spec.instance)
                .map_err(|e| context(io::Error::other(format!("isolation.cgroup: {e}"))))?,
        ),
        None => None,
    };
    let isolate = match &spec.isolation {
        Some(iso) => Some(isolation_plan(spec, iso, &creds, cgroup.as_ref()).map_err(context)?),
        None => None,
    };
    let mut cmd = tokio::process::Command::new("/proc/self/exe");
    cmd.arg0("rein").arg("__exec");
    if let Some(plan) = &isolate {
        cmd.arg("--isolate").arg(plan);
    }
    cmd.arg("--")
        .arg(&spec.executable)
        .args(&spec.arguments)
        .env_clear()
        .envs(environment(spec, &creds))
        .envs(
            channel_fd
                .map(|_| {
                    // Node opens its IPC channel on it; the preload sees the variable and takes connections.
                    [
                        ("NODE_CHANNEL_FD", CHANNEL_FD.to_string()),
                        ("REIN_HANDOFF", "1".to_owned()),
                    ]
                })
                .into_iter()
                .flatten(),
        )
        .stdin(Stdio::null())
        .stdout(stdio(&out_log))
        .stderr(stdio(&err_log))
        .process_group(0)
        .kill_on_drop(false);
    // chdir happens after the user switch, so the directory must be accessible to the app's user. An isolated
    // instance's shim makes both itself, inside the namespaces.
    let (creds, cwd) = match isolate {
        Some(_) => (Credentials::none(), None),
        None => (creds, working_directory(spec).map_err(context)?),
    };
    // SAFETY: the closure only makes async-signal-safe system calls on values prepared before the fork.
    let parent = std::process::id() as libc::pid_t;
    let nofile = crate::fd_limit::inherited();
    unsafe {
        let death = spec.death_signal as libc::c_ulong;
        cmd.pre_exec(move || {
            if let Some(soft) = nofile {
                crate::fd_limit::restore_in_child(soft)?;
            }
            child_setup(&creds, cwd.as_deref(), listen_fd, parent, death)?;
            if let Some(fd) = channel_fd {
                // dup2 clears close-on-exec on the copy.
                check(libc::dup2(fd, CHANNEL_FD))?;
            }
            Ok(())
        });
    }

    let mut child = spawner()
        .spawn(cmd)
        .map_err(|e| io::Error::new(e.kind(), format!("app {:?}: cannot start: {e}", spec.name)))?;
    let stderr_tail = Arc::new(Mutex::new(logs::Tail::default()));
    let notices = logs::Notices::new(err_log.clone().or_else(|| out_log.clone()), spec.instance);
    // Before the pumps start: the notice comes before anything the process wrote.
    if let Some(pid) = child.id() {
        notices.write(&format!("started: pid {pid}, socket {}", spec.socket));
    }
    let lines = |source| Lines::new(spec.instance, source);
    let stdout = pump(
        child.stdout.take(),
        out_log,
        &spec.name,
        None,
        lines(Source::Out),
    );
    let stderr = pump(
        child.stderr.take(),
        err_log,
        &spec.name,
        Some(stderr_tail.clone()),
        lines(Source::Err),
    );
    Ok(Spawned {
        child,
        stdout,
        stderr,
        stderr_tail,
        notices,
        cgroup,
    })
}

/// The shim's instructions for an isolated instance, as JSON for its command line.
fn isolation_plan(
    spec: &SpawnSpec,
    iso: &Isolation,
    creds: &Credentials,
    cgroup: Option<&InstanceCgroup>,
) -> io::Result<String> {
    let host = creds.host_ids();
    let support = spec
        .node
        .iter()
        .flat_map(|(preload, modules)| {
            [
                preload.parent().map(Path::to_path_buf),
                Some(modules.clone()),
            ]
        })
        .flatten()
        .collect();
    let at = isolation::Instance {
        app: &spec.name,
        program: &spec.executable,
        arguments: &spec.arguments,
        support,
        cwd: spec.working_directory.clone(),
        cgroup_procs: cgroup.map(InstanceCgroup::procs).unwrap_or_default(),
        death_signal: spec.death_signal as i32,
    };
    let plan = isolation::plan(iso, &host, &at)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("isolation: {e}")))?;
    serde_json::to_string(&plan).map_err(io::Error::other)
}

/// The ids an app of `user` / `group` runs as on the host, for the isolation checks.
pub(crate) fn host_ids(user: Option<&str>, group: Option<&str>) -> io::Result<HostIds> {
    Ok(credentials(user, group)?.host_ids())
}

/// A command that runs `spec`'s program as its instances run — the same clean environment, user, group and
/// working directory — without an instance's plumbing (no socket on fd 3, no process group, no parent-death
/// signal, no exec shim; stdio is the caller's): for a throwaway run such as Python's import check, which must
/// see the app as its instances do.
pub fn command_like(spec: &SpawnSpec) -> io::Result<std::process::Command> {
    let creds = credentials(spec.user.as_deref(), spec.group.as_deref())?;
    let cwd = working_directory(spec)?;
    let mut cmd = std::process::Command::new(&spec.executable);
    cmd.args(&spec.arguments)
        .env_clear()
        .envs(environment(spec, &creds));
    // SAFETY: the closure only makes async-signal-safe system calls on values prepared before the fork.
    unsafe {
        cmd.pre_exec(move || switch_user(&creds, cwd.as_deref()));
    }
    Ok(cmd)
}

fn working_directory(spec: &SpawnSpec) -> io::Result<Option<CString>> {
    spec.working_directory
        .as_ref()
        .map(|dir| {
            CString::new(dir.as_os_str().as_bytes())
                .map_err(|_| io::Error::other("working directory contains a NUL byte"))
        })
        .transpose()
}

/// The task copying one of the child's pipes into its log; one that has nothing to copy when the stream is
/// discarded.
fn pump<R>(
    pipe: Option<R>,
    log: Option<Arc<Mutex<LogFile>>>,
    name: &str,
    tail: Option<Arc<Mutex<logs::Tail>>>,
    lines: Lines,
) -> JoinHandle<io::Result<u64>>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    match (pipe, log) {
        (Some(pipe), Some(log)) => {
            tokio::spawn(logs::pump(pipe, log, name.to_owned(), tail, lines))
        }
        _ => tokio::spawn(std::future::ready(Ok(0))),
    }
}

/// In the child, between fork and exec.
fn child_setup(
    creds: &Credentials,
    cwd: Option<&std::ffi::CStr>,
    listen_fd: RawFd,
    parent: libc::pid_t,
    death_signal: libc::c_ulong,
) -> io::Result<()> {
    switch_user(creds, cwd)?;
    // SAFETY: plain system calls on plain values.
    unsafe {
        // After the switch: changing credentials clears the parent-death signal.
        check(libc::prctl(libc::PR_SET_PDEATHSIG, death_signal, 0, 0, 0))?;
        // rein died between fork and prctl: the signal will never come.
        if libc::getppid() != parent {
            return Err(io::Error::other("rein exited during the start"));
        }
        if listen_fd == 3 {
            check(libc::fcntl(3, libc::F_SETFD, 0))?;
        } else {
            check(libc::dup2(listen_fd, 3))?;
        }
    }
    Ok(())
}

/// In a child, between fork and exec: becomes the app's user and group, then enters its directory.
fn switch_user(creds: &Credentials, cwd: Option<&std::ffi::CStr>) -> io::Result<()> {
    // SAFETY: plain system calls on plain values.
    unsafe {
        if let Some(gid) = creds.gid {
            check(libc::setgroups(creds.groups.len(), creds.groups.as_ptr()))?;
            check(libc::setgid(gid.as_raw()))?;
        }
        if let Some(uid) = creds.uid {
            check(libc::setuid(uid.as_raw()))?;
        }
        if let Some(dir) = cwd {
            check(libc::chdir(dir.as_ptr()))?;
        }
    }
    Ok(())
}

/// A close-on-exec copy of `fd` numbered `min` or above.
fn dup_above(fd: BorrowedFd<'_>, min: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on a valid fd returns a new fd we own.
    let raw = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh fd owned by nobody else.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) })
}

/// A libc call's result: -1 is the error in `errno`.
fn check(r: libc::c_int) -> io::Result<()> {
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl Credentials {
    fn none() -> Credentials {
        Credentials {
            uid: None,
            gid: None,
            groups: Vec::new(),
            home: None,
            name: None,
        }
    }

    /// The ids the app has on the host: these, or rein's own when it does not switch.
    fn host_ids(&self) -> HostIds {
        HostIds {
            uid: self.uid.unwrap_or_else(Uid::effective).as_raw(),
            gid: self.gid.unwrap_or_else(Gid::effective).as_raw(),
            groups: self.gid.map(|_| self.groups.clone()),
            root: Uid::effective().is_root(),
        }
    }
}

fn credentials(user: Option<&str>, group: Option<&str>) -> io::Result<Credentials> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    let lookup_user = |name: &str| {
        User::from_name(name)
            .map_err(io::Error::from)?
            .ok_or_else(|| invalid(format!("no such user {name:?}")))
    };
    let lookup_group = |name: &str| {
        Group::from_name(name)
            .map_err(io::Error::from)?
            .ok_or_else(|| invalid(format!("no such group {name:?}")))
    };
    let user = user.map(lookup_user).transpose()?;
    let group = group.map(lookup_group).transpose()?;
    let none = Credentials::none();
    if !Uid::effective().is_root() {
        // Not root: the settings may only name what rein already is.
        if let Some(u) = &user
            && u.uid != Uid::effective()
        {
            return Err(invalid(format!(
                "cannot run as user {:?}: rein is not running as root",
                u.name
            )));
        }
        if let Some(g) = &group
            && g.gid != Gid::effective()
        {
            return Err(invalid(format!(
                "cannot run as group {:?}: rein is not running as root",
                g.name
            )));
        }
        return Ok(none);
    }
    match (user, group) {
        (None, None) => Ok(none),
        (None, Some(g)) => Ok(Credentials {
            gid: Some(g.gid),
            groups: vec![g.gid.as_raw()],
            ..none
        }),
        (Some(u), g) => {
            let gid = g.map_or(u.gid, |g| g.gid);
            let cname = CString::new(u.name.as_bytes()).map_err(io::Error::other)?;
            let mut groups: Vec<libc::gid_t> = nix::unistd::getgrouplist(&cname, gid)
                .map_err(io::Error::from)?
                .into_iter()
                .map(Gid::as_raw)
                .collect();
            if !groups.contains(&gid.as_raw()) {
                groups.push(gid.as_raw());
            }
            Ok(Credentials {
                uid: Some(u.uid),
                gid: Some(gid),
                groups,
                home: Some(u.dir),
                name: Some(u.name),
            })
        }
    }
}

fn environment(spec: &SpawnSpec, creds: &Credentials) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut set = |k: &str, v: OsString| {
        env.retain(|(key, _)| key != k);
        env.push((k.into(), v));
    };
    for key in KEPT_ENV {
        if let Some(v) = std::env::var_os(key) {
            set(key, v);
        }
    }
    if std::env::var_os("PATH").is_none() {
        set("PATH", DEFAULT_PATH.into());
    }
    if let (Some(home), Some(name)) = (&creds.home, &creds.name) {
        set("HOME", home.into());
        set("USER", name.into());
        set("LOGNAME", name.into());
    }
    for (k, v) in &spec.environment {
        set(k, v.into());
    }
    if let Some((preload, node_path)) = &spec.node {
        let require = format!("--require {}", node_quote(preload));
        let options = match spec.environment.iter().find(|(k, _)| k == "NODE_OPTIONS") {
            Some((_, user)) if !user.trim().is_empty() => format!("{require} {user}"),
            _ => require,
        };
        set("NODE_OPTIONS", options.into());
        let mut path = node_path.as_os_str().to_owned();
        if let Some((_, user)) = spec.environment.iter().find(|(k, _)| k == "NODE_PATH") {
            path.push(":");
            path.push(user);
        }
        set("NODE_PATH", path);
    }
    set("LISTEN_FDS", "1".into());
    set("LISTEN_FDNAMES", fd_name(&spec.name).into());
    match &spec.socket {
        AppSocket::Tcp(addr) => set("PORT", addr.port().to_string().into()),
        // `PORT` is a number to every framework that reads it (gunicorn, Express, Rails): a Unix socket's
        // path is only in `REIN_SOCKET`.
        AppSocket::Unix(path) => set("REIN_SOCKET", path.into()),
    }
    env
}

/// A `NODE_OPTIONS` word: double-quoted when it holds spaces, quotes or backslashes.
fn node_quote(path: &Path) -> String {
    let s = path.to_string_lossy();
    if s.contains([' ', '"', '\\', '\t']) {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        s.into_owned()
    }
}

/// `LISTEN_FDNAMES` allows up to 255 printable characters, no `:`.
fn fd_name(name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != ':' {
                c
            } else {
                '_'
            }
        })
        .take(255)
        .collect();
    if name.is_empty() { "app".into() } else { name }
}

/// The one thread all children are forked from, so that their parent-death signal is tied to a thread that
/// lives as long as rein.
struct Spawner {
    jobs: Mutex<mpsc::Sender<Job>>,
}

type Job = (
    tokio::process::Command,
    tokio::runtime::Handle,
    mpsc::SyncSender<io::Result<tokio::process::Child>>,
);

fn spawner() -> &'static Spawner {
    static SPAWNER: OnceLock<Spawner> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("rein-spawner".into())
            .spawn(move || {
                for (mut cmd, handle, reply) in rx {
                    let _runtime = handle.enter();
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawn the rein-spawner thread");
        Spawner {
            jobs: Mutex::new(tx),
        }
    })
}

impl Spawner {
    fn spawn(&self, cmd: tokio::process::Command) -> io::Result<tokio::process::Child> {
        let handle = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
        let (reply, result) = mpsc::sync_channel(1);
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send((cmd, handle, reply))
            .map_err(|_| io::Error::other("the spawner thread is gone"))?;
        result
            .recv()
            .map_err(|_| io::Error::other("the spawner thread is gone"))?
    }
}

/// Sends `sig` to the process group led by `pid` (every app process is a group leader: see [`spawn`]).
/// Refuses pids 0 and 1, which would mean rein's own group or every process.
pub fn signal_group(pid: u32, sig: Signal) -> io::Result<()> {
    let pid = i32::try_from(pid).ok().filter(|p| *p > 1).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pid}"),
        )
    })?;
    nix::sys::signal::killpg(Pid::from_raw(pid), sig).map_err(io::Error::from)
}

/// `rein __exec [--] PROG ARGS...`, the shim between fork and the app: sets `LISTEN_PID` to its own pid
/// (the app keeps it across exec) and `execvp`s `PROG` with `ARGS` (`argv[0]` = `PROG`). `args` is the
/// command line after `__exec`. Returns only on failure, after printing why to stderr: exit code 127.
pub fn exec_shim(args: Vec<OsString>) -> ExitCode {
    let mut args = args.into_iter().peekable();
    let mut plan = None;
    if args.peek().map(OsString::as_os_str) == Some(OsStr::new("--isolate")) {
        args.next();
        let parsed = args
            .next()
            .and_then(|p| serde_json::from_slice::<isolation::Plan>(p.as_bytes()).ok());
        let Some(parsed) = parsed else {
            eprintln!("rein __exec: --isolate needs the plan rein writes");
            return ExitCode::from(127);
        };
        plan = Some(parsed);
    }
    if args.peek().map(OsString::as_os_str) == Some(OsStr::new("--")) {
        args.next();
    }
    let Some(program) = args.next() else {
        eprintln!("rein __exec: usage: rein __exec [--isolate PLAN] -- PROGRAM [ARGUMENTS...]");
        return ExitCode::from(127);
    };
    if let Some(plan) = plan {
        return isolation::run_shim(&plan, program, args.collect());
    }
    let err = std::process::Command::new(&program)
        .args(args)
        .env("LISTEN_PID", std::process::id().to_string())
        .exec();
    eprintln!("rein: cannot run {}: {err}", Path::new(&program).display());
    ExitCode::from(127)
}

/// The test binary plays rein's part: when started as `TEST_BINARY __exec -- ...` (which is what [`spawn`]
/// runs, via /proc/self/exe), it becomes the shim before libtest's main runs.
#[cfg(test)]
#[used]
#[unsafe(link_section = ".init_array")]
static EXEC_SHIM_IN_TESTS: extern "C" fn() = {
    extern "C" fn exec_shim_in_tests() {
        let Ok(mut cmdline) = std::fs::read("/proc/self/cmdline") else {
            return;
        };
        if cmdline.last() == Some(&0) {
            cmdline.pop();
        }
        let mut args = cmdline
            .split(|b| *b == 0)
            .map(|a| OsStr::from_bytes(a).to_owned());
        if args.nth(1).is_some_and(|a| a == "__exec") {
            let _ = exec_shim(args.collect());
            std::process::exit(127);
        }
    }
    exec_shim_in_tests
};

#[cfg(test)]
#[path = "spawn_tests.rs"]
mod tests;
