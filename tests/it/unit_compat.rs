//! Unit compatibility: configuration snippets exactly as NGINX Unit's documentation gives them, loaded into
//! rein and, where a request can show it cheaply, checked against the behaviour Unit documents.
//!
//! Each snippet cites its page. Only paths (temp dirs), listener addresses (`*:80` → `127.0.0.1:0`) and
//! addresses of servers the test starts are adapted; a `pass` to an application the test does not run is
//! replaced by a `return` with the same routing, and said so. Snippets for features rein does not have (TLS,
//! other languages, njs) must be refused with a 400 naming the key: see `docs/config.md`, "Unit
//! features rein does not have yet".
//!
//! Sources: UNIT = https://unit.nginx.org/configuration/ (nginx/unit-docs, source/configuration/index.rst);
//! GIST13 = https://gist.github.com/nginx-gists/3841947279722c07e07be2114d3298d1 (Unit 1.13/1.14 blog post);
//! GIST21 = https://gist.github.com/nginx-gists/c1864c7280d7bebd71c79014cb2c9515 (Unit summer 2021 post).

use std::net::SocketAddr;
use std::os::unix::fs::symlink;
use std::path::Path;

use serde_json::{Value, json};

use crate::harness::{Conn, Rein, Response, file, wait_for};

/// PUTs `config` and returns the status and the answer.
fn put(rein: &Rein, config: &Value) -> (u16, Value) {
    rein.api("PUT", "/config", Some(&config.to_string()))
}

/// PUTs a snippet and asserts rein accepted it.
fn accepts(rein: &Rein, what: &str, config: Value) {
    let (status, body) = put(rein, &config);
    assert_eq!(status, 200, "{what}: refused: {body}");
}

/// PUTs a snippet rein does not support and asserts a 400 whose detail starts with `path`.
fn refuses(rein: &Rein, what: &str, config: Value, path: &str) {
    let (status, body) = put(rein, &config);
    assert_eq!(
        status, 400,
        "{what}: expected a refusal, got {status} {body}"
    );
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with(path),
        "{what}: the detail should name {path}: {body}"
    );
}

/// Serves `routes` (a route array or an object of named routes, entered by `pass`) on 127.0.0.1:0.
fn serve(rein: &Rein, pass: &str, routes: Value) -> SocketAddr {
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": pass}},
        "routes": routes,
    }));
    rein.bound("127.0.0.1:0")
}

