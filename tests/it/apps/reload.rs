//! Reloads: rolling under load without a failed request, a broken release abandoned while the old instances
//! serve, and the reload strategies.

use super::*;

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
    for round in 0..5 {
        let name = if round % 2 == 0 { "web" } else { "py" };
        let (code, body) = restart(&rein, name);
        assert_eq!(
            (code, body.clone()),
            (200, json!({"success": "Ok"})),
            "restart {round} of {name}"
        );
        load.wait_more(20);
        // Alternating (web, py, web, …), each round after the other app's reload: both apps are always killed,
        // and the 2-instance app loses a different instance each time.
        let target = if round % 2 == 0 { "py" } else { "web" };
        let mut ready: Vec<u32> = Vec::new();
        wait_for(&format!("a ready instance of {target}"), || {
            ready = ready_pids(&rein, target).into_iter().collect();
            !ready.is_empty()
        });
        let victim = ready[round / 2 % ready.len()];
        eprintln!("round {round}: kill -9 {target} {victim}");
        kill9(victim);
        load.wait_more(20);
        // Back to full strength before the next reload, so that each reload has an instance serving while it
        // runs (its requests_served, checked below, would be 0 behind a dead single instance).
        wait_ready(&rein, target, if target == "web" { 2 } else { 1 });
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
        assert!(
            st["last_reload"]["requests_served"].as_u64().unwrap_or(0) > 0,
            "{name}: {st}"
        );
        assert_eq!(st["last_reload"]["requests_failed"], 0, "{name}: {st}");
        for i in st["instances"].as_array().unwrap() {
            assert_eq!(i["generation"], st["generation"], "{name}: {st}");
        }
    }
}

/// A reload asked for while one runs is queued and begins the moment the first ends: each keeps its own counts.
#[test]
fn a_queued_reload_keeps_the_counts_of_the_one_before() {
    let rein = Rein::start();
    let addr = serve_one(&rein, "py", python_app("q", &["--sleep", "1"], json!({})));
    wait_ready(&rein, "py", 1);
    let gen0 = status(&rein, "py")["generation"].as_u64().unwrap();
    let load = Load::start(addr, &["/a"]);
    load.wait_more(20);
    std::thread::scope(|s| {
        let first = s.spawn(|| restart(&rein, "py"));
        wait_for("the first reload running", || {
            status(&rein, "py")["state"] == "reloading"
        });
        let second = s.spawn(|| restart(&rein, "py"));
        for reply in [first.join().unwrap(), second.join().unwrap()] {
            assert_eq!(reply, (200, json!({"success": "Ok"})));
        }
    });
    // The second reload runs now (its new instance takes a second to start); the first one's counts show.
    let st = status(&rein, "py");
    assert_eq!(st["state"], "reloading", "{st}");
    assert_eq!(st["last_reload"]["generation"], gen0 + 1, "{st}");
    assert!(
        st["last_reload"]["requests_served"].as_u64().unwrap_or(0) > 0,
        "{st}"
    );
    assert_eq!(st["last_reload"]["requests_failed"], 0, "{st}");
    wait_for("the second reload done", || {
        status(&rein, "py")["last_reload"]["generation"] == gen0 + 2
    });
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
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

// ----- A change is live when the API answers ---------------------------------------------------------------

/// Unit answers a change once it is in place: every request after the answer reaches the new version (no
/// request fails meanwhile: the old instances serve until the new ones are ready). A release that never
/// becomes ready is still applied, and the answer says the previous instances keep serving.
#[test]
fn a_change_to_an_application_is_live_when_the_api_answers() {
    let rein = Rein::start();
    let addr = serve_one(&rein, "py", python_app("v1", &[], json!({"processes": 2})));
    wait_ready(&rein, "py", 2);
    let script = app_file("python_app.py");
    for tag in ["v2", "v3"] {
        let args = json!([script, tag, "--sleep", "0.3"]);
        let (code, body) = rein.api(
            "PUT",
            "/config/applications/py/arguments",
            Some(&args.to_string()),
        );
        assert_eq!(code, 200, "{body}");
        assert_eq!(body, json!({"success": "Reconfiguration done."}));
        for _ in 0..6 {
            assert_eq!(who(&get(addr, "/")).0, tag, "the change is live");
        }
    }

    let broken = json!([script, "v4", "--fail-at-start"]);
    let (code, body) = rein.api(
        "PUT",
        "/config/applications/py/arguments",
        Some(&broken.to_string()),
    );
    assert_eq!(code, 200, "applied and saved: {body}");
    let said = body["applications"]["py"].as_str().unwrap_or_default();
    assert!(
        said.contains("the previous instances keep serving"),
        "{body}"
    );
    assert_eq!(who(&get(addr, "/")).0, "v3");
}
