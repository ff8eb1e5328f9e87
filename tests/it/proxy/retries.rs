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
    let refusing = Refusing::new();
    let dead = refusing.addr().to_owned();
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
        assert!(r.body.len() < 512, "a short body: {:?}", r.text());
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }
    // One line per error, naming the upstream, the server and why.
    wait_for("the 502 log lines", || error_lines(&rein, &dead).len() >= 3);
    for line in error_lines(&rein, &dead) {
        assert!(line.contains("upstream=\"dead\""), "{line}");
        assert!(
            line.contains(&format!("cannot connect to {dead}")),
            "{line}"
        );
        assert!(line.contains("502"), "{line}");
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
    assert!(r.body.len() < 512, "a short body: {:?}", r.text());
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(1400),
        "504 after {took:?}"
    );
    wait_for("the 504 log line", || {
        !error_lines(&rein, &slow.addr()).is_empty()
    });
    let line = &error_lines(&rein, &slow.addr())[0];
    assert!(line.contains("upstream=\"u\""), "{line}");
    assert!(
        line.contains("no answer within 0.3 s") && line.contains("504"),
        "{line}"
    );
    // The server itself is fine: a quick request goes through.
    let r = Conn::open(addr).get("/whoami", &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "S"));
    let st = server_status(&rein, &slow.addr());
    assert_eq!(st["failures"], 1, "{st}");
}

/// The sum of `field` over every server of upstream `u`.
fn total(rein: &Rein, field: &str) -> u64 {
    let (_, st) = rein.api("GET", "/status/upstreams/u", None);
    st["servers"]
        .as_object()
        .unwrap_or_else(|| panic!("no servers in {st}"))
        .values()
        .map(|s| s[field].as_u64().unwrap())
        .sum()
}

/// The `proxy error` lines of rein's log that name `server`.
fn error_lines(rein: &Rein, server: &str) -> Vec<String> {
    rein.log_text()
        .lines()
        .filter(|l| l.contains("proxy error") && l.contains(server))
        .map(str::to_owned)
        .collect()
}

#[test]
fn tries_bounds_the_attempts_on_refused_servers() {
    let rein = Rein::start();
    let refusing: Vec<Refusing> = (0..3).map(|_| Refusing::new()).collect();
    let dead: Vec<String> = refusing.iter().map(|r| r.addr().to_owned()).collect();
    let servers: serde_json::Map<String, Value> =
        dead.iter().map(|d| (d.clone(), json!({}))).collect();
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": servers,
            "retries": {"tries": 2},
            "health": {"passive": {"failures": 0}},
            "queue_timeout": 0,
        }),
    );
    let r = Conn::open(addr).get("/whoami", &[]);
    assert_eq!(r.status, 502, "{r:?}");
    assert_eq!(
        (total(&rein, "requests"), total(&rein, "failures")),
        (2, 2),
        "two attempts in all over three refusing servers"
    );
    // A POST with a body goes the same way: nothing of it was sent.
    let r = Conn::open(addr).request("POST", "/echo", &[], b"never sent");
    assert_eq!(r.status, 502, "{r:?}");
    assert_eq!(total(&rein, "failures"), 4);
    // And so does a POST without a body: not replayable, but it never reached a server.
    let r = Conn::open(addr).request("POST", "/form", &[], b"");
    assert_eq!(r.status, 502, "{r:?}");
    assert_eq!(total(&rein, "failures"), 6);
}

#[test]
fn no_retry_starts_after_the_time_budget() {
    let rein = Rein::start();
    // Servers that take the connection (the kernel's backlog) and never answer.
    let silent: Vec<TcpListener> = (0..4)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let servers: serde_json::Map<String, Value> = silent
        .iter()
        .map(|l| (l.local_addr().unwrap().to_string(), json!({})))
        .collect();
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": servers,
            "timeouts": {"read": 0.4},
            "retries": {"tries": 4, "timeout": 0.5},
            "health": {"passive": {"failures": 0}},
            "queue_timeout": 0,
        }),
    );
    let t = Instant::now();
    let r = Conn::open(addr).get("/whoami", &[]);
    let took = t.elapsed();
    assert_eq!(r.status, 504, "{r:?}");
    // Attempts start at 0 and 0.4 s; at 0.8 s the 0.5 s budget is spent, though two tries are left.
    assert_eq!(total(&rein, "failures"), 2);
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_millis(1500),
        "504 after {took:?}"
    );
}

