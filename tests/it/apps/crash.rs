//! Crash recovery: exits noticed at once, instances respawned with back-off, neighbours unaffected.

use super::*;

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
    // The killed instance is still listed, apart, as errored with its exit.
    let exited = status(&rein, "py")["exited"].clone();
    let killed: Vec<&Value> = exited
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["pid"] == victim)
        .collect();
    assert_eq!(killed.len(), 1, "{exited}");
    assert_eq!(killed[0]["state"], "errored", "{exited}");
    assert!(
        killed[0]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("killed by signal 9"),
        "{exited}"
    );
    // Retired by a reload: stopped.
    let (code, _) = restart(&rein, "py");
    assert_eq!(code, 200);
    for pid in [survivor, fresh] {
        wait_for("the old instances listed as stopped", || {
            status(&rein, "py")["exited"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["pid"] == pid && e["state"] == "stopped")
        });
    }
    // A retired instance is no failure: its reason says so, without its last words on stderr.
    for e in status(&rein, "py")["exited"].as_array().unwrap() {
        if e["state"] == "stopped" {
            let reason = e["reason"].as_str().unwrap_or_default();
            assert!(
                reason.starts_with("retired by rein: ") && !reason.contains("stderr"),
                "{e}"
            );
        }
    }
    let now = wait_ready(&rein, "py", 2);
    let mut seen = BTreeSet::new();
    wait_for("both instances answer", || {
        seen.insert(who(&get(addr, "/")).1);
        seen.len() == 2
    });
    assert_eq!(seen, now);
}

/// An errored application with no instance left has its next retry up to `backoff_max` away: a request is
/// answered 503 at once, not after `queue_timeout` (here 30 s, the ready timeout, past the harness's deadline).
#[test]
fn a_request_to_an_errored_app_is_answered_503_at_once() {
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
                "readiness": {"timeout": 30},
                "restart": {"min_interval": 0.2, "backoff_max": 600, "max_failures": 2, "stable_after": 10},
            }),
        ),
    );
    wait_for("the app errored without instances", || {
        let st = status(&rein, "crashy");
        st["state"] == "errored" && st["instances"] == json!([])
    });
    for _ in 0..3 {
        let r = Conn::open(addr).get("/", &[]);
        assert_eq!(r.status, 503, "{r:?}");
    }
    assert_eq!(get(addr, "/keep").status, 204);
}

#[test]
fn a_crash_loop_backs_off_then_errors_and_a_reload_clears_it() {
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
    let output = app_output(&rein, "crashy");
    let times = |word: &str| -> Vec<f64> {
        output
            .iter()
            .filter(|l| l.starts_with(word))
            .filter_map(|l| l.rsplit_once("t=").and_then(|(_, t)| t.parse().ok()))
            .collect()
    };
    let (starts, exits) = (times("start crash"), times("exit crash"));
    assert_eq!(
        starts.len(),
        3,
        "three runs so far (the next retry waits backoff_max):\n{log}"
    );
    assert_eq!(exits.len(), 3, "{log}");
    // Lower bounds only: the back-off is the least a retry waits; a loaded machine starts the process later.
    let gap1 = starts[1] - exits[0];
    let gap2 = starts[2] - exits[1];
    assert!(gap1 >= 0.9, "first back-off 1 s: {gap1}\n{log}");
    assert!(gap2 >= 1.9, "second back-off 2 s: {gap2}\n{log}");
    // A reload clears it at once, without waiting for the next retry.
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