/// One request with the caller's headers; `Host: test` unless the caller gives one.
fn req(addr: SocketAddr, method: &str, target: &str, headers: &[(&str, &str)]) -> Response {
    let mut head = format!("{method} {target} HTTP/1.1\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str("Host: test\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("Connection: close\r\n\r\n");
    let mut c = Conn::open(addr);
    c.send_raw(head.as_bytes());
    let r = if method == "HEAD" {
        c.read_head_only()
    } else {
        c.read()
    };
    r.unwrap_or_else(|| panic!("no response to {method} {target}"))
}

fn status(addr: SocketAddr, target: &str, headers: &[(&str, &str)]) -> u16 {
    req(addr, "GET", target, headers).status
}

/// A route whose one step matches `m` and answers 200; anything else gets 404 (no step matched).
fn only(m: Value) -> Value {
    json!([{"match": m, "action": {"return": 200}}])
}

/// The snippets of Unit's "Matching conditions" and "Pattern syntax" sections, with requests.
#[test]
fn match_conditions_as_unit_documents_them() {
    let rein = Rein::start();

    // UNIT#configuration-routes-matching ("Arguments vs. query"): names and values, any order, and every
    // occurrence of a repeated argument must match.
    let a = serve(
        &rein,
        "routes",
        only(json!({"arguments": {"key1": "4861", "key2": "a4f3"}})),
    );
    assert_eq!(status(a, "/?key1=4861&key2=a4f3", &[]), 200);
    assert_eq!(status(a, "/?key2=a4f3&key1=4861", &[]), 200);
    assert_eq!(status(a, "/?key1=4861", &[]), 404);
    let a = serve(&rein, "routes", only(json!({"arguments": {"key": "*"}})));
    assert_eq!(status(a, "/?key=4861&key=a4f3", &[]), 200);
    let a = serve(&rein, "routes", only(json!({"arguments": {"key": "a*"}})));
    assert_eq!(status(a, "/?key=4861&key=a4f3", &[]), 404);
    let a = serve(&rein, "routes", only(json!({"query": ["utf8", "utf16"]})));
    assert_eq!(status(a, "/?utf8", &[]), 200);
    assert_eq!(status(a, "/?utf16", &[]), 200);
    assert_eq!(status(a, "/?utf8=1", &[]), 404);

    // UNIT#configuration-routes-matching-resolution: positive patterns, minus the negated ones.
    let a = serve(
        &rein,
        "routes",
        only(json!({"uri": ["!pattern1", "!pattern2", "pattern3"]})),
    );
    assert_eq!(status(a, "/x", &[]), 404);
    let a = serve(
        &rein,
        "routes",
        only(json!({"uri": ["!/pattern1", "!/pattern2", "/pattern*"]})),
    );
    assert_eq!(status(a, "/pattern3", &[]), 200);
    assert_eq!(status(a, "/pattern1", &[]), 404);
    // An object needs every member; an array of objects needs one of them.
    let a = serve(
        &rein,
        "routes",
        only(json!({"arguments": {"arg1": "pattern", "arg2": "pattern"}})),
    );
    assert_eq!(status(a, "/?arg1=pattern&arg2=pattern", &[]), 200);
    assert_eq!(status(a, "/?arg1=pattern", &[]), 404);
    let a = serve(
        &rein,
        "routes",
        only(json!({"arguments": [{"arg1": "pattern"}, {"arg2": "pattern"}]})),
    );
    assert_eq!(status(a, "/?arg2=pattern", &[]), 200);
    assert_eq!(status(a, "/?arg3=pattern", &[]), 404);
    // The example combining every kind (Unit's page has trailing commas, invalid JSON: dropped here).
    let a = serve(
        &rein,
        "routes",
        only(json!({
            "host": "pattern",
            "method": "!pattern",
            "uri": ["pattern", "!pattern"],
            "arguments": {"arg1": "pattern", "arg2": "!pattern"},
            "cookies": [{"cookie1": "pattern"}, {"cookie2": "pattern"}],
            "headers": [{"header1": "pattern"}, {"header2": "pattern", "header3": "pattern"}]
        })),
    );
    assert_eq!(status(a, "/", &[("Host", "pattern")]), 404);
    // "mode=strict and any access argument other than access=full".
    let a = serve(
        &rein,
        "routes",
        only(json!({"arguments": {"mode": "strict", "access": "!full"}})),
    );
    assert_eq!(status(a, "/?mode=strict&access=partial", &[]), 200);
    assert_eq!(status(a, "/?mode=strict&access=full", &[]), 404);
    // "either use gzip and identify as Mozilla/5.0 or list curl as the user agent".
    let a = serve(
        &rein,
        "routes",
        only(json!({"headers": [
            {"Accept-Encoding": "*gzip*", "User-Agent": "Mozilla/5.0*"},
            {"User-Agent": "curl*"}
        ]})),
    );
    let moz = [
        ("Accept-Encoding", "br, gzip"),
        ("User-Agent", "Mozilla/5.0 (X11)"),
    ];
    assert_eq!(status(a, "/", &moz), 200);
    assert_eq!(status(a, "/", &[("User-Agent", "curl/8.0")]), 200);
    assert_eq!(status(a, "/", &[("User-Agent", "Mozilla/5.0 (X11)")]), 404);

    // UNIT#configuration-routes-matching-patterns: percent-encoded patterns, decoded on both sides.
    let a = serve(
        &rein,
        "routes",
        only(json!({"arguments": {"word": "*%C3*"}})),
    );
    assert_eq!(status(a, "/?word=%C3%96l", &[]), 200);
    assert_eq!(status(a, "/?word=Ol", &[]), 404);
    let a = serve(
        &rein,
        "routes",
        only(json!({"query": "%7Efuzzy word search"})),
    );
    assert_eq!(status(a, "/?~fuzzy%20word%20search", &[]), 200);
    // String pattern examples.
    let a = serve(
        &rein,
        "routes",
        only(json!({"uri": "~^/data/www/.*\\.php(/.*)?$"})),
    );
    assert_eq!(status(a, "/data/www/a/b.php/info", &[]), 200);
    assert_eq!(status(a, "/data/www/a/b.phps", &[]), 404);
    let a = serve(&rein, "routes", only(json!({"host": "*.example.com"})));
    assert_eq!(status(a, "/", &[("Host", "www.example.com")]), 200);
    assert_eq!(status(a, "/", &[("Host", "example.com")]), 404);
    let a = serve(&rein, "routes", only(json!({"uri": "/admin/*/*.php"})));
    assert_eq!(status(a, "/admin/x/y.php", &[]), 200);
    assert_eq!(status(a, "/admin/y.php", &[]), 404);
    let a = serve(
        &rein,
        "routes",
        only(json!({"host": ["eu-*.example.com", "!eu-5.example.com"]})),
    );
    assert_eq!(status(a, "/", &[("Host", "eu-4.example.com")]), 200);
    assert_eq!(status(a, "/", &[("Host", "eu-5.example.com")]), 404);
    let a = serve(&rein, "routes", only(json!({"method": ["!HEAD", "!GET"]})));
    assert_eq!(req(a, "POST", "/", &[]).status, 200);
    assert_eq!(req(a, "GET", "/", &[]).status, 404);
    let a = serve(&rein, "routes", only(json!({"uri": "!*/api/*"})));
    assert_eq!(status(a, "/web/x", &[]), 200);
    assert_eq!(status(a, "/v1/api/x", &[]), 404);
    let a = serve(
        &rein,
        "routes",
        only(json!({"uri": ["/articles/*", "!~/articles/\\d{4}-\\d{2}-\\d{2}"]})),
    );
    assert_eq!(status(a, "/articles/hello", &[]), 200);
    assert_eq!(status(a, "/articles/2024-01-31", &[]), 404);
}

/// Address patterns (`source`, `destination`) from Unit's page and its 1.13/1.14 announcement.
#[test]
fn address_patterns_as_unit_documents_them() {
    let rein = Rein::start();
    // UNIT#allow-deny: a non-canonical CIDR block ("10.1.1.0/16") is taken as Unit takes it.
    let a = serve(
        &rein,
        "routes",
        json!([
            {"match": {"source": ["!192.168.1.1", "!10.1.1.0/16", "192.168.1.0/24", "2001:0db8::/32"]},
             "action": {"return": 200}},
            {"action": {"return": 403}}
        ]),
    );
    assert_eq!(
        status(a, "/", &[]),
        403,
        "127.0.0.1 is not on the allow list"
    );
    // UNIT#conf-addr-pattern-examples: IPv4 and IPv6, wildcards, ranges, ports.
    let port = a.port();
    for m in [
        json!({"source": ["192.0.2.1-192.0.2.200", "198.51.100.1-198.51.100.200:8000",
                          "203.0.113.1-203.0.113.200:8080-8090", "*:80"],
               "destination": ["192.0.2.0/24", "198.51.100.0/24:8000", "203.0.113.0/24:8080-8090", "*:80"]}),
        json!({"source": ["2001:0db8::-2001:0db8:aaa9:ffff:ffff:ffff:ffff:ffff",
                          "[2001:0db8:aaaa::-2001:0db8:bbbb::]:8000",
                          "[2001:0db8:bbbb::1-2001:0db8:cccc::]:8080-8090", "*:80"],
               "destination": ["2001:0db8:cccd::/48", "[2001:0db8:ccce::/48]:8000",
                               "[2001:0db8:ccce:ffff::/64]:8080-8090", "*:80"]}),
        json!({"source": ["192.0.2.1-192.0.2.10", "!192.0.2.9"]}),
        json!({"source": ["*:80", "*:443", "*:8000-8080"]}),
        json!({"source": "unix"}),
        // GIST13.
        json!({"source": ["*:8000", "*:0-65535"]}),
        json!({"destination": ["127.0.0.1", "[2002::]:8000", "192.168.0.11:8080-8090"]}),
        json!({"source": ["10.0.0.0/8", "[0ff::/64]:8000", "10.0.0.0/32:8080-8090"]}),
        json!({"destination": ["10.0.0.0-11.1.0.30", "[fe08::-feff::]:8000",
                               "192.168.0.0-192.168.1.101:8080-8090"]}),
    ] {
        let a = serve(&rein, "routes", only(m.clone()));
        assert_eq!(a.port(), port);
        let _ = status(a, "/", &[]);
    }
    // "This matches any of the listed IPv4 or IPv6 addresses": the request arrives on 127.0.0.1.
    let a = serve(
        &rein,
        "routes",
        only(json!({"destination": ["127.0.0.1", "192.168.0.1", "::1", "2001:0db8:1::c0a8:1"]})),
    );
    assert_eq!(status(a, "/", &[]), 200);
    let a = serve(&rein, "routes", only(json!({"source": ["*:0-65535"]})));
    assert_eq!(status(a, "/", &[]), 200);
    let a = serve(&rein, "routes", only(json!({"source": "unix"})));
    assert_eq!(status(a, "/", &[]), 404);
    let a = serve(
        &rein,
        "routes",
        only(json!({"destination": format!("*:{port}")})),
    );
    assert_eq!(status(a, "/", &[]), 200);
}

/// Routes, actions and variables: Unit's examples of named routes, `pass` with variables, `rewrite`,
/// `return` + `location` and `response_headers`.
#[test]
fn actions_and_variables_as_unit_documents_them() {
    let rein = Rein::start();
    // UNIT#configuration-listeners: a pass with percent-encoded slashes names a route with slashes.
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes/slashes%2Fin%2Froute%2Fname"}},
        "routes": {"slashes/in/route/name": []}
    }));
    let a = rein.bound("127.0.0.1:0");
    assert_eq!(status(a, "/", &[]), 404, "an empty route matches nothing");
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes/slashes%2Fin%2Froute%2Fname"}},
        "routes": {"slashes/in/route/name": [{"action": {"return": 204}}]}
    }));
    assert_eq!(status(a, "/", &[]), 204);

    // UNIT#configuration-variables: "routes/${method}_route".
    let a = serve(
        &rein,
        "routes/${method}_route",
        json!({
            "GET_route": [{"action": {"return": 201}}],
            "PUT_route": [{"action": {"return": 202}}],
            "POST_route": [{"action": {"return": 203}}]
        }),
    );
    assert_eq!(req(a, "GET", "/", &[]).status, 201);
    assert_eq!(req(a, "PUT", "/", &[]).status, 202);
    assert_eq!(req(a, "POST", "/", &[]).status, 203);
    assert_eq!(req(a, "HEAD", "/", &[]).status, 404, "no route defined");

    // UNIT#conf-route-examples, the chained one: "main" and "http_site" (apps replaced by returns, the proxy
    // by a closed port).
    let a = serve(
        &rein,
        "routes/main",
        json!({
            "main": [
                {"match": {"scheme": "http"}, "action": {"pass": "routes/http_site"}},
                {"match": {"host": "blog.example.com"}, "action": {"return": 210}},
                {"match": {"uri": ["*.css", "*.jpg", "*.js"]}, "action": {"share": "/nonexistent/static$uri"}}
            ],
            "http_site": [
                {"match": {"uri": "/v2_site/*"}, "action": {"return": 211}},
                {"action": {"return": 212}}
            ]
        }),
    );
    assert_eq!(status(a, "/v2_site/x", &[]), 211);
    assert_eq!(status(a, "/other", &[]), 212);

    // UNIT#configuration-variables: arg_, cookie_ and header_ names as Unit writes them ("the names of the
    // header_* variables are case insensitive"; "the rightmost one is used" for a repeated argument).
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {"return": 200, "response_headers": {
            "X-Arg": "$arg_queryTimeout", "X-Color": "$arg_Color", "X-Cookie": "$cookie_sessionId",
            "X-Ae": "$header_Accept_Encoding"
        }}}]),
    );
    let r = req(
        a,
        "GET",
        "/?queryTimeout=5&Color=Red&Color=Blue",
        &[("Cookie", "sessionId=s1"), ("accept-encoding", "gzip")],
    );
    assert_eq!(r.header("x-arg"), Some("5"));
    assert_eq!(r.header("x-color"), Some("Blue"));
    assert_eq!(r.header("x-cookie"), Some("s1"));
    assert_eq!(r.header("x-ae"), Some("gzip"));

    // UNIT#configuration-rewrite: "prefixes the request URI with /v1 and returns it to routing".
    let a = serve(
        &rein,
        "routes",
        json!([
            {"match": {"uri": "/v1/*"}, "action": {"return": 200, "response_headers": {"X-Uri": "$uri"}}},
            {"action": {"rewrite": "/v1$uri", "pass": "routes"}}
        ]),
    );
    let r = req(a, "GET", "/page?q=1", &[]);
    assert_eq!((r.status, r.header("x-uri")), (200, Some("/v1/page")));
    // The normalising rewrite (app replaced by a return that shows the URI).
    let a = {
        rein.configure(json!({
            "listeners": {"127.0.0.1:0": {"pass": "routes/main"}},
            "routes": {
                "main": [{"match": {"uri": ["/fancyAppA", "/fancyAppB"]},
                          "action": {"rewrite": "/commonBackend", "pass": "routes/backend"}}],
                "backend": [{"action": {"return": 200,
                             "response_headers": {"X-Uri": "$uri", "X-Request-Uri": "$request_uri"}}}]
            }
        }));
        rein.bound("127.0.0.1:0")
    };
    let r = req(a, "GET", "/fancyAppB?x=1", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-uri"), Some("/commonBackend"));
    // "It does not affect the query but changes the uri and $request_uri variables." Unit itself keeps
    // `$request_uri` as received (its test_variables_request_uri and test_rewrite_share), and so does rein.
    assert_eq!(r.header("x-request-uri"), Some("/fancyAppB?x=1"));

    // "Avoid infinite loops": one that never ends is stopped (500) rather than spinning.
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {"rewrite": "/again$uri", "pass": "routes"}}]),
    );
    assert_eq!(status(a, "/x", &[]), 500);

    // UNIT#configuration-return and UNIT#variables-examples.
    let a = serve(
        &rein,
        "routes",
        json!([
            {"match": {"uri": "/admin_console/*"}, "action": {"return": 403}},
            {"match": {"uri": "/return/*"}, "action": {"return": 301, "location": "https://www.example.com"}},
            {"action": {"return": 301, "location": "https://$host$request_uri"}}
        ]),
    );
    assert_eq!(status(a, "/admin_console/x", &[]), 403);
    let r = req(a, "GET", "/return/x", &[]);
    assert_eq!(
        (r.status, r.header("location")),
        (301, Some("https://www.example.com"))
    );
    let r = req(a, "GET", "/a/b?c=d", &[("Host", "Example.com:8080")]);
    assert_eq!(
        (r.status, r.header("location")),
        (301, Some("https://example.com/a/b?c=d"))
    );

    // UNIT#configuration-return, the deny list: "scheme": "http" answers 403 first.
    let a = serve(
        &rein,
        "routes",
        json!([
            {"match": {"scheme": "http"}, "action": {"return": 403}},
            {"match": {"source": ["!192.168.1.1", "!10.1.1.0/16", "192.168.1.0/24", "2001:0db8::/32"]},
             "action": {"return": 403}}
        ]),
    );
    assert_eq!(status(a, "/", &[]), 403);

    // UNIT#configuration-response-headers: set on 2xx, and `$response_header_*` reads what is being sent.
    let a = serve(
        &rein,
        "routes",
        json!([
            {"action": {"return": 200, "response_headers": {
                "Cache-Control": "max-age=60, s-maxage=120",
                "CDN-Cache-Control": "max-age=600",
                "Content-Type": "${response_header_content_type};charset=iso-8859-1"
            }}}
        ]),
    );
    let r = req(a, "GET", "/", &[]);
    assert_eq!(r.header("cache-control"), Some("max-age=60, s-maxage=120"));
    assert_eq!(r.header("cdn-cache-control"), Some("max-age=600"));
    assert!(
        r.header("content-type")
            .is_some_and(|t| t.ends_with(";charset=iso-8859-1")),
        "{r:?}"
    );
}

