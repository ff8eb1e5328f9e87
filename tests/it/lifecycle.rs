//! Start, stop, restart: persistence of the last good configuration, corrupt state, SIGHUP, graceful stop,
//! and the CLI that talks to a running rein.

use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::harness::{Conn, Rein, get, wait_for};

#[test]
fn the_last_good_configuration_survives_a_restart() {
    let mut rein = Rein::start();
    let sock = rein.dir.path().join("app.sock");
    let config = json!({
        "listeners": {format!("unix:{}", sock.display()): {"pass": "routes"}},
        "routes": [{"action": {"return": 207}}]
    });
    rein.configure(config.clone());
    // A refused change after it must not reach the saved file.
    assert_eq!(
        rein.api("PUT", "/config/routes/0/action/return", Some("5000"))
            .0,
        400
    );
    rein.signal(Signal::SIGTERM);
    assert_eq!(rein.wait_exit().0, Some(0));

    let dir = std::mem::replace(&mut rein.dir, tempfile::tempdir().unwrap());
    let again = Rein::start_in(dir, &[]);
    again.wait_ready();
    assert_eq!(again.api("GET", "/config", None).1, config);
    let mut stream = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    std::io::Write::write_all(
        &mut stream,
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let resp = crate::harness::read_response(&mut std::io::BufReader::new(stream), false).unwrap();
    assert_eq!(resp.status, 207);
}

#[test]
fn a_corrupt_state_file_stops_start_up_and_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("state/conf.json");
    std::fs::create_dir_all(conf.parent().unwrap()).unwrap();
    std::fs::write(&conf, "{\"listeners\": {").unwrap();
    let mut rein = Rein::start_in(dir, &[]);
    let (code, stderr) = rein.wait_exit();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("conf.json") && stderr.contains("not valid JSON"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), "{\"listeners\": {");
}

#[test]
fn an_invalid_config_file_stops_start_up_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.json");
    std::fs::write(&file, r#"{"routes": [{"action": {"return": "x"}}]}"#).unwrap();
    let file = file.display().to_string();
    let mut rein = Rein::start_in(dir, &["--config", &file]);
    let (code, stderr) = rein.wait_exit();
    assert_eq!(code, Some(1));
    assert!(stderr.contains("routes/0/action/return"), "{stderr}");
}

#[test]
fn sighup_rereads_the_config_file_with_the_same_validation() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rein.json");
    let write = |ret: Value| {
        let doc = json!({"listeners": {"127.0.0.1:0": {"pass": "routes"}}, "routes": [{"action": {"return": ret}}]});
        std::fs::write(&file, doc.to_string()).unwrap();
    };
    write(json!(200));
    let path = file.display().to_string();
    let rein = Rein::start_in(dir, &["--config", &path]);
    rein.wait_ready();
    let addr = rein.bound("127.0.0.1:0");
    assert_eq!(get(addr, "/").status, 200);

    write(json!(203));
    rein.signal(Signal::SIGHUP);
    wait_for("the new return code", || get(addr, "/").status == 203);

    write(json!("not a status"));
    rein.signal(Signal::SIGHUP);
    wait_for("the refusal to be logged", || {
        rein.log_text().contains("SIGHUP: Invalid configuration")
    });
    assert_eq!(get(addr, "/").status, 203);
}

#[test]
fn sigterm_lets_requests_in_flight_finish_then_exits() {
    let mut rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    // A request whose body is half sent when the signal arrives.
    let mut conn = Conn::open(addr);
    conn.send_raw(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhello");
    wait_for("the request to be in flight", || {
        rein.api("GET", "/status/connections/active", None).1 == 1
    });
    rein.signal(Signal::SIGTERM);
    wait_for("the listener to close", || {
        std::net::TcpStream::connect(addr).is_err()
    });
    conn.send_raw(b"world");
    let resp = conn.read().expect("the in-flight request is answered");
    assert_eq!(resp.status, 200);
    assert!(conn.is_closed());
    assert_eq!(rein.wait_exit().0, Some(0));
}

/// `--pid FILE` holds rein's pid while it runs and is removed when it stops.
#[test]
fn the_pid_file_lives_as_long_as_rein() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("rein.pid");
    let pid_arg = pid_file.display().to_string();
    let mut rein = Rein::start_in(dir, &["--config", "EMPTY", "--pid", &pid_arg]);
    rein.wait_ready();
    // Written once the first configuration is applied, just after the control socket is bound.
    wait_for("the pid file", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let written = std::fs::read_to_string(&pid_file).unwrap();
    assert_eq!(written, format!("{}\n", rein.pid()));
    rein.signal(Signal::SIGTERM);
    assert_eq!(rein.wait_exit().0, Some(0));
    assert!(!pid_file.exists(), "the pid file is removed on exit");
}

#[test]
fn the_cli_reads_and_changes_a_running_server() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    let cli = |args: &[&str], stdin: Option<&str>| rein_cli(&rein, args, stdin);
    let (code, out, _) = cli(&["config", "get", "routes/0/action"], None);
    assert_eq!(code, Some(0));
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"return": 200})
    );

    let (code, out, err) = cli(
        &["config", "set", "routes/0/action/return", "-"],
        Some("204"),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("Reconfiguration done."));
    assert_eq!(get(addr, "/").status, 204);

    let (code, _, err) = cli(
        &["config", "set", "routes/0/action/return", "-"],
        Some("\"x\""),
    );
    assert_eq!(code, Some(1));
    assert!(err.contains("routes/0/action/return"), "{err}");

    let (code, _, _) = cli(
        &["config", "set", "routes/0/action/return", "--dry-run", "-"],
        Some("205"),
    );
    assert_eq!(code, Some(0));
    assert_eq!(get(addr, "/").status, 204);

    let (code, _, _) = cli(&["config", "delete", "listeners/127.0.0.1:0"], None);
    assert_eq!(code, Some(0));
    let (code, out, _) = cli(&["status", "--json"], None);
    assert_eq!(code, Some(0));
    assert!(
        serde_json::from_str::<Value>(&out).unwrap()["requests"]["total"]
            .as_u64()
            .unwrap()
            >= 2
    );

    let unreachable = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args([
            "status",
            "--control",
            &format!("unix:{}", rein.dir.path().join("none.sock").display()),
        ])
        .output()
        .unwrap();
    let (code, err) = (
        unreachable.status.code(),
        String::from_utf8_lossy(&unreachable.stderr),
    );
    assert_eq!(code, Some(3));
    assert!(err.contains("cannot reach the control API"), "{err}");
    let help = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("--control"));
}

