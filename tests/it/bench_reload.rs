//! `rein bench reload APP` and `rein bench crash APP`: the real binary against a real rein running a
//! two-instance Node.js application (`tests/apps/hello.js`), through a real listener.

use serde_json::{Value, json};

use crate::harness::{Rein, rein_bench as bench, wait_for};

const HELLO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/apps/hello.js");

/// rein with the hello app (`processes` instances) behind a listener passing to `pass`, all instances ready.
fn rein_with_app(processes: u32, pass: &str) -> Rein {
    let rein = Rein::start();
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": pass}},
        "routes": [{"action": {"return": 204}}],
        "applications": {"web": {
            "type": "external", "executable": "node", "arguments": [HELLO], "processes": processes
        }}
    }));
    wait_for("every instance ready", || {
        ready_pids(&app_status(&rein)).len() == processes as usize
    });
    rein
}

fn app_status(rein: &Rein) -> Value {
    rein.api("GET", "/status/applications/web", None).1
}

fn ready_pids(status: &Value) -> Vec<i64> {
    status["instances"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["state"] == "ready")
        .filter_map(|i| i["pid"].as_i64())
        .collect()
}

fn state(rein: &Rein) -> String {
    rein.state.display().to_string()
}

/// Every phase saw requests, and nothing failed anywhere.
fn assert_phases_and_no_failure(v: &Value) {
    for phase in ["before", "during", "after"] {
        let p = &v["phases"][phase];
        assert!(
            p["requests"].as_u64().unwrap() > 0,
            "no request {phase}: {v}"
        );
        assert_eq!(p["failed"], 0, "failed requests {phase}: {v}");
        assert!(p["p99_us"].as_u64().unwrap() >= p["p50_us"].as_u64().unwrap());
    }
    assert_eq!(v["failed"], 0, "failed requests: {v}");
    assert_eq!(v["errors"]["total"], 0, "{v}");
    let phases: u64 = ["before", "during", "after"]
        .iter()
        .map(|p| v["phases"][p]["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(phases, v["requests"].as_u64().unwrap(), "{v}");
}

#[test]
fn a_rolling_reload_under_load_fails_no_request() {
    let rein = rein_with_app(2, "applications/web");
    let generation = app_status(&rein)["generation"].as_u64().unwrap();
    let s = state(&rein);
    let v = bench(&[
        "reload", "web", "-d", "3", "-c", "4", "--json", "--state", &s,
    ])
    .json();
    assert_eq!(v["bench"], "reload");
    assert_eq!(v["app"], "web");
    assert_eq!(
        v["target"],
        format!("http://{}/", rein.bound("127.0.0.1:0")),
        "the URL comes from the listener passing to the app"
    );
    let reload = &v["reload"];
    assert_eq!(reload["ok"], true, "{v}");
    assert!(reload["reason"].is_null());
    assert!(reload["seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(reload["generation_before"], generation);
    assert!(
        reload["generation_after"].as_u64().unwrap() > generation,
        "{v}"
    );
    let trigger = v["trigger_at_s"].as_f64().unwrap();
    assert!(
        (0.9..1.5).contains(&trigger),
        "default --at is a third: {v}"
    );
    assert!(v.get("crash").is_none());
    assert_phases_and_no_failure(&v);

    let after = app_status(&rein);
    assert!(
        after["generation"].as_u64().unwrap() > generation,
        "{after}"
    );
    assert_eq!(after["last_reload"]["ok"], true, "{after}");
}

#[test]
fn a_killed_instance_is_replaced_without_failing_a_request() {
    let rein = rein_with_app(2, "applications/web");
    let before = ready_pids(&app_status(&rein));
    let s = state(&rein);
    let v = bench(&[
        "crash", "web", "-d", "3", "-c", "4", "--json", "--state", &s,
    ])
    .json();
    assert_eq!(v["bench"], "crash");
    let crash = &v["crash"];
    assert_eq!(crash["ok"], true, "{v}");
    assert_eq!(crash["ready_before"], 2);
    let killed = crash["killed_pid"].as_i64().unwrap();
    assert!(before.contains(&killed), "{killed} not among {before:?}");
    assert!(crash["time_to_capacity_s"].as_f64().unwrap() > 0.0, "{v}");
    let after = ready_pids(&app_status(&rein));
    assert!(!after.contains(&killed), "{killed} still in {after:?}");
    assert_ne!(after, before);
    assert_eq!(
        crash["pids_after"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| !before.contains(&p.as_i64().unwrap()))
            .count(),
        1,
        "one new instance: {v}"
    );
    // The replacement may come after the end of a short run (respawn back-off), so "after" may be empty.
    for phase in ["before", "during"] {
        assert!(v["phases"][phase]["requests"].as_u64().unwrap() > 0, "{v}");
    }
    assert_eq!(v["failed"], 0, "failed requests: {v}");
}

#[test]
fn the_human_report_names_the_phases_and_an_explicit_url_is_used() {
    let rein = rein_with_app(1, "applications/web");
    let url = format!("http://{}/x", rein.bound("127.0.0.1:0"));
    let s = state(&rein);
    let run = bench(&[
        "reload", "web", "--url", &url, "-d", "1.5", "--at", "0.3", "-c", "2", "--state", &s,
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let out = &run.stdout;
    for label in [
        "app",
        "target",
        "duration",
        "requests",
        "failed",
        "latency",
        "longest gap",
        "reload",
        "phases",
    ] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with(label)),
            "no {label:?} line in:\n{out}"
        );
    }
    assert!(
        out.contains(&format!("target        {url} (2 connections)")),
        "{out}"
    );
    assert!(out.contains("reload at 0.3"), "{out}");
    assert!(out.contains("reload        ok in"), "{out}");
    for phase in ["before", "during", "after"] {
        assert!(out.contains(&format!("    {phase} ")), "{out}");
    }
    assert!(run.stderr.is_empty(), "{}", run.stderr);
}

#[test]
fn unknown_apps_missing_listeners_and_bad_arguments_exit_1() {
    let rein = rein_with_app(1, "routes");
    let s = state(&rein);

    let run = bench(&["reload", "nope", "-d", "1", "--state", &s]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("rein bench reload: no application \"nope\" in rein (known: web)"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty());

    let run = bench(&["crash", "web", "-d", "1", "--state", &s]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("no listener passes to \"applications/web\"")
            && run.stderr.contains("--url"),
        "{}",
        run.stderr
    );

    let run = bench(&["reload", "web", "-d", "2", "--at", "2", "--state", &s]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("--at"), "{}", run.stderr);

    let run = bench(&["reload", "web", "--url", "ftp://x/", "--state", &s]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);

    // Nothing was reloaded or killed.
    let status = app_status(&rein);
    assert!(status["last_reload"].is_null(), "{status}");
    assert_eq!(status["instances"][0]["restarts"], 0, "{status}");
}

#[test]
fn an_unreachable_rein_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let sock = format!("unix:{}", dir.path().join("control.sock").display());
    for kind in ["reload", "crash"] {
        let run = bench(&[kind, "web", "-d", "1", "--control", &sock]);
        assert_eq!(run.code, Some(3), "{}", run.stderr);
        assert!(
            run.stderr.contains("cannot reach the control API at unix:"),
            "{}",
            run.stderr
        );
    }

    // rein answers, but the listener given does not.
    let rein = rein_with_app(1, "applications/web");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", closed.local_addr().unwrap());
    drop(closed);
    let s = state(&rein);
    let run = bench(&["reload", "web", "--url", &url, "-d", "1", "--state", &s]);
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("cannot connect to {url}")),
        "{}",
        run.stderr
    );
    assert!(app_status(&rein)["last_reload"].is_null());
}