/// `share` and its options, with files in a temp dir standing for `/www`.
#[test]
fn static_files_as_unit_documents_them() {
    let rein = Rein::start();
    let www = rein.dir.path().join("www");
    let w = www.display().to_string();
    file(&www, "static/default.html", b"default");
    file(&www, "static/a.css", b"css");
    file(&www, "static/a.js", b"js");
    file(&www, "static/a.txt", b"txt");
    file(&www, "static/a.json", b"{}");
    file(&www, "static/b.php", b"<?php");
    file(&www, "static/c.unknownext", b"?");
    file(&www, "storage/common.txt", b"common");
    file(&www, "example.com/site.txt", b"site");
    file(&www, "error_pages/not_found.html", b"not found page");
    file(&www, "index.xml", b"<x/>");
    file(&www, "data/inside.txt", b"inside");
    file(&www, "data/assets/photo.jpg", b"jpg");
    file(&www, "localhost-real/static/index.html", b"index.html");
    symlink("index.html", www.join("localhost-real/static/symlink")).unwrap();
    symlink(www.join("localhost-real"), www.join("localhost")).unwrap();

    // UNIT#configuration-static: "/www/static/$uri" (the doubled slash is compacted).
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {"share": format!("{w}/static/$uri")}}]),
    );
    assert_eq!(req(a, "GET", "/a.txt", &[]).text(), "txt");
    assert_eq!(status(a, "/missing", &[]), 404);
    // An array: "/www/$host$uri", then a fixed not-found page.
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {"share": [
            format!("{w}/$host$uri"), format!("{w}/error_pages/not_found.html")
        ]}}]),
    );
    assert_eq!(
        req(a, "GET", "/site.txt", &[("Host", "example.com")]).text(),
        "site"
    );
    assert_eq!(
        req(a, "GET", "/nope", &[("Host", "example.com")]).text(),
        "not found page"
    );
    // UNIT#variables-examples: "/www/$host$uri", then "/www/storage$uri".
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {"share": [
            format!("{w}/$host$uri"), format!("{w}/storage$uri")
        ]}}]),
    );
    assert_eq!(
        req(a, "GET", "/common.txt", &[("Host", "example.com")]).text(),
        "common"
    );
    // index: "/" serves default.html, with Unit's "MTIME-FILESIZE" ETag.
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {"share": format!("{w}/static$uri"), "index": "default.html"}}]),
    );
    let r = req(a, "GET", "/", &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "default"));
    assert!(
        r.header("etag").is_some_and(|e| e.ends_with("-7\"")),
        "{r:?}"
    );
    assert_eq!(r.header("content-type"), Some("text/html"));
    // The cookie-chosen share of UNIT#variables-examples.
    accepts(
        &rein,
        "share with $cookie_",
        json!({
            "listeners": {"127.0.0.1:0": {"pass": "routes"}},
            "routes": [{"action": {"share": format!("{w}/data/www/$cookie_app_session")}}]
        }),
    );

    // UNIT#configuration-share-mime: types with negation, wildcard and regex.
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {
            "share": format!("{w}/static$uri"),
            "types": ["!text/javascript", "!text/css", "text/*", "~video/3gpp2?"]
        }}]),
    );
    assert_eq!(status(a, "/a.txt", &[]), 200);
    assert_eq!(status(a, "/a.css", &[]), 403);
    assert_eq!(status(a, "/a.js", &[]), 403);
    // With a fallback: the header only on the types listed (Unit's snippet has a trailing comma, dropped).
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {
            "share": format!("{w}/static$uri"),
            "types": ["image/*", "font/*", "text/*"],
            "response_headers": {"Cache-Control": "max-age=1209600"},
            "fallback": {"share": format!("{w}/static$uri")}
        }}]),
    );
    let r = req(a, "GET", "/a.txt", &[]);
    assert_eq!(
        (r.status, r.header("cache-control")),
        (200, Some("max-age=1209600"))
    );
    // "Any other requests will still serve the files, but this time without the header."
    let r = req(a, "GET", "/a.json", &[]);
    assert_eq!((r.status, r.header("cache-control")), (200, None));
    // "!": only types rein knows; an unknown extension's type is "".
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {"share": format!("{w}/static$uri"), "types": ["!"]}}]),
    );
    assert_eq!(status(a, "/a.txt", &[]), 200);
    assert_eq!(status(a, "/c.unknownext", &[]), 403);
    // "!application/x-httpd-php" with a fallback: PHP files go to the app (a return here).
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {
            "share": format!("{w}/static$uri"),
            "types": ["!application/x-httpd-php"],
            "fallback": {"return": 299}
        }}]),
    );
    assert_eq!(status(a, "/a.txt", &[]), 200);
    assert_eq!(status(a, "/b.php", &[]), 299);

    // UNIT#configuration-share-path: chroot, and a path outside it is 403.
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {"share": format!("{w}$uri"), "chroot": format!("{w}/data/")}}]),
    );
    assert_eq!(status(a, "/data/inside.txt", &[]), 200);
    assert_eq!(status(a, "/index.xml", &[]), 403);
    // follow_symlinks false, with and without chroot ("/www/$host/static$uri", $host = localhost, a symlink).
    let share = format!("{w}/$host/static$uri");
    let host = [("Host", "localhost")];
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {"share": share, "chroot": format!("{w}/$host/")}}]),
    );
    assert_eq!(req(a, "GET", "/symlink", &host).text(), "index.html");
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {
            "share": share, "chroot": format!("{w}/$host/"), "follow_symlinks": false
        }}]),
    );
    assert_eq!(req(a, "GET", "/index.html", &host).text(), "index.html");
    assert_eq!(status(a, "/symlink", &host), 403);
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {"share": share, "follow_symlinks": false}}]),
    );
    assert_eq!(
        status(a, "/index.html", &host),
        403,
        "localhost itself is a symlink"
    );
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {
            "share": share, "chroot": format!("{w}/$host/"), "follow_symlinks": false, "traverse_mounts": false
        }}]),
    );
    assert_eq!(status(a, "/index.html", &host), 200);
    // GIST21.
    accepts(
        &rein,
        "chroot, GIST21",
        json!({
            "listeners": {"127.0.0.1:0": {"pass": "routes"}},
            "routes": [{"action": {"share": format!("{w}/data/static/"), "chroot": format!("{w}/data/"),
                                   "follow_symlinks": false, "traverse_mounts": false}}]
        }),
    );

    // UNIT#configuration-fallback: nested fallbacks, share → share with chroot → a proxy (here a return).
    let a = serve(
        &rein,
        "routes",
        json!([{"action": {
            "share": format!("{w}/data/static$uri"),
            "fallback": {
                "share": format!("{w}/storage$uri"),
                "chroot": format!("{w}/"),
                "fallback": {"return": 298}
            }
        }}]),
    );
    assert_eq!(req(a, "GET", "/common.txt", &[]).text(), "common");
    assert_eq!(status(a, "/nothing", &[]), 298);
    // "The request's HTTP method isn't GET or HEAD" is a reason to fall back.
    assert_eq!(req(a, "POST", "/common.txt", &[]).status, 298);
}

