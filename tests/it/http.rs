//! HTTP/1.1 serving: keep-alive, pipelining, bodies, limits and timeouts, and hostile input.

use serde_json::json;

use crate::harness::{Conn, Rein, get, wait_for};

fn return_200() -> serde_json::Value {
    json!([{"action": {"return": 200}}])
}

#[test]
fn keep_alive_and_pipelining() {
    let rein = Rein::start();
    let addr = rein.serve(json!([
        {"match": {"uri": "/a"}, "action": {"return": 201}},
        {"match": {"uri": "/b"}, "action": {"return": 202}},
        {"action": {"return": 203}}
    ]));
    let mut conn = Conn::open(addr);
    for _ in 0..5 {
        assert_eq!(conn.get("/a", &[]).status, 201);
    }
    // Three requests in one write: three answers, in order.
    conn.send_raw(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\nGET /c HTTP/1.1\r\nHost: t\r\n\r\n");
    let statuses: Vec<u16> = (0..3)
        .map(|_| conn.read().expect("response").status)
        .collect();
    assert_eq!(statuses, [201, 202, 203]);
    let (_, status) = rein.api("GET", "/status", None);
    assert_eq!(status["connections"]["accepted"], 1);
}

#[test]
fn bodies_chunked_and_expect_continue() {
    let rein = Rein::start();
    let addr = rein.serve_with(
        return_200(),
        json!({"settings": {"http": {"max_body_size": 100}}}),
    );
    let mut conn = Conn::open(addr);
    conn.send_raw(b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    assert_eq!(conn.read().unwrap().status, 200);
    // The connection stays usable after a body was read.
    assert_eq!(conn.request("POST", "/", &[], b"abc").status, 200);

    // Expect: 100-continue gets its interim answer before the body is sent.
    let mut conn = Conn::open(addr);
    conn.send_raw(
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
    );
    let mut line = String::new();
    std::io::BufRead::read_line(conn_reader(&mut conn), &mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 100"), "{line:?}");
    let mut blank = String::new();
    std::io::BufRead::read_line(conn_reader(&mut conn), &mut blank).unwrap();
    conn.send_raw(b"body");
    assert_eq!(conn.read().unwrap().status, 200);
}

/// Heads and bodies arrive in pieces of any size: a stream written one byte at a time (a chunked upload, then
/// a request pipelined behind it) is read as the same two requests as when written at once.
#[test]
fn requests_written_a_byte_at_a_time_are_read_whole() {
    let rein = Rein::start();
    let addr = rein.serve(json!([
        {"match": {"uri": "/up"}, "action": {"return": 201}},
        {"action": {"return": 200, "response_headers": {"X-Host": "$host"}}}
    ]));
    let stream = b"POST /up HTTP/1.1\r\nHost: first\r\nTransfer-Encoding: chunked\r\n\r\n\
        5\r\nhello\r\n0\r\n\r\nGET /next HTTP/1.1\r\nHost: second\r\n\r\n";
    let mut conn = Conn::open(addr);
    for byte in stream {
        conn.send_raw(std::slice::from_ref(byte));
    }
    assert_eq!(conn.read().unwrap().status, 201);
    let next = conn.read().unwrap();
    assert_eq!((next.status, next.header("x-host")), (200, Some("second")));
}

fn conn_reader(conn: &mut Conn) -> &mut impl std::io::BufRead {
    conn.reader()
}

#[test]
fn body_limits_answer_413() {
    let rein = Rein::start();
    let addr = rein.serve_with(
        return_200(),
        json!({"settings": {"http": {"max_body_size": 10}}}),
    );
    let big = vec![b'x'; 11];
    assert_eq!(Conn::open(addr).request("POST", "/", &[], &big).status, 413);
    let mut conn = Conn::open(addr);
    conn.send_raw(b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n");
    assert_eq!(conn.read().unwrap().status, 413);
    assert_eq!(
        Conn::open(addr)
            .request("POST", "/", &[], b"0123456789")
            .status,
        200
    );
}

#[test]
fn ambiguous_or_malformed_requests_get_4xx_and_rein_keeps_serving() {
    let rein = Rein::start();
    let addr = rein.serve(return_200());
    let cases: [(&[u8], u16); 7] = [
        (b"GET / HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            501,
        ),
        (b"GET /a/../../x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET /%00 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"BAD\x01 / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n", 400),
    ];
    for (raw, expected) in cases {
        let mut conn = Conn::open(addr);
        conn.send_raw(raw);
        let resp = conn.read();
        let got = resp.as_ref().map(|r| r.status);
        assert_eq!(got, Some(expected), "{}", String::from_utf8_lossy(raw));
    }
    // Content-Length beside chunked: framed by the transfer coding and the connection closed after the answer
    // (RFC 9112 §6.3), so whatever follows is never read as a request.
    let mut conn = Conn::open(addr);
    conn.send_raw(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /%00 HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(conn.read().map(|r| r.status), Some(200));
    assert!(conn.read().is_none());

    let mut conn = Conn::open(addr);
    conn.send_raw(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n");
    assert!(matches!(conn.read().map(|r| r.status), None | Some(400)));
    assert_eq!(get(addr, "/").status, 200);
}

#[test]
fn oversized_heads_answer_431() {
    let rein = Rein::start();
    let addr = rein.serve(return_200());
    let big = "x".repeat(100 * 1024);
    let mut conn = Conn::open(addr);
    conn.send_raw(format!("GET / HTTP/1.1\r\nHost: t\r\nX-Big: {big}\r\n\r\n").as_bytes());
    assert_eq!(conn.read().map(|r| r.status), Some(431));
    assert_eq!(get(addr, "/").status, 200);
}

#[test]
fn header_and_body_timeouts_answer_408() {
    let rein = Rein::start();
    let settings =
        json!({"settings": {"http": {"header_read_timeout": 0.3, "body_read_timeout": 0.3}}});
    let addr = rein.serve_with(return_200(), settings);
    let mut conn = Conn::open(addr);
    conn.send_raw(b"GET / HTTP/1.1\r\nHost: t\r\n");
    assert_eq!(conn.read().map(|r| r.status), Some(408));
    assert!(conn.is_closed());

    let mut conn = Conn::open(addr);
    conn.send_raw(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
    assert_eq!(conn.read().map(|r| r.status), Some(408));
}

#[test]
fn idle_keep_alive_connections_close_after_idle_timeout() {
    let rein = Rein::start();
    let settings = json!({"settings": {"http": {"idle_timeout": 0.3}}});
    let addr = rein.serve_with(return_200(), settings);
    let mut conn = Conn::open(addr);
    assert_eq!(conn.get("/", &[]).status, 200);
    // The read blocks until rein answers the idle connection with Unit's 408 and closes it (or the harness
    // deadline fails the test).
    assert_eq!(conn.read().map(|r| r.status), Some(408));
    assert!(conn.is_closed());
    wait_for("the close to be counted", || {
        rein.api("GET", "/status/connections/closed", None).1 == 1
    });
}

#[test]
fn a_client_that_stops_reading_is_dropped_after_send_timeout() {
    let rein = Rein::start();
    let big = crate::harness::file(rein.dir.path(), "www/big.bin", &vec![7u8; 32 * 1024 * 1024]);
    let root = big.parent().unwrap().display().to_string();
    let settings = json!({"settings": {"http": {"send_timeout": 0.3}}});
    let addr = rein.serve_with(
        json!([{"action": {"share": format!("{root}$uri")}}]),
        settings,
    );
    let mut conn = Conn::open(addr);
    conn.send_raw(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    // Never read: the socket buffers fill, rein's writes stall, and send_timeout ends the connection.
    wait_for("the stalled connection to be closed", || {
        rein.api("GET", "/status/connections/closed", None).1 == 1
    });
    drop(conn);
}

#[test]
fn unsafe_header_fields_are_discarded_unless_asked_not_to() {
    let rein = Rein::start();
    let routes = json!([
        {"match": {"headers": {"X_Id": "*"}}, "action": {"return": 299}},
        {"action": {"return": 200}}
    ]);
    let addr = rein.serve(routes.clone());
    let send = |addr| {
        let mut conn = Conn::open(addr);
        conn.send_raw(b"GET / HTTP/1.1\r\nHost: t\r\nX_Id: 1\r\n\r\n");
        conn.read().unwrap().status
    };
    assert_eq!(send(addr), 200);
    let addr = rein.serve_with(
        routes,
        json!({"settings": {"http": {"discard_unsafe_fields": false}}}),
    );
    assert_eq!(send(addr), 299);
}

/// Mutated requests (bytes flipped, dropped, repeated) by a fixed-seed generator: each is answered or closed
/// before the deadline, and rein keeps serving.
#[test]
fn mutated_requests_never_hang_or_crash() {
    let rein = Rein::start();
    let root = rein.dir.path().join("www");
    crate::harness::file(&root, "index.html", b"hi");
    let share = format!("{}$uri", root.display());
    let addr = rein.serve_with(
        json!([{"match": {"uri": "~^/a"}, "action": {"return": 301, "location": "/b$uri?$arg_x"}},
               {"action": {"share": share}}]),
        json!({"settings": {"http": {"header_read_timeout": 1, "body_read_timeout": 1}}}),
    );
    let seed: &[u8] = b"POST /a/index.html?x=%41&y HTTP/1.1\r\nHost: t\r\nRange: bytes=0-1,1-\r\nCookie: a=b\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..150 {
        let mut bytes = seed.to_vec();
        for _ in 0..(next() % 6 + 1) {
            let at = (next() as usize) % bytes.len();
            match next() % 4 {
                0 => bytes[at] = next() as u8,
                1 => {
                    bytes.remove(at);
                }
                2 => bytes.insert(at, b"\r\n:%/.\0 "[(next() % 8) as usize]),
                _ => {
                    let piece = bytes[at..bytes.len().min(at + 8)].to_vec();
                    bytes.splice(at..at, piece);
                }
            }
        }
        let mut conn = Conn::open(addr);
        conn.send_raw(&bytes);
        // Shut our side so a request waiting for more bytes ends at EOF instead of at the timeout.
        conn.reader()
            .get_ref()
            .shutdown(std::net::Shutdown::Write)
            .ok();
        while conn.read().is_some() {}
    }
    assert_eq!(get(addr, "/index.html").status, 200);
}

#[test]
fn forwarded_headers_from_a_trusted_proxy_set_the_client_and_scheme() {
    let rein = Rein::start();
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes", "forwarded": {
            "client_ip": "X-Forwarded-For", "protocol": "X-Forwarded-Proto",
            "source": "127.0.0.0/8", "recursive": true}}},
        "routes": [
            {"match": {"scheme": "https", "source": "203.0.113.0/24"},
             "action": {"return": 200, "response_headers": {"X-Client": "$remote_addr"}}},
            {"action": {"return": 403}}
        ]
    }));
    let addr = rein.bound("127.0.0.1:0");
    let chain = [
        ("X-Forwarded-For", "198.51.100.1, 203.0.113.7, 127.0.0.9"),
        ("X-Forwarded-Proto", "https"),
    ];
    let r = Conn::open(addr).get("/", &chain);
    assert_eq!((r.status, r.header("x-client")), (200, Some("203.0.113.7")));
    assert_eq!(
        Conn::open(addr)
            .get("/", &[("X-Forwarded-Proto", "https")])
            .status,
        403
    );
    let bad = json!({"pass": "routes", "forwarded": {"client_ip": "X-Forwarded-For"}});
    let (status, body) = rein.api(
        "PUT",
        "/config/listeners/127.0.0.1:0",
        Some(&bad.to_string()),
    );
    assert_eq!(status, 400);
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("listeners/127.0.0.1:0/forwarded"),
        "{body}"
    );
}
