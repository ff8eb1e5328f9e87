//! Readiness: traffic only once an instance passes its check; one that never does is reported.

use super::*;

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

#[test]
fn an_app_whose_user_does_not_exist_is_refused_naming_the_user() {
    let rein = Rein::start();
    let (_, before) = rein.api("GET", "/config", None);
    let ghost = app("/bin/sh", &[], json!({"user": "no-such-user-rein"}));
    let (code, body) = rein.api(
        "PUT",
        "/config/applications",
        Some(&json!({ "ghost": ghost }).to_string()),
    );
    assert_eq!(code, 400, "{body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with("applications/ghost/user: ") && detail.contains("no-such-user-rein"),
        "the error names the user, not the program: {body}"
    );
    assert_eq!(rein.api("GET", "/config", None).1, before);
}

/// `readiness.http` asks its own path: an app that serves `/` but answers 503 on `/health` stays starting,
/// with no request let through, until `/health` answers below 500.
#[test]
fn the_readiness_path_decides_not_any_answer() {
    let rein = Rein::start();
    let flag = rein.dir.path().join("unhealthy");
    std::fs::write(&flag, b"").unwrap();
    let addr = serve_one(
        &rein,
        "checked",
        python_app(
            "checked",
            &["--unhealthy-while", &flag.display().to_string()],
            json!({"readiness": {"http": "/health", "timeout": 30}}),
        ),
    );
    let waiting = std::thread::spawn(move || get(addr, "/"));
    wait_for("three readiness probes answered 503", || {
        app_log(&rein, "checked").matches("health 503").count() >= 3
    });
    let all = instances(&rein, "checked");
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["state"], "starting", "{}", all[0]);
    assert_eq!(all[0]["requests"], 0, "{}", all[0]);
    assert!(!waiting.is_finished(), "the request waits in rein");

    std::fs::remove_file(&flag).unwrap();
    let r = waiting.join().unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(instances(&rein, "checked")[0]["state"], "ready");
}