/// `proxy` and `upstreams`, with rein's own listeners as the servers behind.
#[test]
fn proxies_and_upstreams_as_unit_documents_them() {
    let rein = Rein::start();
    let sock = rein.dir.path().join("backend.sock");
    let unix = format!("unix:{}", sock.display());
    // The backend: a listener on 127.0.0.2 and one on a Unix socket, both echoing the URI in a header.
    let backend =
        json!([{"action": {"return": 200, "response_headers": {"X-Backend-Uri": "$uri"}}}]);
    rein.configure(json!({
        "listeners": {"127.0.0.2:0": {"pass": "routes/backend"}, unix.clone(): {"pass": "routes/backend"}},
        "routes": {"backend": backend}
    }));
    let b = rein.bound("127.0.0.2:0");
    let routes = json!({
        "backend": backend,
        // UNIT#configuration-proxy (the IPv6 server is a closed port: only its acceptance is checked).
        "main": [
            {"match": {"uri": "/ipv4/*"}, "action": {"proxy": format!("http://{b}")}},
            {"match": {"uri": "/ipv6/*"}, "action": {"proxy": "http://[::1]:9"}},
            {"match": {"uri": "/unix/*"}, "action": {"proxy": format!("http://{unix}")}},
            {"action": {"pass": "upstreams/rr-lb"}}
        ]
    });
    // UNIT#configuration-upstreams: a fractional weight (0.5 gets half the requests of 1).
    let config = json!({
        "listeners": {
            "127.0.0.2:0": {"pass": "routes/backend"},
            unix.clone(): {"pass": "routes/backend"},
            "127.0.0.1:0": {"pass": "routes/main"}
        },
        "routes": routes,
        "upstreams": {"rr-lb": {"servers": {format!("{b}"): {}, "127.0.0.3:9": {"weight": 0.5}}}}
    });
    accepts(&rein, "proxy and upstreams", config.clone());
    let a = rein.bound("127.0.0.1:0");
    assert_eq!(
        req(a, "GET", "/ipv4/x", &[]).header("x-backend-uri"),
        Some("/ipv4/x")
    );
    assert_eq!(
        req(a, "GET", "/unix/y", &[]).header("x-backend-uri"),
        Some("/unix/y")
    );
    // Weights in decimal or scientific notation, "all three values are equal".
    let mut c = config.clone();
    c["upstreams"]["rr-lb"]["servers"] = json!({
        format!("{b}"): {"weight": 1e1}, "127.0.0.3:9": {"weight": 10.0}, "127.0.0.4:9": {"weight": 10}
    });
    accepts(&rein, "weights 1e1, 10.0, 10", c);
}

