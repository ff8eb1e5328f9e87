//! Tests of `spawn`, kept beside it to keep both files readable.
use super::*;
use crate::supervisor::executable::check_executable;
use crate::supervisor::kind::node::install_node_support;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);

fn spec(
    dir: &Path,
    name: &str,
    executable: &str,
    arguments: &[&str],
    socket: &AppSocket,
) -> SpawnSpec {
    SpawnSpec {
        executable: executable.into(),
        arguments: arguments.iter().map(|a| a.to_string()).collect(),
        working_directory: Some(dir.to_owned()),
        environment: vec![("GREETING".into(), "hello world".into())],
        user: None,
        group: None,
        socket: socket.clone(),
        stdout: Output::Log(dir.join(format!("{name}.out.log"))),
        stderr: Output::Log(dir.join(format!("{name}.err.log"))),
        log_rotation: Rotation::default(),
        node: None,
        name: name.into(),
        instance: 1,
        death_signal: Signal::SIGKILL,
        isolation: None,
    }
}

/// What the process wrote so far to the stream logged in `output` (the lines' prefixes taken off).
fn read_log(output: &Output) -> String {
    let file = std::fs::read(output.path().unwrap()).unwrap_or_default();
    let mut raw = super::super::logline::Raw::new(Vec::new());
    raw.write_all(&file).unwrap();
    raw.finish().unwrap();
    String::from_utf8(raw.into_inner()).unwrap()
}

/// Waits for the process and its log pumps; returns (status, stdout log, stderr log).
async fn finish(spawned: Spawned, spec: &SpawnSpec) -> (std::process::ExitStatus, String, String) {
    let Spawned {
        mut child,
        stdout,
        stderr,
        ..
    } = spawned;
    let status = tokio::time::timeout(DEADLINE, child.wait())
        .await
        .expect("exits in time")
        .unwrap();
    tokio::time::timeout(DEADLINE, stdout)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    tokio::time::timeout(DEADLINE, stderr)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    (status, read_log(&spec.stdout), read_log(&spec.stderr))
}

