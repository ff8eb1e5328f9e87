//! rein as a process among others: out of descriptors, on a state directory it cannot write, under signals
//! an operator or a service manager may send, and killed outright with applications running.

use std::net::TcpStream;
use std::time::Instant;

use serde_json::json;

use crate::harness::{Rein, wait_for};

/// Starts rein with at most `n` open descriptors (soft and hard: rein cannot raise it).
fn start_with_fd_limit(n: u32) -> Rein {
    let limit = format!("ulimit -n {n} && exec \"$@\"");
    let wrapper = ["sh", "-c", limit.as_str(), "sh"];
    let args = ["--config", "EMPTY", "--workers", "1"];
    let rein = Rein::start_through(tempfile::tempdir().unwrap(), &wrapper, &args, &[]);
    rein.wait_ready();
    rein
}

fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

/// Clients holding every descriptor rein may open: the data plane stops accepting, the control API still
/// answers (from its reserve), nothing spins, and the repeated accept failures make a few lines of log, not
/// one per attempt.
#[test]
fn out_of_descriptors_the_control_api_answers_and_the_log_stays_small() {
    let rein = start_with_fd_limit(64);
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    let mut clients = Vec::new();
    wait_for("rein to run out of descriptors", || {
        clients.extend((0..8).filter_map(|_| TcpStream::connect(addr).ok()));
        rein.log_text().contains("accept failed")
    });
    for _ in 0..3 {
        let (status, body) = rein.api("GET", "/status", None);
        assert_eq!(status, 200, "{body}");
        assert!(body["connections"].is_object(), "{body}");
    }
    // The accept loops retry every 50 ms; after one interval of the rate limit, the next line says how many
    // failures it stood for.
    let started = Instant::now();
    wait_for("a line counting the repeated failures", || {
        rein.log_text().lines().any(|l| {
            l.contains("accept failed") && l.contains("repeated=") && !l.contains("repeated=0")
        })
    });
    let log = rein.log_text();
    let lines = count(&log, "accept failed");
    assert!(
        lines <= 6,
        "{lines} accept failure lines in {:?}:\n{log}",
        started.elapsed()
    );
    assert!(log.contains("from the reserve"), "{log}");
    let (status, _) = rein.api("GET", "/config", None);
    assert_eq!(status, 200);
    drop(clients);
}

#[test]
fn the_soft_descriptor_limit_is_raised_to_the_hard_one() {
    let wrapper = ["sh", "-c", "ulimit -S -n 100 && exec \"$@\"", "sh"];
    let rein = Rein::start_through(
        tempfile::tempdir().unwrap(),
        &wrapper,
        &["--config", "EMPTY"],
        &[],
    );
    rein.wait_ready();
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", rein.pid())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[3], fields[4], "{line}");
    assert_ne!(fields[3], "100", "{line}");
}

/// A state directory that became read-only (a full disk, a remount, a container's read-only volume): rein
/// starts on its saved configuration and serves it; only a change, which must be saved, is refused, and
/// says why.
#[test]
fn a_read_only_state_directory_serves_and_refuses_only_changes() {
    let mut rein = Rein::start();
    let site = rein.dir.path().join("site.sock");
    let config = json!({
        "listeners": {format!("unix:{}", site.display()): {"pass": "routes"}},
        "routes": [{"action": {"return": 207}}]
    });
    rein.configure(config.clone());
    rein.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(rein.wait_exit().0, Some(0));

    // In a mount namespace of its own, rein sees its state directory bound read-only over itself; its
    // control socket is outside it. Root is not stopped by file modes, but is by a read-only mount
    // (`unshare -rm`: a user namespace makes it work without root too).
    let dir = std::mem::replace(&mut rein.dir, tempfile::tempdir().unwrap());
    let state = dir.path().join("state").display().to_string();
    let control = format!("unix:{}", dir.path().join("ctl.sock").display());
    let script = format!(
        "mount --bind '{state}' '{state}' && mount -o remount,ro,bind '{state}' && exec \"$@\""
    );
    let wrapper = ["unshare", "-rm", "sh", "-c", script.as_str(), "sh"];
    let rein = Rein::start_through(dir, &wrapper, &["--control", &control], &[]);
    rein.wait_ready();

    assert_eq!(rein.api("GET", "/config", None).1, config);
    let mut stream = std::os::unix::net::UnixStream::connect(&site).unwrap();
    std::io::Write::write_all(
        &mut stream,
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let resp = crate::harness::read_response(&mut std::io::BufReader::new(stream), false).unwrap();
    assert_eq!(resp.status, 207);

    let (status, body) = rein.api("PUT", "/config/routes/0/action/return", Some("208"));
    assert_eq!(status, 500, "{body}");
    assert_eq!(
        body["error"],
        "Failed to save the configuration; nothing changed."
    );
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("Read-only file system"), "{body}");
    assert_eq!(rein.api("GET", "/config", None).1, config);
    assert!(
        rein.log_text()
            .contains("serving the configuration without saving it")
    );
}

/// Signals a service manager or an operator may send, which ask nothing of rein: it carries on serving.
#[test]
fn signals_that_ask_nothing_do_not_end_rein() {
    use nix::sys::signal::Signal;
    let mut rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    for sig in [
        Signal::SIGUSR2,
        Signal::SIGWINCH,
        Signal::SIGPIPE,
        Signal::SIGALRM,
        Signal::SIGIO,
        Signal::SIGPWR,
        Signal::SIGVTALRM,
        Signal::SIGPROF,
        Signal::SIGXFSZ,
        Signal::SIGUSR1,
    ] {
        rein.signal(sig);
        assert_eq!(crate::harness::get(addr, "/").status, 200, "after {sig}");
    }
    wait_for("the signals to be logged", || {
        let log = rein.log_text();
        log.contains("SIGUSR2") && log.contains("SIGXFSZ") && log.contains("SIGUSR1")
    });
    rein.signal(Signal::SIGTERM);
    assert_eq!(rein.wait_exit().0, Some(0));
}