/// The `forwarded` listener option: UNIT#configuration-listeners-forwarded, with 127.0.0.1 (the test client)
/// added to each `source` so that the headers are trusted.
#[test]
fn forwarded_as_unit_documents_it() {
    let rein = Rein::start();
    let show = json!([
        {"match": {"scheme": "https"}, "action": {"return": 200, "response_headers": {"X-Client": "$remote_addr", "X-Scheme": "https"}}},
        {"action": {"return": 200, "response_headers": {"X-Client": "$remote_addr", "X-Scheme": "http"}}}
    ]);
    let with = |forwarded: Value| {
        rein.configure(json!({
            "listeners": {"127.0.0.1:0": {"pass": "routes", "forwarded": forwarded}},
            "routes": show
        }));
        rein.bound("127.0.0.1:0")
    };
    let a = with(json!({"client_ip": "X-Forwarded-For", "source": [
        "198.51.100.1-198.51.100.254", "!198.51.100.128/26", "203.0.113.195", "127.0.0.1"
    ]}));
    let r = req(a, "GET", "/", &[("X-Forwarded-For", "192.0.2.7")]);
    assert_eq!(r.header("x-client"), Some("192.0.2.7"));
    let a = with(
        json!({"protocol": "X-Forwarded-Proto", "source": ["192.0.2.0/24", "198.51.100.0/24", "127.0.0.1"]}),
    );
    assert_eq!(
        req(a, "GET", "/", &[("X-Forwarded-Proto", "https")]).header("x-scheme"),
        Some("https")
    );
    // Two X-Forwarded-For fields: the rightmost address of the last field, or, recursively, the first
    // untrusted one from the right.
    let two = [
        ("X-Forwarded-For", "192.0.2.18"),
        ("X-Forwarded-For", "203.0.113.195, 198.51.100.178"),
    ];
    let a = with(json!({"client_ip": "X-Forwarded-For", "recursive": false,
                        "source": ["192.0.2.0/24", "198.51.100.0/24", "127.0.0.1"]}));
    assert_eq!(
        req(a, "GET", "/", &two).header("x-client"),
        Some("198.51.100.178")
    );
    let a = with(json!({"client_ip": "X-Forwarded-For", "recursive": true,
                        "source": ["192.0.2.0/24", "198.51.100.0/24", "127.0.0.1"]}));
    assert_eq!(
        req(a, "GET", "/", &two).header("x-client"),
        Some("203.0.113.195")
    );
    // The pre-1.28 "client_ip" object, which "still works": header, recursive, source.
    let a = {
        rein.configure(json!({
            "listeners": {"127.0.0.1:0": {"pass": "routes", "client_ip": {
                "header": "X-Forwarded-For", "recursive": true, "source": ["198.51.100.0/24", "127.0.0.1"]
            }}},
            "routes": show
        }));
        rein.bound("127.0.0.1:0")
    };
    assert_eq!(
        req(a, "GET", "/", &two).header("x-client"),
        Some("203.0.113.195")
    );
    // "backlog" (Unit 1.33).
    accepts(
        &rein,
        "backlog",
        json!({"listeners": {"127.0.0.1:0": {"pass": "routes", "backlog": 1024}}, "routes": []}),
    );
}

