//! The application supervisor end to end: rein runs real Node.js, Python and shell apps (`tests/apps/`),
//! hands them their socket, gates traffic on readiness, replaces crashed instances with back-off, reloads
//! them one at a time under load, abandons broken releases, stops whole process groups and keeps their logs.
//!
//! Configurations use short timeouts (readiness 3 s, stop 1 s, restart `min_interval` 0.2 s) so the whole
//! module runs in seconds; every wait is a deadline.

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

// ----- 1. Node.js ------------------------------------------------------------------------------------

#[test]
fn node_apps_run_unmodified_with_two_processes() {
    let rein = Rein::start();
    let addr = rein.serve_with(
        json!([
            {"match": {"uri": "/unit"}, "action": {"pass": "applications/unit"}},
            {"action": {"pass": "applications/web"}}
        ]),
        json!({"applications": {
            "web": node_app("node_app.js", &["v1"], json!({"processes": 2})),
            "unit": node_app("unit_http_app.js", &[], json!({})),
        }}),
    );
    let pids = wait_ready(&rein, "web", 2);
    assert_eq!(pids.len(), 2, "two distinct pids: {pids:?}");
    for pid in &pids {
        assert!(alive(*pid), "/proc/{pid} exists for a ready instance");
    }
    let mut seen = BTreeSet::new();
    wait_for("answers from both node instances", || {
        let r = get(addr, "/");
        assert_eq!(r.status, 200, "{r:?}");
        let (tag, pid) = who(&r);
        assert_eq!(tag, "v1");
        seen.insert(pid);
        seen.len() == 2
    });
    assert_eq!(seen, pids, "the pids answering are the ones /status shows");
    let st = status(&rein, "web");
    assert_eq!(st["state"], "running", "{st}");
    for i in st["instances"].as_array().unwrap() {
        assert_eq!(i["generation"], st["generation"], "{st}");
        assert_eq!(i["restarts"], 0, "{st}");
        assert!(i["rss_bytes"].as_u64().unwrap() > 1_000_000, "{st}");
        assert!(i["requests"].as_u64().unwrap() >= 1, "{st}");
    }

    let unit = wait_ready(&rein, "unit", 1);
    let r = get(addr, "/unit");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.text(),
        format!("unit-http:{}", unit.first().unwrap()),
        "require('unit-http') works"
    );
}

// ----- 2. Python on fd 3, and its environment --------------------------------------------------------

