//! Hostile and malformed requests against the real binary, over raw TCP: each gets the right status (or a
//! close), rein never panics or hangs, and it keeps serving afterwards.
//!
//! Covered: framing ambiguities (`Content-Length` and `Transfer-Encoding` forms, chunk-size tricks), malformed
//! heads (obs-fold, space before the colon, control and non-ASCII bytes, odd versions), head limits, `CONNECT`,
//! `OPTIONS *`, absolute-form targets, a slowloris head, a pipelined request after a bad one, and what a
//! backend behind `proxy` receives: exactly one framing, no second request, the target as received, no
//! `h2c` upgrade, and a client's broken body never counted against the server.
//! (Basic 400s, 413, 431, 408 and the mutation fuzz are in `http.rs`.)

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Conn, Rein, get};

/// The routes every test here serves: `/p…` proxied to `backend`, `/r…` answered 200 with `$host`, and the
/// rest 204.
fn routes(backend: Option<SocketAddr>) -> Value {
    let mut routes = vec![json!({"match": {"uri": "/r*"},
        "action": {"return": 200, "response_headers": {"X-Host": "$host"}}})];
    if let Some(b) = backend {
        routes.push(json!({"match": {"uri": "/p*"}, "action": {"proxy": format!("http://{b}")}}));
    }
    routes.push(json!({"action": {"return": 204}}));
    Value::Array(routes)
}

/// Short timeouts keep a request rein waits on from slowing the file down.
fn settings() -> Value {
    json!({"settings": {"http": {"header_read_timeout": 0.5, "body_read_timeout": 0.5}}})
}

/// Sends `raw` on a fresh connection; the first answer's status, `None` if rein closed without one.
fn status_of(addr: SocketAddr, raw: &[u8]) -> Option<u16> {
    let mut conn = Conn::open(addr);
    conn.send_raw(raw);
    conn.read().map(|r| r.status)
}

/// Each case answered as expected, then a normal request still served and no panic in the log.
fn assert_cases(rein: &Rein, addr: SocketAddr, cases: &[(&[u8], Option<u16>)]) {
    for (raw, expected) in cases {
        let got = status_of(addr, raw);
        assert_eq!(got, *expected, "{:?}", String::from_utf8_lossy(raw));
    }
    assert_still_serving(rein, addr);
}

fn assert_still_serving(rein: &Rein, addr: SocketAddr) {
    assert_eq!(get(addr, "/r").status, 200);
    let log = rein.log_text();
    assert!(!log.contains("panic"), "{log}");
}

fn post(fields: &str, body: &str) -> Vec<u8> {
    format!("POST /r HTTP/1.1\r\nHost: t\r\n{fields}\r\n{body}").into_bytes()
}

