//! Routing through real requests: every `match` condition, named routes and `pass` chains (fixed and with
//! variables), the `return` / `rewrite` / `response_headers` actions, passes to applications and upstreams,
//! variables, the access log and the `Server` header.
//!
//! Steps that match answer `200` with an `X-Step` header naming themselves, so each request shows which step
//! (if any) it reached; a request no step takes is Unit's 404 error page.

use std::net::SocketAddr;
use std::path::Path;

use serde_json::{Value, json};

use crate::harness::{Conn, Rein, Response, get, get_with, wait_for};

/// An action that answers 200 and names itself in `X-Step`.
fn ok(name: &str) -> Value {
    json!({"return": 200, "response_headers": {"X-Step": name}})
}

/// One raw request (the caller writes the whole head, `Host` included) on a fresh connection.
fn raw(addr: SocketAddr, request: &str) -> Response {
    let mut c = Conn::open(addr);
    c.send_raw(request.as_bytes());
    c.read()
        .unwrap_or_else(|| panic!("no response to {request:?}"))
}

fn get_host(addr: SocketAddr, host: &str, path: &str) -> Response {
    raw(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n"),
    )
}

/// Which step answered: its `X-Step`, or `None` for rein's 404 page (asserted to be one).
fn step_of(r: &Response, what: &str) -> Option<String> {
    match r.status {
        200 => Some(
            r.header("x-step")
                .unwrap_or_else(|| panic!("{what}: 200 without X-Step: {r:?}"))
                .to_owned(),
        ),
        404 => {
            assert_not_found_page(r, what);
            None
        }
        other => panic!("{what}: unexpected status {other}: {r:?}"),
    }
}

fn assert_not_found_page(r: &Response, what: &str) {
    assert_eq!(r.status, 404, "{what}");
    assert_eq!(r.header("content-type"), Some("text/html"), "{what}");
    let body = r.text();
    assert!(
        body.contains("<title>Error 404</title>") && body.contains("Not Found"),
        "{what}: not an error page: {body:?}"
    );
    assert_eq!(
        r.header("content-length")
            .map(|n| n.parse::<usize>().unwrap()),
        Some(r.body.len()),
        "{what}"
    );
}

/// One request of a table-driven test: method, target, extra headers, and the step expected to answer.
type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], Option<&'a str>);