#[test]
fn python_app_serves_on_fd_3_and_sees_its_environment() {
    let rein = Rein::start();
    let wd = rein.dir.path().join("workdir");
    std::fs::create_dir_all(&wd).unwrap();
    let env = json!({"PYTHON": python(), "GREETING": "hello from the config"});
    let addr = rein.serve_with(
        json!([
            {"match": {"uri": "/tcp/*"}, "action": {"pass": "applications/pytcp"}},
            {"action": {"pass": "applications/py"}}
        ]),
        json!({"applications": {
            "py": python_app("p1", &[], json!({"environment": env, "working_directory": wd})),
            "pytcp": python_app("p2", &[], json!({"socket": "tcp"})),
        }}),
    );
    let pid = *wait_ready(&rein, "py", 1).first().unwrap();
    let r = get(addr, "/env");
    assert_eq!(r.status, 200, "{r:?}");
    let env: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(env["pid"], pid, "{env}");
    assert_eq!(env["LISTEN_PID"], pid.to_string(), "{env}");
    assert_eq!(env["LISTEN_FDS"], "1", "{env}");
    assert_eq!(env["LISTEN_FDNAMES"], "py", "{env}");
    assert_eq!(env["GREETING"], "hello from the config", "{env}");
    assert_eq!(
        Path::new(env["cwd"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        wd.canonicalize().unwrap(),
        "{env}"
    );
    let sock = env["REIN_SOCKET"]
        .as_str()
        .expect("REIN_SOCKET on a unix socket");
    assert_eq!(env["PORT"], sock, "PORT names the socket too: {env}");
    assert!(
        Path::new(sock).starts_with(rein.state.join("run/py")),
        "{sock}"
    );
    assert!(
        std::os::unix::fs::FileTypeExt::is_socket(&std::fs::metadata(sock).unwrap().file_type()),
        "{sock}"
    );

    let tcp_pid = *wait_ready(&rein, "pytcp", 1).first().unwrap();
    let r = get(addr, "/tcp/env");
    assert_eq!(r.status, 200, "{r:?}");
    let env: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(env["pid"], tcp_pid, "{env}");
    assert_eq!(env["LISTEN_PID"], tcp_pid.to_string(), "{env}");
    assert_eq!(env["REIN_SOCKET"], Value::Null, "{env}");
    let port: u16 = env["PORT"].as_str().unwrap().parse().expect("a TCP port");
    assert_ne!(port, 0);
    // It really is the instance's port: the app answers there directly.
    let r = get(SocketAddr::from(([127, 0, 0, 1], port)), "/direct");
    assert_eq!(r.text(), format!("python:p2:{tcp_pid}"));
}

// ----- 3. Readiness ----------------------------------------------------------------------------------

#[test]
fn requests_wait_until_a_slow_app_is_ready() {
    let rein = Rein::start();
    let put = Instant::now();
    let addr = serve_one(
        &rein,
        "slow",
        python_app(
            "slow",
            &["--sleep", "1"],
            json!({"readiness": {"http": "/health", "timeout": 3}}),
        ),
    );
    let waiting = std::thread::spawn(move || {
        let r = get(addr, "/");
        (r, put.elapsed())
    });
    // While the instance is starting, the request is held by rein, not sent to it.
    let mut seen_starting = false;
    while !waiting.is_finished() {
        let all = instances(&rein, "slow");
        if let Some(i) = all.first()
            && i["state"] == "starting"
        {
            seen_starting = true;
            assert_eq!(
                i["requests"], 0,
                "no request reaches a starting instance: {i}"
            );
            assert_eq!(i["in_flight"], 0, "{i}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(seen_starting, "the instance was seen starting");
    let (r, took) = waiting.join().unwrap();
    assert_eq!(
        r.status, 200,
        "the early request waited and succeeded: {r:?}"
    );
    let pid = *wait_ready(&rein, "slow", 1).first().unwrap();
    assert_eq!(r.text(), format!("python:slow:{pid}"));
    assert!(
        took >= Duration::from_millis(900),
        "answered after {took:?}"
    );
    assert_eq!(instances(&rein, "slow")[0]["requests"], 1);
}

#[test]
fn an_app_that_never_becomes_ready_gets_no_traffic() {
    let rein = Rein::start();
    let addr = serve_one(
        &rein,
        "stuck",
        app(
            &app_file("never_ready.sh"),
            &[],
            json!({"readiness": {"timeout": 1}}),
        ),
    );
    let t = Instant::now();
    let r = get(addr, "/");
    let took = t.elapsed();
    assert_eq!(r.status, 503, "{r:?}");
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(5),
        "503 after the readiness wait, took {took:?}"
    );
    // Failed readiness is retried: a replacement with a higher restart count, never a ready one.
    wait_for("a retried instance", || {
        let st = status(&rein, "stuck");
        let all = st["instances"].as_array().unwrap();
        assert!(all.iter().all(|i| i["state"] != "ready"), "{st}");
        all.iter()
            .any(|i| i["state"] == "starting" && i["restarts"].as_u64().unwrap() >= 1)
    });
}

#[test]
fn an_app_with_a_missing_executable_is_refused_and_nothing_changes() {
    let rein = Rein::start();
    let addr = serve_one(&rein, "py", python_app("p", &[], json!({})));
    wait_ready(&rein, "py", 1);
    let (_, before) = rein.api("GET", "/config", None);
    let missing = rein.dir.path().join("no-such-program");
    let ghost = app(&missing.display().to_string(), &[], json!({}));
    let (code, body) = rein.api(
        "PUT",
        "/config/applications/ghost",
        Some(&ghost.to_string()),
    );
    assert_eq!(code, 400, "{body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("applications/ghost/executable"),
        "the error names the field: {body}"
    );
    // The same through a whole-document PUT, and through the existing app's executable.
    let (code, body) = rein.api(
        "PUT",
        "/config/applications/py/executable",
        Some(&json!(missing).to_string()),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("applications/py/executable"),
        "{body}"
    );
    assert_eq!(rein.api("GET", "/config", None).1, before);
    let (_, st) = rein.api("GET", "/status/applications", None);
    assert!(st.get("ghost").is_none(), "{st}");
    assert_eq!(st["py"]["last_reload"], Value::Null, "no reload: {st}");
    assert_eq!(get(addr, "/").status, 200);
}

// ----- 4. Crash recovery -----------------------------------------------------------------------------

#[test]
fn a_killed_instance_is_replaced() {
    let rein = Rein::start();
    let addr = serve_one(&rein, "py", python_app("p", &[], json!({"processes": 2})));
    let pids = wait_ready(&rein, "py", 2);
    let victim = *pids.first().unwrap();
    let before = instances(&rein, "py");
    let restarts_before = before
        .iter()
        .find(|i| pid_of(i) == victim)
        .map(|i| i["restarts"].as_u64().unwrap())
        .unwrap();
    kill9(victim);
    let mut now = BTreeSet::new();
    wait_for("a replacement instance", || {
        now = wait_ready(&rein, "py", 2);
        !now.contains(&victim)
    });
    let survivor = *pids.iter().find(|p| **p != victim).unwrap();
    assert!(now.contains(&survivor), "the other instance was left alone");
    let fresh = *now.iter().find(|p| **p != survivor).unwrap();
    let st = instances(&rein, "py");
    let replaced = st.iter().find(|i| pid_of(i) == fresh).unwrap();
    assert_eq!(
        replaced["restarts"].as_u64().unwrap(),
        restarts_before + 1,
        "{st:?}"
    );
    wait_for("the killed process reaped", || !exists(victim));
    let mut seen = BTreeSet::new();
    wait_for("both instances answer", || {
        seen.insert(who(&get(addr, "/")).1);
        seen.len() == 2
    });
    assert_eq!(seen, now);
}

#[test]
fn a_crash_loop_backs_off_then_errors_until_a_reload() {
    let rein = Rein::start();
    let flag = rein.dir.path().join("crash-flag");
    std::fs::write(&flag, "").unwrap();
    let addr = serve_one(
        &rein,
        "crashy",
        app(
            &app_file("crash.sh"),
            &[],
            json!({
                "environment": {"PYTHON": python(), "CRASH_FLAG": flag},
                "restart": {"min_interval": 0.2, "backoff_max": 2, "max_failures": 3, "stable_after": 10},
            }),
        ),
    );
    let mut st = Value::Null;
    wait_for("the app errored", || {
        st = status(&rein, "crashy");
        st["state"] == "errored"
    });
    let reason = st["errored"].as_str().unwrap_or_default();
    assert!(reason.contains("3 consecutive failures"), "{st}");
    assert_eq!(st["instances"], json!([]), "no instance left: {st}");
    // The app's own log gives the timeline: start, ready, exit 0.2 s later; back-off 1 s, then 2 s.
    let log = app_log(&rein, "crashy");
    let times = |word: &str| -> Vec<f64> {
        log.lines()
            .filter(|l| l.starts_with(word))
            .filter_map(|l| l.rsplit_once("t=").and_then(|(_, t)| t.parse().ok()))
            .collect()
    };
    let (starts, exits) = (times("start crash"), times("exit crash"));
    assert_eq!(starts.len(), 3, "three runs, none after errored:\n{log}");
    assert_eq!(exits.len(), 3, "{log}");
    let gap1 = starts[1] - exits[0];
    let gap2 = starts[2] - exits[1];
    assert!(
        (0.9..1.8).contains(&gap1),
        "first back-off 1 s: {gap1}\n{log}"
    );
    assert!(
        (1.9..2.8).contains(&gap2),
        "second back-off 2 s: {gap2}\n{log}"
    );
    // Still errored (no more runs) until a reload; the reload clears it.
    std::fs::remove_file(&flag).unwrap();
    let (code, body) = restart(&rein, "crashy");
    assert_eq!(
        (code, body.clone()),
        (200, json!({"success": "Ok"})),
        "{body}"
    );
    let st = status(&rein, "crashy");
    assert_eq!(st["state"], "running", "{st}");
    assert_eq!(st["errored"], Value::Null, "{st}");
    assert_eq!(st["last_reload"]["ok"], true, "{st}");
    let pid = *wait_ready(&rein, "crashy", 1).first().unwrap();
    assert_eq!(get(addr, "/").text(), format!("python:crash:{pid}"));
}

// ----- 5. Rolling reloads under load -----------------------------------------------------------------

#[test]
fn rolling_reloads_and_kills_under_load_fail_no_request() {
    let rein = Rein::start();
    let restart_policy =
        json!({"min_interval": 0.2, "backoff_max": 1, "max_failures": 100, "stable_after": 0.5});
    let addr = rein.serve_with(
        json!([
            {"match": {"uri": "/py/*"}, "action": {"pass": "applications/py"}},
            {"action": {"pass": "applications/web"}}
        ]),
        json!({"applications": {
            "web": node_app("node_app.js", &["w"], json!({"processes": 2, "restart": restart_policy})),
            "py": python_app("p", &[], json!({"restart": restart_policy})),
        }}),
    );
    wait_ready(&rein, "web", 2);
    wait_ready(&rein, "py", 1);
    let gen_before = |name: &str| status(&rein, name)["generation"].as_u64().unwrap();
    let (web0, py0) = (gen_before("web"), gen_before("py"));

    let load = Load::start(addr, &["/web/a", "/web/b", "/py/a", "/py/b"]);
    load.wait_more(50);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    eprintln!("kill seed {seed}");
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for round in 0..5 {
        let name = if round % 2 == 0 { "web" } else { "py" };
        let (code, body) = restart(&rein, name);
        assert_eq!(
            (code, body.clone()),
            (200, json!({"success": "Ok"})),
            "restart {round} of {name}"
        );
        load.wait_more(20);
        let target = if next() % 2 == 0 { "web" } else { "py" };
        let mut ready: Vec<u32> = Vec::new();
        wait_for(&format!("a ready instance of {target}"), || {
            ready = ready_pids(&rein, target).into_iter().collect();
            !ready.is_empty()
        });
        let victim = ready[(next() % ready.len() as u64) as usize];
        eprintln!("round {round}: kill -9 {target} {victim}");
        kill9(victim);
        load.wait_more(20);
    }
    wait_ready(&rein, "web", 2);
    wait_ready(&rein, "py", 1);
    load.wait_more(50);
    let (web_ok, py_ok) = (load.count("node:w"), load.count("python:p"));
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
    assert!(web_ok > 50 && py_ok > 50, "{ok:?}");
    for (name, before, reloads) in [("web", web0, 3), ("py", py0, 2)] {
        let st = status(&rein, name);
        assert_eq!(
            st["generation"].as_u64().unwrap(),
            before + reloads,
            "{name}: {st}"
        );
        assert_eq!(st["last_reload"]["ok"], true, "{name}: {st}");
        assert_eq!(
            st["last_reload"]["generation"], st["generation"],
            "{name}: {st}"
        );
        assert_eq!(st["state"], "running", "{name}: {st}");
        for i in st["instances"].as_array().unwrap() {
            assert_eq!(i["generation"], st["generation"], "{name}: {st}");
        }
    }
}

// ----- 6. A broken release ---------------------------------------------------------------------------

#[test]
fn a_broken_release_is_abandoned_and_the_old_instances_keep_serving() {
    let rein = Rein::start();
    let addr = serve_one(&rein, "py", python_app("v1", &[], json!({"processes": 2})));
    let old = wait_ready(&rein, "py", 2);
    let gen0 = status(&rein, "py")["generation"].as_u64().unwrap();
    let load = Load::start(addr, &["/a", "/b"]);
    load.wait_more(20);

    let script = app_file("python_app.py");
    let broken = json!([script, "v2", "--fail-at-start"]);
    let (code, body) = rein.api(
        "PUT",
        "/config/applications/py/arguments",
        Some(&broken.to_string()),
    );
    assert_eq!(code, 200, "the configuration is applied: {body}");
    let mut st = Value::Null;
    wait_for("the reload abandoned", || {
        st = status(&rein, "py");
        st["last_reload"]["ok"] == false
    });
    assert!(
        !st["last_reload"]["reason"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "a reason: {st}"
    );
    assert_eq!(st["last_reload"]["generation"], gen0 + 1, "{st}");
    assert_ne!(
        st["state"], "errored",
        "an abandoned reload is not an app failure: {st}"
    );
    assert_eq!(
        wait_ready(&rein, "py", 2),
        old,
        "the old instances still serve"
    );
    for i in st["instances"].as_array().unwrap() {
        assert_eq!(i["generation"], gen0, "{st}");
    }
    load.wait_more(20);
    let r = get(addr, "/");
    assert_eq!(r.status, 200);
    assert_eq!(who(&r).0, "v1", "still the old version");

    // Asking again for the broken version: 500, and the generation is not reused.
    let (code, body) = restart(&rein, "py");
    assert_eq!(code, 500, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Reload failed"),
        "{body}"
    );
    assert!(
        !body["detail"].as_str().unwrap_or_default().is_empty(),
        "{body}"
    );
    let st = status(&rein, "py");
    assert_eq!(st["last_reload"]["ok"], false, "{st}");
    assert_eq!(st["last_reload"]["generation"], gen0 + 2, "{st}");
    assert_eq!(ready_pids(&rein, "py"), old);
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
    assert_eq!(ok.keys().collect::<Vec<_>>(), ["python:v1"], "{ok:?}");
    let log = app_log(&rein, "py");
    assert!(log.contains("v2: failing at start"), "{log}");
}

// ----- 7. Process hygiene ----------------------------------------------------------------------------

#[test]
fn an_app_ignoring_sigterm_is_killed_after_the_stop_timeout() {
    let rein = Rein::start();
    let addr = serve_one(
        &rein,
        "stubborn",
        app(&app_file("ignore_term.sh"), &[], json!({})),
    );
    let first = *wait_ready(&rein, "stubborn", 1).first().unwrap();
    assert_eq!(who(&get(addr, "/")).1, first);
    // On reload: the old instance gets SIGTERM, ignores it, and is killed 1 s later.
    let (code, body) = restart(&rein, "stubborn");
    assert_eq!(code, 200, "{body}");
    let t = Instant::now();
    assert!(alive(first), "SIGTERM is ignored");
    wait_for("the old instance killed", || !alive(first));
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_secs(5),
        "killed after the 1 s stop timeout: {took:?}"
    );
    let second = *wait_ready(&rein, "stubborn", 1).first().unwrap();
    assert_ne!(second, first);
    // On removal: the same.
    remove_app(&rein, "stubborn");
    let t = Instant::now();
    assert!(alive(second), "SIGTERM is ignored");
    wait_for("the removed instance killed", || !alive(second));
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_secs(5),
        "killed after the 1 s stop timeout: {took:?}"
    );
    wait_for("the killed instance reaped", || !exists(second));
}

#[test]
fn removing_an_app_stops_its_grandchildren_and_leaves_no_zombies() {
    let rein = Rein::start();
    serve_one(
        &rein,
        "forker",
        app(&app_file("forks_grandchild.sh"), &[], json!({})),
    );
    let pid = *wait_ready(&rein, "forker", 1).first().unwrap();
    let mut grandchild = 0;
    wait_for("the grandchild's pid in the log", || {
        grandchild = app_log(&rein, "forker")
            .lines()
            .find_map(|l| l.strip_prefix("grandchild="))
            .and_then(|g| g.trim().parse().ok())
            .unwrap_or(0);
        grandchild != 0
    });
    assert!(alive(pid) && alive(grandchild));
    assert!(
        children_of(rein.pid()).iter().any(|(c, _)| *c == pid),
        "the instance is rein's child"
    );
    remove_app(&rein, "forker");
    wait_for("the instance and its grandchild gone", || {
        !alive(pid) && !alive(grandchild)
    });
    wait_for("the removed app gone from /status", || {
        rein.api("GET", "/status/applications", None)
            .1
            .get("forker")
            .is_none()
    });
    let mut left = Vec::new();
    wait_for("no child of rein left (zombie or not)", || {
        left = children_of(rein.pid());
        left.is_empty()
    });
    assert!(!exists(pid), "reaped");
}

// ----- 8. Logs ---------------------------------------------------------------------------------------

#[test]
fn app_output_lands_in_its_log_file() {
    let rein = Rein::start();
    rein.serve_with(
        json!([{"action": {"pass": "applications/py"}}]),
        json!({"applications": {
            "py": python_app("logger", &[], json!({})),
            "web": node_app("node_app.js", &["nl"], json!({})),
        }}),
    );
    let py = *wait_ready(&rein, "py", 1).first().unwrap();
    let web = *wait_ready(&rein, "web", 1).first().unwrap();
    let path = rein.state.join("logs/py.log");
    wait_for("both lines in py.log", || {
        let log = std::fs::read_to_string(&path).unwrap_or_default();
        log.contains(&format!("start logger pid={py}"))
            && log.contains(&format!("stderr logger pid={py}"))
    });
    let web_log = rein.state.join("logs/web.log");
    wait_for("node's stdout and the preload's stderr in web.log", || {
        let log = std::fs::read_to_string(&web_log).unwrap_or_default();
        log.contains(&format!("node_app nl listening, pid {web}"))
            && log.contains("rein: listen(3000) uses the socket passed by rein (fd 3")
    });
    assert!(
        !std::fs::read_to_string(&path).unwrap().contains("node_app"),
        "each app has its own log"
    );
}

// ----- 9. Persistence --------------------------------------------------------------------------------

#[test]
fn an_app_whose_executable_vanished_does_not_stop_a_restart() {
    let mut rein = Rein::start();
    let script = rein.dir.path().join("app.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec {} {} persisted\n",
            python(),
            app_file("python_app.py")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    serve_one(
        &rein,
        "kept",
        app(
            &script.display().to_string(),
            &[],
            json!({"restart": {"min_interval": 0.2, "backoff_max": 1, "max_failures": 1000, "stable_after": 0.5}}),
        ),
    );
    let pid = *wait_ready(&rein, "kept", 1).first().unwrap();
    let (_, config) = rein.api("GET", "/config", None);
    rein.signal(Signal::SIGTERM);
    assert_eq!(rein.wait_exit().0, Some(0));
    assert!(!alive(pid), "the app stopped with rein");

    std::fs::remove_file(&script).unwrap();
    let dir = std::mem::replace(&mut rein.dir, tempfile::tempdir().unwrap());
    let mut again = Rein::start_in(dir, &[]);
    wait_for("rein started (or exited)", || {
        std::os::unix::net::UnixStream::connect(again.control()).is_ok() || rein_exited(&again)
    });
    if rein_exited(&again) {
        let (code, stderr) = again.wait_exit();
        panic!(
            "rein refused to start because an app's executable is missing (exit {code:?}): {stderr}\n\
             expected: it starts, keeps the application in the configuration, reports it failing and \
             retries it with back-off"
        );
    }
    assert_eq!(
        again.api("GET", "/config", None).1,
        config,
        "the configuration is kept"
    );
    let addr = again.bound("127.0.0.1:0");
    wait_for("the app reported failing and retried", || {
        instances(&again, "kept")
            .iter()
            .any(|i| i["restarts"].as_u64().unwrap_or(0) >= 1)
    });
    assert!(ready_pids(&again, "kept").is_empty());
    // Once the executable is back, the retries bring it up without any change of configuration.
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec {} {} persisted\n",
            python(),
            app_file("python_app.py")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let pid = *wait_ready(&again, "kept", 1).first().unwrap();
    assert_eq!(get(addr, "/").text(), format!("python:persisted:{pid}"));
}

#[test]
fn a_busy_app_scales_up_to_max_and_back_to_spare_when_idle() {
    let rein = Rein::start();
    let conf = node_app(
        "slow.js",
        &[],
        json!({"processes": {"max": 3, "spare": 1, "idle_timeout": 0.5}}),
    );
    let addr = serve_one(&rein, "slow", conf);
    wait_ready(&rein, "slow", 1);
    // Held requests keep every instance busy: rein adds instances, one a second, up to `max`.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let holders: Vec<_> = (0..6)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut conn = Conn::open(addr);
                let mut codes = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    codes.push(conn.get("/?ms=300", &[]).status);
                }
                codes
            })
        })
        .collect();
    wait_ready(&rein, "slow", 3);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for holder in holders {
        assert!(holder.join().unwrap().iter().all(|c| *c == 200));
    }
    // Idle again: back to `spare`, one step per idle_timeout.
    wait_ready(&rein, "slow", 1);
}

