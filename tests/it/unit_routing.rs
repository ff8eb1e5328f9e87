//! Unit compatibility of configuration text, routing, variables, static files, upstreams, the access log and
//! `/status`: the places where a Unit user's configuration or client met a different answer from rein than
//! from Unit. Each test cites the Unit behaviour it checks; where Unit's documentation is silent, the comment
//! says what a Unit user's client expects and why.

use serde_json::json;

use crate::harness::{Rein, file, get, wait_for};

// ----- configuration text and the API ---------------------------------------------------------------------

/// Unit reads its configuration with JavaScript-style comments and skips a UTF-8 byte-order mark.
#[test]
fn a_document_with_comments_and_a_byte_order_mark_loads() {
    let rein = Rein::start();
    let text = "\u{FEFF}{\n  // where requests arrive\n  \"listeners\": {\"127.0.0.1:0\": {\"pass\": \"routes\"}},\n  \
                /* every request */ \"routes\": [{\"action\": {\"return\": 204}}]\n}\n";
    let (status, body) = rein.api("PUT", "/config", Some(text));
    assert_eq!(status, 200, "{body}");
    assert_eq!(get(rein.bound("127.0.0.1:0"), "/").status, 204);
    // A syntax error still points at the line the user wrote.
    let (status, body) = rein.api("PUT", "/config/routes", Some("[ /* a\n b */ x ]"));
    assert_eq!(status, 400);
    assert!(
        body["detail"].as_str().unwrap().contains("line 2"),
        "{body}"
    );
}

/// Unit's `PUT` on an array index equal to the array's length appends an element.
#[test]
fn put_at_the_end_of_an_array_appends() {
    let rein = Rein::start();
    let a = rein.serve(json!([{"match": {"uri": "/a"}, "action": {"return": 201}}]));
    let step = json!({"action": {"return": 202}}).to_string();
    let (status, body) = rein.api("PUT", "/config/routes/1", Some(&step));
    assert_eq!(status, 200, "{body}");
    assert_eq!(get(a, "/b").status, 202);
    let (status, _) = rein.api("PUT", "/config/routes/3", Some(&step));
    assert_eq!(status, 404);
}

/// Unit's listener option from before `pass` existed, `"application": "NAME"`, which Unit still takes.
#[test]
fn a_listener_with_the_old_application_option_serves_the_app() {
    let rein = Rein::start();
    let js = "require('http').createServer((q, s) => s.end('app')).listen({fd: 3})";
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"application": "a"}},
        "applications": {"a": {"type": "external", "executable": "node", "arguments": ["-e", js]}},
    }));
    let a = rein.bound("127.0.0.1:0");
    wait_for("the app", || get(a, "/").text() == "app");
    let (status, body) = rein.api(
        "PUT",
        "/config/listeners",
        Some(&json!({"127.0.0.1:0": {"application": "nope"}}).to_string()),
    );
    assert_eq!(status, 400);
    assert!(
        body["detail"].as_str().unwrap().contains("application"),
        "{body}"
    );
}

// ----- static files ---------------------------------------------------------------------------------------

/// Unit's own MIME table: `.xml` is `application/xml`, and a type Unit does not know gets no `Content-Type`
/// at all. `mime_types` entries match case-insensitively, bare names (`README`) included, and an extension
/// declared twice, case aside, is refused.
#[test]
fn static_files_have_the_types_unit_gives_them() {
    let rein = Rein::start();
    let www = rein.dir.path().join("www");
    for name in [
        "a.xml",
        "a.js",
        "a.unknownext",
        "Makefile",
        "readme",
        "app.LOG",
    ] {
        file(&www, name, b"x");
    }
    let share = json!([{"action": {"share": format!("{}$uri", www.display())}}]);
    let a = rein.serve_with(
        share.clone(),
        json!({"settings": {"http": {"static": {"mime_types": {"text/plain": ["README", ".log"]}}}}}),
    );
    let ctype = |p: &str| get(a, p).header("content-type").map(str::to_owned);
    assert_eq!(ctype("/a.xml").as_deref(), Some("application/xml"));
    assert_eq!(ctype("/a.js").as_deref(), Some("application/javascript"));
    assert_eq!(ctype("/a.unknownext"), None);
    assert_eq!(ctype("/Makefile"), None);
    assert_eq!(ctype("/readme").as_deref(), Some("text/plain"));
    assert_eq!(ctype("/app.LOG").as_deref(), Some("text/plain"));
    let twice = json!({"text/plain": [".log"], "text/x-log": [".LOG"]});
    let (status, body) = rein.api(
        "PUT",
        "/config/settings/http/static/mime_types",
        Some(&twice.to_string()),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("mime_types/text/x-log"),
        "{body}"
    );
}