/// The routes of [`match_conditions`]; `port` is the listener's port once known (for `destination`).
fn condition_routes(port: Option<u16>) -> Value {
    let mut steps = vec![
        json!({"match": {"uri": "/method", "method": ["get", "PUT"]}, "action": ok("method")}),
        json!({"match": {"uri": "/host", "host": "example.com"}, "action": ok("host")}),
        json!({"match": {"uri": "/host-wild", "host": ["*.example.org", "~^re[0-9]+\\.test$"]}, "action": ok("host-wild")}),
        json!({"match": {"uri": "/host-neg", "host": "!example.com"}, "action": ok("host-neg")}),
        json!({"match": {"uri": ["/u/*.txt", "!/u/secret*"]}, "action": ok("uri-wild")}),
        json!({"match": {"uri": "/w/*/mid/*"}, "action": ok("uri-middle")}),
        json!({"match": {"uri": ["/any/a", "/any/b"]}, "action": ok("uri-any")}),
        json!({"match": {"uri": "~^/re/[0-9]+$"}, "action": ok("uri-regex")}),
        json!({"match": {"uri": "/sp%20ace"}, "action": ok("uri-encoded")}),
        json!({"match": {"uri": "/args", "arguments": {"a": "1", "b": "x*"}}, "action": ok("args-all")}),
        json!({"match": {"uri": "/args-any", "arguments": [{"a": "1"}, {"b": "2"}]}, "action": ok("args-any")}),
        json!({"match": {"uri": "/args-space", "arguments": {"name": "a b"}}, "action": ok("args-space")}),
        json!({"match": {"uri": "/query", "query": "x=*"}, "action": ok("query")}),
        json!({"match": {"uri": "/query-re", "query": "~(^|&)debug(&|$)"}, "action": ok("query-re")}),
        json!({"match": {"uri": "/headers", "headers": {"X-Test": "yes*"}}, "action": ok("headers")}),
        json!({"match": {"uri": "/headers-neg", "headers": {"X-Neg": "!bad"}}, "action": ok("headers-neg")}),
        json!({"match": {"uri": "/headers-any", "headers": [{"X-A": "1"}, {"X-B": "2"}]}, "action": ok("headers-any")}),
        json!({"match": {"uri": "/cookies", "cookies": {"session": "abc*"}}, "action": ok("cookies")}),
        json!({"match": {"uri": "/scheme/http", "scheme": "http"}, "action": ok("scheme-http")}),
        json!({"match": {"uri": "/scheme/https", "scheme": "https"}, "action": ok("scheme-https")}),
        json!({"match": {"uri": "/src/exact", "source": "127.0.0.1"}, "action": ok("src-exact")}),
        json!({"match": {"uri": "/src/cidr", "source": "127.0.0.0/8"}, "action": ok("src-cidr")}),
        json!({"match": {"uri": "/src/ports", "source": "127.0.0.1:1-65535"}, "action": ok("src-ports")}),
        json!({"match": {"uri": "/src/neg", "source": "!127.0.0.0/8"}, "action": ok("src-neg")}),
        json!({"match": {"uri": "/src/other", "source": ["10.0.0.0/8", "192.168.0.0/16"]}, "action": ok("src-other")}),
        json!({"match": {"uri": "/src/range", "source": "127.0.0.0-127.0.0.255"}, "action": ok("src-range")}),
        json!({"match": {"uri": "/all", "method": "GET", "arguments": {"k": "v"}, "headers": {"X-Test": "1"}}, "action": ok("all")}),
    ];
    if let Some(port) = port {
        let other = port.wrapping_add(1);
        steps.extend([
            json!({"match": {"uri": "/dst/exact", "destination": format!("127.0.0.1:{port}")}, "action": ok("dst-exact")}),
            json!({"match": {"uri": "/dst/any", "destination": format!("*:{port}")}, "action": ok("dst-any")}),
            json!({"match": {"uri": "/dst/addr", "destination": "127.0.0.1"}, "action": ok("dst-addr")}),
            json!({"match": {"uri": "/dst/wrong", "destination": format!("127.0.0.1:{other}")}, "action": ok("dst-wrong")}),
            json!({"match": {"uri": "/dst/neg", "destination": format!("!*:{port}")}, "action": ok("dst-neg")}),
        ]);
    }
    Value::Array(steps)
}