#[test]
fn only_the_instance_over_its_memory_limit_is_replaced_under_load() {
    let rein = Rein::start();
    // A fresh Python instance is well under 48 MiB; `/grow` adds 64 MiB to the one that serves it.
    let script = app_file("grow_app.py");
    let conf = app(
        python(),
        &[script.as_str(), "g"],
        json!({"processes": 2, "memory_limit": "48M"}),
    );
    let addr = serve_one(&rein, "fat", conf);
    let before = wait_ready(&rein, "fat", 2);
    let gen0 = status(&rein, "fat")["generation"].clone();
    let load = Load::start(addr, &["/a", "/b"]);
    load.wait_more(20);

    let (tag, fat) = who(&get(addr, "/grow"));
    assert_eq!(tag, "g");
    let kept = *before.iter().find(|p| **p != fat).unwrap();
    let mut now = BTreeSet::new();
    wait_for("the grown instance replaced", || {
        now = ready_pids(&rein, "fat");
        now.len() == 2 && !now.contains(&fat)
    });
    assert!(
        now.contains(&kept),
        "the other instance keeps its pid: {now:?}"
    );
    wait_for("the grown instance stopped", || !alive(fat));
    load.wait_more(20);
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);

    let st = status(&rein, "fat");
    assert_eq!(st["replacements"], 1, "{st}");
    assert_eq!(st["generation"], gen0, "not a reload: {st}");
    assert_eq!(st["last_reload"], Value::Null, "not a reload: {st}");
    assert_eq!(st["state"], "running", "{st}");
    assert_eq!(wait_ready(&rein, "fat", 2), now, "nothing else replaced");
    let log = rein.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("memory limit exceeded"))
        .unwrap_or_else(|| panic!("the reason in rein's log:\n{log}"));
    assert!(line.contains(&format!("pid={fat}")), "{line}");
    assert!(log.contains("instance replaced"), "{log}");
}

