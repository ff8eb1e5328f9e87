//! The command line as people use it: `rein run --listen`, what a refused start leaves behind, `rein status`
//! as a table or JSON, errors from the API on one line, completions and the man page.

use std::process::Command;

use serde_json::json;

use crate::harness::{Rein, get};

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
