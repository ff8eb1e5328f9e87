//! Unit's behaviour on the wire (issue: "Responses and HTTP", "Timeouts"): what a client written against
//! NGINX Unit meets, checked against the real binary. Each test names the Unit behaviour it holds rein to;
//! where Unit's documentation is silent, the comment says what a Unit user's client expects and why.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::thread::JoinHandle;

use serde_json::{Value, json};

use crate::harness::{Conn, Rein, Response};
use crate::python::python_app;

/// Sends `raw` on a fresh connection and reads one response.
fn raw(addr: SocketAddr, raw: &[u8]) -> Option<Response> {
    let mut c = Conn::open(addr);
    c.send_raw(raw);
    c.read()
}

/// A one-shot upstream: answers every request on its connections with `response`, as written.
fn fixed_upstream(response: &'static [u8]) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    match reader.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) if line == "\r\n" => {
                            if reader.get_mut().write_all(response).is_err() {
                                return;
                            }
                        }
                        Ok(_) => {}
                    }
                }
            });
        }
    });
    (addr, handle)
}

fn python_env(rein: &Rein, action: Value, settings: Value) -> SocketAddr {
    let mut app = python_app("wsgi_app", json!({}));
    app["processes"] = json!(1);
    rein.serve_with(
        json!([{"action": action}]),
        json!({"applications": {"py": app}, "settings": settings}),
    )
}

fn env_of(addr: SocketAddr, headers: &[(&str, &str)]) -> Value {
    let r = Conn::open(addr).get("/env", headers);
    assert_eq!(r.status, 200, "{r:?}");
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.text()))
}

/// Unit answers 400 to a `%` that starts no escape (`/%`), where rein answered 404 after decoding nothing.
#[test]
fn an_invalid_percent_escape_is_a_400_with_a_body() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    for target in ["/%", "/a%2", "/%zz"] {
        let r = raw(
            addr,
            format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes(),
        )
        .unwrap();
        assert_eq!(r.status, 400, "{target}");
        assert!(!r.body.is_empty(), "{target}: an error answer has a body");
    }
    let ok = raw(addr, b"GET /%25 HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!(ok.status, 200);
}