fn http_get(connect: impl Fn() -> io::Result<Box<dyn ReadWrite>>) -> String {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let attempt = connect().and_then(|mut s| {
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
            let mut out = String::new();
            s.read_to_string(&mut out)?;
            Ok(out)
        });
        match attempt {
            Ok(text) if !text.is_empty() => return text,
            other if Instant::now() > deadline => panic!("no answer: {other:?}"),
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

fn get(socket: &AppSocket) -> String {
    // The socket is listening from the start (rein made it), so connecting always succeeds; reading
    // waits for the app to accept. Connection resets (none expected) are retried until the deadline.
    match socket {
        AppSocket::Tcp(addr) => {
            http_get(|| Ok(Box::new(std::net::TcpStream::connect(addr)?) as Box<dyn ReadWrite>))
        }
        AppSocket::Unix(path) => http_get(|| {
            Ok(Box::new(std::os::unix::net::UnixStream::connect(path)?) as Box<dyn ReadWrite>)
        }),
    }
}

/// Running: /proc/PID exists and is not a zombie (a dead process keeps /proc/PID until reaped; tokio
/// reaps our child, a grandchild is reparented to init, which may be slow or absent in a container).
fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ")
        .is_some_and(|(_, s)| !s.starts_with('Z'))
}

fn wait_gone(pid: u32) {
    let deadline = Instant::now() + DEADLINE;
    while alive(pid) {
        assert!(Instant::now() < deadline, "process {pid} still alive");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn have(program: &str) -> bool {
    check_executable(Path::new(program), None, None).is_ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn shell_app_sees_socket_activation_environment() {
    let dir = tempfile::tempdir().unwrap();
    for kind in [SocketKind::Tcp, SocketKind::Unix] {
        let (fd, socket) = listen(kind, dir.path(), 1).unwrap();
        let script = r#"
                echo "fds=$LISTEN_FDS names=$LISTEN_FDNAMES pid_ok=$([ "$LISTEN_PID" = "$$" ] && echo yes || echo no:$LISTEN_PID:$$)"
                [ -S /proc/self/fd/3 ] && echo "fd3=socket" || echo "fd3=missing"
                echo "port=$PORT socket=$REIN_SOCKET"
                echo "greeting=$GREETING cwd=$(pwd)"
                echo "pgid=$(ps -o pgid= $$ 2>/dev/null | tr -d ' ') pid=$$"
                echo "stdin=$(readlink /proc/self/fd/0)"
                echo "fd4=$([ -e /proc/self/fd/4 ] && echo open || echo closed)"
                echo to-stderr >&2
            "#;
        let spec = spec(dir.path(), "sh-app", "/bin/sh", &["-c", script], &socket);
        let spawned = spawn(&spec, fd.as_fd()).unwrap();
        let pid = spawned.child.id().unwrap();
        let (status, out, err) = finish(spawned, &spec).await;
        assert!(status.success(), "{status:?} {err}");
        assert!(out.contains("fds=1 names=sh-app pid_ok=yes"), "{out}");
        assert!(out.contains("fd3=socket"), "{out}");
        match &socket {
            AppSocket::Tcp(addr) => {
                assert!(
                    out.contains(&format!("port={} socket=\n", addr.port())),
                    "{out}"
                )
            }
            AppSocket::Unix(path) => {
                let p = path.display();
                assert!(out.contains(&format!("port= socket={p}\n")), "{out}")
            }
        }
        assert!(out.contains(&format!(
            "greeting=hello world cwd={}",
            dir.path().display()
        )));
        if out.contains("pgid=") && !out.contains("pgid= ") {
            assert!(out.contains(&format!("pgid={pid} pid={pid}")), "{out}");
        }
        assert!(out.contains("stdin=/dev/null"), "{out}");
        assert!(out.contains("fd4=closed"), "no other fd leaks: {out}");
        assert!(err.contains("to-stderr"), "{err}");
        // In the files, each line says which instance and stream wrote it, and rein's start notice comes first.
        let file = |o: &Output| std::fs::read_to_string(o.path().unwrap()).unwrap();
        let (out_file, err_file) = (file(&spec.stdout), file(&spec.stderr));
        assert!(out_file.contains("Z [1] fds=1 names=sh-app"), "{out_file}");
        let err_lines: Vec<&str> = err_file.lines().collect();
        assert!(
            err_lines[0].ends_with(&format!("Z [1 rein] started: pid {pid}, socket {socket}")),
            "{err_file}"
        );
        assert!(err_lines[1].ends_with("Z [1 err] to-stderr"), "{err_file}");
        std::fs::remove_file(spec.stdout.path().unwrap()).unwrap();
        std::fs::remove_file(spec.stderr.path().unwrap()).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn python_app_serves_on_the_passed_socket() {
    if !have("python3") {
        eprintln!("skipped: no python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (fd, socket) = listen(SocketKind::Tcp, dir.path(), 7).unwrap();
    let app = r#"
import os, socket
s = socket.socket(fileno=3)
print("serving", s.getsockname(), flush=True)
while True:
    c, _ = s.accept()
    c.recv(65536)
    body = b"python pid=%d" % os.getpid()
    c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    c.close()
"#;
    let spec = spec(dir.path(), "py", "python3", &["-c", app], &socket);
    let mut spawned = spawn(&spec, fd.as_fd()).unwrap();
    let pid = spawned.child.id().unwrap();
    let answer = get(&socket);
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    assert!(answer.ends_with(&format!("python pid={pid}")), "{answer}");
    // A replacement process on the same socket answers too (the socket outlives the process).
    signal_group(pid, Signal::SIGKILL).unwrap();
    spawned.child.wait().await.unwrap();
    let spawned = spawn(&spec, fd.as_fd()).unwrap();
    let pid2 = spawned.child.id().unwrap();
    assert!(get(&socket).ends_with(&format!("python pid={pid2}")));
    signal_group(pid2, Signal::SIGKILL).unwrap();
    let (_, out, _) = finish(spawned, &spec).await;
    assert!(out.contains("serving ('127.0.0.1'"), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn node_apps_listen_on_the_passed_unix_socket() {
    if !have("node") {
        eprintln!("skipped: no node");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let node = install_node_support(dir.path()).unwrap();
    let apps = [
        (
            "node-http",
            "require('http').createServer((q, r) => r.end('plain node ' + process.pid)).listen(8080, () => console.log('listening'));",
        ),
        (
            "node-unit",
            "const http = require('unit-http'); http.createServer((q, r) => r.end('unit-http ' + process.pid)).listen(8081);",
        ),
    ];
    for (i, (name, code)) in apps.into_iter().enumerate() {
        let (fd, socket) = listen(SocketKind::Unix, dir.path(), i as u64).unwrap();
        let mut spec = spec(dir.path(), name, "node", &["-e", code], &socket);
        spec.node = Some(node.clone());
        spec.environment
            .push(("NODE_OPTIONS".into(), "--no-warnings".into()));
        let spawned = spawn(&spec, fd.as_fd()).unwrap();
        let pid = spawned.child.id().unwrap();
        let answer = get(&socket);
        let word = if name == "node-http" {
            "plain node"
        } else {
            "unit-http"
        };
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with(&format!("{word} {pid}")), "{answer}");
        signal_group(pid, Signal::SIGTERM).unwrap();
        let (_, _, err) = finish(spawned, &spec).await;
        assert_eq!(
            err.matches("uses the socket passed by rein (fd 3").count(),
            1,
            "logged once: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn signal_group_kills_grandchildren() {
    let dir = tempfile::tempdir().unwrap();
    let (fd, socket) = listen(SocketKind::Tcp, dir.path(), 1).unwrap();
    let spec = spec(
        dir.path(),
        "forker",
        "/bin/sh",
        &["-c", "sleep 1000 & echo grandchild=$!; wait"],
        &socket,
    );
    let mut spawned = spawn(&spec, fd.as_fd()).unwrap();
    let pid = spawned.child.id().unwrap();
    let deadline = Instant::now() + DEADLINE;
    let grandchild: u32 = loop {
        let out = read_log(&spec.stdout);
        if let Some(g) = out.trim().strip_prefix("grandchild=") {
            break g.parse().unwrap();
        }
        assert!(Instant::now() < deadline, "no grandchild");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(alive(grandchild));
    signal_group(pid, Signal::SIGKILL).unwrap();
    let status = spawned.child.wait().await.unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    wait_gone(pid);
    wait_gone(grandchild);
    // The pumps end once the grandchild (which held the pipes too) is gone.
    tokio::time::timeout(DEADLINE, spawned.stdout)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// Run by [`children_die_with_rein`] in a separate test process (the "rein" that gets killed): spawns
/// `sleep 1000`, prints its pid, and waits.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "helper process for children_die_with_rein"]
async fn pdeathsig_helper() {
    let Some(dir) = std::env::var_os("REIN_PDEATHSIG_DIR") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let (fd, socket) = listen(SocketKind::Tcp, &dir, 1).unwrap();
    let spec = spec(&dir, "orphan", "sleep", &["1000"], &socket);
    // Spawn from a thread that exits right after: the child must survive that (pdeathsig follows the
    // forking thread, which is why spawn() forks on its own long-lived thread).
    let rt = tokio::runtime::Handle::current();
    let spawned = std::thread::spawn(move || {
        let _g = rt.enter();
        spawn(&spec, fd.as_fd()).map(|s| (s, fd))
    })
    .join()
    .unwrap()
    .unwrap();
    println!("CHILD={}", spawned.0.child.id().unwrap());
    std::io::stdout().flush().unwrap();
    tokio::time::sleep(Duration::from_secs(1000)).await;
}

#[test]
fn children_die_with_rein() {
    let dir = tempfile::tempdir().unwrap();
    let mut helper = std::process::Command::new("/proc/self/exe")
        .args([
            "--exact",
            "supervisor::spawn::tests::pdeathsig_helper",
            "--ignored",
            "--nocapture",
        ])
        .env("REIN_PDEATHSIG_DIR", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(helper.stdout.take().unwrap());
    let child: u32 = loop {
        let mut line = String::new();
        assert!(
            std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0,
            "helper ended"
        );
        if let Some(pid) = line.trim().strip_prefix("CHILD=") {
            break pid.parse().unwrap();
        }
    };
    // The thread that called spawn() is gone; give a wrongly delivered SIGKILL time to land.
    std::thread::sleep(Duration::from_millis(300));
    assert!(alive(child), "child outlives the thread that spawned it");
    helper.kill().unwrap(); // SIGKILL: no cleanup code runs in "rein"
    helper.wait().unwrap();
    wait_gone(child);
}

#[test]
fn signal_group_refuses_rein_own_group_and_init() {
    for pid in [0, 1, u32::MAX] {
        let err = signal_group(pid, Signal::SIGTERM).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}

#[tokio::test]
async fn missing_program_exits_127_with_a_message() {
    // (Also shows spawn() works from a current-thread runtime.)
    let dir = tempfile::tempdir().unwrap();
    let (fd, socket) = listen(SocketKind::Tcp, dir.path(), 1).unwrap();
    let spec = spec(dir.path(), "ghost", "/nonexistent/app", &[], &socket);
    let spawned = spawn(&spec, fd.as_fd()).unwrap();
    let (status, _, err) = finish(spawned, &spec).await;
    assert_eq!(status.code(), Some(127));
    assert!(err.contains("rein: cannot run /nonexistent/app:"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_as_another_user_when_root() {
    if !Uid::effective().is_root() {
        assert!(credentials(Some("nobody"), None).is_err());
        eprintln!("skipped: not root");
        return;
    }
    let Ok(Some(nobody)) = User::from_name("nobody") else {
        eprintln!("skipped: no user nobody");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (fd, socket) = listen(SocketKind::Tcp, dir.path(), 1).unwrap();
    let mut spec = spec(
        dir.path(),
        "as-nobody",
        "/bin/sh",
        &[
            "-c",
            "echo uid=$(id -u) gid=$(id -g) groups=$(id -G) home=$HOME user=$USER; [ -S /proc/self/fd/3 ] && echo fd3=socket; [ \"$LISTEN_PID\" = \"$$\" ] && echo pid=ok",
        ],
        &socket,
    );
    spec.user = Some("nobody".into());
    // A directory only root may enter: chdir happens as nobody, so the start fails.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let err = spawn(&spec, fd.as_fd()).unwrap_err();
    assert!(
        err.to_string().contains("cannot start") && err.kind() == io::ErrorKind::PermissionDenied,
        "{err}"
    );
    spec.working_directory = None;
    let spawned = spawn(&spec, fd.as_fd()).unwrap();
    let (status, out, err) = finish(spawned, &spec).await;
    assert!(status.success(), "{status:?} {err}");
    let gid = nobody.gid.as_raw();
    assert!(
        out.contains(&format!("uid={} gid={gid} ", nobody.uid)),
        "{out}"
    );
    assert!(
        !out.contains("groups=0") && !out.contains(" 0 "),
        "root group dropped: {out}"
    );
    assert!(out.contains("user=nobody"), "{out}");
    assert!(
        out.contains("fd3=socket") && out.contains("pid=ok"),
        "{out}"
    );
}

#[test]
fn unknown_user_is_a_clear_error() {
    let err = credentials(Some("no-such-user-rein"), None).unwrap_err();
    assert!(
        err.to_string()
            .contains("no such user \"no-such-user-rein\""),
        "{err}"
    );
}

#[test]
fn an_unknown_user_blames_the_user_not_the_program() {
    let err = check_executable(Path::new("sh"), None, Some("no-such-user-rein")).unwrap_err();
    assert!(err.is_about_the_user(), "{err}");
    assert_eq!(err.to_string(), "no such user \"no-such-user-rein\"");
    let err = check_executable(Path::new("no-such-program-rein"), None, None).unwrap_err();
    assert!(!err.is_about_the_user(), "{err}");
}

#[test]
fn unix_socket_replaces_stale_socket_only() {
    let dir = tempfile::tempdir().unwrap();
    let (fd, socket) = listen(SocketKind::Unix, dir.path(), 3).unwrap();
    let AppSocket::Unix(path) = &socket else {
        panic!()
    };
    assert_eq!(path, &dir.path().join("instance-3.sock"));
    let mode = std::fs::metadata(path).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o660);
    drop(fd); // a stale socket file remains
    let (_fd, again) = listen(SocketKind::Unix, dir.path(), 3).unwrap();
    assert_eq!(again, socket);
    std::os::unix::net::UnixStream::connect(path).unwrap();

    std::fs::write(dir.path().join("instance-4.sock"), "data").unwrap();
    let err = listen(SocketKind::Unix, dir.path(), 4).unwrap_err();
    assert!(err.to_string().contains("is not a socket"), "{err}");

    let (_fd, tcp) = listen(SocketKind::Tcp, dir.path(), 0).unwrap();
    let AppSocket::Tcp(addr) = tcp else { panic!() };
    assert!(addr.ip().is_loopback() && addr.port() != 0);
}

#[test]
fn environment_is_clean_and_rein_variables_win() {
    let dir = Path::new("/srv/app");
    let mut spec = spec(
        dir,
        "a:b c",
        "x",
        &[],
        &AppSocket::Tcp("127.0.0.1:4321".parse().unwrap()),
    );
    spec.environment.push(("PORT".into(), "1".into()));
    spec.environment
        .push(("NODE_OPTIONS".into(), "--max-old-space-size=64".into()));
    spec.node = Some((
        "/run/rein dir/preload.js".into(),
        "/run/rein/modules".into(),
    ));
    let creds = credentials(None, None).unwrap();
    let env: std::collections::HashMap<_, _> = environment(&spec, &creds)
        .into_iter()
        .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
        .collect();
    assert_eq!(env["PORT"], "4321");
    assert_eq!(env["LISTEN_FDNAMES"], "a_b_c");
    assert_eq!(
        env["NODE_OPTIONS"],
        "--require \"/run/rein dir/preload.js\" --max-old-space-size=64"
    );
    assert_eq!(env["NODE_PATH"], "/run/rein/modules");
    assert!(env.contains_key("PATH"));
    assert!(
        !env.contains_key("CARGO"),
        "rein's other variables are not passed"
    );
}