/// Unit tests `types` against the share path, before looking for the file, and serves the index of a path
/// ending in `/` whatever its type.
#[test]
fn types_apply_to_the_share_path_not_to_the_index() {
    let rein = Rein::start();
    let www = rein.dir.path().join("www");
    file(&www, "index.html", b"index");
    file(&www, "a.txt", b"text");
    let a = rein.serve(json!([{"action": {
        "share": format!("{}$uri", www.display()),
        "types": ["text/plain"]
    }}]));
    assert_eq!(get(a, "/").text(), "index");
    assert_eq!(get(a, "/a.txt").text(), "text");
    assert_eq!(get(a, "/index.html").status, 403);
    assert_eq!(get(a, "/missing.html").status, 403);
}

/// A Unix socket under a share is 404 (Unit: the open's ENXIO), and a share naming a directory without a
/// trailing slash is Unit's 301 to the request path plus `/`, for `GET /` too.
#[test]
fn sockets_are_not_found_and_a_directory_share_redirects() {
    let rein = Rein::start();
    let www = rein.dir.path().join("www");
    file(&www, "index.html", b"index");
    let _socket = std::os::unix::net::UnixListener::bind(www.join("sock")).unwrap();
    let a = rein.serve(json!([
        {"match": {"uri": "/fixed/*"}, "action": {"share": www.display().to_string()}},
        {"match": {"uri": "/"}, "action": {"share": www.display().to_string()}},
        {"action": {"share": format!("{}$uri", www.display())}}
    ]));
    assert_eq!(get(a, "/sock").status, 404);
    let r = get(a, "/");
    assert_eq!(r.status, 301, "{r:?}");
    assert_eq!(r.header("location"), Some("//"));
    let r = get(a, "/fixed/x?q=1");
    assert_eq!(r.status, 301, "{r:?}");
    assert_eq!(r.header("location"), Some("/fixed/x/?q=1"));
}

// ----- routing --------------------------------------------------------------------------------------------

/// Unit accepts empty arrays in `match` with their plain meaning: no pattern to fail matches anything (`uri`,
/// `method`, `arguments`...), no address matches nobody (`source`, `destination`), and an empty
/// `forwarded.source` trusts no proxy.
#[test]
fn empty_match_arrays_are_taken_with_units_meaning() {
    let rein = Rein::start();
    for k in [
        "uri",
        "method",
        "host",
        "headers",
        "arguments",
        "query",
        "cookies",
    ] {
        let a = rein.serve(json!([
            {"match": {k: []}, "action": {"return": 200}},
            {"action": {"return": 404}}
        ]));
        assert_eq!(get(a, "/x?a=1").status, 200, "{k}");
    }
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {
            "pass": "routes",
            "forwarded": {"client_ip": "X-Forwarded-For", "source": []}
        }},
        "routes": [
            {"match": {"source": []}, "action": {"return": 201}},
            {"match": {"destination": []}, "action": {"return": 202}},
            {"match": {"source": "192.0.2.1"}, "action": {"return": 203}},
            {"action": {"return": 204}}
        ],
    }));
    let a = rein.bound("127.0.0.1:0");
    let r = crate::harness::get_with(a, "/x", &[("X-Forwarded-For", "192.0.2.1")]);
    assert_eq!(
        r.status, 204,
        "no address matches [], and no proxy is trusted"
    );
}

// ----- access log -----------------------------------------------------------------------------------------

/// A client on a Unix-socket listener is `unix:` in `$remote_addr` (the access log's first field), as Unit
/// writes it.
#[test]
fn a_unix_socket_client_is_logged_as_unix() {
    use std::io::{Read, Write};
    let rein = Rein::start();
    let sock = rein.dir.path().join("web.sock");
    let log = rein.dir.path().join("access.log");
    rein.configure(json!({
        "listeners": {format!("unix:{}", sock.display()): {"pass": "routes"}},
        "routes": [{"action": {"return": 204}}],
        "access_log": {"path": log.display().to_string(), "format": "[$remote_addr]"},
    }));
    let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 204"), "{answer}");
    wait_for("the log line", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("[unix:]"))
    });
}

// ----- rewrite and variables ------------------------------------------------------------------------------