/// Unit binds `pass: "applications/..."` (and `upstreams/...`) into the action, so that action's
/// `response_headers` dress what the application or upstream answers.
#[test]
fn response_headers_apply_to_applications_and_upstreams() {
    let rein = Rein::start();
    let (up, _t) = fixed_upstream(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Up: 1\r\n\r\nup");
    let mut app = python_app("wsgi_app", json!({}));
    app["processes"] = json!(1);
    let addr = rein.serve_with(
        json!([
            {"match": {"uri": "/env"}, "action": {"pass": "applications/py",
                "response_headers": {"X-Added": "app $uri", "Content-Type": null}}},
            {"action": {"pass": "upstreams/u", "response_headers": {"X-Added": "up", "X-Up": null}}}
        ]),
        json!({
            "applications": {"py": app},
            "upstreams": {"u": {"servers": {up.to_string(): {}}}},
        }),
    );
    let r = Conn::open(addr).get("/env", &[]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-added"), Some("app /env"));
    assert_eq!(r.header("content-type"), None);
    let r = Conn::open(addr).get("/other", &[]);
    assert_eq!(r.header("x-added"), Some("up"), "{r:?}");
    assert_eq!(r.header("x-up"), None);
}

/// `discard_unsafe_fields: false` passes `X_Test` to the application (as `HTTP_X_TEST`), as Unit does; the
/// default drops it. A trailing dot of `Host` is not part of `SERVER_NAME` (Unit strips it).
#[test]
fn unsafe_fields_reach_the_app_when_the_user_keeps_them() {
    let rein = Rein::start();
    let addr = python_env(&rein, json!({"pass": "applications/py"}), json!({}));
    let env = env_of(addr, &[("X_Test", "kept")]);
    assert_eq!(env["HTTP_X_TEST"], Value::Null, "dropped by default: {env}");
    let addr = python_env(
        &rein,
        json!({"pass": "applications/py"}),
        json!({"http": {"discard_unsafe_fields": false}}),
    );
    let env = env_of(addr, &[("X_Test", "kept")]);
    assert_eq!(env["HTTP_X_TEST"], "kept", "{env}");
    let mut c = Conn::open(addr);
    c.send_raw(b"GET /env HTTP/1.1\r\nHost: example.com.\r\n\r\n");
    let env: Value = serde_json::from_slice(&c.read().unwrap().body).unwrap();
    assert_eq!(env["SERVER_NAME"], "example.com", "{env}");
}

/// Unit refuses a host with an empty label (`127.0.0..1`) with 400; `server_version: false` sends the
/// server's name without its version.
#[test]
fn malformed_hosts_are_refused_and_server_version_can_be_hidden() {
    let rein = Rein::start();
    let addr = rein.serve_with(
        json!([{"action": {"return": 200}}]),
        json!({"settings": {"http": {"server_version": false}}}),
    );
    let bad = raw(addr, b"GET / HTTP/1.1\r\nHost: 127.0.0..1\r\n\r\n").unwrap();
    assert_eq!(bad.status, 400);
    assert!(!bad.body.is_empty());
    let ok = raw(addr, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!(ok.header("server"), Some("rein"));
}

/// Unit answers a connection that sends nothing with 408 at `idle_timeout` (its `test_settings_idle_timeout_2`),
/// and a head still incomplete at `header_read_timeout` with 408; both close the connection.
#[test]
fn silent_and_partial_connections_get_408() {
    let rein = Rein::start();
    let addr = rein.serve_with(
        json!([{"action": {"return": 200}}]),
        json!({"settings": {"http": {"idle_timeout": 0.3, "header_read_timeout": 0.3}}}),
    );
    // Nothing sent: the read waits for rein's answer (the harness deadline fails the test if none comes).
    let mut silent = Conn::open(addr);
    let r = silent.read().expect("a 408 to a silent connection");
    assert_eq!(r.status, 408);
    assert!(!r.body.is_empty());
    assert!(silent.is_closed());

    let mut partial = Conn::open(addr);
    partial.send_raw(b"GET / HTTP/1.1\r\nHost: a\r\n");
    assert_eq!(partial.read().map(|r| r.status), Some(408));
    assert!(partial.is_closed());
}

/// On a listener that also takes HTTP/2 without TLS (`h2c`), an HTTP/1 client's partial head is held to
/// `header_read_timeout`, not to the far longer `idle_timeout` an HTTP/2 connection waits between requests.
#[test]
fn an_h2c_listener_times_its_http1_clients_as_http1() {
    let rein = Rein::start();
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes", "h2c": true}},
        "routes": [{"action": {"return": 200}}],
        "settings": {"http": {"idle_timeout": 600, "header_read_timeout": 0.3}},
    }));
    let addr = rein.bound("127.0.0.1:0");
    let mut partial = Conn::open(addr);
    partial.send_raw(b"GET / HTTP/1.1\r\nHost: a\r\n");
    assert_eq!(partial.read().map(|r| r.status), Some(408));
    assert!(partial.is_closed());
    // A whole request is served as before, a raw space in its target too, as on any HTTP/1 listener.
    let whole = |head: &[u8]| raw(addr, head).unwrap().status;
    assert_eq!(whole(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 200);
    assert_eq!(whole(b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n"), 200);
}

/// Unit answers 431 to a header field line that does not fit `large_header_buffer_size` (8 KB by default), a
/// long `Host` included, and takes the setting (with `large_header_buffers` and `body_buffer_size`).
#[test]
fn a_header_field_longer_than_the_large_buffer_is_a_431() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    let long = "v".repeat(8200);
    let head = format!("GET / HTTP/1.1\r\nHost: a\r\nX-Long: {long}\r\n\r\n");
    let r = raw(addr, head.as_bytes()).unwrap();
    assert_eq!(r.status, 431);
    assert!(!r.body.is_empty());
    let host = format!("GET / HTTP/1.1\r\nHost: {}\r\n\r\n", "h".repeat(10_000));
    assert_eq!(raw(addr, host.as_bytes()).unwrap().status, 431);
    let fits = format!(
        "GET / HTTP/1.1\r\nHost: a\r\nX-Fits: {}\r\n\r\n",
        "v".repeat(8000)
    );
    assert_eq!(raw(addr, fits.as_bytes()).unwrap().status, 200);

    let addr = rein.serve_with(
        json!([{"action": {"return": 200}}]),
        json!({"settings": {"http": {
            "large_header_buffer_size": 16384, "large_header_buffers": 4, "body_buffer_size": 32768}}}),
    );
    assert_eq!(raw(addr, head.as_bytes()).unwrap().status, 200);
    let (status, body) = rein.api(
        "PUT",
        "/config/settings/http/large_header_buffers",
        Some("0"),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or_default()
            .starts_with("settings/http/large_header_buffers"),
        "{body}"
    );
}

/// A request half received when its listener is removed finishes on the configuration it started on (Unit
/// does, and it is rein's promise), instead of a 503.
#[test]
fn a_request_half_received_when_its_listener_goes_finishes_on_its_configuration() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 299}}]));
    let mut c = Conn::open(addr);
    c.send_raw(b"GET / HTTP/1.1\r\n");
    // The head's first bytes are in before the change is applied: wait until rein holds the connection.
    crate::harness::wait_for("the connection to be counted", || {
        rein.api("GET", "/status/connections/accepted", None).1 == 1
    });
    rein.configure(json!({"listeners": {}, "routes": []}));
    c.send_raw(b"Host: a\r\n\r\n");
    assert_eq!(c.read().map(|r| r.status), Some(299));
}