#[test]
fn match_conditions() {
    let rein = Rein::start();
    let addr = rein.serve(condition_routes(None));
    // `destination` needs the port chosen for the listener: now add those steps. The listener stays bound.
    let routes = condition_routes(Some(addr.port()));
    let (status, body) = rein.api("PUT", "/config/routes", Some(&routes.to_string()));
    assert_eq!(status, 200, "{body}");
    assert_eq!(rein.bound("127.0.0.1:0"), addr);

    let mut c = Conn::open(addr);
    let cases: &[Case] = &[
        // method: case-insensitive patterns, array any-of.
        ("GET", "/method", &[], Some("method")),
        ("PUT", "/method", &[], Some("method")),
        ("POST", "/method", &[], None),
        ("DELETE", "/method", &[], None),
        // uri: wildcards, negation, arrays, regex, decoding and normalisation before matching.
        ("GET", "/u/a.txt", &[], Some("uri-wild")),
        ("GET", "/u/dir/b.txt", &[], Some("uri-wild")),
        ("GET", "/u/secret.txt", &[], None),
        ("GET", "/u/a.html", &[], None),
        ("GET", "/x/../u/./a.txt", &[], Some("uri-wild")),
        ("GET", "/u//a%2Etxt", &[], Some("uri-wild")),
        ("GET", "/w/1/mid/2", &[], Some("uri-middle")),
        ("GET", "/w/mid/", &[], None),
        ("GET", "/any/a", &[], Some("uri-any")),
        ("GET", "/any/b", &[], Some("uri-any")),
        ("GET", "/any/c", &[], None),
        ("GET", "/re/123", &[], Some("uri-regex")),
        ("GET", "/re/12a", &[], None),
        ("GET", "/sp%20ace", &[], Some("uri-encoded")),
        // the query is not part of the path `uri` sees
        ("GET", "/any/a?x=1", &[], Some("uri-any")),
        // arguments: object = all of, array = any of, values decoded (`+` is a space)
        ("GET", "/args?a=1&b=xyz", &[], Some("args-all")),
        ("GET", "/args?b=x&a=%31", &[], Some("args-all")),
        ("GET", "/args?a=1", &[], None),
        ("GET", "/args?a=2&b=x", &[], None),
        ("GET", "/args?a=1&b=y", &[], None),
        ("GET", "/args-any?b=2", &[], Some("args-any")),
        ("GET", "/args-any?a=1&b=3", &[], Some("args-any")),
        ("GET", "/args-any?a=2&b=3", &[], None),
        ("GET", "/args-any", &[], None),
        ("GET", "/args-space?name=a+b", &[], Some("args-space")),
        ("GET", "/args-space?name=a%20b", &[], Some("args-space")),
        ("GET", "/args-space?name=ab", &[], None),
        // query: the whole (decoded) query string
        ("GET", "/query?x=5", &[], Some("query")),
        ("GET", "/query?y=5", &[], None),
        ("GET", "/query", &[], None),
        ("GET", "/query-re?a=1&debug", &[], Some("query-re")),
        ("GET", "/query-re?debugger", &[], None),
        // headers: names and values case-insensitive; an absent header fails even a negated pattern
        ("GET", "/headers", &[("X-Test", "yes")], Some("headers")),
        ("GET", "/headers", &[("x-test", "YESSIR")], Some("headers")),
        ("GET", "/headers", &[("X-Test", "no")], None),
        ("GET", "/headers", &[], None),
        (
            "GET",
            "/headers-neg",
            &[("X-Neg", "good")],
            Some("headers-neg"),
        ),
        ("GET", "/headers-neg", &[("X-Neg", "bad")], None),
        ("GET", "/headers-neg", &[], None),
        ("GET", "/headers-any", &[("X-B", "2")], Some("headers-any")),
        ("GET", "/headers-any", &[("X-A", "2"), ("X-B", "1")], None),
        // cookies: case-sensitive names and values, any position among several
        (
            "GET",
            "/cookies",
            &[("Cookie", "other=1; session=abcdef")],
            Some("cookies"),
        ),
        (
            "GET",
            "/cookies",
            &[("Cookie", "session=abc")],
            Some("cookies"),
        ),
        ("GET", "/cookies", &[("Cookie", "session=zzz")], None),
        ("GET", "/cookies", &[("Cookie", "SESSION=abc")], None),
        ("GET", "/cookies", &[("Cookie", "session=ABC")], None),
        ("GET", "/cookies", &[], None),
        // scheme: this listener is plain HTTP
        ("GET", "/scheme/http", &[], Some("scheme-http")),
        ("GET", "/scheme/https", &[], None),
        // source: the test connects from 127.0.0.1
        ("GET", "/src/exact", &[], Some("src-exact")),
        ("GET", "/src/cidr", &[], Some("src-cidr")),
        ("GET", "/src/ports", &[], Some("src-ports")),
        ("GET", "/src/neg", &[], None),
        ("GET", "/src/other", &[], None),
        ("GET", "/src/range", &[], Some("src-range")),
        // destination: the listener's own address and port
        ("GET", "/dst/exact", &[], Some("dst-exact")),
        ("GET", "/dst/any", &[], Some("dst-any")),
        ("GET", "/dst/addr", &[], Some("dst-addr")),
        ("GET", "/dst/wrong", &[], None),
        ("GET", "/dst/neg", &[], None),
        // several conditions: all must hold
        ("GET", "/all?k=v", &[("X-Test", "1")], Some("all")),
        ("GET", "/all?k=v", &[], None),
        ("GET", "/all?k=w", &[("X-Test", "1")], None),
        ("PUT", "/all?k=v", &[("X-Test", "1")], None),
        // nothing matches
        ("GET", "/nowhere", &[], None),
    ];
    for (method, path, headers, want) in cases {
        let what = format!("{method} {path} {headers:?}");
        let r = c.request(method, path, headers, b"");
        assert_eq!(step_of(&r, &what).as_deref(), *want, "{what}: {r:?}");
    }

    // host: the port is ignored, case too, and a trailing dot; wildcards and regexes; negation.
    let hosts: &[(&str, &str, Option<&str>)] = &[
        ("example.com", "/host", Some("host")),
        ("Example.COM:8080", "/host", Some("host")),
        ("example.com.", "/host", Some("host")),
        ("www.example.com", "/host", None),
        ("other.com", "/host", None),
        ("a.example.org", "/host-wild", Some("host-wild")),
        ("A.B.Example.Org:1", "/host-wild", Some("host-wild")),
        ("example.org", "/host-wild", None),
        ("re42.test", "/host-wild", Some("host-wild")),
        ("re.test", "/host-wild", None),
        ("other.com", "/host-neg", Some("host-neg")),
        ("EXAMPLE.com:80", "/host-neg", None),
    ];
    for (host, path, want) in hosts {
        let what = format!("Host: {host} {path}");
        let r = get_host(addr, host, path);
        assert_eq!(step_of(&r, &what).as_deref(), *want, "{what}: {r:?}");
    }
}