/// Unit's `rewrite` changes the path only: later matches, `$arg_*` and the target sent upstream keep the
/// client's arguments (a query in the rewrite is ignored: Unit's test_rewrite_arguments), and `$request_uri`
/// stays the target as the client sent it, a `#fragment` included (Unit's test_variables_request_uri,
/// "rewrite set $request_uri before proxy").
#[test]
fn a_rewrite_keeps_the_arguments_and_the_request_uri() {
    let rein = Rein::start();
    let sock = rein.dir.path().join("b.sock");
    let log = rein.dir.path().join("access.log");
    rein.configure(json!({
        "listeners": {
            "127.0.0.1:0": {"pass": "routes/a"},
            format!("unix:{}", sock.display()): {"pass": "routes/b"},
        },
        "routes": {
            "a": [
                {"match": {"uri": "/args", "arguments": {"arg": "val"}},
                 "action": {"rewrite": "/new?some", "pass": "routes/m"}},
                {"action": {"rewrite": "/foo", "proxy": format!("http://unix:{}", sock.display())}},
            ],
            "m": [
                {"match": {"uri": "/new", "arguments": {"arg": "val"}},
                 "action": {"return": 302, "location": "/x?$arg_arg"}},
                {"action": {"return": 404}},
            ],
            "b": [{"action": {"rewrite": "/bar", "return": 200}}],
        },
        "access_log": {"path": log.display().to_string(), "format": "$remote_addr $uri $request_uri"},
    }));
    let a = rein.bound("127.0.0.1:0");
    let r = get(a, "/args?arg=val");
    assert_eq!(r.status, 302, "{r:?}");
    assert_eq!(r.header("location"), Some("/x?val"));
    assert_eq!(get(a, "/blah%2Fblah?a=b").status, 200);
    wait_for("both log lines", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.contains("unix: /bar /foo?a=b\n") && text.contains("127.0.0.1 /foo /blah%2Fblah?a=b\n")
    });
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("127.0.0.1 /new /args?arg=val\n"), "{text}");
    // A fragment the client sent stays in `$request_uri` (Unit's too); routing does not see it.
    assert_eq!(get(a, "/args?arg=val#top").status, 302);
    logged(&log, "the fragment's line", |l| {
        l == "127.0.0.1 /new /args?arg=val#top"
    });
}

/// The log line's file, and a wait until a line matching `pred` is in it.
fn logged(log: &std::path::Path, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let mut found = String::new();
    wait_for(what, || {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        match text.lines().find(|l| pred(l)) {
            Some(l) => {
                found = l.to_owned();
                true
            }
            None => false,
        }
    });
    found
}

/// `$response_header_*` sees the fields rein's HTTP layer adds as it writes the answer (`Date`,
/// `Content-Length`, `Connection`), as Unit's test_variables_response_header expects
/// (`return@Unit/...@...GMT@0@close` for a `return 200` to a `Connection: close` request).
#[test]
fn response_header_variables_see_the_fields_rein_adds() {
    let rein = Rein::start();
    let log = rein.dir.path().join("access.log");
    let a = rein.serve_with(
        json!([{"action": {"return": 200}}]),
        json!({"access_log": {"path": log.display().to_string(), "format":
            "return@$response_header_server@$response_header_date@$response_header_content_length@$response_header_connection"}}),
    );
    let r = crate::harness::get_with(a, "/", &[("Connection", "close")]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), Some("close"));
    let line = logged(&log, "the log line", |l| l.starts_with("return@"));
    let fields: Vec<&str> = line.split('@').collect();
    assert!(fields[1].starts_with("rein"), "{line}");
    assert!(fields[2].ends_with(" GMT"), "{line}");
    assert_eq!(&fields[3..], ["0", "close"], "{line}");
}

/// `$request_time` counts from the request head's first byte, as Unit's test_variables_request_time checks: a
/// head sent in two parts a second apart takes at least a second. (The pause is the thing measured, not a
/// wait for rein; only a lower bound is asserted.)
#[test]
fn request_time_counts_from_the_first_byte_of_the_head() {
    let rein = Rein::start();
    let log = rein.dir.path().join("access.log");
    let a = rein.serve_with(
        json!([{"action": {"return": 200}}]),
        json!({"access_log": {"path": log.display().to_string(), "format": "$uri $request_time"}}),
    );
    let mut c = crate::harness::Conn::open(a);
    c.send_raw(b"G");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    c.send_raw(b"ET /r_time HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(c.read().map(|r| r.status), Some(200));
    let line = logged(&log, "the log line", |l| l.starts_with("/r_time "));
    let secs: f64 = line["/r_time ".len()..].parse().unwrap();
    assert!(secs >= 1.0, "{line}");
}

/// A `return`'s `Location` is encoded by Unit's rule (test_return_location): sent as it is when already a
/// valid URI reference, else encoded whole, a `?` after the first one included.
#[test]
fn a_location_is_encoded_as_unit_encodes_it() {
    let rein = Rein::start();
    let a = rein.serve(json!([
        {"match": {"uri": "/q"}, "action": {"return": 301, "location": "/?a?b#c#d"}},
        {"match": {"uri": "/kept"}, "action": {"return": 301, "location": "/%20?%20#%20"}},
        {"action": {"return": 301, "location": "$uri?x"}},
    ]));
    assert_eq!(get(a, "/q").header("location"), Some("/?a%3Fb#c%23d"));
    assert_eq!(get(a, "/kept").header("location"), Some("/%20?%20#%20"));
    // The decoded `$uri` holding a space and a `%`: the whole value is encoded.
    assert_eq!(get(a, "/a%20b%25").header("location"), Some("/a%20b%25?x"));
}
