//! rein as a systemd service: the unit file in `dist/` passes `systemd-analyze verify`, and its `ExecStart` line
//! runs as docs/service.md installs it, on a fresh state directory, telling a `Type=notify` manager READY=1,
//! RELOADING=1 … READY=1 around a reload (the unit's `ExecReload`) and STOPPING=1. The completions and the man
//! page the docs install are generated from the command line.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::harness::{DEADLINE, get, wait_for};

const INSTALLED: &str = "/usr/local/bin/rein";

fn unit_text() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/rein.service");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The unit's value of `key` (the first such line).
fn unit_value(unit: &str, key: &str) -> String {
    unit.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in the unit"))
        .to_owned()
}

/// The unit as installed, with the binary where this build put it (`verify` checks the program exists).
fn unit_for_this_build(dir: &Path) -> PathBuf {
    let path = dir.join("rein.service");
    let unit = unit_text().replace(INSTALLED, env!("CARGO_BIN_EXE_rein"));
    std::fs::write(&path, unit).unwrap();
    path
}

#[test]
fn the_unit_file_passes_systemd_analyze_verify() {
    let unit = unit_text();
    for (key, value) in [
        ("Type", "notify"),
        ("Restart", "on-failure"),
        ("ProtectSystem", "strict"),
        ("ReadWritePaths", "/var/lib/rein"),
        ("StateDirectory", "rein"),
        ("NoNewPrivileges", "yes"),
        ("ExecReload", "/bin/kill -HUP $MAINPID"),
    ] {
        assert_eq!(unit_value(&unit, key), value, "{key}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = unit_for_this_build(dir.path());
    let out = match Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!(
                "SKIPPED: systemd-analyze cannot run here ({e}); install systemd (scripts/test.sh does)"
            );
            return;
        }
    };
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify: {:?}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A `Type=notify` manager's end: a datagram socket in the test's directory.
struct Manager {
    socket: UnixDatagram,
    path: PathBuf,
}

impl Manager {
    fn bind(dir: &Path) -> Manager {
        let path = dir.join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket.set_read_timeout(Some(DEADLINE)).unwrap();
        Manager { socket, path }
    }

    /// The next message, which must hold `expected` as one of its lines.
    fn expect(&self, expected: &str) -> String {
        let mut buf = [0u8; 1024];
        let n = self
            .socket
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("no {expected} from rein: {e}"));
        let message = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert!(
            message.lines().any(|l| l == expected),
            "{expected} in {message:?}"
        );
        message
    }
}

/// The unit's ExecStart line as a command: the installed binary replaced by this build, `/var/lib/rein` by a
/// fresh directory, and `--listen` on a free port (the embedded default's 8080 may be taken on a test machine).
fn exec_start(state: &Path) -> Command {
    let line = unit_value(&unit_text(), "ExecStart");
    let mut words = line.split_whitespace().map(|w| match w {
        INSTALLED => env!("CARGO_BIN_EXE_rein").to_owned(),
        "/var/lib/rein" => state.display().to_string(),
        w => w.to_owned(),
    });
    let mut command = Command::new(words.next().unwrap());
    command.args(words).args(["--listen", "127.0.0.1:0"]);
    command
}

#[test]
fn the_units_exec_start_notifies_ready_reloading_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let manager = Manager::bind(dir.path());
    let mut rein = exec_start(&state)
        .env("NOTIFY_SOCKET", &manager.path)
        .env_remove("REIN_STATE")
        .env_remove("REIN_CONTROL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(rein.id() as i32);

    manager.expect("READY=1");
    // Ready means serving: the welcome page answers at once, no retry needed.
    let addr = bound_address(&state);
    assert!(get(addr, "/").text().contains("rein is running"));

    // ExecReload.
    nix::sys::signal::kill(pid, Signal::SIGHUP).unwrap();
    let reloading = manager.expect("RELOADING=1");
    assert!(reloading.contains("MONOTONIC_USEC="), "{reloading}");
    manager.expect("READY=1");

    nix::sys::signal::kill(pid, Signal::SIGTERM).unwrap();
    manager.expect("STOPPING=1");
    let mut status = None;
    wait_for("rein to exit", || {
        status = rein.try_wait().unwrap();
        status.is_some()
    });
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut rein.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.unwrap().success(), "{stderr}");
    assert!(!state.join("control.sock").exists());
    // Under systemd, standard error is the journal: plain lines, no colour codes.
    assert!(stderr.contains("rein is running"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "colour codes in {stderr:?}");
}

/// The default listener's address, from `/status` on the control socket.
fn bound_address(state: &Path) -> std::net::SocketAddr {
    let out = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["status", "--json", "--state"])
        .arg(state)
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    status["listeners"]["127.0.0.1:0"]["address"]
        .as_str()
        .unwrap_or_else(|| panic!("no listener in {status}"))
        .parse()
        .unwrap()
}

/// The completions and the man page docs/service.md installs: generated, and well-formed for their readers.
#[test]
fn completions_and_the_man_page_are_generated_from_the_cli() {
    let rein = env!("CARGO_BIN_EXE_rein");
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(rein)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(
            script.contains("status") && script.contains("listen"),
            "{shell}: {script}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let bash = dir.path().join("rein.bash");
    let out = Command::new(rein)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    std::fs::write(&bash, out.stdout).unwrap();
    let check = Command::new("bash").arg("-n").arg(&bash).status().unwrap();
    assert!(check.success(), "bash -n on the completion script");

    let out = Command::new(rein).arg("man").output().unwrap();
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success() && page.contains(".TH rein 1"),
        "{page}"
    );
    let man1 = dir.path().join("man1");
    std::fs::create_dir(&man1).unwrap();
    let out = Command::new(rein)
        .arg("man")
        .arg("--dir")
        .arg(&man1)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for page in ["rein.1", "rein-run.1", "rein-config-set.1", "rein-status.1"] {
        let text = std::fs::read_to_string(man1.join(page)).unwrap();
        assert!(text.starts_with(".ie"), "{page}");
    }
    let run = std::fs::read_to_string(man1.join("rein-run.1")).unwrap();
    assert!(run.contains("listen"), "{run}");
}
