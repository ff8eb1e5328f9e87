use super::*;
use crate::fastcgi::request_params::tests::info;
use crate::fastcgi::{Cgi, request_params};

fn script(cgi: Cgi, name: &str, path_info: &str) -> Script {
    Script {
        name: name.into(),
        path_info: path_info.into(),
        cgi,
        ..Script::default()
    }
}

/// The environ's entries as the adapter splits them: (name, value) pairs.
fn entries(p: &Params) -> Vec<(String, String)> {
    let blob = p.get(NAME).expect("REIN_WSGI_ENVIRON");
    let fields: Vec<String> = blob
        .split(|&b| b == 0)
        .map(|f| String::from_utf8(f.to_vec()).unwrap())
        .collect();
    assert_eq!(fields.len() % 2, 0, "names and values: {fields:?}");
    fields
        .chunks(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect()
}

fn lean(p: &Params) -> Vec<(String, String)> {
    p.iter()
        .map(|(n, v)| {
            let s = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
            (s(n), s(v))
        })
        .collect()
}

/// The one param carries exactly the variables `Lean` sends as pairs, in their order, then the scheme.
#[test]
fn the_environ_in_one_param_is_the_lean_set() {
    let req = info(
        "/app/caf%C3%A9/x?a=1&b=%20",
        &[
            ("host", "Example.com:8443"),
            ("content-type", "text/plain"),
            ("content-length", "3"),
            ("cookie", "a=1"),
            ("cookie", "b=2"),
            ("x-forwarded-for", "1.1.1.1"),
        ],
        Some("[::ffff:10.0.0.9]:51000"),
        Some("10.0.0.1:8443"),
    );
    let mut wsgi = script(Cgi::Wsgi, "/app", "/café/x");
    wsgi.extra.push(("REIN_TARGET".into(), "admin".into()));
    let p = request_params(&req, &wsgi, Some(3));
    assert_eq!(p.iter().count(), 1, "one param, nothing else");
    let got = entries(&p);

    let mut as_pairs = wsgi.clone();
    as_pairs.cgi = Cgi::Lean;
    let mut expect = lean(&request_params(&req, &as_pairs, Some(3)));
    expect.push(("wsgi.url_scheme".into(), "https".into()));
    assert_eq!(got, expect);
    for (name, value) in [
        ("PATH_INFO", "/café/x"),
        ("SCRIPT_NAME", "/app"),
        ("HTTP_COOKIE", "a=1; b=2"),
        ("CONTENT_LENGTH", "3"),
        ("REIN_TARGET", "admin"),
    ] {
        assert!(
            got.contains(&(name.into(), value.into())),
            "{name}: {got:?}"
        );
    }
}

#[test]
fn plain_http_has_no_scheme_entry_and_an_empty_value_is_kept() {
    let req = info("/", &[], None, None);
    let got = entries(&request_params(&req, &script(Cgi::Wsgi, "", "/"), None));
    assert_eq!(got[0], ("SCRIPT_NAME".into(), String::new()));
    assert_eq!(got[1], ("PATH_INFO".into(), "/".into()));
    // `info` builds https requests: the last entry says so; the variables before it are Lean's.
    assert_eq!(got.last().unwrap().0, "wsgi.url_scheme");
    let mut http = info("/", &[], None, None);
    http.scheme = "http";
    let got = entries(&request_params(&http, &script(Cgi::Wsgi, "", "/"), None));
    assert!(
        got.iter()
            .all(|(n, _)| n != "wsgi.url_scheme" && n != "HTTPS")
    );
}

#[test]
fn a_nul_falls_back_to_the_cgi_variables() {
    let req = info("/a%00b", &[("host", "h")], None, None);
    let p = request_params(&req, &script(Cgi::Wsgi, "", "/a\0b"), None);
    assert_eq!(p.get(NAME), None);
    assert_eq!(p.get("PATH_INFO"), Some(&b"/a\0b"[..]));
    assert_eq!(p.get("HTTP_HOST"), Some(&b"h"[..]));
    assert_eq!(p.get("SCRIPT_FILENAME"), None, "the lean set");
}