/// Applications: Unit's `external` and `python` snippets, run with the test apps.
#[test]
fn applications_as_unit_documents_them() {
    let rein = Rein::start();
    let apps = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps");
    let py = apps.join("python").display().to_string();
    let work = rein.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let run = |name: &str, app: Value| -> SocketAddr {
        rein.configure(json!({
            "listeners": {"127.0.0.1:0": {"pass": format!("applications/{name}")}},
            "applications": {name: app}
        }));
        rein.bound("127.0.0.1:0")
    };
    // UNIT#configuration-python, with path, module, callable and prefix; "python 3" picks the interpreter
    // installed, as "python 3.6" would on a host with 3.6 (the version in "type" is not checked).
    let a = run(
        "cart",
        json!({
            "type": "python 3",
            "processes": 2,
            "working_directory": work.display().to_string(),
            "path": py,
            "module": "wsgi_app",
            "callable": "application",
            "prefix": "/cart",
            "environment": {"DJANGO_SETTINGS_MODULE": "blog.settings.prod", "DB_PORT": "5432"},
            "limits": {"timeout": 10, "requests": 1000},
            "threads": 2,
            "thread_stack_size": 262144,
            "protocol": "wsgi"
        }),
    );
    let r = req(a, "GET", "/cart/env", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let env: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(env["SCRIPT_NAME"], "/cart", "{env}");
    // UNIT#configuration-routes-action, "An example": rewrite + pass, a share array with a fallback to an
    // upstream, a proxy, a redirect (the servers behind are closed ports: acceptance and routing only).
    let www = rein.dir.path().join("www");
    file(&www, "static/assets/a.jpg", b"jpg");
    let w = www.display().to_string();
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [
            {"match": {"uri": ["/v1/*", "/v2/*"]}, "action": {"rewrite": "/app/$uri", "pass": "applications/app"}},
            {"match": {"uri": "~\\.jpe?g$"},
             "action": {"share": [format!("{w}/static$uri"), format!("{w}/static/assets$uri")],
                        "fallback": {"pass": "upstreams/cdn"}}},
            {"match": {"uri": "/proxy/*"}, "action": {"proxy": "http://192.168.0.100:80"}},
            {"match": {"uri": "/return/*"}, "action": {"return": 301, "location": "https://www.example.com"}}
        ],
        "applications": {"app": {"type": "python", "path": py, "module": "wsgi_app"}},
        "upstreams": {"cdn": {"servers": {"127.0.0.3:9": {}}}}
    }));
    let ex = rein.bound("127.0.0.1:0");
    assert_eq!(req(ex, "GET", "/a.jpg", &[]).text(), "jpg");
    assert_eq!(status(ex, "/return/x", &[]), 301);
    let r = req(ex, "GET", "/v1/env", &[]);
    // The app (which knows no such path) says which one it got: the rewritten one.
    let seen = r.text();
    assert!(
        r.status == 404 && seen.contains("/app/") && seen.trim_end().ends_with("/v1/env"),
        "{seen}"
    );

    // UNIT#configuration-proc-mgmt-prcs: the dynamic process object, and the empty one.
    for processes in [
        json!({"max": 10, "spare": 5, "idle_timeout": 20}),
        json!({}),
    ] {
        accepts(
            &rein,
            "processes object",
            json!({
                "listeners": {"127.0.0.1:0": {"pass": "applications/cart"}},
                "applications": {"cart": {"type": "python", "path": py, "module": "wsgi_app", "processes": processes}}
            }),
        );
    }
    // UNIT#configuration-python-targets.
    let app = json!({"type": "python", "path": py, "targets": {
        "front": {"module": "wsgi_targets", "callable": "first"},
        "back": {"module": "wsgi_targets", "callable": "second"}
    }});
    accepts(
        &rein,
        "python targets",
        json!({
            "listeners": {"127.0.0.2:0": {"pass": "applications/python-app/front"}, "127.0.0.1:0": {"pass": "routes"}},
            "routes": [{"match": {"uri": "/back"}, "action": {"pass": "applications/python-app/back"}}],
            "applications": {"python-app": app}
        }),
    );

    // UNIT#configuration-php (options, with the php.ini path adapted) and UNIT#configuration-php-targets.
    let php = apps.join("php").display().to_string();
    let ini = work.join("php.ini");
    std::fs::write(&ini, "").unwrap();
    rein.configure(json!({
        "listeners": {"127.0.0.2:0": {"pass": "applications/php-app/front"}, "127.0.0.1:0": {"pass": "routes"}},
        "routes": [{"match": {"uri": "/back"}, "action": {"pass": "applications/php-app/back"}}],
        "applications": {"php-app": {
            "type": "php",
            "processes": 2,
            "options": {
                "file": ini.display().to_string(),
                "admin": {"memory_limit": "256M", "variables_order": "EGPCS"},
                "user": {"display_errors": "0"}
            },
            "environment": {"PHP_INI_SCAN_DIR": ":/tmp/php.inis/"},
            "targets": {
                "front": {"script": "hello.php", "root": php},
                "back": {"script": "env.php", "root": php}
            }
        }}
    }));
    let front = rein.bound("127.0.0.2:0");
    assert!(
        req(front, "GET", "/anything", &[])
            .text()
            .starts_with("hello:")
    );
    let back = req(rein.bound("127.0.0.1:0"), "GET", "/back", &[]);
    assert_eq!(
        back.header("content-type"),
        Some("application/json"),
        "{}",
        back.text()
    );

    // UNIT#configuration-listeners: "pass": "applications/blogs$uri" picks a target by the URI.
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "applications/php-app$uri"}},
        "applications": {"php-app": {"type": "php", "targets": {
            "front": {"script": "hello.php", "root": php},
            "back": {"script": "env.php", "root": php}
        }}}
    }));
    let by_uri = rein.bound("127.0.0.1:0");
    assert!(
        req(by_uri, "GET", "/front", &[])
            .text()
            .starts_with("hello:")
    );
    assert_eq!(status(by_uri, "/side", &[]), 404, "no such target");

    // https://unit.nginx.org/howto/wordpress/ (source/howto/wordpress.rst): scripts named in the URI and
    // /wp-admin/ run directly, files are shared, anything else goes to index.php. (The howto's share is
    // "/path/to/wordpress/", written before Unit 1.26 made share a file path; "$uri" is appended here, as
    // the howto's later revisions do.)
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes/wordpress"}},
        "routes": {"wordpress": [
            {"match": {"uri": ["*.php", "*.php/*", "/wp-admin/"]},
             "action": {"pass": "applications/wordpress/direct"}},
            {"action": {"share": format!("{php}$uri"),
                        "fallback": {"pass": "applications/wordpress/index"}}}
        ]},
        "applications": {"wordpress": {"type": "php", "targets": {
            "direct": {"root": format!("{php}/")},
            "index": {"root": format!("{php}/"), "script": "index.php"}
        }}}
    }));
    let wp = rein.bound("127.0.0.1:0");
    assert!(
        req(wp, "GET", "/hello.php", &[])
            .text()
            .starts_with("hello:")
    );
    assert_eq!(
        req(wp, "GET", "/style.css", &[]).header("content-type"),
        Some("text/css")
    );
    let front = req(wp, "GET", "/2024/01/a-post/", &[]).text();
    assert!(
        front.starts_with("front|/2024/01/a-post/|/index.php"),
        "{front}"
    );

    // https://unit.nginx.org/howto/express/ (source/howto/express.rst): /usr/bin/env node with Unit's
    // loaders, and an app that calls listen() with no port (plain `http` stands in for Express).
    let express = work.join("express");
    std::fs::create_dir_all(&express).unwrap();
    std::fs::write(
        express.join("app.js"),
        "#!/usr/bin/env node\nconst http = require('http')\n\
         http.createServer((req, res) => res.end('Hello, Express on Unit!')).listen()\n",
    )
    .unwrap();
    let a = run(
        "express",
        json!({
            "type": "external",
            "working_directory": express.display().to_string(),
            "executable": "/usr/bin/env",
            "arguments": ["node", "--loader", "unit-http/loader.mjs", "--require", "unit-http/loader", "app.js"]
        }),
    );
    assert_eq!(req(a, "GET", "/", &[]).text(), "Hello, Express on Unit!");

    // UNIT#configuration-nodejs: "Supply your .js pathname here and start the file itself with a proper
    // shebang", relative to working_directory, for an app that uses `unit-http` (user/group left out: rein is
    // not root here).
    let script = std::fs::read_to_string(apps.join("unit_http_app.js")).unwrap();
    let app_js = work.join("app.js");
    std::fs::write(&app_js, format!("#!/usr/bin/env node\n{script}")).unwrap();
    std::fs::set_permissions(&app_js, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let a = run(
        "node",
        json!({
            "type": "external",
            "working_directory": work.display().to_string(),
            "executable": "app.js",
            "arguments": ["--tmp-files", "/tmp/node-cache"],
            "stdout": "/dev/null"
        }),
    );
    wait_for("the external app", || req(a, "GET", "/", &[]).status == 200);
}

