use super::*;
use crate::fastcgi::request_params::tests::info;
use crate::fastcgi::{Cgi, request_params};

fn asgi(name: &str, path_info: &str) -> Script {
    Script {
        name: name.into(),
        path_info: path_info.into(),
        cgi: Cgi::Asgi,
        ..Script::default()
    }
}

/// The scope's fields as the adapter splits them.
fn fields(p: &Params) -> Vec<String> {
    let scope = p.get(NAME).expect("REIN_ASGI_SCOPE");
    scope
        .split(|&b| b == 0)
        .map(|f| String::from_utf8(f.to_vec()).unwrap())
        .collect()
}

#[test]
fn the_scope_in_one_param() {
    let req = info(
        "/app/caf%C3%A9/x?a=1&b=%20",
        &[
            ("host", "Example.com:8443"),
            ("content-type", "text/plain"),
            ("content-length", "3"),
            ("cookie", "a=1"),
            ("cookie", "b=2"),
            ("x_real_ip", "kept: no CGI name to collide with"),
        ],
        Some("[::ffff:10.0.0.9]:51000"),
        Some("10.0.0.1:8443"),
    );
    let p = request_params(&req, &asgi("/app", "/café/x"), Some(3));
    assert_eq!(p.iter().count(), 1, "one param, nothing else");
    let expect = [
        "POST",
        "1.1",
        "https",
        "/app/café/x",
        "/app/caf%C3%A9/x",
        "a=1&b=%20",
        "/app",
        "10.0.0.9",
        "51000",
        "example.com",
        "8443",
        "host",
        "Example.com:8443",
        "content-type",
        "text/plain",
        "content-length",
        "3",
        "cookie",
        "a=1",
        "cookie",
        "b=2",
        "x_real_ip",
        "kept: no CGI name to collide with",
    ];
    assert_eq!(fields(&p), expect);
}

#[test]
fn unix_listener_and_no_headers() {
    // No peer, no local address: the client is 127.0.0.1:0 as in CGI; the server, the Host header's.
    let req = info("/", &[("host", "site.test:8080")], None, None);
    let f = fields(&request_params(&req, &asgi("", "/"), None));
    assert_eq!(
        f[..11],
        [
            "POST",
            "1.1",
            "https",
            "/",
            "/",
            "",
            "",
            "127.0.0.1",
            "0",
            "site.test",
            "8080"
        ]
    );
    let req = info("/x", &[], None, None);
    let f = fields(&request_params(&req, &asgi("", "/x"), None));
    assert_eq!(
        f[9..],
        ["localhost", "443"],
        "no Host: localhost and the scheme's port"
    );
}

#[test]
fn the_target_follows_the_scope() {
    let req = info("/", &[], Some("10.0.0.9:1"), Some("10.0.0.1:80"));
    let mut script = asgi("", "/");
    script.extra.push(("REIN_TARGET".into(), "admin".into()));
    let p = request_params(&req, &script, None);
    let names: Vec<&[u8]> = p.iter().map(|(n, _)| n).collect();
    assert_eq!(names, [NAME.as_bytes(), b"REIN_TARGET"]);
    assert_eq!(p.get("REIN_TARGET"), Some(&b"admin"[..]));
}

#[test]
fn a_nul_in_the_path_falls_back_to_the_cgi_variables() {
    let req = info(
        "/a%00b",
        &[("host", "h")],
        Some("10.0.0.9:1"),
        Some("10.0.0.1:80"),
    );
    let p = request_params(&req, &asgi("", "/a\0b"), None);
    assert_eq!(p.get(NAME), None);
    assert_eq!(p.get("PATH_INFO"), Some(&b"/a\0b"[..]));
    assert_eq!(p.get("HTTP_HOST"), Some(&b"h"[..]));
    assert_eq!(p.get("SCRIPT_FILENAME"), None, "the lean set, as for WSGI");
}