#[test]
fn ambiguous_lengths_and_codings_are_refused() {
    let rein = Rein::start();
    let addr = rein.serve_with(routes(None), settings());
    let chunked = "Transfer-Encoding: chunked\r\n";
    let cases: Vec<(Vec<u8>, Option<u16>)> = vec![
        (
            post("Content-Length: 5\r\nContent-Length: 6\r\n", "hello!"),
            Some(400),
        ),
        (post("Content-Length: 5, 6\r\n", "hello!"), Some(400)),
        (post("Content-Length: 5, 5\r\n", "hello"), Some(400)),
        (post("Content-Length: +5\r\n", "hello"), Some(400)),
        (post("Content-Length: -1\r\n", "hello"), Some(400)),
        (post("Content-Length: 0x10\r\n", "hello"), Some(400)),
        (post("Content-Length:\r\n", ""), Some(400)),
        (
            post("Content-Length: 99999999999999999999999\r\n", ""),
            Some(400),
        ),
        // Within u64: refused by max_body_size before any byte of the body is awaited.
        (
            post("Content-Length: 18446744073709551613\r\n", ""),
            Some(413),
        ),
        (
            post("Content-Length: 18446744073709551615\r\n", ""),
            Some(413),
        ),
        // Repeated identical lengths are one length (RFC 9110 §8.6).
        (
            post("Content-Length: 5\r\nContent-Length: 5\r\n", "hello"),
            Some(200),
        ),
        (
            post("Transfer-Encoding: chunked, identity\r\n", "0\r\n\r\n"),
            Some(400),
        ),
        (
            post("Transfer-Encoding: identity\r\n", "0\r\n\r\n"),
            Some(400),
        ),
        (
            post("Transfer-Encoding: xchunked\r\n", "0\r\n\r\n"),
            Some(400),
        ),
        (post(&chunked.repeat(2), "0\r\n\r\n"), Some(501)),
        (
            post("Transfer-Encoding: chunked, chunked\r\n", "0\r\n\r\n"),
            Some(501),
        ),
        (
            post("Transfer-Encoding: CHUNKED\r\n", "5\r\nhello\r\n0\r\n\r\n"),
            Some(200),
        ),
        (
            b"POST /r HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
                .to_vec(),
            Some(400),
        ),
        // Chunk sizes: overflow, sign, hex prefix; a missing CRLF after the data; extensions are fine.
        (
            post(chunked, "fffffffffffffffff1\r\nhello\r\n0\r\n\r\n"),
            Some(400),
        ),
        (post(chunked, "-5\r\nhello\r\n0\r\n\r\n"), Some(400)),
        (post(chunked, "0x5\r\nhello\r\n0\r\n\r\n"), Some(400)),
        (post(chunked, "5\r\nhelloX0\r\n\r\n"), Some(400)),
        (post(chunked, "5\nhello\n0\n\n"), Some(400)),
        (post(chunked, "5;a=b\r\nhello\r\n0\r\n\r\n"), Some(200)),
    ];
    let cases: Vec<(&[u8], Option<u16>)> = cases.iter().map(|(r, s)| (&r[..], *s)).collect();
    assert_cases(&rein, addr, &cases);
}

#[test]
fn malformed_heads_are_refused() {
    let rein = Rein::start();
    let addr = rein.serve_with(routes(None), settings());
    let cases: [(&[u8], Option<u16>); 23] = [
        (b"GET /r HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n folded\r\n\r\n", Some(400)),
        (b"GET /r HTTP/1.1\r\nHost : t\r\n\r\n", Some(400)),
        (b"POST /r HTTP/1.1\r\nHost: t\r\nTransfer-Encoding : chunked\r\nContent-Length: 1\r\n\r\nx", Some(400)),
        (b"GET /r HTTP/1.1\r\nHost: t\r\nX-\0A: 1\r\n\r\n", Some(400)),
        (b"GET /r HTTP/1.1\r\nHost: t\r\nX-A: a\0b\r\n\r\n", Some(400)),
        (b"GET /r HTTP/1.1\r\nHost: t\r\nX-A: a\rb\r\n\r\n", Some(400)),
        (b"GET /r HTTP/1.1\r\nHost: t\r\nX-\xe9: 1\r\n\r\n", Some(400)),
        (b"GET /r\0x HTTP/1.1\r\nHost: t\r\n\r\n", Some(400)),
        (b"GET /r/\xe9 HTTP/1.1\r\nHost: t\r\n\r\n", Some(400)),
        (b"GET  /r HTTP/1.1\r\nHost: t\r\n\r\n", Some(400)),
        (b"GET /r HTTP/2.0\r\nHost: t\r\n\r\n", Some(400)),
        (b"GET /r HTTP/3.0\r\nHost: t\r\n\r\n", Some(400)),
        (b"GET /r HTTP/1.2\r\nHost: t\r\n\r\n", Some(400)),
        (b"GET /r\r\n\r\n", Some(400)),
        // Host must be host[:port] (RFC 9112 §3.2); an empty one is allowed.
        (b"GET /r HTTP/1.1\r\nHost: a b/c\r\n\r\n", Some(400)),
        (b"GET /r HTTP/1.1\r\nHost: user@evil\r\n\r\n", Some(400)),
        (b"GET /r HTTP/1.1\r\nHost: t:80x\r\n\r\n", Some(400)),
        (b"GET /r HTTP/1.1\r\nHost:\r\n\r\n", Some(200)),
        // HTTP/1.0 needs no Host.
        (b"GET /r HTTP/1.0\r\n\r\n", Some(200)),
        // Accepted by RFC 9112: obs-text in a value, bare LF line ends, empty lines before the request line.
        (b"GET /r HTTP/1.1\r\nHost: t\r\nX-A: caf\xe9\r\n\r\n", Some(200)),
        (b"GET /r HTTP/1.1\nHost: t\n\n", Some(200)),
        (b"\r\n\r\nGET /r HTTP/1.1\r\nHost: t\r\n\r\n", Some(200)),
        // An HTTP/2 preface on an HTTP/1 listener: closed without an HTTP/1 answer.
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", None),
    ];
    assert_cases(&rein, addr, &cases);
}