#[test]
fn a_post_refused_at_connect_is_answered_by_another_server() {
    let rein = Rein::start();
    let refusing = Refusing::new();
    let dead = refusing.addr().to_owned();
    let live = Backend::python("L", "0", &[]);
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": {&dead: {}, live.addr(): {}},
            "health": {"passive": {"failures": 0}},
            "queue_timeout": 0,
        }),
    );
    for i in 0..4 {
        let body = format!("post body {i}");
        let r = Conn::open(addr).request("POST", "/echo", &[], body.as_bytes());
        assert_eq!((r.status, r.text()), (200, body), "{r:?}");
        assert_eq!(r.header("x-backend"), Some("L"));
    }
    let st = server_status(&rein, &dead);
    assert!(
        st["failures"].as_u64() >= Some(1),
        "the refusing server was never tried first: {st}"
    );
    assert_eq!(live.count("path=/echo"), 4, "each POST reached L once");
}

/// A listening socket whose accept queue is full and never drained: a SYN to it is dropped, so a connect
/// neither succeeds nor is refused. Returns the listener and the connections that fill its queue.
fn unanswering() -> (socket2::Socket, Vec<socket2::Socket>) {
    use socket2::{Domain, SockAddr, Socket, Type};
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    listener
        .bind(&SockAddr::from(
            "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
        ))
        .unwrap();
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fillers = Vec::new();
    loop {
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        match s.connect_timeout(&addr, Duration::from_millis(300)) {
            Ok(()) => fillers.push(s),
            Err(e)
                if e.kind() == std::io::ErrorKind::TimedOut
                    || e.kind() == std::io::ErrorKind::WouldBlock =>
            {
                return (listener, fillers);
            }
            Err(e) => panic!("filling the accept queue: {e}"),
        }
        assert!(fillers.len() < 64, "the accept queue never filled");
    }
}

#[test]
fn a_server_that_does_not_accept_is_a_504_after_the_connect_timeout() {
    let rein = Rein::start();
    let (listener, _fillers) = unanswering();
    let server = listener
        .local_addr()
        .unwrap()
        .as_socket()
        .unwrap()
        .to_string();
    let addr = rein.serve_with(
        upstream_routes(),
        json!({"upstreams": {"u": {
            "servers": {&server: {}},
            "timeouts": {"connect": 0.3},
            "queue_timeout": 0,
        }}}),
    );
    let t = Instant::now();
    let r = Conn::open(addr).get("/whoami", &[]);
    let took = t.elapsed();
    assert_eq!(r.status, 504, "{r:?}");
    assert!(r.body.len() < 512, "a short body: {:?}", r.text());
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "504 after {took:?}"
    );
    wait_for("the log line", || !error_lines(&rein, &server).is_empty());
    let line = &error_lines(&rein, &server)[0];
    assert!(line.contains("upstream=\"u\""), "{line}");
    assert!(line.contains("no connection within 0.3 s"), "{line}");
}

#[test]
fn a_server_that_does_not_read_the_body_is_a_504_after_the_send_timeout() {
    upload_to_a_deaf_server(|_| json!({"pass": "upstreams/u"}));
}

#[test]
fn a_fastcgi_server_that_does_not_read_the_body_is_a_504_after_the_send_timeout() {
    upload_to_a_deaf_server(|rein| {
        crate::harness::file(rein.dir.path(), "www/index.php", b"<?php");
        let root = rein.dir.path().join("www");
        json!({"fastcgi": {"server": "upstreams/u", "root": root, "script": "index.php"}})
    });
}

/// A 64 MB upload through `action` to upstream `u`, whose one server takes connections (the kernel's backlog)
/// and never reads: once the socket buffers are full, the upload stalls, and `timeouts.send` (not `read`)
/// ends it in a 504.
fn upload_to_a_deaf_server(action: impl FnOnce(&Rein) -> Value) {
    let rein = Rein::start();
    let deaf = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = deaf.local_addr().unwrap().to_string();
    let addr = rein.serve_with(
        json!([{"action": action(&rein)}]),
        json!({
            "upstreams": {"u": {
                "servers": {&server: {}},
                "timeouts": {"send": 0.5, "read": 30},
                "queue_timeout": 0,
            }},
            "settings": {"http": {"max_body_size": 1u64 << 30}},
        }),
    );
    let mut c = Conn::open(addr);
    let size = 64 << 20;
    c.send_raw(
        format!("POST /upload HTTP/1.1\r\nHost: test\r\nContent-Length: {size}\r\n\r\n").as_bytes(),
    );
    let mut writer = c.reader().get_ref().try_clone().unwrap();
    let t = Instant::now();
    // Written from another thread: rein answers while the body is still on its way.
    std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..size >> 20 {
            if writer.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    let r = c.read().expect("an answer");
    let took = t.elapsed();
    assert_eq!(r.status, 504, "{r:?}");
    assert!(took < Duration::from_secs(10), "504 after {took:?}");
    wait_for("the log line", || !error_lines(&rein, &server).is_empty());
    let line = &error_lines(&rein, &server)[0];
    assert!(line.contains("upstream=\"u\""), "{line}");
    assert!(
        line.contains("the request was not read within 0.5 s"),
        "{line}"
    );
    drop(deaf);
}
