//! An app over time: its configuration kept across restarts of rein, scaling between `spare` and `max`,
//! memory and request limits, watched files.

use super::*;

// ----- 9. Persistence --------------------------------------------------------------------------------

#[test]
fn an_app_whose_executable_vanished_does_not_stop_a_restart() {
    let mut rein = Rein::start();
    let script = rein.dir.path().join("app.sh");
    write_app_script(&script);
    serve_one(
        &rein,
        "kept",
        app(
            &script.display().to_string(),
            &[],
            // The default max_failures (5): the app errs, and is still retried every backoff_max.
            json!({"restart": {"min_interval": 0.2, "backoff_max": 1, "stable_after": 0.5}}),
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
    let mut st = Value::Null;
    wait_for("the app reported errored", || {
        st = status(&again, "kept");
        st["state"] == "errored"
    });
    let reason = st["errored"].as_str().unwrap_or_default();
    assert!(
        reason.contains("5 consecutive failures") && reason.contains("No such file or directory"),
        "the last failure's reason: {st}"
    );
    assert!(ready_pids(&again, "kept").is_empty());
    // Errored is not the end: the retries go on, at backoff_max.
    let restarts = |st: &Value| {
        st["instances"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| i["restarts"].as_u64().unwrap_or(0))
            .max()
    };
    let before = restarts(&st);
    wait_for("another retry while errored", || {
        let now = status(&again, "kept");
        now["state"] == "errored" && restarts(&now) > before
    });
    // Once the executable is back, the retries bring it up without any change of configuration.
    write_app_script(&script);
    let pid = *wait_ready(&again, "kept", 1).first().unwrap();
    assert_eq!(get(addr, "/").text(), format!("python:persisted:{pid}"));
    let st = status(&again, "kept");
    assert_eq!(st["state"], "running", "{st}");
}

/// Clients each sending `path` back to back on their own keep-alive connection, until finished.
struct Clients {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Vec<u16>>>,
}

impl Clients {
    fn start(addr: std::net::SocketAddr, n: usize, path: &'static str) -> Clients {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut conn = Conn::open(addr);
                    let mut codes = Vec::new();
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        codes.push(conn.get(path, &[]).status);
                    }
                    codes
                })
            })
            .collect();
        Clients { stop, threads }
    }

    /// Stops the clients; asserts every answer was a 200.
    fn finish(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for thread in self.threads {
            let codes = thread.join().unwrap();
            assert!(
                !codes.is_empty() && codes.iter().all(|c| *c == 200),
                "{codes:?}"
            );
        }
    }
}

/// A 3-instance-max app grown to `max` by held requests.
fn grown_app(rein: &Rein) -> std::net::SocketAddr {
    let conf = node_app(
        "slow.js",
        &[],
        json!({"processes": {"max": 3, "spare": 1, "idle_timeout": 0.5}}),
    );
    let addr = serve_one(rein, "slow", conf);
    wait_ready(rein, "slow", 1);
    // Held requests keep every instance busy: rein adds instances, one a second, up to `max`.
    let burst = Clients::start(addr, 6, "/?ms=300");
    wait_ready(rein, "slow", 3);
    burst.finish();
    addr
}

#[test]
fn a_busy_app_scales_up_to_max_and_back_to_spare_when_idle() {
    let rein = Rein::start();
    grown_app(&rein);
    // Idle again: back to `spare`, one step per idle_timeout.
    wait_ready(&rein, "slow", 1);
}

#[test]
fn steady_light_traffic_lets_the_instances_grown_for_a_burst_retire() {
    let rein = Rein::start();
    let addr = grown_app(&rein);
    // One client keeps a request in flight nearly all the time: the app is never idle, but one instance
    // serves it, so the two grown for the burst serve nothing and are retired (as Unit reaps an idle
    // process above `spare`), with no request failing meanwhile.
    let light = Clients::start(addr, 1, "/?ms=20");
    wait_ready(&rein, "slow", 1);
    light.finish();
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
fn an_answer_slower_than_limits_timeout_is_a_504_and_the_instance_serves_on() {
    let rein = Rein::start();
    let addr = serve_one(
        &rein,
        "slow",
        node_app("slow.js", &[], json!({"limits": {"timeout": 0.5}})),
    );
    let pid = *wait_ready(&rein, "slow", 1).first().unwrap();
    let started = Instant::now();
    let r = get(addr, "/?ms=3000");
    let waited = started.elapsed();
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(
        waited < Duration::from_millis(2500),
        "answered at the timeout, not after the app: {waited:?}"
    );
    let r = get(addr, "/?ms=10");
    assert_eq!(r.status, 200, "a fast answer still comes");
    assert_eq!(r.text(), format!("slow:{pid}\n"), "from the same instance");
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

/// An executable shell script that runs the Python test app, tagged `persisted`.
fn write_app_script(script: &Path) {
    std::fs::write(
        script,
        format!(
            "#!/bin/sh\nexec {} {} persisted\n",
            python(),
            app_file("python_app.py")
        ),
    )
    .unwrap();
    std::fs::set_permissions(script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}