#[test]
fn an_instance_that_served_its_request_limit_is_replaced() {
    let rein = Rein::start();
    let addr = serve_one(
        &rein,
        "lim",
        python_app("lim", &[], json!({"limits": {"requests": 5}})),
    );
    let first = wait_ready(&rein, "lim", 1);
    let mut conn = Conn::open(addr);
    for _ in 0..5 {
        assert_eq!(conn.get("/", &[]).status, 200);
    }
    wait_for("a replacement after 5 requests", || {
        let pids = ready_pids(&rein, "lim");
        !pids.is_empty() && pids.is_disjoint(&first)
    });
    assert_eq!(Conn::open(addr).get("/", &[]).status, 200);
    let st = status(&rein, "lim");
    assert!(st["replacements"].as_u64().unwrap() >= 1, "{st}");
    assert_eq!(
        st["last_reload"],
        Value::Null,
        "one instance replaced, not a reload: {st}"
    );
    assert!(rein.log_text().contains("request limit reached"));
}

#[test]
fn a_change_to_a_watched_file_is_a_rolling_reload() {
    let rein = Rein::start();
    let watched = rein.dir.path().join("src");
    std::fs::create_dir_all(watched.join("node_modules")).unwrap();
    std::fs::write(watched.join("app.txt"), "v1").unwrap();
    let watch = json!({"watch": {"paths": [watched], "ignore": ["node_modules"], "debounce": 0.2}});
    let addr = serve_one(&rein, "w", python_app("w", &[], watch));
    let first = wait_ready(&rein, "w", 1);
    // Ignored: no reload.
    std::fs::write(watched.join("node_modules/x.js"), "x").unwrap();
    std::fs::write(watched.join("app.txt"), "v2").unwrap();
    wait_for("the reload after the change", || {
        let s = status(&rein, "w");
        s["last_reload"]["ok"] == true && ready_pids(&rein, "w").is_disjoint(&first)
    });
    assert_eq!(
        status(&rein, "w")["generation"],
        2,
        "one reload for the burst, none for node_modules"
    );
    assert_eq!(Conn::open(addr).get("/", &[]).status, 200);
    // A watched path that does not exist is refused with its JSON path.
    let bad = python_app("w", &[], json!({"watch": {"paths": ["/nonexistent/dir"]}}));
    let (code, body) = rein.api("PUT", "/config/applications/w", Some(&bad.to_string()));
    assert_eq!(code, 400, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("applications/w/watch/paths"),
        "{body}"
    );
}

