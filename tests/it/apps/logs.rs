//! An application's log as people read it: `rein logs NAME` shows each line with its time and instance (and
//! rein's own lines about the instance, marked as rein's), `--raw` the application's output as it wrote it,
//! and `-f` follows either; a failure's reason in `/status` is the app's text, not a log line.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;

use super::*;

/// Runs `rein logs ARGS --state STATE`.
fn rein_logs(rein: &Rein, args: &[&str]) -> Output {
    logs_command(rein, args).output().unwrap()
}

fn logs_command(rein: &Rein, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rein"));
    cmd.arg("logs")
        .args(args)
        .arg("--state")
        .arg(&rein.state)
        .env_remove("REIN_CONTROL")
        .env_remove("REIN_STATE");
    cmd
}

fn stdout(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// `2026-11-26T09:30:01.123Z `: UTC, RFC 3339, milliseconds.
fn stamped(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 25
        && b[..25].iter().enumerate().all(|(i, &c)| match i {
            4 | 7 => c == b'-',
            10 => c == b'T',
            13 | 16 => c == b':',
            19 => c == b'.',
            23 => c == b'Z',
            24 => c == b' ',
            _ => c.is_ascii_digit(),
        })
}

/// The index of the line whose text after the time is `tagged` (`[3] start v1 pid=42`); panics if none.
fn position(lines: &[&str], tagged: &str, log: &str) -> usize {
    lines
        .iter()
        .position(|l| l.get(25..).is_some_and(|t| t.starts_with(tagged)))
        .unwrap_or_else(|| panic!("no line {tagged:?} in:\n{log}"))
}

fn first_instance(rein: &Rein, name: &str) -> (u64, u32) {
    let all = instances(rein, name);
    let i = all.first().expect("an instance");
    (i["id"].as_u64().unwrap(), pid_of(i))
}

#[test]
fn rein_logs_shows_time_instance_and_stream_and_raw_the_apps_own_lines() {
    let rein = Rein::start();
    serve_one(&rein, "py", python_app("v1", &[], json!({})));
    wait_ready(&rein, "py", 1);
    let (id, pid) = first_instance(&rein, "py");
    // A reload retires the instance: rein says so in the log, after the instance's own lines.
    let (code, body) = restart(&rein, "py");
    assert_eq!(code, 200, "{body}");
    // The app does not catch SIGTERM: it dies of it.
    let ended = format!("[{id} rein] killed by SIGTERM");
    wait_for("the retired instance's end in the log", || {
        app_log(&rein, "py").contains(&ended)
    });
    let (new_id, new_pid) = first_instance(&rein, "py");
    assert_ne!(id, new_id);

    let log = stdout(&rein_logs(&rein, &["py"]));
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.iter().all(|l| stamped(l)), "{log}");
    let started = position(
        &lines,
        &format!("[{id} rein] started: pid {pid}, socket "),
        &log,
    );
    let out = position(&lines, &format!("[{id}] start v1 pid={pid} "), &log);
    let err = position(&lines, &format!("[{id} err] stderr v1 pid={pid}"), &log);
    let ready = position(&lines, &format!("[{id} rein] ready: taking requests"), &log);
    let stopping = position(&lines, &format!("[{id} rein] stopping: SIGTERM sent"), &log);
    let exited = position(&lines, &ended, &log);
    assert!(started < out && started < err, "rein's start first:\n{log}");
    assert!(ready < stopping && stopping < exited, "{log}");
    position(&lines, &format!("[{new_id}] start v1 pid={new_pid} "), &log);

    // --raw: the app's lines as it wrote them, rein's left out.
    let raw = stdout(&rein_logs(&rein, &["py", "--raw"]));
    let raw_lines: Vec<&str> = raw.lines().collect();
    assert!(
        raw_lines.contains(&format!("stderr v1 pid={pid}").as_str()),
        "{raw}"
    );
    assert!(
        raw_lines
            .iter()
            .any(|l| l.starts_with(&format!("start v1 pid={new_pid} t="))),
        "{raw}"
    );
    assert!(
        !raw.contains("rein]") && !raw.contains("taking requests"),
        "{raw}"
    );
    assert!(raw_lines.iter().all(|l| !stamped(l)), "{raw}");
    assert_eq!(
        raw_lines.len(),
        lines.iter().filter(|l| !l.contains(" rein] ")).count(),
        "one raw line per app line:\n{log}\n{raw}"
    );
}

/// Reads `child`'s stdout lines on a thread until one satisfies `want` (or the deadline); kills it.
fn follow_until(mut child: Child, want: impl Fn(&str) -> bool) -> Vec<String> {
    let (tx, rx) = mpsc::channel();
    let pipe = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while !seen.last().is_some_and(|l: &String| want(l)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => {
                let _ = child.kill();
                panic!("the follower never printed the line; it printed:\n{seen:#?}");
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    seen
}

#[test]
fn rein_logs_follows_with_and_without_prefixes() {
    let rein = Rein::start();
    serve_one(&rein, "py", python_app("v1", &[], json!({})));
    wait_ready(&rein, "py", 1);
    let spawn = |args: &[&str]| {
        logs_command(&rein, args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let raw = spawn(&["py", "-f", "--raw"]);
    let tagged = spawn(&["py", "--follow"]);
    let (code, body) = restart(&rein, "py");
    assert_eq!(code, 200, "{body}");
    let (id, pid) = first_instance(&rein, "py");

    let start = format!("start v1 pid={pid} t=");
    let seen = follow_until(raw, |l| l.starts_with(&start));
    assert!(
        seen.iter().all(|l| !stamped(l) && !l.contains("rein]")),
        "{seen:#?}"
    );
    let start = format!("[{id}] start v1 pid={pid} t=");
    let seen = follow_until(tagged, |l| {
        l.get(25..).is_some_and(|t| t.starts_with(&start))
    });
    assert!(seen.iter().all(|l| stamped(l)), "{seen:#?}");
}

/// The reason of a failed start is what the app said, not its log line with a time and instance.
#[test]
fn a_failure_reason_carries_no_log_prefix() {
    let rein = Rein::start();
    serve_one(
        &rein,
        "py",
        python_app("v2", &["--fail-at-start"], json!({})),
    );
    let reason = |st: &Value| {
        st["exited"]
            .as_array()
            .and_then(|e| e.last())
            .and_then(|e| e["reason"].as_str())
            .map(str::to_owned)
    };
    let mut last = String::new();
    wait_for("an exited instance with its reason", || {
        last = reason(&status(&rein, "py")).unwrap_or_default();
        last.contains("failing at start")
    });
    assert!(last.contains("v2: failing at start"), "{last}");
    assert!(!last.contains("err]") && !last.contains("Z ["), "{last}");
    assert!(app_log(&rein, "py").contains(" err] v2: failing at start\n"));
}

/// An instance rein could not start at all has no output of its own: rein's line says why.
#[test]
fn an_instance_that_cannot_start_is_told_in_the_log() {
    let rein = Rein::start();
    let conf = json!({"working_directory": "/nonexistent-dir-of-the-test"});
    serve_one(&rein, "py", python_app("v1", &[], conf));
    wait_for("rein's line about the failed start", || {
        app_log(&rein, "py")
            .lines()
            .any(|l| stamped(l) && l.contains(" rein] not started: ") && l.contains("No such file"))
    });
}