#[test]
fn head_limits_hold_at_their_edges() {
    let rein = Rein::start();
    let addr = rein.serve_with(routes(None), settings());
    let fields = |n: usize| -> String { (1..n).map(|i| format!("X-{i}: 1\r\n")).collect() };
    let head = |target: String, fields: String| {
        format!("GET {target} HTTP/1.1\r\nHost: t\r\n{fields}\r\n").into_bytes()
    };
    let cases = [
        (head("/r".into(), fields(100)), Some(200)),
        (head("/r".into(), fields(101)), Some(431)),
        (
            head(format!("/r/{}", "a".repeat(20_000)), String::new()),
            Some(200),
        ),
        (
            head(format!("/r/{}", "a".repeat(40_000)), String::new()),
            Some(431),
        ),
    ];
    let cases: Vec<(&[u8], Option<u16>)> = cases.iter().map(|(r, s)| (&r[..], *s)).collect();
    assert_cases(&rein, addr, &cases);
}

#[test]
fn connect_is_refused_and_options_star_is_routed() {
    let rein = Rein::start();
    let addr = rein.serve_with(routes(None), settings());
    let cases: [(&[u8], Option<u16>); 2] = [
        (
            b"CONNECT evil:443 HTTP/1.1\r\nHost: evil:443\r\n\r\n",
            Some(501),
        ),
        (b"OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n", Some(204)),
    ];
    assert_cases(&rein, addr, &cases);
}