/// The names of a response's fields, as they came on the wire.
fn names(r: &Response) -> Vec<&str> {
    r.headers.iter().map(|(k, _)| k.as_str()).collect()
}

/// Unit and nginx send header names as the application or upstream wrote them, and their own in canonical
/// case (`Content-Type`, `ETag`, `Last-Modified`); clients written against Unit compare them as written. The
/// names an action's `response_headers` sets are spelled as the configuration spells them.
#[test]
fn header_names_keep_the_spelling_they_were_written_with() {
    let rein = Rein::start();
    let (up, _t) = fixed_upstream(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Foo: 1\r\nx-bar: 2\r\nx-bar: 3\r\nCache-control: no\r\n\r\nup",
    );
    let dir = rein.dir.path().join("share");
    std::fs::create_dir_all(&dir).unwrap();
    crate::harness::file(&dir, "index.html", b"hello");
    let addr = rein.serve_with(
        json!([
            {"match": {"uri": "/up"}, "action": {"pass": "upstreams/u",
                "response_headers": {"x-Added": "v", "X-Foo": "replaced"}}},
            {"match": {"uri": "/return"}, "action": {"return": 301, "location": "/x"}},
            {"action": {"share": format!("{}$uri", dir.display())}}
        ]),
        json!({"upstreams": {"u": {"servers": {up.to_string(): {}}}}}),
    );
    let r = raw(addr, b"GET /up HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!(r.text(), "up");
    let mut got = names(&r);
    got.sort_unstable();
    assert_eq!(
        got,
        [
            "Cache-control",
            "Content-Length",
            "Date",
            "Server",
            "X-Foo",
            "x-Added",
            "x-bar",
            "x-bar"
        ],
        "{r:?}"
    );
    assert_eq!(r.header("x-foo"), Some("replaced"));

    let r = raw(addr, b"GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!(r.text(), "hello");
    for name in [
        "Content-Type",
        "Content-Length",
        "Last-Modified",
        "ETag",
        "Server",
        "Date",
    ] {
        assert!(names(&r).contains(&name), "{name} in {r:?}");
    }
    assert!(
        names(&r)
            .iter()
            .all(|n| n.starts_with(|c: char| c.is_ascii_uppercase())),
        "{r:?}"
    );

    // Pipelined on one connection: a redirect, a 404 (rein's error page), a HEAD, then the upstream again.
    let mut c = crate::harness::Conn::open(addr);
    c.send_raw(
        b"GET /return HTTP/1.1\r\nHost: a\r\n\r\nGET /nothing HTTP/1.1\r\nHost: a\r\n\r\n\
          HEAD /index.html HTTP/1.1\r\nHost: a\r\n\r\nGET /up HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    let redirect = c.read().unwrap();
    assert_eq!(redirect.status, 301);
    assert!(names(&redirect).contains(&"Location"), "{redirect:?}");
    let missing = c.read().unwrap();
    assert_eq!(missing.status, 404);
    assert!(names(&missing).contains(&"Content-Type"), "{missing:?}");
    let head = c.read_head_only().unwrap();
    assert!(names(&head).contains(&"ETag"), "{head:?}");
    let again = c.read().unwrap();
    assert!(names(&again).contains(&"x-bar"), "{again:?}");
    assert_eq!(again.text(), "up");
}

/// hyper answers a request head it cannot parse itself, without a body; Unit's error answers have one, and so
/// do rein's.
#[test]
fn hypers_own_error_answers_have_a_body() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    let r = raw(addr, b"GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n").unwrap();
    assert_eq!(r.status, 400);
    assert!(r.text().contains("Error 400"), "{r:?}");
    assert_eq!(r.header("Content-Type"), Some("text/html"));
    let long = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(40_000));
    let r = raw(addr, long.as_bytes()).unwrap();
    assert_eq!(r.status, 431);
    assert!(r.text().contains("Error 431"), "{r:?}");
}

/// Unit serves a request target holding a raw space, `<`, `>` or `` ` `` as if the byte were percent-encoded
/// (nginx too, but for the space); hyper's parser alone would refuse them with 400.
#[test]
fn raw_spaces_and_brackets_in_a_target_are_served() {
    let rein = Rein::start();
    let dir = rein.dir.path().join("share");
    std::fs::create_dir_all(&dir).unwrap();
    crate::harness::file(&dir, "a b<c>`d", b"odd");
    let addr = rein.serve(json!([{"action": {"share": format!("{}$uri", dir.display())}}]));
    let r = raw(addr, b"GET /a b<c>`d HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "odd"), "{r:?}");

    // Keep-alive and pipelined: each request line is looked at, none of the fields.
    let mut c = Conn::open(addr);
    c.send_raw(b"GET /a%20b%3Cc%3E%60d HTTP/1.1\r\nHost: a\r\nX-A: <b c>\r\n\r\n");
    assert_eq!(c.read().map(|r| r.status), Some(200));
    c.send_raw(b"GET /a b<c>`d HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(c.read().map(|r| r.text()), Some("odd".to_owned()));
    c.send_raw(b"GET /nothing <here> HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(c.read().map(|r| r.status), Some(404));
}

/// An upstream whose chunked body is invalid from its first chunk: nothing has been sent to the client yet,
/// so it gets 502, as from Unit; one whose body goes bad after good data: the head is out, so the client's
/// connection is closed before a complete body (never a 200 that looks whole).
#[test]
fn an_invalid_chunked_body_from_an_upstream_is_a_502_or_a_cut() {
    let (bad_first, _) = fixed_upstream(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
    );
    let (bad_later, _) = fixed_upstream(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\nabc\r\n0\r\n\r\n",
    );
    let rein = Rein::start();
    let a = rein.serve(json!([
        {"match": {"uri": "/first"}, "action": {"proxy": format!("http://{bad_first}")}},
        {"action": {"proxy": format!("http://{bad_later}")}},
    ]));
    let r = Conn::open(a).get("/first", &[]);
    assert_eq!(r.status, 502, "{r:?}");
    let mut c = Conn::open(a);
    c.send_raw(b"GET /later HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut all = Vec::new();
    let _ = std::io::Read::read_to_end(c.reader(), &mut all);
    let text = String::from_utf8_lossy(&all);
    // The bad chunk arrives with the good one here, so this is a 502 too; had it come later, the head would
    // be out and the body cut. Either way the client never sees a body that ends as if complete.
    assert!(
        text.starts_with("HTTP/1.1 502") || !text.ends_with("0\r\n\r\n"),
        "{text:?}"
    );
}