/// Configures `routes` as named routes with the listener passing to `routes/main`.
fn serve_named(rein: &Rein, routes: Value, extra: Value) -> SocketAddr {
    let mut config = json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes/main"}},
        "routes": routes,
    });
    if let Value::Object(more) = extra {
        config.as_object_mut().unwrap().extend(more);
    }
    rein.configure(config);
    rein.bound("127.0.0.1:0")
}

#[test]
fn named_routes_and_pass_chains() {
    let rein = Rein::start();
    let addr = serve_named(
        &rein,
        json!({
            "main": [
                {"match": {"uri": "/chain/*"}, "action": {"pass": "routes/second"}},
                {"match": {"uri": "/dyn/*"}, "action": {"pass": "routes/$host"}},
                {"match": {"uri": "/to"}, "action": {"pass": "$arg_to"}},
                {"match": {"uri": "/loop"}, "action": {"pass": "routes/${arg_r}"}},
                {"action": ok("main-last")}
            ],
            "second": [
                {"match": {"uri": "/chain/b"}, "action": {"pass": "routes/third"}},
                {"match": {"uri": "/chain/a"}, "action": ok("second")}
            ],
            "third": [{"action": ok("third")}],
            "a": [{"action": ok("route-a")}],
            "b": [{"action": ok("route-b")}],
            "loop": [{"action": {"pass": "routes/$arg_r"}}]
        }),
        json!({}),
    );
    let cases: &[(&str, &str, Option<&str>)] = &[
        ("test", "/chain/a", Some("second")),
        ("test", "/chain/b", Some("third")),
        // a step reached through `pass` that matches nothing: 404, not a fall-through to main's last step
        ("test", "/chain/c", None),
        ("test", "/other", Some("main-last")),
        // `pass` with variables: host `a` goes to route `a`, and so on
        ("a", "/dyn/x", Some("route-a")),
        ("B:8080", "/dyn/x", Some("route-b")),
        ("missing", "/dyn/x", None),
        ("test", "/to?to=routes/third", Some("third")),
        ("test", "/to?to=routes/nope", None),
        ("test", "/to?to=garbage", None),
        ("test", "/to", None),
    ];
    for (host, path, want) in cases {
        let what = format!("Host: {host} {path}");
        let r = get_host(addr, host, path);
        assert_eq!(step_of(&r, &what).as_deref(), *want, "{what}: {r:?}");
    }
    // A pass with variables that keeps coming back to its own route is cut off rather than looping forever.
    let r = get_host(addr, "test", "/loop?r=loop");
    assert_eq!(r.status, 500, "{r:?}");

    // Fixed passes are checked when configured: to a missing route, or one that loops.
    let bad = json!({"listeners": {"127.0.0.1:0": {"pass": "routes/main"}},
        "routes": {"main": [{"action": {"pass": "routes/ghost"}}]}});
    let (status, body) = rein.api("PUT", "/config", Some(&bad.to_string()));
    assert_eq!(status, 400, "{body}");
    let looping = json!({"listeners": {"127.0.0.1:0": {"pass": "routes/main"}},
        "routes": {"main": [{"action": {"pass": "routes/other"}}], "other": [{"action": {"pass": "routes/main"}}]}});
    let (status, body) = rein.api("PUT", "/config", Some(&looping.to_string()));
    assert_eq!(status, 400, "{body}");
    // The refused changes left the running configuration in place.
    let r = get_host(addr, "test", "/chain/a");
    assert_eq!(r.header("x-step"), Some("second"));
}

