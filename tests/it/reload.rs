//! Live reconfiguration under load: not one failed request, kept connections kept, removed listeners drained.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::json;

use crate::harness::{Conn, Rein, wait_for};

#[test]
fn a_hundred_changes_under_keep_alive_load_fail_no_request() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200, "response_headers": {"X-Gen": "0"}}}]));
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (stop, served) = (stop.clone(), served.clone());
            std::thread::spawn(move || {
                // One keep-alive connection per client for the whole run: any drop fails the test.
                let mut conn = Conn::open(addr);
                let mut failures = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let resp = conn.get("/", &[]);
                    if resp.status != 200 || resp.header("x-gen").is_none() {
                        failures.push(format!("{} {:?}", resp.status, resp.headers));
                    }
                    served.fetch_add(1, Ordering::Relaxed);
                }
                failures
            })
        })
        .collect();
    wait_for("load to start", || served.load(Ordering::Relaxed) > 20);
    for generation in 1..=100 {
        let path = "/config/routes/0/action/response_headers/X-Gen";
        let (status, body) = rein.api("PUT", path, Some(&format!("\"{generation}\"")));
        assert_eq!(status, 200, "{body}");
    }
    let mut conn = Conn::open(addr);
    assert_eq!(conn.get("/", &[]).header("x-gen"), Some("100"));
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        let failures = client
            .join()
            .expect("a client panicked: a connection was dropped");
        assert!(failures.is_empty(), "failed requests: {failures:?}");
    }
    let (_, status) = rein.api("GET", "/status", None);
    assert_eq!(
        status["connections"]["accepted"], 5,
        "connections were re-opened: {status}"
    );
    assert!(served.load(Ordering::Relaxed) > 100);
}

#[test]
fn a_removed_listener_stops_accepting_and_drains() {
    let rein = Rein::start();
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes"}, "[::1]:0": {"pass": "routes"}},
        "routes": [{"action": {"return": 200}}]
    }));
    let leaving = rein.bound("127.0.0.1:0");
    let staying = rein.bound("[::1]:0");
    let mut idle = Conn::open(leaving);
    assert_eq!(idle.get("/", &[]).status, 200);
    let mut in_flight = Conn::open(leaving);
    in_flight.send_raw(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nab");
    let mut kept = Conn::open(staying);
    assert_eq!(kept.get("/", &[]).status, 200);
    wait_for("the request to be in flight", || {
        rein.api("GET", "/status/connections/active", None).1 == 1
    });

    assert_eq!(
        rein.api("DELETE", "/config/listeners/127.0.0.1:0", None).0,
        200
    );
    wait_for("the removed listener to stop accepting", || {
        std::net::TcpStream::connect(leaving).is_err()
    });
    assert!(
        idle.is_closed(),
        "an idle connection on a removed listener is closed"
    );
    in_flight.send_raw(b"cd");
    assert_eq!(
        in_flight.read().map(|r| r.status),
        Some(200),
        "the request in flight finishes"
    );
    assert!(in_flight.is_closed());
    assert_eq!(
        kept.get("/", &[]).status,
        200,
        "connections on a kept listener are untouched"
    );
}
