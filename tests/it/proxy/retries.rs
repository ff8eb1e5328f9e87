//! Retry rules, waiting for a server (`queue_timeout`), and 502/503/504.

use super::*;

#[test]
fn a_sent_body_is_not_retried_but_an_idempotent_get_is() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let b = Backend::python("B", "0", &[]);
    // Passive health off, so that A keeps being chosen in turn.
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": servers(&[&a, &b]),
            "health": {"passive": {"failures": 0}},
            "queue_timeout": 0,
        }),
    );
    // POSTs with a body to /die?who=A: A reads the body and closes without answering.
    let mut refused = 0;
    for i in 0..6 {
        let tag = format!("post{i}");
        let mut c = Conn::open(addr);
        let r = if i % 2 == 0 {
            c.request(
                "POST",
                &format!("/die?who=A&tag={tag}"),
                &[],
                b"a body that must not be sent twice",
            )
        } else {
            c.send_raw(
                format!(
                    "POST /die?who=A&tag={tag} HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n\
                     4\r\nbody\r\n0\r\n\r\n"
                )
                .as_bytes(),
            );
            c.read().expect("an answer to the chunked POST")
        };
        let (on_a, on_b) = (
            a.count(&format!("tag={tag}")),
            b.count(&format!("tag={tag}")),
        );
        match r.status {
            502 => {
                refused += 1;
                assert_eq!(
                    (on_a, on_b),
                    (1, 0),
                    "{tag}: a POST that A took must go nowhere else"
                );
            }
            200 => {
                assert_eq!(r.text(), "B");
                assert_eq!((on_a, on_b), (0, 1), "{tag}");
            }
            other => panic!("{tag}: {other} {r:?}"),
        }
    }
    assert!(refused >= 2, "A was never tried first ({refused} 502s)");

    // GETs to the same endpoint: when A dies on one, it is tried again on B, which answers.
    let mut retried = 0;
    let mut c = Conn::open(addr);
    for i in 0..6 {
        let tag = format!("get{i}");
        let r = c.get(&format!("/die?who=A&tag={tag}"), &[]);
        assert_eq!((r.status, r.text().as_str()), (200, "B"), "{tag}");
        assert_eq!(b.count(&format!("tag={tag}")), 1);
        retried += a.count(&format!("tag={tag}"));
    }
    assert!(retried >= 2, "A was never tried first for a GET");
    let st = server_status(&rein, &a.addr());
    assert_eq!(st["failures"], refused + retried, "{st}");
    assert_eq!(server_status(&rein, &b.addr())["failures"], 0);
}

#[test]
fn a_waiting_request_gets_a_server_that_comes_up() {
    let rein = Rein::start();
    let port = free_port();
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": {format!("127.0.0.1:{port}"): {}},
            "health": {"active": {"path": "/health", "interval": 0.1, "timeout": 0.5, "rise": 1, "fall": 1}},
            "queue_timeout": 3,
        }),
    );
    let key = format!("127.0.0.1:{port}");
    wait_for("the dead server to be unhealthy", || {
        server_status(&rein, &key)["state"] == "unhealthy"
    });
    let mut c = Conn::open(addr);
    let sent = Instant::now();
    c.send_raw(b"GET /whoami HTTP/1.1\r\nHost: test\r\n\r\n");
    // The request is in rein, with no server: bring one up on the same port.
    let up = std::thread::spawn(move || {
        let b = restart_on("late", port);
        (b, sent.elapsed())
    });
    let r = c.read().expect("an answer");
    let waited = sent.elapsed();
    let (_late, came_up_after) = up.join().unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "late"), "{r:?}");
    assert!(
        waited >= came_up_after && waited < Duration::from_secs(3),
        "answered after {waited:?}; the server came up after {came_up_after:?}"
    );
}

#[test]
fn with_no_server_coming_back_the_wait_ends_in_503() {
    let rein = Rein::start();
    let port = free_port();
    let key = format!("127.0.0.1:{port}");
    // Passive health only: the first request finds the server refusing (502) and puts it out for 10 s.
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": {&key: {}},
            "health": {"passive": {"failures": 1, "timeout": 10}},
            "queue_timeout": 0.3,
        }),
    );
    let r = Conn::open(addr).get("/whoami", &[]);
    assert_eq!(r.status, 502, "{r:?}");
    assert_eq!(server_status(&rein, &key)["state"], "failed");
    // Now no server is available: the request waits queue_timeout, then 503.
    let t = Instant::now();
    let r = Conn::open(addr).get("/whoami", &[]);
    let waited = t.elapsed();
    assert_eq!(r.status, 503, "{r:?}");
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
        "503 after {waited:?}"
    );
    let st = server_status(&rein, &key);
    assert_eq!(
        st["failures"], 1,
        "the waiting request must not have tried: {st}"
    );
}

#[test]
fn refused_is_502_and_a_slow_answer_is_504() {
    let rein = Rein::start();
    let dead = format!("127.0.0.1:{}", free_port());
    let slow = Backend::python("S", "0", &[]);
    rein.serve_with(
        json!([
            {"match": {"uri": "/dead/*"}, "action": {"pass": "upstreams/dead"}},
            {"action": {"pass": "upstreams/u"}}
        ]),
        json!({"upstreams": {
            "dead": {"servers": {&dead: {}}, "queue_timeout": 0, "health": {"passive": {"failures": 0}}},
            "u": {"servers": servers(&[&slow]), "timeouts": {"read": 0.3}, "queue_timeout": 0,
                  "health": {"passive": {"failures": 0}}},
        }}),
    );
    let addr = rein.bound("127.0.0.1:0");
    let mut c = Conn::open(addr);
    for _ in 0..3 {
        let t = Instant::now();
        let r = c.get("/dead/x", &[]);
        assert_eq!(r.status, 502, "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }
    let (_, st) = rein.api(
        "GET",
        &format!("/status/upstreams/dead/servers/{dead}"),
        None,
    );
    assert_eq!(
        (st["requests"].as_u64(), st["failures"].as_u64()),
        (Some(3), Some(3)),
        "3 requests, one refused attempt each (requests, failures): {st}"
    );

    let t = Instant::now();
    let r = c.get("/slow?ms=1500", &[]);
    let took = t.elapsed();
    assert_eq!(r.status, 504, "{r:?}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(1400),
        "504 after {took:?}"
    );
    // The server itself is fine: a quick request goes through.
    let r = Conn::open(addr).get("/whoami", &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "S"));
    let st = server_status(&rein, &slow.addr());
    assert_eq!(st["failures"], 1, "{st}");
}