#[test]
fn return_actions_and_variables() {
    let rein = Rein::start();
    let location = "u=$uri;h=$host;ru=$request_uri;m=$method;a=$arg_q;hd=$header_x_forwarded_proto;c=$cookie_sid;d=$dollar;b=${arg_q}x";
    let addr = rein.serve(json!([
        {"match": {"uri": "/200"}, "action": {"return": 200}},
        {"match": {"uri": "/204"}, "action": {"return": 204}},
        {"match": {"uri": "/301/*"}, "action": {"return": 301, "location": "http://$host/new$request_uri"}},
        {"match": {"uri": "/302"}, "action": {"return": 302, "location": "https://example.com/fixed"}},
        {"match": {"uri": "/404"}, "action": {"return": 404}},
        {"match": {"uri": "/418"}, "action": {"return": 418}},
        {"match": {"uri": "/503"}, "action": {"return": 503}},
        {"match": {"uri": "/vars/*"}, "action": {"return": 307, "location": location}}
    ]));
    let mut c = Conn::open(addr);

    let r = c.get("/200", &[]);
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty(), "{r:?}");
    assert_eq!(r.header("location"), None);

    let r = c.get("/204", &[]);
    assert_eq!(r.status, 204);
    assert!(r.body.is_empty());

    let r = c.get("/301/page?x=1&y=2", &[]);
    assert_eq!(r.status, 301);
    assert_eq!(
        r.header("location"),
        Some("http://test/new/301/page?x=1&y=2")
    );

    let r = c.get("/302", &[]);
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("https://example.com/fixed"));

    for (path, code, reason) in [
        ("/404", 404, "Not Found"),
        ("/418", 418, "I'm a teapot"),
        ("/503", 503, "Service Unavailable"),
    ] {
        let r = c.get(path, &[]);
        assert_eq!(r.status, code, "{path}");
        assert_eq!(r.header("content-type"), Some("text/html"), "{path}");
        let body = r.text();
        assert!(body.contains(&format!("Error {code}")), "{path}: {body:?}");
        assert!(body.contains(reason), "{path}: {body:?}");
    }

    // Every variable `return`'s location may use. `$uri` is decoded and normalised, `$request_uri` is as
    // sent, `$header_*` turns `_` into `-`, absent fields expand to nothing.
    let r = c.request(
        "POST",
        "/vars/a%20b/../c?q=1&q=last",
        &[
            ("X-Forwarded-Proto", "https"),
            ("Cookie", "x=1; sid=s3"),
            ("Content-Type", "text/plain"),
        ],
        b"discarded body",
    );
    assert_eq!(r.status, 307);
    assert_eq!(
        r.header("location"),
        Some(
            "u=/vars/c;h=test;ru=/vars/a%20b/../c?q=1&q=last;m=POST;a=last;hd=https;c=s3;d=$;b=lastx"
        )
    );
    let r = raw(addr, "GET /vars/x HTTP/1.1\r\nHost: Mixed.Case:99\r\n\r\n");
    assert_eq!(
        r.header("location"),
        Some("u=/vars/x;h=mixed.case;ru=/vars/x;m=GET;a=;hd=;c=;d=$;b=x")
    );
    // A decoded CR LF (or space) in `$uri` is percent-encoded: the `Location` field is there, and whole.
    // By Unit's rule a value needing any encoding is encoded whole, so the raw `$request_uri`'s `%` is too.
    let r = c.get("/vars/a%0D%0ASet-Cookie:%20stolen=1", &[]);
    assert_eq!((r.status, r.header("set-cookie")), (307, None), "{r:?}");
    assert_eq!(
        r.header("location"),
        Some(
            "u=/vars/a%0D%0ASet-Cookie:%20stolen=1;h=test;ru=/vars/a%250D%250ASet-Cookie:%2520stolen=1;m=GET;a=;hd=;c=;d=$;b=x"
        )
    );
    // The connection survived a request with a body (rein read and discarded it).
    let r = c.get("/200", &[]);
    assert_eq!(r.status, 200);

    // Unknown variables are refused at configuration time.
    let bad = json!({"listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [{"action": {"return": 301, "location": "$nosuchvar"}}]});
    let (status, body) = rein.api("PUT", "/config", Some(&bad.to_string()));
    assert_eq!(status, 400, "{body}");
}

#[test]
fn rewrite_then_route() {
    let rein = Rein::start();
    let addr = serve_named(
        &rein,
        json!({
            "main": [
                {"match": {"uri": "/old/*"}, "action": {"rewrite": "/new${uri}", "pass": "routes/second"}},
                {"match": {"uri": "/q/*"}, "action": {"rewrite": "/replaced?z=9", "pass": "routes/second"}},
                {"match": {"uri": "/same"}, "action": {"rewrite": "/rewritten/$arg_to", "return": 302, "location": "$uri"}},
                {"match": {"uri": "/climb"}, "action": {"rewrite": "/../../etc/passwd", "pass": "routes/second"}},
                {"match": {"uri": "/enc"}, "action": {"rewrite": "/a%2Fb/%2e%2e/c", "pass": "routes/second"}}
            ],
            "second": [
                // Matched against the rewritten URI only.
                {"match": {"uri": "/old/*"}, "action": ok("saw-old-uri")},
                {"match": {"uri": "/new/old/*"}, "action": {"return": 302, "location": "$uri,$arg_keep"}},
                {"match": {"uri": "/replaced", "arguments": {"z": "9"}}, "action": {"return": 302, "location": "$uri,$arg_z,$arg_orig"}},
                {"match": {"uri": "/a/c"}, "action": {"return": 302, "location": "$uri"}}
            ]
        }),
        json!({}),
    );
    let mut c = Conn::open(addr);
    let r = c.get("/old/page?keep=1", &[]);
    assert_eq!(r.status, 302, "{r:?}");
    // Without a `?` in the rewrite, the original query stays.
    assert_eq!(r.header("location"), Some("/new/old/page,1"));

    let r = c.get("/q/x?orig=1&z=9", &[]);
    assert_eq!(r.status, 302, "{r:?}");
    // With one, the client's query still stands (Unit ignores the rewrite's).
    assert_eq!(r.header("location"), Some("/replaced,9,1"));

    // `rewrite` runs before the action itself: `return` in the same action sees the new `$uri`.
    let r = c.get("/same?to=there", &[]);
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("/rewritten/there"));

    // The rewritten target is decoded and normalised like a received one.
    let r = c.get("/enc", &[]);
    assert_eq!(r.status, 302, "{r:?}");
    assert_eq!(r.header("location"), Some("/a/c"));

    // A rewrite that climbs above the root is refused, not routed.
    let r = c.get("/climb", &[]);
    assert_eq!(r.status, 400, "{r:?}");
}

