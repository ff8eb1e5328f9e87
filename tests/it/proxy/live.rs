//! Live upstream changes: under load with no failed request, and with a request in flight on a removed server
//! and pooled connections to a kept one.

use super::*;

#[test]
fn upstream_servers_change_under_load_without_errors() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let b = Backend::python("B", "0", &[]);
    let c = Backend::python("C", "0", &[]);
    // One try per request: a failed attempt cannot hide behind a retry on another server.
    let addr = serve_upstream(
        &rein,
        json!({"servers": servers(&[&a, &b]), "retries": {"tries": 1}}),
    );
    let load = Load::start_keyed(addr, &["/whoami"; 4], backend_of);
    load.wait_answers("A", 20);
    load.wait_answers("B", 20);

    let set = |to: &[&Backend]| {
        let (status, body) = rein.api(
            "PUT",
            "/config/upstreams/u/servers",
            Some(&servers(to).to_string()),
        );
        assert_eq!(status, 200, "{body}");
    };
    // Checks that, once `now` answered a few, `gone` answer no more.
    let settled = |now: &str, gone: &[&str]| {
        load.wait_answers(now, 20);
        let before: Vec<u64> = gone.iter().map(|g| load.count(g)).collect();
        load.wait_answers(now, 50);
        let after: Vec<u64> = gone.iter().map(|g| load.count(g)).collect();
        assert_eq!(before, after, "{gone:?} still got requests");
    };

    set(&[&b, &c]);
    settled("C", &["A"]);
    load.wait_answers("B", 10);
    set(&[&c]);
    settled("C", &["A", "B"]);
    set(&[&a, &c]);
    load.wait_answers("A", 20);
    settled("C", &["B"]);
    set(&[&b]);
    settled("B", &["A", "C"]);

    let total = load.total();
    let (counts, failures) = load.finish();
    assert!(
        failures.is_empty(),
        "{} of {total} failed across the changes: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(counts["C"] >= 100, "{counts:?}");
    let st = server_status(&rein, &b.addr());
    assert_eq!(st["failures"], 0, "{st}");
}

#[test]
fn a_change_lets_requests_on_a_removed_server_finish_and_keeps_the_others_connections() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let b = Backend::python("B", "0", &[]);
    let c = Backend::python("C", "0", &[]);
    let addr = serve_upstream(
        &rein,
        json!({"servers": servers(&[&a, &b]), "health": {"passive": {"failures": 0}}}),
    );
    // Two slow requests at once: round-robin puts one on each server.
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let mut conn = Conn::open(addr);
            conn.send_raw(b"GET /slow?ms=3000 HTTP/1.1\r\nHost: test\r\n\r\n");
            std::thread::spawn(move || conn.read())
        })
        .collect();
    wait_for("a slow request in flight on A and on B", || {
        server_status(&rein, &a.addr())["active"] == 1
            && server_status(&rein, &b.addr())["active"] == 1
    });
    // Requests one at a time on fresh client connections, until B's connections are all made (one per worker
    // thread that reaches it, whichever thread a client connection lands on).
    let opened = |s: &Backend| {
        server_status(&rein, &s.addr())["connections_opened"]
            .as_u64()
            .unwrap()
    };
    let quick = |n: usize| {
        for _ in 0..n {
            let r = Conn::open(addr).get("/whoami", &[]);
            assert_eq!(r.status, 200, "{r:?}");
        }
    };
    let mut before = opened(&b);
    let deadline = Instant::now() + DEADLINE;
    loop {
        quick(20);
        let now = opened(&b);
        if now == before {
            break;
        }
        before = now;
        assert!(Instant::now() < deadline, "B's connections never settled");
    }

    assert_eq!(
        server_status(&rein, &a.addr())["active"],
        1,
        "the slow request on A ended before the change"
    );
    let b_before = server_status(&rein, &b.addr());
    let idle = |st: &Value| st["idle_connections"].as_u64().unwrap();
    assert!(
        idle(&b_before) >= 1,
        "no pooled connection to B: {b_before}"
    );
    let (status, body) = rein.api(
        "PUT",
        "/config/upstreams/u/servers",
        Some(&servers(&[&b, &c]).to_string()),
    );
    assert_eq!(status, 200, "{body}");
    // Read before any request could use or add one: the change itself dropped none of B's connections.
    let b_changed = server_status(&rein, &b.addr());
    assert_eq!(
        (idle(&b_changed), &b_changed["connections_opened"]),
        (idle(&b_before), &b_before["connections_opened"]),
        "B's pooled connections did not survive the change: {b_before} then {b_changed}"
    );
    quick(20);
    assert!(c.count("path=/whoami") > 0, "C never got a request");
    let after = server_status(&rein, &b.addr());
    assert!(
        after["requests"].as_u64().unwrap() > b_before["requests"].as_u64().unwrap(),
        "B's state did not survive the change: {after}"
    );
    // The request in flight on A when it was removed finishes normally.
    let mut answered: Vec<String> = slow
        .into_iter()
        .map(|t| {
            let r = t.join().unwrap().expect("an answer to the slow request");
            assert_eq!(r.status, 200, "{r:?}");
            r.text()
        })
        .collect();
    answered.sort();
    assert_eq!(answered, ["A", "B"]);
}
