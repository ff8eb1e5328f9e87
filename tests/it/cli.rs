//! The command line as people use it: `rein run --listen`, what a refused start leaves behind, `rein status`
//! as a table or JSON, errors from the API on one line, completions and the man page.

use std::process::Command;

use serde_json::json;

use crate::harness::{Rein, get, wait_for};

/// `--listen` moves the embedded default configuration's listener: the welcome page is served there.
#[test]
fn listen_moves_the_default_configurations_listener() {
    let dir = tempfile::tempdir().unwrap();
    let rein = Rein::start_in(dir, &["--listen", "127.0.0.1:0"]);
    rein.wait_ready();
    let resp = get(rein.bound("127.0.0.1:0"), "/");
    assert_eq!(resp.status, 200);
    assert!(resp.text().contains("rein is running"), "{}", resp.text());
}

/// The default configuration's address taken: the error names the address and the flag that changes it, and
/// the refused start leaves no control socket behind.
#[test]
fn a_taken_default_port_names_the_listen_flag_and_leaves_no_socket() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let mut rein = Rein::start_in(dir, &["--listen", &addr]);
    let (code, stderr) = rein.wait_exit();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {addr}")) && stderr.contains("--listen ADDR"),
        "{stderr}"
    );
    assert!(!rein.control().exists(), "stale control socket left");
}

/// A start refused for an invalid `--config` or a listener in use removes the control socket it had bound.
#[test]
fn a_refused_start_removes_its_control_socket() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let docs = [
        json!({"routes": [{"action": {"return": "x"}}]}),
        json!({"listeners": {taken.local_addr().unwrap().to_string(): {"pass": "routes"}}, "routes": []}),
    ];
    for doc in docs {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rein.json");
        std::fs::write(&file, doc.to_string()).unwrap();
        let path = file.display().to_string();
        let mut rein = Rein::start_in(dir, &["--config", &path]);
        let (code, stderr) = rein.wait_exit();
        assert_eq!(code, Some(1), "{stderr}");
        assert!(!rein.control().exists(), "stale control socket: {stderr}");
    }
}

/// `--listen` is for the embedded default: given with `--config`, it is a usage error.
#[test]
fn listen_with_config_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["run", "--config", "x.json", "--listen", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `rein status` is a table of instances (pid, state, restarts, memory), listeners and totals; `--json` is
/// `/status` itself.
#[test]
fn status_prints_a_table_and_json_on_request() {
    let rein = Rein::start();
    let app = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/apps/python_app.py");
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "applications/web"}},
        "applications": {"web": {"type": "external", "executable": "python3", "arguments": [app, "web"],
                                 "processes": 2}},
    }));
    let addr = rein.bound("127.0.0.1:0");
    wait_for("the app to answer", || get(addr, "/").status == 200);
    let mut text = String::new();
    wait_for("two ready instances in the table", || {
        let out = rein.cli(&["status"]);
        text = String::from_utf8_lossy(&out.stdout).into_owned();
        out.status.success()
            && text
                .lines()
                .filter(|l| l.starts_with("web ") && l.contains(" ready "))
                .count()
                == 2
    });
    let head = text.lines().next().unwrap();
    for column in ["APP", "PID", "STATE", "RESTARTS", "MEMORY", "REQUESTS"] {
        assert!(head.contains(column), "{column} in {text}");
    }
    assert!(text.contains(&format!("127.0.0.1:0  {addr}")), "{text}");
    assert!(text.contains("connections: "), "{text}");

    let out = rein.cli(&["status", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["applications"]["web"]["instances"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// An error from the API is one line on standard error, `rein: error: WHAT: DETAIL`, and exit code 1.
#[test]
fn an_api_error_is_one_line() {
    let rein = Rein::start();
    let out = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["config", "set", "routes", "-", "--state"])
        .arg(&rein.state)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(br#"[{"action": {"return": "x"}}]"#)?;
            child.wait_with_output()
        })
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("rein: error: Invalid configuration: routes/0/action/return: "),
        "{err}"
    );

    let out = rein.cli(&["config", "get", "nothing/here"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        (out.status.code(), err.lines().count()),
        (Some(1), 1),
        "{err}"
    );
    assert!(err.starts_with("rein: error: "), "{err}");
}

/// A Node.js app that throws at start: the status gives the app's own `Error: …` line as the reason, not the
/// last frames of its stack.
#[test]
fn a_failed_start_shows_the_apps_own_error() {
    let rein = Rein::start();
    let script = rein.dir.path().join("broken.js");
    std::fs::write(
        &script,
        "function connect() { throw new Error('database unreachable'); }\nconnect();\n",
    )
    .unwrap();
    let doc = json!({
        "listeners": {"127.0.0.1:0": {"pass": "applications/broken"}},
        "applications": {"broken": {"type": "external", "executable": "node",
            "arguments": [script.display().to_string()], "readiness": {"timeout": 3},
            "restart": {"min_interval": 0.2, "backoff_max": 1}}},
    });
    let file = rein.dir.path().join("conf.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let out = rein.cli(&["config", "set", "/", &file.display().to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut text = String::new();
    wait_for("the failure in the status table", || {
        text = String::from_utf8_lossy(&rein.cli(&["status"]).stdout).into_owned();
        text.contains("Error: database unreachable")
    });
    assert!(!text.contains("Module._compile"), "{text}");
    let out = rein.cli(&["status", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let reason = doc["applications"]["broken"]["exited"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        reason.ends_with("its stderr ended: Error: database unreachable"),
        "{reason}"
    );
}

/// `--log-format json`: rein's own log is one JSON object a line, message and fields apart.
#[test]
fn the_log_format_json_writes_one_object_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let rein = Rein::start_in(dir, &["--config", "EMPTY", "--log-format", "json"]);
    rein.wait_ready();
    wait_for("rein is running in the log", || {
        rein.log_text().contains("rein is running")
    });
    for line in rein.log_text().lines() {
        let entry: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            entry["level"].is_string() && entry["fields"]["message"].is_string(),
            "{line}"
        );
    }
}
