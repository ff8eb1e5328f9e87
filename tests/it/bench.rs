//! `rein bench http`: the real binary against a real rein, and against tiny misbehaving servers (refused,
//! reset, stalled).

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Rein, rein_bench as bench};

fn url(addr: SocketAddr, path: &str) -> String {
    format!("http://{addr}{path}")
}

/// A raw TCP server on 127.0.0.1:0 handing each accepted connection to `handle` on its own thread. It lives as
/// long as the test process.
fn raw_server(handle: fn(TcpStream)) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || handle(stream));
        }
    });
    addr
}

fn assert_no_errors(v: &Value) {
    assert_eq!(
        v["errors"],
        json!({"total": 0, "connect": 0, "reset": 0, "timeout": 0, "other": 0, "status": {}}),
        "{v}"
    );
}

#[test]
fn a_fixed_count_of_requests_all_succeed_with_ordered_percentiles() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    let v = bench(&["http", "-n", "2000", "-c", "4", "--json", &url(addr, "/")]).json();
    assert_eq!(v["requests"], 2000, "{v}");
    assert_eq!(v["successes"], 2000, "{v}");
    assert_no_errors(&v);
    assert_eq!(v["connections"], 4);
    let lat = &v["latency_us"];
    let p = |k: &str| lat[k].as_u64().unwrap_or_else(|| panic!("no {k} in {lat}"));
    assert!(p("p50") > 0, "{lat}");
    assert!(
        p("p50") <= p("p90")
            && p("p90") <= p("p99")
            && p("p99") <= p("p99_9")
            && p("p99_9") <= p("max"),
        "{lat}"
    );
    assert!(v["rps"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["bytes_read"].as_u64().unwrap() > 2000 * 20, "{v}");
    let gap = v["longest_gap_us"].as_u64().unwrap();
    let duration_us = (v["duration_s"].as_f64().unwrap() * 1e6) as u64;
    assert!(gap > 0 && gap < duration_us.max(1), "{v}");
}

#[test]
fn an_open_loop_run_sends_at_the_rate_asked() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    let v = bench(&[
        "http",
        "--rate",
        "200",
        "-d",
        "1",
        "--json",
        &url(addr, "/"),
    ])
    .json();
    let requests = v["requests"].as_u64().unwrap();
    assert!((160..=240).contains(&requests), "{v}");
    assert_eq!(v["successes"], requests, "{v}");
    assert_no_errors(&v);
    assert_eq!(v["rate"], 200.0);
    // One success about every 5ms: no window without one comes near a second.
    assert!(v["longest_gap_us"].as_u64().unwrap() < 500_000, "{v}");
}

#[test]
fn the_human_report_is_the_default_and_stderr_stays_quiet_off_a_terminal() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    let run = bench(&["http", "-n", "50", "-c", "2", &url(addr, "/")]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        run.stderr, "",
        "no progress line when stderr is not a terminal"
    );
    for label in [
        "target",
        "requests",
        "successes",
        "errors",
        "latency",
        "longest gap",
    ] {
        assert!(
            run.stdout
                .lines()
                .any(|l| l.trim_start().starts_with(label)),
            "no {label} line in:\n{}",
            run.stdout
        );
    }
    assert!(run.stdout.contains("p99.9"), "{}", run.stdout);
}

#[test]
fn a_unix_socket_target_works() {
    // The control API is a real HTTP server on a Unix socket.
    let rein = Rein::start();
    let target = format!("unix:{}:/status", rein.control().display());
    let v = bench(&["http", "-n", "20", "-c", "2", "--json", &target]).json();
    assert_eq!(v["successes"], 20, "{v}");
    assert_no_errors(&v);
}

#[test]
fn non_2xx_answers_are_errors_counted_by_status() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 503}}]));
    let v = bench(&["http", "-n", "300", "-c", "3", "--json", &url(addr, "/")]).json();
    assert_eq!(v["requests"], 300, "{v}");
    assert_eq!(v["successes"], 0, "{v}");
    assert_eq!(v["errors"]["status"]["503"], 300, "{v}");
    assert_eq!(v["errors"]["total"], 300, "{v}");
    // No success at all: the whole run is one gap.
    let gap = v["longest_gap_us"].as_u64().unwrap() as f64;
    let duration_us = v["duration_s"].as_f64().unwrap() * 1e6; // rounded to the millisecond
    assert!((gap - duration_us).abs() <= 500.0, "{v}");
}