#[test]
fn response_headers() {
    let rein = Rein::start();
    let www = rein.dir.path().join("www");
    crate::harness::file(&www, "file.txt", b"file body");
    let addr = serve_named(
        &rein,
        json!({
            "main": [
                {"match": {"uri": "/chain/*"}, "action": {"pass": "routes/inner"}},
                {"match": {"uri": "/set"}, "action": {
                    "return": 200,
                    "response_headers": {"X-Uri": "$uri", "X-Arg": "a=$arg_a", "Cache-Control": "no-store", "X-Dollar": "$dollar"}
                }},
                {"match": {"uri": "/redirect"}, "action": {
                    "return": 302, "location": "/elsewhere",
                    "response_headers": {"X-Host": "$host"}
                }},
                {"match": {"uri": "/file.txt"}, "action": {
                    "share": format!("{}$uri", www.display()),
                    "response_headers": {"ETag": null, "Last-Modified": null, "Content-Type": "text/x-custom", "X-Kept": "yes"}
                }},
                {"match": {"uri": "/invalid*"}, "action": {
                    "return": 200,
                    "response_headers": {"X-Bad": "$uri", "X-Good": "ok"}
                }}
            ],
            "inner": [
                {"action": {"return": 200, "response_headers": {"X-Inner": "inner $uri", "Content-Type": "text/plain"}}}
            ]
        }),
        json!({}),
    );
    let mut c = Conn::open(addr);
    // Set, with variables.
    let r = c.get("/set?a=1", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-uri"), Some("/set"));
    assert_eq!(r.header("x-arg"), Some("a=1"));
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert_eq!(r.header("x-dollar"), Some("$"));
    let r = c.get("/redirect", &[]);
    assert_eq!((r.status, r.header("location")), (302, Some("/elsewhere")));
    assert_eq!(r.header("x-host"), Some("test"));

    // `null` removes a header the action produced; a value replaces it.
    let r = c.get("/file.txt", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"file body");
    assert_eq!(r.header("etag"), None, "{r:?}");
    assert_eq!(r.header("last-modified"), None, "{r:?}");
    assert_eq!(r.header("content-type"), Some("text/x-custom"));
    assert_eq!(r.header("x-kept"), Some("yes"));

    // The answering action's headers apply when it was reached through a pass chain.
    let r = c.get("/chain/x", &[]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-inner"), Some("inner /chain/x"));
    assert_eq!(r.header("content-type"), Some("text/plain"));

    // A value that is not a valid header once expanded (a decoded CR LF) is skipped, never split into
    // another header; the other headers are still set.
    let r = c.get("/invalid%0d%0aSet-Cookie:%20evil=1", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-good"), Some("ok"));
    assert_eq!(r.header("x-bad"), None, "{r:?}");
    assert_eq!(r.header("set-cookie"), None, "{r:?}");
}

/// Unit applies `response_headers` only to responses with a status from 200 to 399
/// (`nxt_http_set_headers`: `if (r->status < NXT_HTTP_OK || r->status >= NXT_HTTP_BAD_REQUEST) return`).
#[test]
fn response_headers_skip_error_responses() {
    let rein = Rein::start();
    let addr = rein.serve(json!([
        {"match": {"uri": "/ok"}, "action": {"return": 200, "response_headers": {"X-Set": "1"}}},
        {"match": {"uri": "/teapot"}, "action": {"return": 418, "response_headers": {"X-Set": "1", "Content-Type": null}}},
        {"match": {"uri": "/missing"}, "action": {
            "share": format!("{}/nope$uri", rein.dir.path().display()),
            "response_headers": {"X-Set": "1"}
        }}
    ]));
    let mut c = Conn::open(addr);
    assert_eq!(c.get("/ok", &[]).header("x-set"), Some("1"));
    let r = c.get("/teapot", &[]);
    assert_eq!(r.status, 418);
    assert_eq!(r.header("x-set"), None, "{r:?}");
    assert_eq!(r.header("content-type"), Some("text/html"), "{r:?}");
    let r = c.get("/missing", &[]);
    assert_eq!(r.status, 404);
    assert_eq!(r.header("x-set"), None, "{r:?}");
}

#[test]
fn pass_to_applications_and_upstreams() {
    let rein = Rein::start();
    let addr = rein.serve_with(
        json!([
            {"match": {"uri": "/app"}, "action": {"pass": "applications/app"}},
            {"match": {"uri": "/up"}, "action": {"pass": "upstreams/up"}},
            {"match": {"uri": "/dyn"}, "action": {"pass": "applications/$arg_name"}}
        ]),
        json!({
            // An app that exits at once never becomes ready: requests wait `readiness.timeout`, then 503.
            "applications": {"app": {"type": "external", "executable": "/bin/true", "readiness": {"timeout": 0.3}}},
            "upstreams": {"up": {"servers": {"127.0.0.1:9": {}}, "queue_timeout": 0}}
        }),
    );
    let mut c = Conn::open(addr);
    for (path, status) in [("/app", 503), ("/up", 502), ("/dyn?name=app", 503)] {
        let r = c.get(path, &[]);
        assert_eq!(r.status, status, "{path}: {r:?}");
        assert!(r.text().contains(&format!("Error {status}")), "{path}");
    }
    // A fixed reference to an application or upstream that does not exist is refused.
    for (routes, extra) in [
        (
            json!([{"action": {"pass": "applications/ghost"}}]),
            json!({}),
        ),
        // External apps have no `targets`.
        (
            json!([{"action": {"pass": "applications/app/default"}}]),
            json!({"applications": {"app": {"type": "external", "executable": "/bin/true"}}}),
        ),
        (
            json!([{"action": {"pass": "upstreams/ghost"}}]),
            json!({"upstreams": {"up": {"servers": {"127.0.0.1:9": {}}, "queue_timeout": 0}}}),
        ),
    ] {
        let mut config =
            json!({"listeners": {"127.0.0.1:0": {"pass": "routes"}}, "routes": routes});
        config
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let (status, body) = rein.api("PUT", "/config", Some(&config.to_string()));
        assert_eq!(status, 400, "{config}: {body}");
    }
    // The one server failed its last request, so it is out for a while: no server is available.
    let r = c.get("/up", &[]);
    assert_eq!(r.status, 503);
}

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn access_log_custom_format_and_condition() {
    let rein = Rein::start();
    let log = rein.dir.path().join("access.log");
    let addr = rein.serve_with(
        json!([
            {"match": {"uri": "/ok"}, "action": {"return": 200}},
            {"match": {"uri": "/teapot"}, "action": {"return": 418}}
        ]),
        json!({"access_log": {"path": log.display().to_string(), "format": "$method $uri $status $body_bytes_sent"}}),
    );
    let mut c = Conn::open(addr);
    let ok = c.get("/ok", &[]);
    assert_eq!(ok.status, 200);
    let missing = c.get("/missing", &[]);
    assert_eq!(missing.status, 404);
    let tea = c.request("HEAD", "/teapot", &[], b"");
    assert_eq!(tea.status, 418);
    let want = vec![
        "GET /ok 200 0".to_owned(),
        format!("GET /missing 404 {}", missing.body.len()),
        "HEAD /teapot 418 0".to_owned(),
    ];
    wait_for("three access log lines", || read_lines(&log).len() >= 3);
    assert_eq!(read_lines(&log), want);

    // `if`: lines whose condition expands to empty or `0` are not written.
    let cond_log = rein.dir.path().join("cond.log");
    let addr = rein.serve_with(
        json!([{"action": {"return": 200}}]),
        json!({"access_log": {"path": cond_log.display().to_string(), "format": "$request_uri", "if": "$arg_log"}}),
    );
    let mut c = Conn::open(addr);
    for path in [
        "/a?log=1",
        "/b",
        "/c?log=0",
        "/d?log=",
        "/e?log=yes",
        "/end?log=1",
    ] {
        assert_eq!(c.get(path, &[]).status, 200, "{path}");
    }
    wait_for("the last logged line", || {
        read_lines(&cond_log).iter().any(|l| l == "/end?log=1")
    });
    assert_eq!(
        read_lines(&cond_log),
        ["/a?log=1", "/e?log=yes", "/end?log=1"]
    );

    // `!` inverts the condition.
    let neg_log = rein.dir.path().join("neg.log");
    let addr = rein.serve_with(
        json!([{"action": {"return": 200}}]),
        json!({"access_log": {"path": neg_log.display().to_string(), "format": "$uri", "if": "!$cookie_nolog"}}),
    );
    let mut c = Conn::open(addr);
    c.get("/quiet", &[("Cookie", "nolog=1")]);
    c.get("/loud", &[]);
    c.get("/loud2", &[("Cookie", "nolog=0")]);
    wait_for("the negated log", || read_lines(&neg_log).len() >= 2);
    assert_eq!(read_lines(&neg_log), ["/loud", "/loud2"]);
}

#[test]
fn access_log_default_format() {
    let rein = Rein::start();
    let log = rein.dir.path().join("combined.log");
    let addr = rein.serve_with(
        json!([{"action": {"return": 200}}]),
        json!({"access_log": log.display().to_string()}),
    );
    let mut c = Conn::open(addr);
    c.get(
        "/first?x=1",
        &[
            ("Referer", "http://ref.example/"),
            ("User-Agent", "agent/1.0"),
        ],
    );
    c.get("/second", &[]);
    wait_for("two combined-format lines", || read_lines(&log).len() >= 2);
    let lines = read_lines(&log);
    assert_eq!(lines.len(), 2, "{lines:?}");
    // 127.0.0.1 - - [22/Nov/2026:06:10:28 +0000] "GET /first?x=1 HTTP/1.1" 200 0 "http://ref.example/" "agent/1.0"
    let check = |line: &str, rest: &str| {
        let prefix = "127.0.0.1 - - [";
        assert!(line.starts_with(prefix), "{line}");
        let (time, after) = line[prefix.len()..]
            .split_once("] ")
            .unwrap_or_else(|| panic!("{line}"));
        assert_eq!(after, rest, "{line}");
        // dd/Mon/yyyy:hh:mm:ss +0000
        assert_eq!(time.len(), 26, "{time}");
        assert!(time.ends_with(" +0000"), "{time}");
        let b = time.as_bytes();
        assert_eq!(
            (b[2], b[6], b[11], b[14], b[17]),
            (b'/', b'/', b':', b':', b':'),
            "{time}"
        );
        assert!(
            [
                "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"
            ]
            .contains(&&time[3..6]),
            "{time}"
        );
    };
    check(
        &lines[0],
        "\"GET /first?x=1 HTTP/1.1\" 200 0 \"http://ref.example/\" \"agent/1.0\"",
    );
    check(&lines[1], "\"GET /second HTTP/1.1\" 200 0 \"-\" \"-\"");
}

#[test]
fn server_header() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    let r = get(addr, "/");
    assert_eq!(
        r.header("server"),
        Some(concat!("rein/", env!("CARGO_PKG_VERSION")))
    );
    // Error pages carry it too.
    let addr = rein.serve(json!([{"match": {"uri": "/x"}, "action": {"return": 200}}]));
    assert_eq!(
        get(addr, "/").header("server"),
        Some(concat!("rein/", env!("CARGO_PKG_VERSION")))
    );

    let addr = rein.serve_with(
        json!([{"action": {"return": 200}}]),
        json!({"settings": {"http": {"server_version": false}}}),
    );
    let r = get_with(addr, "/", &[("User-Agent", "t")]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("server"), Some("rein"));
}