/// RFC 9112 §3.2.2: the host of an absolute-form target wins over the `Host` field.
#[test]
fn an_absolute_form_target_names_the_host() {
    let rein = Rein::start();
    let addr = rein.serve_with(routes(None), settings());
    let mut conn = Conn::open(addr);
    conn.send_raw(b"GET http://Evil.example:81/r HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = conn.read().expect("an answer");
    assert_eq!((r.status, r.header("x-host")), (200, Some("evil.example")));
    // Without any Host field it is still a 400 (RFC 9112 §3.2).
    assert_eq!(
        status_of(addr, b"GET http://evil/r HTTP/1.1\r\n\r\n"),
        Some(400)
    );
    assert_still_serving(&rein, addr);
}

#[test]
fn a_slowloris_head_times_out_with_408() {
    let rein = Rein::start();
    let addr = rein.serve_with(routes(None), settings());
    let mut conn = Conn::open(addr);
    let mut writer = conn.reader().get_ref().try_clone().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    // One byte every 20 ms of a head that never ends: the clock runs from the first byte, so trickling does
    // not extend it.
    let trickle = std::thread::spawn(move || {
        let head = b"GET /r HTTP/1.1\r\nHost: t\r\nX-Slow: ";
        for b in head.iter().chain([b'a'; 500].iter()) {
            let stop = stopped.load(std::sync::atomic::Ordering::Relaxed);
            if stop || writer.write_all(&[*b]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let started = Instant::now();
    assert_eq!(conn.read().map(|r| r.status), Some(408));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    trickle.join().unwrap();
    // 0.5 s of header_read_timeout, well before the 10 s the trickle would take.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_still_serving(&rein, addr);
}

#[test]
fn a_request_pipelined_after_a_bad_one_is_not_processed() {
    let rein = Rein::start();
    let addr = rein.serve_with(routes(None), settings());
    for bad in [
        &b"GET /r HTTP/1.1\r\n\r\n"[..],
        b"GET /%2e%2e/x HTTP/1.1\r\nHost: t\r\n\r\n",
        b"POST /r HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ] {
        let mut conn = Conn::open(addr);
        conn.send_raw(bad);
        conn.send_raw(b"GET /r HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(conn.read().map(|r| r.status), Some(400));
        assert!(conn.read().is_none(), "{:?}", String::from_utf8_lossy(bad));
    }
    // Bytes inside a declared body are body, never a request, even when they look like one: the body is one
    // byte short, so the answer is the body timeout's 408 and nothing for `/x`.
    let mut conn = Conn::open(addr);
    conn.send_raw(b"GET /r HTTP/1.1\r\nHost: t\r\nContent-Length: 30\r\n\r\nGET /x HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(conn.read().map(|r| r.status), Some(408));
    assert!(conn.read().is_none());
    assert_still_serving(&rein, addr);
}

/// A backend that records the bytes of each connection (one request: its head and body, as the head frames
/// it, or until the peer closes) and answers `200 ok`, closing.
struct Recorder {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Recorder {
    fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = log.clone();
                std::thread::spawn(move || Recorder::serve(stream, &log));
            }
        });
        Recorder { addr, seen }
    }

    fn serve(mut stream: TcpStream, log: &Mutex<Vec<Vec<u8>>>) {
        stream
            .set_read_timeout(Some(crate::harness::DEADLINE))
            .unwrap();
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        while !Recorder::complete(&bytes) {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
            }
        }
        log.lock().unwrap().push(bytes);
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    }

    /// Whether `bytes` hold a whole request, by its own framing (enough for the requests rein sends here).
    fn complete(bytes: &[u8]) -> bool {
        let text = String::from_utf8_lossy(bytes).to_ascii_lowercase();
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            return false;
        };
        if head.contains("\r\ntransfer-encoding: chunked") {
            return body.ends_with("0\r\n\r\n");
        }
        let length = head
            .split("\r\n")
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|n| n.parse::<usize>().ok());
        body.len() >= length.unwrap_or(0)
    }

    /// What the backend received since the last call, one string per connection.
    fn take(&self) -> Vec<String> {
        let taken = std::mem::take(&mut *self.seen.lock().unwrap());
        taken
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect()
    }
}

#[test]
fn the_backend_receives_exactly_one_framing_and_one_request() {
    let backend = Recorder::start();
    let rein = Rein::start();
    let addr = rein.serve_with(routes(Some(backend.addr)), settings());

    // Both framings: the chunked one wins, the length is not forwarded, the connection closes after.
    let mut conn = Conn::open(addr);
    conn.send_raw(b"POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 30\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /p/smuggled HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(conn.read().map(|r| r.status), Some(200));
    assert!(conn.read().is_none());
    let seen = backend.take();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let (head, body) = seen[0].split_once("\r\n\r\n").unwrap();
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(!head.contains("content-length"), "{head}");
    assert_eq!(body, "5\r\nhello\r\n0\r\n\r\n");

    // A request after a complete chunked body is the client's next request, answered by rein itself; it is
    // never part of what the backend receives.
    let mut conn = Conn::open(addr);
    conn.send_raw(b"POST /p HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /x HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(conn.read().map(|r| r.status), Some(200));
    assert_eq!(conn.read().map(|r| r.status), Some(204));
    let seen = backend.take();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].ends_with("\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        "{seen:?}"
    );

    // Repeated identical lengths reach the backend as one.
    let mut conn = Conn::open(addr);
    conn.send_raw(
        b"POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
    );
    assert_eq!(conn.read().map(|r| r.status), Some(200));
    let seen = backend.take();
    assert_eq!(seen[0].matches("content-length").count(), 1, "{seen:?}");

    // `Connection` naming `Content-Length` drops it, and the body goes chunked: still one framing.
    let raw = b"POST /p HTTP/1.1\r\nHost: t\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\nhello";
    assert_eq!(status_of(addr, raw), Some(200));
    let seen = backend.take();
    assert!(!seen[0].contains("content-length"), "{seen:?}");
    assert!(
        seen[0].ends_with("transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        "{seen:?}"
    );

    // `Connection` naming `Host` does not take the host away from the server.
    let raw = b"GET /p HTTP/1.1\r\nHost: t\r\nConnection: Host\r\n\r\n";
    assert_eq!(status_of(addr, raw), Some(200));
    let seen = backend.take();
    assert!(seen[0].contains("\r\nhost: t\r\n"), "{seen:?}");
    assert!(!seen[0].contains("localhost"), "{seen:?}");
    assert_still_serving(&rein, addr);
}

#[test]
fn targets_reach_the_backend_as_received_or_not_at_all() {
    let backend = Recorder::start();
    let rein = Rein::start();
    let addr = rein.serve_with(routes(Some(backend.addr)), settings());
    for target in [
        "/p//a//b",
        "/p\\..\\..\\x",
        "/p/%5c..%5c..%5cx",
        "/p/a%2fb?x=%00",
    ] {
        let raw = format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(status_of(addr, raw.as_bytes()), Some(200), "{target}");
        let seen = backend.take();
        let line = format!("GET {target} HTTP/1.1\r\n");
        assert!(seen.len() == 1 && seen[0].starts_with(&line), "{seen:?}");
    }
    for target in ["/p/%00", "/p/%2e%2e/%2e%2e/etc", "/p/../../etc"] {
        let raw = format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(status_of(addr, raw.as_bytes()), Some(400), "{target}");
    }
    assert_eq!(backend.take(), Vec::<String>::new());

    // An absolute-form target: the backend gets the origin form and the target's host (RFC 9112 §3.2.2).
    let raw = b"GET http://evil.example:81/p HTTP/1.1\r\nHost: t\r\n\r\n";
    assert_eq!(status_of(addr, raw), Some(200));
    let seen = backend.take();
    assert!(seen[0].starts_with("GET /p HTTP/1.1\r\n"), "{seen:?}");
    assert!(
        seen[0].contains("\r\nhost: evil.example:81\r\n"),
        "{seen:?}"
    );
    assert!(!seen[0].contains("host: t\r\n"), "{seen:?}");
    assert_still_serving(&rein, addr);
}

/// An `h2c` upgrade through the proxy would let a client talk HTTP/2 straight to the backend past rein's
/// routes: the upgrade is not passed on.
#[test]
fn an_h2c_upgrade_is_not_passed_to_the_backend() {
    let backend = Recorder::start();
    let rein = Rein::start();
    let addr = rein.serve_with(routes(Some(backend.addr)), settings());
    let raw = b"GET /p HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n";
    assert_eq!(status_of(addr, raw), Some(200));
    let seen = backend.take().concat().to_ascii_lowercase();
    assert!(
        !seen.contains("h2c") && !seen.contains("http2-settings"),
        "{seen}"
    );
    assert!(!seen.contains("upgrade"), "{seen}");
    assert_still_serving(&rein, addr);
}

/// A malformed chunked body is the client's fault: a 400, and the server stays available to others (it used
/// to be a 502 that marked the server down, so one client could take a backend out for everyone).
#[test]
fn a_broken_client_body_through_the_proxy_is_a_400_not_the_servers_fault() {
    let backend = Recorder::start();
    let rein = Rein::start();
    let addr = rein.serve_with(routes(Some(backend.addr)), settings());
    for body in ["-5\r\nhello\r\n0\r\n\r\n", "5\r\nhelloX0\r\n\r\n", "zz\r\n"] {
        let raw =
            format!("POST /p HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{body}");
        assert_eq!(status_of(addr, raw.as_bytes()), Some(400), "{body:?}");
        assert_eq!(get(addr, "/p").status, 200, "after {body:?}");
    }
    // A body that stops coming: body_read_timeout, a 408, and again no blame on the server.
    let mut conn = Conn::open(addr);
    conn.send_raw(b"POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
    assert_eq!(conn.read().map(|r| r.status), Some(408));
    assert_eq!(get(addr, "/p").status, 200);
    let log = rein.log_text();
    assert!(!log.contains("server unavailable"), "{log}");
    assert_still_serving(&rein, addr);
}

/// A decoded `%0a` in a path, a quote in a header: escaped as nginx escapes them (`\xHH`), so a client can
/// neither add a line to the access log nor end a quoted field.
#[test]
fn a_client_cannot_forge_an_access_log_line() {
    let rein = Rein::start();
    let log = rein.dir.path().join("access.log");
    let format = "$remote_addr \"$uri\" $status \"$header_user_agent\"";
    let addr = rein.serve_with(
        json!([{"action": {"return": 200}}]),
        json!({"access_log": {"path": log.display().to_string(), "format": format}}),
    );
    let forged = "/x%0a10.0.0.9%20%22/admin%22%20200%20%22-%22%5c";
    let mut conn = Conn::open(addr);
    assert_eq!(conn.get(forged, &[("User-Agent", "a\" \"b")]).status, 200);
    assert_eq!(conn.get("/end", &[]).status, 200);
    crate::harness::wait_for("two lines", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("/end"))
    });
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            r#"127.0.0.1 "/x\x0A10.0.0.9 \x22/admin\x22 200 \x22-\x22\x5C" 200 "a\x22 \x22b""#,
            r#"127.0.0.1 "/end" 200 "-""#,
        ]
    );
}

