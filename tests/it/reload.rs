//! Listeners and live reconfiguration: not one failed request under load, kept connections kept, removed
//! listeners drained, a request in flight finishing under the configuration it started on, `*:PORT` listeners.

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

/// A request keeps the configuration it started on: one held at its backend while the route changes is
/// answered by that backend, and the next request on the same listener takes the new route.
#[test]
fn a_request_in_flight_finishes_under_the_configuration_it_started_on() {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::sync::mpsc;

    let backend = TcpListener::bind("127.0.0.1:0").unwrap();
    let backend_addr = backend.local_addr().unwrap();
    let (arrived_tx, arrived) = mpsc::channel();
    let (answer, answer_rx) = mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let (stream, _) = backend.accept().unwrap();
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 2 {
            line.clear();
        }
        arrived_tx.send(()).unwrap();
        answer_rx.recv().unwrap();
        let body = "from the backend";
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
        reader
            .get_mut()
            .write_all((head + body).as_bytes())
            .unwrap();
    });

    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"proxy": format!("http://{backend_addr}")}}]));
    let mut held = Conn::open(addr);
    held.send_raw(b"GET /held HTTP/1.1\r\nHost: t\r\n\r\n");
    arrived
        .recv_timeout(crate::harness::DEADLINE)
        .expect("the request reaches the backend");

    let (code, body) = rein.api(
        "PUT",
        "/config/routes",
        Some(&json!([{"action": {"return": 202}}]).to_string()),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        Conn::open(addr).get("/", &[]).status,
        202,
        "a new request takes the new route"
    );
    answer.send(()).unwrap();
    let r = held.read().expect("the held request is answered");
    assert_eq!((r.status, r.text()), (200, "from the backend".to_owned()));
    server.join().unwrap();
}

/// A `*:PORT` listener binds every IPv4 address, so it answers on 127.0.0.1.
#[test]
fn a_wildcard_listener_answers_on_loopback() {
    let rein = Rein::start();
    rein.configure(json!({
        "listeners": {"*:0": {"pass": "routes"}},
        "routes": [{"action": {"return": 204}}]
    }));
    let bound = rein.bound("*:0");
    assert!(bound.ip().is_unspecified(), "{bound}");
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], bound.port()));
    assert_eq!(Conn::open(loopback).get("/", &[]).status, 204);
}