#[test]
fn an_unreachable_target_exits_3_with_a_clear_message() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = format!("http://127.0.0.1:{port}/");
    let run = bench(&["http", "-d", "5", &target]);
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(
        run.stderr
            .starts_with(&format!("rein bench: cannot connect to {target}: ")),
        "{}",
        run.stderr
    );
    assert!(run.took < Duration::from_secs(3), "took {:?}", run.took);
    assert_eq!(run.stdout, "");

    let run = bench(&["http", "-n", "1", "unix:/nonexistent/rein.sock:/"]);
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("cannot connect to unix:/nonexistent/rein.sock:/"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_server_that_resets_connections_counts_resets_and_does_not_hang() {
    // Read the request, then close with SO_LINGER 0: a reset every time. (Closing before the request
    // arrives races with the client's write and is not always a reset.)
    let addr = raw_server(|mut stream| {
        let mut buf = [0u8; 4096];
        let _ = stream.read(&mut buf);
        let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
    });
    let run = bench(&[
        "http",
        "-n",
        "40",
        "-c",
        "2",
        "--timeout",
        "5",
        "--json",
        &url(addr, "/"),
    ]);
    let v = run.json();
    assert_eq!(v["requests"], 40, "{v}");
    assert_eq!(v["successes"], 0, "{v}");
    assert_eq!(v["errors"]["reset"], 40, "{v}");
    assert!(run.took < Duration::from_secs(5), "took {:?}", run.took);
}

#[test]
fn gap_from_leaves_out_a_slow_start_but_not_a_later_outage() {
    // Each connection's first answer takes 400 ms (a cold server); later ones are immediate.
    let addr = raw_server(|mut stream| {
        let mut buf = [0u8; 4096];
        let mut first = true;
        while matches!(stream.read(&mut buf), Ok(n) if n > 0) {
            if std::mem::take(&mut first) {
                std::thread::sleep(Duration::from_millis(400));
            }
            let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
            if std::io::Write::write_all(&mut stream, ok).is_err() {
                return;
            }
        }
    });
    let run = |extra: &[&str]| {
        let mut args = vec!["http", "-d", "1s", "-c", "1", "--json"];
        args.extend_from_slice(extra);
        let target = url(addr, "/");
        args.push(&target);
        bench(&args).json()
    };
    let whole = run(&[]);
    assert!(
        whole["longest_gap_us"].as_u64().unwrap() >= 400_000,
        "{whole}"
    );
    assert_eq!(whole["longest_gap_start_s"], 0.0, "{whole}");
    assert!(whole.get("gap_from_s").is_none(), "{whole}");
    // From 0.6 s: the start is over by then, and nothing else is silent for long.
    let later = run(&["--gap-from", "0.6"]);
    assert_eq!(later["gap_from_s"], 0.6, "{later}");
    assert!(
        later["longest_gap_us"].as_u64().unwrap() < 400_000,
        "{later}"
    );
    // From 0.2 s: the start's window is still open then, so it counts whole.
    let during = run(&["--gap-from", "0.2"]);
    assert!(
        during["longest_gap_us"].as_u64().unwrap() >= 400_000,
        "{during}"
    );
}

#[test]
fn a_server_that_never_answers_times_out_promptly() {
    let addr = raw_server(|mut stream| {
        // Read the request, answer nothing, keep the connection open until the client gives up.
        let mut buf = [0u8; 4096];
        while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
    });
    let run = bench(&[
        "http",
        "--timeout",
        "0.3",
        "-n",
        "5",
        "-c",
        "1",
        "--json",
        &url(addr, "/"),
    ]);
    let v = run.json();
    assert_eq!(v["requests"], 5, "{v}");
    assert_eq!(v["errors"]["timeout"], 5, "{v}");
    assert_eq!(v["errors"]["total"], 5, "{v}");
    assert!(
        run.took >= Duration::from_millis(1500),
        "took {:?}",
        run.took
    );
    assert!(run.took < Duration::from_secs(4), "took {:?}", run.took);
}

#[test]
fn bad_arguments_exit_1_and_usage_errors_exit_2() {
    for (args, says) in [
        (&["http", "ftp://127.0.0.1/"][..], "ftp://127.0.0.1/"),
        (
            &["http", "-H", "no colon", "http://127.0.0.1:1/"][..],
            "no colon",
        ),
        (
            &["http", "-c", "0", "http://127.0.0.1:1/"][..],
            "--connections",
        ),
        (
            &["http", "--body", "/nonexistent/body", "http://127.0.0.1:1/"][..],
            "/nonexistent/body",
        ),
    ] {
        let run = bench(args);
        assert_eq!(run.code, Some(1), "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.starts_with("rein bench: ") && run.stderr.contains(says),
            "{args:?}: {}",
            run.stderr
        );
    }
    let run = bench(&["http", "-n", "5", "-d", "5", "http://127.0.0.1:1/"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
}