/// Opens a connection and sends a request on it; whether an answer came (the connection was let in).
fn let_in(addr: SocketAddr) -> (Option<Conn>, bool) {
    let mut c = Conn::open(addr);
    c.send_raw(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    match c.read() {
        Some(r) => {
            assert_eq!(r.status, 200);
            (Some(c), true)
        }
        None => (None, false),
    }
}

#[test]
fn one_client_cannot_hold_more_than_its_share_of_connections() {
    let rein = Rein::start();
    let addr = rein.serve_with(
        json!([{"action": {"return": 200}}]),
        json!({"settings": {"http": {"max_connections_per_client": 3}}}),
    );
    let held: Vec<Conn> = (0..3).map(|_| let_in(addr).0.expect("let in")).collect();
    assert!(
        !let_in(addr).1,
        "a fourth connection from the same address was let in"
    );
    let (_, status) = rein.api("GET", "/status/connections/refused", None);
    assert_eq!(status, 1);
    drop(held);
    // Its connections closed, the client is let in again (once rein has seen them close).
    crate::harness::wait_for("a connection let in again", || let_in(addr).1);

    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [{"action": {"return": 200}}],
        "settings": {"http": {"max_connections": 2}},
    }));
    let addr = rein.bound("127.0.0.1:0");
    let held: Vec<Conn> = (0..2).map(|_| let_in(addr).0.expect("let in")).collect();
    assert!(
        !let_in(addr).1,
        "a third connection was let in over max_connections"
    );
    drop(held);
    crate::harness::wait_for("a connection let in again", || let_in(addr).1);

    // A proxy the listener trusts carries many clients: it is not held to the per-client limit.
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes", "forwarded": {
            "client_ip": "X-Forwarded-For", "source": "127.0.0.1"}}},
        "routes": [{"action": {"return": 200}}],
        "settings": {"http": {"max_connections_per_client": 3}},
    }));
    let addr = rein.bound("127.0.0.1:0");
    let held: Vec<Conn> = (0..6).map(|_| let_in(addr).0.expect("let in")).collect();
    drop(held);
}