// ----- 10. Reload strategies -------------------------------------------------------------------------

/// Polls the app's status until `stop` is set (from another thread of a scope), returning every snapshot.
fn observe(rein: &Rein, name: &str, stop: &AtomicBool) -> Vec<Value> {
    let mut seen = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        seen.push(status(rein, name));
        std::thread::sleep(Duration::from_millis(5));
    }
    seen
}

/// `(starting, ready)` instances of `generation` in a status snapshot.
fn count_of(st: &Value, generation: u64) -> (usize, usize) {
    let all = st["instances"].as_array().cloned().unwrap_or_default();
    let of = |state: &str| {
        all.iter()
            .filter(|i| i["generation"] == generation && i["state"] == state)
            .count()
    };
    (of("starting"), of("ready"))
}

#[test]
fn a_parallel_reload_under_load_switches_every_instance_at_once() {
    let rein = Rein::start();
    let conf = |tag: &str| {
        python_app(
            tag,
            &["--sleep", "0.3"],
            json!({"processes": 3, "reload": {"strategy": "parallel"}}),
        )
    };
    let addr = serve_one(&rein, "py", conf("v1"));
    let old = wait_ready(&rein, "py", 3);
    let gen0 = status(&rein, "py")["generation"].as_u64().unwrap();
    let load = Load::start(addr, &["/a", "/b", "/c"]);
    load.wait_more(20);

    let stop = AtomicBool::new(false);
    let seen = std::thread::scope(|s| {
        let watcher = s.spawn(|| observe(&rein, "py", &stop));
        let (code, body) = rein.api(
            "PUT",
            "/config/applications/py",
            Some(&conf("v2").to_string()),
        );
        assert_eq!(code, 200, "{body}");
        wait_for("the parallel reload done", || {
            let st = status(&rein, "py");
            st["last_reload"]["ok"] == true && st["generation"] == gen0 + 1
        });
        stop.store(true, Ordering::Relaxed);
        watcher.join().unwrap()
    });
    let new = wait_ready(&rein, "py", 3);
    assert!(
        new.is_disjoint(&old),
        "every pid changed: {old:?} -> {new:?}"
    );
    load.wait_more(20);
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
    assert!(ok.contains_key("python:v2"), "{ok:?}");
    // Blue/green: the new generation never served while part of it was still starting.
    let mut held = false;
    for st in &seen {
        let (starting, ready) = count_of(st, gen0 + 1);
        assert!(
            ready == 0 || ready == 3,
            "new instances admitted one by one: {st}"
        );
        held |= starting == 3 && st["state"] == "reloading";
    }
    assert!(held, "the three new instances were seen starting together");
    for w in old {
        wait_for("the old instances stopped", || !alive(w));
    }
}