/// Runs `rein ARGS --state STATE` against `rein`, with `stdin` as its input; returns the exit code, stdout
/// and stderr.
fn rein_cli(rein: &Rein, args: &[&str], stdin: Option<&str>) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rein"));
    cmd.args(args).arg("--state").arg(&rein.state);
    cmd.env_remove("REIN_CONTROL")
        .env_remove("REIN_STATE")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(input) = stdin {
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), input.as_bytes()).unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The CLI percent-encodes each segment of PATH (a space, `?`), keeps a `%2F` the user wrote for a key holding
/// `/`, and tells a request it cannot make from a server it cannot reach.
#[test]
fn the_cli_encodes_paths_and_addresses_keys_holding_slashes() {
    let rein = Rein::start();
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes/my route?"}},
        "routes": {"my route?": [{"action": {"return": 200}}]}
    }));
    let addr = rein.bound("127.0.0.1:0");
    let (code, out, err) = rein_cli(&rein, &["config", "get", "routes/my route?/0/action"], None);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"return": 200})
    );
    let (code, _, err) = rein_cli(
        &rein,
        &["config", "set", "routes/my route?/0/action/return", "-"],
        Some("203"),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(get(addr, "/").status, 203);

    let sock = rein.dir.path().join("l.sock");
    let key = format!("unix:{}", sock.display()).replace('/', "%2F");
    let path = format!("listeners/{key}");
    let (code, _, err) = rein_cli(
        &rein,
        &["config", "set", &path, "-"],
        Some(r#"{"pass": "routes/my route?"}"#),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(sock.exists());
    let (code, out, err) = rein_cli(&rein, &["config", "get", &format!("{path}/pass")], None);
    assert_eq!(
        (code, out.trim()),
        (Some(0), "\"routes/my route?\""),
        "{err}"
    );
    let (code, _, err) = rein_cli(&rein, &["config", "delete", &path], None);
    assert_eq!(code, Some(0), "{err}");
    wait_for("the Unix listener to go", || !sock.exists());

    // A header that cannot be sent is the caller's mistake (exit 1), not an unreachable server (exit 3).
    let (code, _, err) = rein_cli(
        &rein,
        &[
            "config",
            "set",
            "routes/my route?/0/action/return",
            "--if-match",
            "a\nb",
            "-",
        ],
        Some("204"),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("cannot make a control API request") && !err.contains("cannot reach"),
        "{err}"
    );
    assert_eq!(get(addr, "/").status, 203);
}

/// `--stop-timeout` bounds how long a stop waits for requests in flight: a client that stalls mid-body does
/// not hold rein (the defaults, 30 s, would).
#[test]
fn a_stalled_request_holds_a_stop_no_longer_than_the_stop_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mut rein = Rein::start_in(dir, &["--config", "EMPTY", "--stop-timeout", "0.5"]);
    rein.wait_ready();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    let mut conn = Conn::open(addr);
    conn.send_raw(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhel");
    wait_for("the request to be in flight", || {
        rein.api("GET", "/status/connections/active", None).1 == 1
    });
    let signalled = Instant::now();
    rein.signal(Signal::SIGQUIT);
    let (code, stderr) = rein.wait_exit();
    let took = signalled.elapsed();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(5),
        "the stop waited for the stalled request about 0.5 s: {took:?}"
    );
    assert!(
        rein.log_text().contains("stop timeout reached"),
        "{}",
        rein.log_text()
    );
}

/// With 3 workers, a Unix and a TCP listener serve every connection. A Unix listener's file goes with the
/// listener, but not when the listener was added back at the same path meanwhile (the old one's late close
/// must not remove the new file).
#[test]
fn workers_share_listeners_and_a_unix_socket_file_outlives_its_removed_predecessor() {
    let dir = tempfile::tempdir().unwrap();
    let rein = Rein::start_in(dir, &["--config", "EMPTY", "--workers", "3"]);
    rein.wait_ready();
    let sock = rein.dir.path().join("w.sock");
    let with = json!({
        "listeners": {format!("unix:{}", sock.display()): {"pass": "routes"}},
        "routes": [{"action": {"return": 204}}]
    });
    let without = json!({"listeners": {}, "routes": [{"action": {"return": 204}}]});
    let status = |path: &std::path::Path| {
        let mut stream = std::os::unix::net::UnixStream::connect(path).unwrap();
        std::io::Write::write_all(
            &mut stream,
            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        crate::harness::read_response(&mut std::io::BufReader::new(stream), false)
            .unwrap()
            .status
    };
    rein.configure(with.clone());
    // A connection each: whichever of the 3 workers accepts it answers (which one is the kernel's choice).
    for _ in 0..30 {
        assert_eq!(status(&sock), 204);
    }
    rein.configure(without.clone());
    wait_for("the removed listener's socket file to go", || {
        !sock.exists()
    });
    for _ in 0..20 {
        rein.configure(without.clone());
        rein.configure(with.clone());
    }
    assert_eq!(status(&sock), 204);
    let mut both = with.clone();
    both["listeners"]["127.0.0.1:0"] = json!({"pass": "routes"});
    rein.configure(both);
    let tcp = rein.bound("127.0.0.1:0");
    for _ in 0..30 {
        assert_eq!(get(tcp, "/").status, 204);
    }
    assert_eq!(
        status(&sock),
        204,
        "the file of the listener that stays is kept"
    );
}

/// `backlog` applies to Unix listeners as to TCP ones (a Unix listener had the system's maximum). The kernel's
/// accept queue limit is read with `ss` (iproute2, which `scripts/test.sh` installs): `Send-Q` of a listening
/// socket.
#[test]
fn a_listeners_backlog_applies_to_unix_and_tcp_sockets() {
    let rein = Rein::start();
    let sock = rein.dir.path().join("b.sock");
    rein.configure(json!({
        "listeners": {
            format!("unix:{}", sock.display()): {"pass": "routes", "backlog": 79},
            "127.0.0.1:0": {"pass": "routes", "backlog": 78}
        },
        "routes": [{"action": {"return": 204}}]
    }));
    let tcp = rein.bound("127.0.0.1:0").to_string();
    assert_eq!(listen_queue_limit("-xlnH", &sock.display().to_string()), 79);
    assert_eq!(listen_queue_limit("-tlnH", &tcp), 78);
}

/// The accept queue limit (`Send-Q`) `ss FLAGS` shows for the listening socket at `local`.
fn listen_queue_limit(flags: &str, local: &str) -> u64 {
    let out = Command::new("ss")
        .arg(flags)
        .output()
        .expect("ss (iproute2) is needed by this test");
    let text = String::from_utf8_lossy(&out.stdout);
    // `Send-Q` is the column just before the local address (a `Netid` column comes first only for `-x`).
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find_map(|f| {
            let at = f.iter().position(|x| *x == local)?;
            f.get(at.checked_sub(1)?)?.parse().ok()
        })
        .unwrap_or_else(|| panic!("{local} not in `ss {flags}`:\n{text}"))
}

/// The README's first command: `rein run` with no configuration serves the welcome page on 127.0.0.1:8080.
/// That port is fixed, so rein runs in a network namespace of its own (`unshare -rn`: a user namespace makes it
/// work without root), where the port is surely free; the client runs in the same namespace.
#[test]
fn with_no_configuration_rein_serves_the_welcome_page_on_port_8080() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let client = r#"
import sys, time, urllib.request
deadline = time.monotonic() + 20
while True:
    try:
        r = urllib.request.urlopen("http://127.0.0.1:8080/", timeout=2)
        print(r.status, r.headers.get("Content-Type"))
        print(r.read().decode())
        break
    except OSError as e:
        if time.monotonic() > deadline:
            sys.exit(f"no answer on 127.0.0.1:8080: {e}")
        time.sleep(0.02)
"#;
    let script = r#"PATH="$PATH:/usr/sbin:/sbin"; ip link set lo up || exit 97
"$0" run --state "$1" --log "$1.log" &
python3 -c "$2"; status=$?
kill -TERM $! && wait $!
exit $status"#;
    let out = Command::new("unshare")
        .args(["-rn", "sh", "-c", script, env!("CARGO_BIN_EXE_rein")])
        .arg(&state)
        .arg(client)
        .output()
        .expect("unshare (util-linux)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "status {:?}\n{text}\n{}\nrein's log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(dir.path().join("state.log")).unwrap_or_default()
    );
    assert!(text.starts_with("200 text/html"), "{text}");
    assert!(text.contains("<title>rein is running</title>"), "{text}");
    assert!(state.join("welcome/index.html").is_file());
}