/// `settings` and `access_log`: UNIT#configuration-stngs and UNIT#configuration-access-log.
#[test]
fn settings_and_access_log_as_unit_documents_them() {
    let rein = Rein::start();
    let dir = rein.dir.path();
    let www = dir.join("www");
    file(&www, "main.c", b"int main;");
    let log = dir.join("access.log");
    let routes = json!([{"action": {"share": format!("{}$uri", www.display())}}]);
    // Every `http` option Unit documents (compression and its siblings are below, refused).
    let a = rein.serve_with(routes.clone(), json!({"settings": {"http": {
        "header_read_timeout": 30, "body_read_timeout": 30, "send_timeout": 30, "idle_timeout": 180,
        "max_body_size": 8388608, "discard_unsafe_fields": true, "log_route": false, "server_version": false,
        "static": {"mime_types": {"text/x-code": [".c", ".h"]}}
    }}}));
    let r = req(a, "GET", "/main.c", &[]);
    assert_eq!(r.header("content-type"), Some("text/x-code"));
    // The curl example: PUT '{"text/x-code": [".c", ".h"]}' to .../settings/http/static/mime_types.
    let (code, body) = rein.api(
        "PUT",
        "/config/settings/http/static/mime_types",
        Some(r#"{"text/x-code": [".c", ".h"]}"#),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["success"], "Reconfiguration done.");
    // And curl -X PUT -d '"/var/log/access.log"' .../config/access_log.
    let quoted = serde_json::to_string(&log.display().to_string()).unwrap();
    let (code, body) = rein.api("PUT", "/config/access_log", Some(&quoted));
    assert_eq!(code, 200, "{body}");
    // The string form, then the object form with Unit's default format.
    let lp = log.display().to_string();
    rein.serve_with(routes.clone(), json!({"access_log": lp}));
    let fmt = "$remote_addr - - [$time_local] \"$request_line\" $status $body_bytes_sent \"$header_referer\" \"$header_user_agent\"";
    let a = rein.serve_with(
        routes.clone(),
        json!({"access_log": {"path": lp, "format": fmt}}),
    );
    req(a, "GET", "/main.c", &[("User-Agent", "Godzilla/5.0")]);
    wait_for("the access log line", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("\"GET /main.c HTTP/1.1\" 200 9 \"-\" \"Godzilla/5.0\"")
    });
    // Conditional logging: "if" a session cookie, then "!" for the others.
    let cond = dir.join("cond.log");
    let cp = cond.display().to_string();
    let a = rein.serve_with(
        routes.clone(),
        json!({"access_log": {"if": "$cookie_session", "path": cp, "format": "$uri"}}),
    );
    req(a, "GET", "/no-cookie", &[]);
    req(a, "GET", "/with-cookie", &[("Cookie", "session=abc")]);
    req(a, "GET", "/false-cookie", &[("Cookie", "session=false")]);
    wait_for("the conditional line", || {
        std::fs::read_to_string(&cond)
            .unwrap_or_default()
            .contains("/with-cookie")
    });
    let text = std::fs::read_to_string(&cond).unwrap();
    assert!(!text.contains("/no-cookie"), "{text}");
    // Unit: "if the value is empty, 0, false, null, or undefined, the logs will not be recorded".
    assert!(!text.contains("/false-cookie"), "{text}");
    let a = rein.serve_with(
        routes,
        json!({"access_log": {"if": "!$cookie_session", "path": cp, "format": "$uri"}}),
    );
    req(a, "GET", "/anonymous", &[]);
    wait_for("the inverted line", || {
        std::fs::read_to_string(&cond)
            .unwrap_or_default()
            .contains("/anonymous")
    });
}

/// Unit features outside rein's scope: each refused with a 400 whose detail names the key.
#[test]
fn unit_features_rein_does_not_have_are_refused_by_name() {
    let rein = Rein::start();
    let listener = |extra: Value| {
        let mut l = json!({"pass": "routes"});
        l.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"listeners": {"127.0.0.1:0": l}, "routes": []})
    };
    // UNIT#configuration-listeners-ssl, GIST21.
    refuses(
        &rein,
        "tls",
        listener(json!({"tls": {"certificate": "bundle"}})),
        "listeners/127.0.0.1:0/tls",
    );
    // UNIT#configuration-listeners: Linux abstract sockets.
    refuses(
        &rein,
        "abstract socket",
        json!({"listeners": {"unix:@abstract_socket": {"pass": "routes"}}, "routes": []}),
        "listeners/unix:@abstract_socket",
    );
    let app = |app: Value| json!({"applications": {"a": app}});
    // Other languages: UNIT#configuration-java, -wasm (Ruby: tests/it/ruby.rs; Perl: tests/it/perl.rs).
    refuses(
        &rein,
        "java",
        app(json!({"type": "java", "webapp": "/www/qwk2mart/qwk2mart.war"})),
        "applications/a/type",
    );
    refuses(
        &rein,
        "wasm",
        app(json!({"type": "wasm-wasi-component", "component": "/var/www/app/component.wasm"})),
        "applications/a/type",
    );
    // UNIT#configuration-python: "factory" (Unit 1.33).
    refuses(
        &rein,
        "factory",
        app(json!({"type": "python", "module": "wsgi", "factory": true})),
        "applications/a/factory",
    );
    // UNIT#configuration-stngs: njs modules, telemetry, compression, listen_threads.
    let settings = |s: Value| json!({"settings": s});
    refuses(
        &rein,
        "js_module",
        settings(json!({"js_module": "hello"})),
        "settings/js_module",
    );
    refuses(
        &rein,
        "telemetry",
        settings(
            json!({"telemetry": {"endpoint": "http://example.com/v1/traces", "protocol": "http"}}),
        ),
        "settings/telemetry",
    );
    refuses(
        &rein,
        "compression",
        settings(
            json!({"http": {"compression": {"types": ["text/*"], "compressors": [{"encoding": "gzip"}]}}}),
        ),
        "settings/http/compression",
    );
    refuses(
        &rein,
        "listen_threads",
        settings(json!({"listen_threads": 2})),
        "settings/listen_threads",
    );
    // njs template literals (UNIT scripting): a backtick value is not a template rein can run.
    refuses(
        &rein,
        "njs share",
        json!({"listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [{"action": {"share": "`/www/html${hellonjs.hello(vars)}`"}}]}),
        "routes/0/action/share",
    );
    // A template literal whose `${...}` are rein's own variables must not pass as text with backticks.
    refuses(
        &rein,
        "njs share of plain variables",
        json!({"listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [{"action": {"share": "`/www/html${uri}`"}}]}),
        "routes/0/action/share",
    );
    refuses(
        &rein,
        "njs response header",
        json!({"listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [{"action": {"return": 200, "response_headers": {"X-Host": "`${host}`"}}}]}),
        "routes/0/action/response_headers/X-Host",
    );
    // UNIT#configuration-return: "Integer (000–999)"; codes below 100 are not HTTP statuses.
    refuses(
        &rein,
        "return 0",
        json!({"listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [{"action": {"return": 0}}]}),
        "routes/0/action/return",
    );
    // The JSON access-log format (Unit 1.34) is taken; an njs value in it is not.
    let log = rein.dir.path().join("j.log").display().to_string();
    accepts(
        &rein,
        "JSON log format",
        json!({"access_log": {"path": log.clone(),
        "format": {"remote_addr": "$remote_addr", "time_local": "$time_local", "request_line": "$request_line",
                   "status": "$status", "body_bytes_sent": "$body_bytes_sent",
                   "header_referer": "$header_referer", "header_user_agent": "$header_user_agent"}}}),
    );
    refuses(
        &rein,
        "njs in the JSON log format",
        json!({"access_log": {"path": log, "format": {"uri": "`${uri}`"}}}),
        "access_log/format/uri",
    );
}
