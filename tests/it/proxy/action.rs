//! The `proxy` action over TCP and Unix sockets: target, body, status, headers, hop-by-hop fields,
//! `X-Forwarded-*`.

use super::*;

#[test]
fn proxy_action_over_tcp_forwards_requests_and_answers() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let addr = rein.serve(json!([{"action": {"proxy": format!("http://{}", a.addr())}}]));
    let mut c = Conn::open(addr);

    // The target as received: encoded path, query with an empty value and a bare key.
    let target = "/headers/a%20b/c%2Fd?x=1&y=%2F%20&empty=&flag";
    let mut req = format!("GET {target} HTTP/1.1\r\n");
    for (k, v) in [
        ("Host", "example.com:8080"),
        ("Connection", "keep-alive, X-Secret"),
        ("X-Secret", "1"),
        ("Keep-Alive", "timeout=5, max=100"),
        ("Proxy-Connection", "keep-alive"),
        ("TE", "trailers"),
        ("X-Forwarded-For", "10.0.0.1"),
        ("X-Custom-In", "kept"),
    ] {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    c.send_raw(req.as_bytes());
    let r = c.read().expect("an answer to GET /headers");
    let (doc, seen) = seen_headers(&r);
    assert_eq!(doc["method"], "GET");
    assert_eq!(
        doc["target"], target,
        "the target must be forwarded as received"
    );
    for hop in ["x-secret", "keep-alive", "proxy-connection", "te"] {
        assert!(
            header_values(&seen, hop).is_empty(),
            "hop-by-hop {hop} reached the backend: {seen:?}"
        );
    }
    for v in header_values(&seen, "connection") {
        assert!(
            !v.to_ascii_lowercase().contains("x-secret"),
            "Connection forwarded as is: {v}"
        );
    }
    assert_eq!(
        header_values(&seen, "x-forwarded-for"),
        ["10.0.0.1, 127.0.0.1"]
    );
    assert_eq!(header_values(&seen, "x-forwarded-proto"), ["http"]);
    assert_eq!(
        header_values(&seen, "x-forwarded-host"),
        ["example.com:8080"]
    );
    assert_eq!(header_values(&seen, "host"), ["example.com:8080"]);
    assert_eq!(header_values(&seen, "x-custom-in"), ["kept"]);

    // Without X-Forwarded-For, rein starts one.
    let r = c.get("/headers", &[]);
    let (_, seen) = seen_headers(&r);
    assert_eq!(header_values(&seen, "x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(header_values(&seen, "x-forwarded-host"), ["test"]);

    // A body with Content-Length, every byte value included.
    let body: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let r = c.request("POST", "/echo?len=70000", &[], &body);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, body, "the POST body must arrive unchanged");
    assert_eq!(r.header("x-backend"), Some("A"));

    // A chunked body, in several chunks.
    c.send_raw(
        b"POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nhello\r\n1\r\n \r\n10\r\nchunked world!!!\r\n0\r\n\r\n",
    );
    let r = c.read().expect("an answer to the chunked POST");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "hello chunked world!!!");

    // Status and headers come back; hop-by-hop fields of the answer (named by its Connection) do not.
    let r = c.get("/status?code=201", &[]);
    assert_eq!(r.status, 201);
    assert_eq!(r.text(), "status 201 from A");
    assert_eq!(r.header("x-custom"), Some("yes"));
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(
        r.header("x-resp-secret"),
        None,
        "a field named by the backend's Connection reached the client: {r:?}"
    );
    // An error status of the backend is passed through with its own body, not replaced by rein's page.
    let r = c.get("/status?code=404", &[]);
    assert_eq!(r.status, 404);
    assert_eq!(r.text(), "status 404 from A");
    let r = c.get("/status?code=503", &[]);
    assert_eq!(r.status, 503);
    assert_eq!(r.text(), "status 503 from A");
    // HEAD: no body, the head as for GET.
    let r = c.request("HEAD", "/whoami", &[], b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("1"));
    // The connection is still usable after all that.
    assert_eq!(c.get("/whoami", &[]).text(), "A");
}

#[test]
fn x_forwarded_for_appends_to_every_prior_field() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let addr = rein.serve(json!([{"action": {"proxy": format!("http://{}", a.addr())}}]));
    // Two X-Forwarded-For fields are one list (RFC 9110 §5.3): the client's address goes after both.
    let r = Conn::open(addr).get(
        "/headers",
        &[
            ("X-Forwarded-For", "10.0.0.1"),
            ("X-Forwarded-For", "10.0.0.2"),
        ],
    );
    let (_, seen) = seen_headers(&r);
    assert_eq!(
        header_values(&seen, "x-forwarded-for").join(", "),
        "10.0.0.1, 10.0.0.2, 127.0.0.1",
        "the second X-Forwarded-For field was lost"
    );
}

