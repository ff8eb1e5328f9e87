//! The application supervisor end to end: rein runs real Node.js, Python and shell apps (`tests/apps/`),
//! hands them their socket, gates traffic on readiness, replaces crashed instances with back-off, reloads
//! them one at a time under load, abandons broken releases, stops whole process groups and keeps their logs.
//!
//! Configurations use short timeouts (readiness 3 s, stop 1 s, restart `min_interval` 0.2 s) so the whole
//! module runs in seconds; every wait is a deadline. Tests live in one submodule per topic; the helpers they
//! share are here.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::harness::{Conn, Rein, Response, get, wait_for};
use crate::load::{Load, assert_no_failures};

mod as_user;
mod cli;
mod crash;
mod dashboard;
mod handoff;
mod hygiene;
mod logs;
mod persistence;
mod readiness;
mod reload;
mod restart_one;
mod start;
mod top;

// ----- helpers ---------------------------------------------------------------------------------------

fn apps_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps")
}

fn app_file(name: &str) -> String {
    apps_dir().join(name).display().to_string()
}

/// The real Python interpreter (not a version manager's shim, which would add a process and start-up time).
fn python() -> &'static str {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = std::process::Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 is needed by the supervisor tests");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    })
}

/// `node` from PATH (rein gives it its preload because the executable is named `node`).
fn node() -> &'static str {
    static NODE: OnceLock<String> = OnceLock::new();
    NODE.get_or_init(|| {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join("node"))
            .find(|p| p.is_file())
            .expect("node is needed by the supervisor tests")
            .display()
            .to_string()
    })
}

/// An application object with the tests' short timeouts; `extra` overrides top-level keys.
fn app(executable: &str, arguments: &[&str], extra: Value) -> Value {
    let mut a = json!({
        "type": "external",
        "executable": executable,
        "arguments": arguments,
        "environment": {"PYTHON": python()},
        "readiness": {"timeout": 3},
        "stop": {"timeout": 1},
        "restart": {"min_interval": 0.2, "backoff_max": 1, "max_failures": 5, "stable_after": 0.5},
    });
    if let Value::Object(more) = extra {
        a.as_object_mut().unwrap().extend(more);
    }
    a
}

fn python_app(tag: &str, more_args: &[&str], extra: Value) -> Value {
    let script = app_file("python_app.py");
    let mut args = vec![script.as_str(), tag];
    args.extend_from_slice(more_args);
    app(python(), &args, extra)
}

fn node_app(script: &str, args: &[&str], extra: Value) -> Value {
    let script = app_file(script);
    let mut all = vec![script.as_str()];
    all.extend_from_slice(args);
    app(node(), &all, extra)
}

/// One listener whose only route passes to application `name`.
fn serve_one(rein: &Rein, name: &str, conf: Value) -> SocketAddr {
    rein.serve_with(
        json!([
            {"match": {"uri": "/keep"}, "action": {"return": 204}},
            {"action": {"pass": format!("applications/{name}")}}
        ]),
        json!({"applications": {name: conf}}),
    )
}

fn status(rein: &Rein, name: &str) -> Value {
    let (code, body) = rein.api("GET", &format!("/status/applications/{name}"), None);
    assert_eq!(code, 200, "status of {name}: {body}");
    body
}

fn instances(rein: &Rein, name: &str) -> Vec<Value> {
    status(rein, name)["instances"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn pid_of(instance: &Value) -> u32 {
    instance["pid"].as_u64().expect("instance pid") as u32
}

/// Pids of the ready instances.
fn ready_pids(rein: &Rein, name: &str) -> BTreeSet<u32> {
    instances(rein, name)
        .iter()
        .filter(|i| i["state"] == "ready")
        .map(pid_of)
        .collect()
}

/// Waits until `name` has exactly `n` instances, all ready; returns their pids.
fn wait_ready(rein: &Rein, name: &str, n: usize) -> BTreeSet<u32> {
    let mut pids = BTreeSet::new();
    wait_for(&format!("{n} ready instances of {name}"), || {
        let all = instances(rein, name);
        pids = all.iter().map(pid_of).collect();
        all.len() == n && all.iter().all(|i| i["state"] == "ready")
    });
    pids
}

/// A process that exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => proc_state(&stat) != Some('Z'),
        Err(_) => false,
    }
}

fn proc_state(stat: &str) -> Option<char> {
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Whether `/proc/<pid>` still exists (a zombie counts).
fn exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn kill9(pid: u32) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
}

/// rein's child processes (every thread's `children` list), with their states.
fn children_of(pid: u32) -> Vec<(u32, Option<char>)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path().join("children");
        for child in std::fs::read_to_string(path)
            .unwrap_or_default()
            .split_whitespace()
        {
            let child: u32 = child.parse().unwrap();
            let state = std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|s| proc_state(&s));
            out.push((child, state));
        }
    }
    out
}

fn app_log(rein: &Rein, name: &str) -> String {
    std::fs::read_to_string(rein.state.join(format!("logs/{name}.log"))).unwrap_or_default()
}

/// The lines of the application's log without their time and instance (`2026-…Z [3 err] `).
fn app_output(rein: &Rein, name: &str) -> Vec<String> {
    app_log(rein, name)
        .lines()
        .map(|l| l.split_once("] ").map_or(l, |(_, text)| text).to_owned())
        .collect()
}

/// `(tag, pid)` of an answer `python:TAG:PID` / `node:TAG:PID`.
fn who(r: &Response) -> (String, u32) {
    let text = r.text();
    let mut parts = text.rsplitn(2, ':');
    let pid = parts.next().and_then(|p| p.parse().ok());
    let rest = parts.next().unwrap_or_default();
    match (pid, rest.split_once(':')) {
        (Some(pid), Some((_, tag))) => (tag.to_owned(), pid),
        _ => panic!("not an app answer: {} {text}", r.status),
    }
}

/// Whether rein's process has exited (it is then a zombie: the harness has not reaped it yet).
fn rein_exited(rein: &Rein) -> bool {
    !alive(rein.pid())
}

fn restart(rein: &Rein, name: &str) -> (u16, Value) {
    rein.api(
        "GET",
        &format!("/control/applications/{name}/restart"),
        None,
    )
}

/// Deletes route 1 (the pass to the app) and then the application itself.
fn remove_app(rein: &Rein, name: &str) {
    let (code, body) = rein.api("DELETE", "/config/routes/1", None);
    assert_eq!(code, 200, "{body}");
    let (code, body) = rein.api("DELETE", &format!("/config/applications/{name}"), None);
    assert_eq!(code, 200, "{body}");
}
