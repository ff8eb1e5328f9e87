//! Who reaches the control API, and what its socket may replace. On TCP: a bearer token, the control address
//! as `Host`, no cross-site `Origin`; the CLI finds the token in the state directory. On a Unix socket: only
//! a socket rein left behind is ever replaced or removed.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use serde_json::{Value, json};

use crate::harness::{Rein, Response, read_response, wait_for};

/// rein with its control API on a free loopback port; returns it and that address.
fn start_on_tcp() -> (Rein, String) {
    // A port the kernel just handed out and released: free, never fixed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let control = format!("127.0.0.1:{port}");
    let rein = Rein::start_in(
        tempfile::tempdir().unwrap(),
        &["--config", "EMPTY", "--control", &control],
    );
    wait_for("the TCP control API", || {
        TcpStream::connect(&control).is_ok()
    });
    (rein, control)
}

fn token(rein: &Rein) -> String {
    std::fs::read_to_string(rein.state.join("control.token"))
        .unwrap()
        .trim()
        .to_owned()
}

/// One request on a new connection, with exactly the headers given (no `Host` unless given).
fn request(
    control: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut stream = TcpStream::connect(control).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).unwrap();
    read_response(&mut BufReader::new(stream), false).expect("a response")
}

fn json_body(r: &Response) -> Value {
    serde_json::from_slice(&r.body).unwrap_or(Value::Null)
}