#[test]
fn a_batch_reload_under_load_replaces_two_at_a_time() {
    let rein = Rein::start();
    let conf = json!({"processes": 4, "reload": {"strategy": "rolling", "batch": 2}});
    let addr = serve_one(&rein, "py", python_app("b", &["--sleep", "0.2"], conf));
    let old = wait_ready(&rein, "py", 4);
    let gen0 = status(&rein, "py")["generation"].as_u64().unwrap();
    let load = Load::start(addr, &["/a", "/b", "/c"]);
    load.wait_more(20);

    let stop = AtomicBool::new(false);
    let seen = std::thread::scope(|s| {
        let watcher = s.spawn(|| observe(&rein, "py", &stop));
        let (code, body) = restart(&rein, "py");
        assert_eq!((code, body), (200, json!({"success": "Ok"})));
        stop.store(true, Ordering::Relaxed);
        watcher.join().unwrap()
    });
    let new = wait_ready(&rein, "py", 4);
    assert!(
        new.is_disjoint(&old),
        "every pid changed: {old:?} -> {new:?}"
    );
    load.wait_more(20);
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
    let st = status(&rein, "py");
    assert_eq!(st["generation"], gen0 + 1, "{st}");
    let most = seen
        .iter()
        .map(|st| count_of(st, gen0 + 1).0)
        .max()
        .unwrap_or(0);
    assert!(most <= 2, "at most `batch` new instances start at once");
    assert_eq!(most, 2, "two new instances were seen starting together");
}

