//! Process hygiene (process groups, stop signals, no zombies) and each app's logs.

use super::*;

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

/// `--stop-timeout` bounds the whole stop, applications included: a request to an app still running at the
/// deadline does not hold rein a second time while the app drains (it took twice the stop timeout).
#[test]
fn a_request_to_an_app_holds_a_stop_no_longer_than_the_stop_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mut rein = Rein::start_in(dir, &["--config", "EMPTY", "--stop-timeout", "2"]);
    rein.wait_ready();
    let addr = serve_one(
        &rein,
        "slow",
        app(node(), &[&app_file("slow.js")], json!({})),
    );
    let pid = *wait_ready(&rein, "slow", 1).first().unwrap();
    let mut conn = Conn::open(addr);
    conn.send_raw(b"GET /?ms=20000 HTTP/1.1\r\nHost: t\r\n\r\n");
    wait_for("the request in flight on the app", || {
        instances(&rein, "slow")
            .first()
            .is_some_and(|i| i["in_flight"] == 1)
    });
    let signalled = Instant::now();
    rein.signal(Signal::SIGTERM);
    let (code, stderr) = rein.wait_exit();
    let took = signalled.elapsed();
    assert_eq!(code, Some(0), "{stderr}");
    // Not a speed measurement: the stop timeout is configured behaviour. With the bug the stop took twice it
    // (4 s); the window leaves 1.5 s for rein's exit on a loaded machine.
    assert!(
        took >= Duration::from_millis(1800) && took < Duration::from_millis(3500),
        "the stop took about the 2 s stop timeout, not twice it: {took:?}"
    );
    wait_for("the instance gone with rein", || !alive(pid));
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
        grandchild = app_output(&rein, "forker")
            .iter()
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