#[test]
fn tcp_control_needs_the_token() {
    let (rein, control) = start_on_tcp();
    let mode = std::fs::metadata(rein.state.join("control.token"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let token = token(&rein);
    assert_eq!(token.len(), 64, "{token}");
    let host = ("Host", control.as_str());

    let none = request(&control, "GET", "/config", &[host], "");
    assert_eq!(none.status, 401, "{}", none.text());
    assert_eq!(json_body(&none)["error"], "Unauthorized.");
    assert!(
        none.header("www-authenticate")
            .is_some_and(|v| v.starts_with("Bearer"))
    );

    let wrong = format!("Bearer {}", token.replace(|c: char| c != '0', "0"));
    let r = request(
        &control,
        "GET",
        "/config",
        &[host, ("Authorization", &wrong)],
        "",
    );
    assert_eq!(r.status, 401, "{}", r.text());

    let auth = format!("Bearer {token}");
    let r = request(
        &control,
        "GET",
        "/config",
        &[host, ("Authorization", &auth)],
        "",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(json_body(&r), json!({}));
    let localhost = control.replace("127.0.0.1", "localhost");
    let r = request(
        &control,
        "GET",
        "/status",
        &[("Host", &localhost), ("Authorization", &auth)],
        "",
    );
    assert_eq!(r.status, 200, "{}", r.text());
}

/// DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1 reaches the port, but its
/// requests name evil.example.
#[test]
fn tcp_control_refuses_another_host_even_with_the_token() {
    let (rein, control) = start_on_tcp();
    let auth = format!("Bearer {}", token(&rein));
    for host in ["evil.example", "evil.example:80", "127.0.0.2"] {
        let r = request(
            &control,
            "GET",
            "/config",
            &[("Host", host), ("Authorization", &auth)],
            "",
        );
        assert_eq!(r.status, 421, "{host}: {}", r.text());
        assert_eq!(json_body(&r)["error"], "Misdirected request.");
    }
    let r = request(&control, "GET", "/config", &[("Authorization", &auth)], "");
    assert_eq!(r.status, 421, "no Host: {}", r.text());
}

/// A cross-site `text/plain` POST (what a form or a no-cors `fetch` may send) changes nothing.
#[test]
fn tcp_control_refuses_a_cross_site_write() {
    let (rein, control) = start_on_tcp();
    let auth = format!("Bearer {}", token(&rein));
    let doc = r#"{"listeners": {}, "routes": [{"action": {"return": 204}}]}"#;
    let headers = [
        ("Host", control.as_str()),
        ("Authorization", auth.as_str()),
        ("Content-Type", "text/plain"),
        ("Origin", "http://evil.example"),
    ];
    let r = request(&control, "PUT", "/config", &headers, doc);
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(json_body(&r)["error"], "Forbidden.");
    let r = request(
        &control,
        "POST",
        "/config/routes",
        &headers,
        r#"{"action": {"return": 204}}"#,
    );
    assert_eq!(r.status, 403, "{}", r.text());
    let r = request(&control, "GET", "/config", &headers[..2], "");
    assert_eq!(json_body(&r), json!({}), "nothing changed");

    // The API's own origin is no stranger.
    let own = format!("http://{control}");
    let mut same = headers;
    same[3] = ("Origin", own.as_str());
    let r = request(&control, "PUT", "/config", &same, doc);
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn the_cli_with_state_talks_to_tcp_control() {
    let (rein, control) = start_on_tcp();
    let cli = |extra: &[&str], envs: &[(&str, &str)]| {
        Command::new(env!("CARGO_BIN_EXE_rein"))
            .args(["config", "get", "--control", &control])
            .args(extra)
            .env_remove("REIN_TOKEN")
            .env_remove("REIN_TOKEN_FILE")
            .envs(envs.iter().copied())
            .output()
            .unwrap()
    };
    let state = rein.state.display().to_string();
    let out = cli(&["--state", &state], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        json!({})
    );

    let token_file = rein.state.join("control.token").display().to_string();
    let out = cli(&["--token-file", &token_file], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli(&[], &[("REIN_TOKEN", &token(&rein))]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Without the token: refused, and told what is missing.
    let elsewhere = rein.dir.path().join("elsewhere").display().to_string();
    let out = cli(&["--state", &elsewhere], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("Unauthorized") && err.contains("control.token"),
        "{err}"
    );
    assert!(
        !rein.control().exists(),
        "no Unix socket when the API is on TCP"
    );
}

/// The token survives a restart: a script or a client configured with it keeps working.
#[test]
fn the_token_is_kept_across_restarts() {
    let (mut rein, control) = start_on_tcp();
    let first = token(&rein);
    rein.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(rein.wait_exit().0, Some(0));
    let dir = std::mem::replace(&mut rein.dir, tempfile::tempdir().unwrap());
    let again = Rein::start_in(dir, &["--control", &control]);
    wait_for("the TCP control API", || {
        TcpStream::connect(&control).is_ok()
    });
    assert_eq!(token(&again), first);
}

#[test]
fn a_regular_file_at_the_control_path_is_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let precious = dir.path().join("notes.txt");
    std::fs::write(&precious, "keep me").unwrap();
    let control = format!("unix:{}", precious.display());
    let mut rein = Rein::start_in(dir, &["--config", "EMPTY", "--control", &control]);
    let (code, stderr) = rein.wait_exit();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("is not a socket"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me");
}

/// At stop, the socket goes only if it is still rein's: a file someone put at the path meanwhile stays.
#[test]
fn the_control_socket_is_removed_at_stop_only_if_it_is_reins() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctl.sock");
    let control = format!("unix:{}", path.display());
    let mut rein = Rein::start_in(dir, &["--config", "EMPTY", "--control", &control]);
    wait_for("the control socket", || {
        std::os::unix::net::UnixStream::connect(&path).is_ok()
    });
    rein.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(rein.wait_exit().0, Some(0));
    assert!(!path.exists(), "rein's own socket is removed");

    let dir = std::mem::replace(&mut rein.dir, tempfile::tempdir().unwrap());
    let mut rein = Rein::start_in(dir, &["--config", "EMPTY", "--control", &control]);
    wait_for("the control socket", || {
        std::os::unix::net::UnixStream::connect(&path).is_ok()
    });
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, "someone else's").unwrap();
    rein.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(rein.wait_exit().0, Some(0));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "someone else's");
}

/// A start that fails after the control socket is bound (here: a listener's port is taken) leaves no
/// socket file behind.
#[test]
fn a_failed_start_leaves_no_control_socket() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rein.json");
    let doc = json!({"listeners": {taken.local_addr().unwrap().to_string(): {"pass": "routes"}}, "routes": []});
    std::fs::write(&file, doc.to_string()).unwrap();
    let file = file.display().to_string();
    let mut rein = Rein::start_in(dir, &["--config", &file]);
    let (code, stderr) = rein.wait_exit();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("Address already in use"), "{stderr}");
    assert!(!rein.control().exists(), "a stale control socket was left");
}