#[test]
fn a_bad_reload_option_is_refused_with_its_path() {
    let rein = Rein::start();
    serve_one(&rein, "py", python_app("r", &[], json!({})));
    wait_ready(&rein, "py", 1);
    for (reload, at) in [
        (json!({"strategy": "blue"}), "reload/strategy"),
        (json!({"strategy": "rolling", "batch": 0}), "reload/batch"),
        (json!({"batch": "2"}), "reload/batch"),
        (json!({"strategy": "parallel", "batch": 2}), "reload/batch"),
        (json!({"drain_timeout": -1}), "reload/drain_timeout"),
        (json!({"strategy": "rolling", "size": 2}), "reload/size"),
        (json!("parallel"), "reload"),
    ] {
        let bad = python_app("r", &[], json!({ "reload": reload }));
        let (code, body) = rein.api("PUT", "/config/applications/py", Some(&bad.to_string()));
        assert_eq!(code, 400, "{reload}: {body}");
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(
            detail.starts_with(&format!("applications/py/{at}")),
            "{reload}: {body}"
        );
    }
    let good = python_app(
        "r",
        &[],
        json!({"reload": {"strategy": "parallel", "drain_timeout": 5}}),
    );
    let (code, body) = rein.api("PUT", "/config/applications/py", Some(&good.to_string()));
    assert_eq!(code, 200, "{body}");
}