/// Unit's `stdout` and `stderr`: a file of the user's instead of the app's log, or nowhere (`/dev/null`).
#[test]
fn stdout_and_stderr_can_go_to_a_file_or_nowhere() {
    let rein = Rein::start();
    let err_file = rein.dir.path().join("py.err");
    let conf = json!({"stdout": "/dev/null", "stderr": err_file.display().to_string()});
    let addr = serve_one(&rein, "py", python_app("redirected", &[], conf));
    let pid = *wait_ready(&rein, "py", 1).first().unwrap();
    wait_for("the app's stderr in its own file", || {
        std::fs::read_to_string(&err_file)
            .unwrap_or_default()
            .contains(&format!("stderr redirected pid={pid}"))
    });
    assert_eq!(get(addr, "/").status, 200);
    let log = app_log(&rein, "py");
    assert!(
        !log.contains("redirected"),
        "nothing in the app's log: {log}"
    );
    let err = std::fs::read_to_string(&err_file).unwrap();
    assert!(
        !err.contains("start redirected"),
        "stdout went nowhere: {err}"
    );
    // Written as the app's log is: each line with its time and instance, rein's lines with them.
    let id = instances(&rein, "py")[0]["id"].as_u64().unwrap();
    assert!(
        err.contains(&format!("Z [{id} err] stderr redirected pid={pid}\n")),
        "{err}"
    );
    assert!(
        err.contains(&format!("Z [{id} rein] started: pid {pid}, ")),
        "{err}"
    );

    let (code, body) = rein.api("PUT", "/config/applications/py/stdout", Some("\"py.out\""));
    assert_eq!(code, 400, "{body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("applications/py/stdout"), "{body}");
    assert!(detail.contains("absolute"), "{body}");
}

/// `kill -9` of rein (or the OOM killer): its instances die with it (parent-death signal), and what they left
/// in their process group is stopped by the next rein on the same state directory, before it starts its
/// own: no second copy of an application runs beside the first.
#[test]
fn a_killed_reins_processes_do_not_outlive_the_next_start() {
    let mut rein = Rein::start();
    serve_one(
        &rein,
        "forker",
        app(&app_file("forks_grandchild.sh"), &[], json!({})),
    );
    let pid = *wait_ready(&rein, "forker", 1).first().unwrap();
    let grandchild = grandchild_of(&rein, "forker");
    rein.signal(Signal::SIGKILL);
    rein.wait_exit();
    wait_for("the instance to die with rein", || !alive(pid));
    assert!(
        alive(grandchild),
        "a grandchild gets no parent-death signal"
    );

    let dir = std::mem::replace(&mut rein.dir, tempfile::tempdir().unwrap());
    let again = Rein::start_in(dir, &[]);
    again.wait_ready();
    wait_for("the grandchild left behind to be stopped", || {
        !alive(grandchild)
    });
    let new = *wait_ready(&again, "forker", 1).first().unwrap();
    assert_ne!(new, pid);
    assert!(
        again.log_text().contains("a previous rein left running"),
        "{}",
        again.log_text()
    );
}

/// The `grandchild=PID` an instance of `forks_grandchild.sh` prints in its log.
fn grandchild_of(rein: &Rein, name: &str) -> u32 {
    let mut grandchild = 0;
    wait_for("the grandchild's pid in the log", || {
        grandchild = app_output(rein, name)
            .iter()
            .find_map(|l| l.strip_prefix("grandchild="))
            .and_then(|g| g.trim().parse().ok())
            .unwrap_or(0);
        grandchild != 0
    });
    grandchild
}

/// logrotate renames the logs, then sends SIGUSR1: rein's log, the access log and the applications' logs
/// continue in new files at the old paths, created 0640 whatever the umask.
#[test]
fn sigusr1_reopens_every_log_at_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let wrapper = ["sh", "-c", "umask 000 && exec \"$@\"", "sh"];
    let rein = Rein::start_through(dir, &wrapper, &["--config", "EMPTY"], &[]);
    rein.wait_ready();
    let access = rein.dir.path().join("access.log");
    let addr = rein.serve_with(
        json!([
            {"match": {"uri": "/keep"}, "action": {"return": 204}},
            {"action": {"pass": "applications/py"}}
        ]),
        json!({
            "access_log": {"path": access.display().to_string(), "format": "$uri $status"},
            "applications": {"py": python_app("rotated", &[], json!({}))}
        }),
    );
    let first = *wait_ready(&rein, "py", 1).first().unwrap();
    assert_eq!(get(addr, "/keep").status, 204);
    wait_for("the first access line", || {
        std::fs::read_to_string(&access).is_ok_and(|l| l.contains("/keep 204"))
    });
    let mode =
        |p: &Path| std::os::unix::fs::MetadataExt::mode(&std::fs::metadata(p).unwrap()) & 0o777;
    assert_eq!(mode(&access), 0o640, "the access log");
    assert_eq!(mode(&rein.log), 0o640, "rein's log");

    let app_log = rein.state.join("logs/py.log");
    let rotated = |p: &Path| PathBuf::from(format!("{}.1", p.display()));
    for path in [&access, &rein.log, &app_log] {
        std::fs::rename(path, rotated(path)).unwrap();
    }
    rein.signal(Signal::SIGUSR1);
    wait_for("rein's new log", || {
        rein.log_text().contains("log files reopened")
    });
    assert_eq!(get(addr, "/keep?after").status, 204);
    wait_for("the access line in the new file", || {
        std::fs::read_to_string(&access).is_ok_and(|l| l == "/keep 204\n")
    });
    // New output of the application: a reload starts an instance, which says so.
    let (code, body) = restart(&rein, "py");
    assert_eq!(code, 200, "{body}");
    let second = *wait_ready(&rein, "py", 1).first().unwrap();
    wait_for("the new instance's line in the new app log", || {
        std::fs::read_to_string(&app_log)
            .is_ok_and(|l| l.contains(&format!("start rotated pid={second}")))
    });
    let old = std::fs::read_to_string(rotated(&app_log)).unwrap();
    assert!(old.contains(&format!("start rotated pid={first}")), "{old}");
    let old_access = std::fs::read_to_string(rotated(&access)).unwrap();
    assert_eq!(old_access, "/keep 204\n");
}