/// A `rewrite` built from the decoded `$uri` can hold a space or CR LF: the target sent upstream is the same
/// path with those bytes percent-encoded, never `/` or a split request line.
#[test]
fn a_rewritten_target_with_unsafe_bytes_goes_upstream_encoded() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let addr = rein.serve(json!([
        {"match": {"uri": "/in/*"}, "action": {
            "rewrite": "/headers$uri",
            "proxy": format!("http://{}", a.addr())
        }}
    ]));
    let mut c = Conn::open(addr);
    for (target, sent) in [
        ("/in/a%20b", "/headers/in/a%20b"),
        (
            "/in/a%0D%0AX-Injected:%201",
            "/headers/in/a%0D%0AX-Injected:%201",
        ),
        ("/in/caf%C3%A9?q=x%20y", "/headers/in/caf%C3%A9?q=x%20y"),
        ("/in/h%23frag", "/headers/in/h%23frag"),
        // Only what a request line cannot carry is encoded: a decoded `|` is sent as it is. (A decoded `%`
        // makes the rewritten target an invalid escape, which is a 400 like any other.) The client's query
        // goes with the new path, as in Unit.
        ("/in/kept%7C?q=%7C", "/headers/in/kept|?q=%7C"),
    ] {
        let r = c.get(target, &[]);
        let (doc, seen) = seen_headers(&r);
        assert_eq!(doc["target"], sent, "{target}");
        assert!(header_values(&seen, "x-injected").is_empty(), "{seen:?}");
    }
}

#[test]
fn proxy_action_over_a_unix_socket_to_node() {
    let rein = Rein::start();
    let sock = rein.dir.path().join("node.sock");
    let n = Backend::node("N", &format!("unix:{}", sock.display()));
    let addr = rein.serve(json!([
        {"action": {"proxy": format!("http://unix:{}", sock.display())}}
    ]));
    let mut c = Conn::open(addr);
    let r = c.get("/whoami", &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "N"));
    assert_eq!(r.header("x-backend"), Some(n.name.as_str()));

    let r = c.get(
        "/headers?q=a%26b&z",
        &[
            ("X-Forwarded-For", "192.0.2.7"),
            ("Connection", "X-Secret"),
            ("X-Secret", "1"),
        ],
    );
    let (doc, seen) = seen_headers(&r);
    assert_eq!(doc["target"], "/headers?q=a%26b&z");
    assert_eq!(
        header_values(&seen, "x-forwarded-for"),
        ["192.0.2.7, 127.0.0.1"]
    );
    assert_eq!(header_values(&seen, "x-forwarded-proto"), ["http"]);
    assert!(header_values(&seen, "x-secret").is_empty(), "{seen:?}");

    let body = vec![b'z'; 300_000];
    let r = c.request("POST", "/echo", &[], &body);
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), body.len());
    assert_eq!(r.body, body);

    c.send_raw(
        b"POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n\
          3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n",
    );
    let r = c.read().expect("an answer to the chunked POST");
    assert_eq!((r.status, r.text().as_str()), (200, "abcdefg"));

    let r = c.get("/status?code=418", &[]);
    assert_eq!(r.status, 418);
    assert_eq!(r.header("x-custom"), Some("yes"));
    assert_eq!(r.text(), "status 418 from N");

    // A chunked answer with a trailer, kept alive after it; a 204 without a body.
    let r = c.get("/stream?n=40", &[]);
    let expected: String = (0..40).map(|i| format!("chunk{i};")).collect();
    assert_eq!((r.status, r.text()), (200, expected));
    let r = c.get("/status?code=204", &[]);
    assert_eq!((r.status, r.body.len()), (204, 0));

    // `Expect: 100-continue`: rein answers the client's expectation itself (hyper sends the interim answer
    // when the body is read) and does not forward it.
    let r = c.request("POST", "/headers", &[("Expect", "100-continue")], b"hello");
    let (doc, seen) = seen_headers(&r);
    assert_eq!(doc["method"], "POST");
    assert!(header_values(&seen, "expect").is_empty(), "{seen:?}");
    assert_eq!(header_values(&seen, "content-length"), ["5"]);
    assert_eq!(c.get("/whoami", &[]).text(), "N");
}