// ----- 11. ES modules --------------------------------------------------------------------------------

#[test]
fn esm_apps_importing_unit_http_run_unmodified() {
    let rein = Rein::start();
    let addr = rein.serve_with(
        json!([
            {"match": {"uri": "/pkg"}, "action": {"pass": "applications/pkg"}},
            {"action": {"pass": "applications/esm"}}
        ]),
        json!({"applications": {
            "esm": node_app("esm_app.mjs", &["m"], json!({"processes": 2})),
            "pkg": node_app("esm_pkg/server.js", &["p"], json!({})),
        }}),
    );
    let pids = wait_ready(&rein, "esm", 2);
    let mut seen = BTreeSet::new();
    wait_for("answers from both ES-module instances", || {
        let r = get(addr, "/");
        assert_eq!(r.status, 200, "{r:?}");
        let (tag, pid) = who(&r);
        assert_eq!(
            (r.text().split(':').next().unwrap(), tag.as_str()),
            ("esm", "m")
        );
        seen.insert(pid);
        seen.len() == 2
    });
    assert_eq!(seen, pids);
    let pkg = *wait_ready(&rein, "pkg", 1).first().unwrap();
    assert_eq!(get(addr, "/pkg").text(), format!("esm:p:{pkg}"));
    // The preload's listen() on fd 3 applied to the ES module too (its port 8080 was never bound).
    let log = app_log(&rein, "esm");
    assert!(
        log.contains("rein: listen(8080) uses the socket passed by rein (fd 3"),
        "{log}"
    );
    assert!(!log.contains("Error"), "{log}");
    // And it reloads like any app.
    let (code, body) = restart(&rein, "esm");
    assert_eq!(code, 200, "{body}");
    assert!(wait_ready(&rein, "esm", 2).is_disjoint(&pids));
}
