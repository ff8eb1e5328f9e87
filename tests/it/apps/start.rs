//! How apps start: Node.js apps unmodified (and written for Unit, as CommonJS or ES modules), Python apps on
//! the socket rein passes as fd 3, and the environment they get.

use super::*;

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
    // Frameworks parse `PORT` as a number (plain `gunicorn app:app` fails on a path): only TCP sets it.
    assert_eq!(env["PORT"], Value::Null, "no PORT on a Unix socket: {env}");
    assert!(
        Path::new(sock).starts_with(rein.state.join("run/apps/py")),
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

// ----- 12. Spreading requests over instances -----------------------------------------------------------

/// A request goes to the instance with the fewest in flight: one instance holding a long request gets no
/// share of the quick ones meanwhile (round-robin would send it every other one).
#[test]
fn requests_go_to_the_instance_with_the_fewest_in_flight() {
    let rein = Rein::start();
    let addr = serve_one(
        &rein,
        "slow",
        node_app("slow.js", &[], json!({"processes": 2})),
    );
    wait_ready(&rein, "slow", 2);
    let held = std::thread::spawn(move || get(addr, "/?ms=2500"));
    let mut busy = 0;
    wait_for("an instance with the long request in flight", || {
        let all = instances(&rein, "slow");
        let holding = all.iter().find(|i| i["in_flight"] == 1);
        busy = holding.map_or(0, pid_of);
        holding.is_some()
    });
    let slow_pid = |r: &Response| -> u32 {
        assert_eq!(r.status, 200, "{r:?}");
        let text = r.text();
        text.trim().strip_prefix("slow:").unwrap().parse().unwrap()
    };
    for i in 0..6 {
        let r = get(addr, "/?ms=0");
        assert_ne!(
            slow_pid(&r),
            busy,
            "quick request {i} went to the busy instance"
        );
    }
    assert_eq!(slow_pid(&held.join().unwrap()), busy);
}

/// An application's name becomes file names (its log, its sockets' directory): a name holding `/`, or too
/// long for a file name, is refused with the configuration rather than accepted and never started.
#[test]
fn application_names_that_cannot_be_file_names_are_refused() {
    let rein = Rein::start();
    let long = "a".repeat(1 << 20);
    for (name, expected) in [
        ("blah/blah", "is not a valid application name"),
        ("..", "is not a valid application name"),
        (long.as_str(), "an application name is at most 200 bytes"),
    ] {
        let doc = json!({name: python_app("v1", &[], json!({}))});
        let (code, body) = rein.api("PUT", "/config/applications", Some(&doc.to_string()));
        assert_eq!(
            code,
            400,
            "{}",
            &body.to_string()[..200.min(body.to_string().len())]
        );
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains(expected),
            "{}",
            &detail[..300.min(detail.len())]
        );
    }
    // A name of the longest length starts and serves.
    let name = "n".repeat(200);
    let addr = serve_one(&rein, &name, python_app("v1", &[], json!({})));
    wait_ready(&rein, &name, 1);
    assert_eq!(get(addr, "/").status, 200);
}
