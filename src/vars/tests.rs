//! Tests of templates: parsing, every variable, absent values, and compile errors.

use std::time::{Duration, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue, Method, Version};

use super::format::clf_time;
use super::*;

fn request() -> RequestInfo {
    let mut headers = HeaderMap::new();
    headers.append("accept-encoding", HeaderValue::from_static("gzip"));
    headers.append("user-agent", HeaderValue::from_static("curl/8.0"));
    headers.append("referer", HeaderValue::from_static("https://ref.example/"));
    headers.append("x-multi", HeaderValue::from_static("first"));
    headers.append("x-multi", HeaderValue::from_static("second"));
    headers.append(
        "cookie",
        HeaderValue::from_static("sessionId=abc; app_session=s1"),
    );
    headers.append("cookie", HeaderValue::from_static("sessionId=later"));
    RequestInfo {
        method: Method::POST,
        version: Version::HTTP_11,
        headers,
        request_uri: "/a%20b/../c?Color=Red&Color=Blue&q1=x+y&na%6De=v".to_owned(),
        rewritten: None,
        path: "/c".to_owned(),
        query: "Color=Red&Color=Blue&q1=x+y&na%6De=v".to_owned(),
        host: "example.com.".to_owned(),
        scheme: "https",
        remote: Some("[2001:db8::7]:5000".parse().expect("addr")),
        local: Some("10.0.0.1:443".parse().expect("addr")),
        id: 1,
        head_parsed: true,
    }
}

fn response() -> ResponseInfo {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("text/html"));
    ResponseInfo {
        status: 204,
        body_bytes_sent: 1234,
        headers,
        request_time: Duration::from_millis(1_234),
        // 2026-11-22T06:10:28Z
        started: UNIX_EPOCH + Duration::from_secs(1_795_327_828),
    }
}

fn path() -> JsonPath {
    JsonPath::root()
        .key("routes")
        .index(0)
        .key("action")
        .key("share")
}

fn render(s: &str) -> String {
    let req = request();
    let resp = response();
    let t = Template::compile(s, &path()).expect("compiles");
    t.render(&VarContext {
        req: &req,
        response: Some(&resp),
    })
}

fn render_without_response(s: &str, log: bool) -> String {
    let req = request();
    let t = Template::compile(s, &path()).expect("compiles");
    let ctx = VarContext {
        req: &req,
        response: None,
    };
    let mut out = String::new();
    if log {
        t.render_log_into(&ctx, &mut out);
    } else {
        t.render_into(&ctx, &mut out);
    }
    out
}

fn err(s: &str) -> String {
    Template::compile(s, &path())
        .expect_err("must fail")
        .to_string()
}

#[test]
fn literal_templates() {
    let t = Template::compile("/www/static/", &path()).expect("compiles");
    assert!(t.is_literal());
    assert_eq!(t.source(), "/www/static/");
    assert_eq!(render("/www/static/"), "/www/static/");
    assert_eq!(render(""), "");
    let v = Template::compile("/www$uri", &path()).expect("compiles");
    assert!(!v.is_literal());
    assert_eq!(v.source(), "/www$uri");
}

#[test]
fn the_fixed_prefix_ends_at_the_first_variable() {
    let prefix = |s: &str| {
        Template::compile(s, &path())
            .expect("compiles")
            .fixed_prefix()
            .to_owned()
    };
    assert_eq!(prefix("/www/static/"), "/www/static/");
    assert_eq!(prefix("/www/$host$uri"), "/www/");
    assert_eq!(prefix("/www${uri}"), "/www");
    assert_eq!(prefix("$host/x"), "");
    assert_eq!(prefix("/a$dollar/b"), "/a");
    assert_eq!(prefix(""), "");
}

#[test]
fn request_variables() {
    assert_eq!(render("/www/$host$uri"), "/www/example.com/c");
    assert_eq!(render("$method ${method}_route"), "POST POST_route");
    assert_eq!(
        render("https://$host$request_uri"),
        "https://example.com/a%20b/../c?Color=Red&Color=Blue&q1=x+y&na%6De=v"
    );
    assert_eq!(
        render("$request_line"),
        "POST /a%20b/../c?Color=Red&Color=Blue&q1=x+y&na%6De=v HTTP/1.1"
    );
    assert_eq!(render("$remote_addr"), "2001:db8::7");
    assert_eq!(render("cost: $dollar$dollar{x}"), "cost: $${x}");
}

#[test]
fn field_variables() {
    assert_eq!(
        render("$header_Accept_Encoding|$header_accept_encoding|${header_accept-encoding}"),
        "gzip|gzip|gzip"
    );
    assert_eq!(
        render("$header_user_agent $header_referer"),
        "curl/8.0 https://ref.example/"
    );
    assert_eq!(render("$header_x_multi"), "first");
    assert_eq!(render("$arg_Color"), "Blue", "the rightmost argument wins");
    assert_eq!(render("${arg_q1}|$arg_name"), "x y|v");
    assert_eq!(
        render("[$arg_color]"),
        "[]",
        "argument names are case-sensitive"
    );
    assert_eq!(render("$cookie_sessionId/$cookie_app_session"), "abc/s1");
    assert_eq!(render("[$header_x_absent][$cookie_none]"), "[][]");
}

#[test]
fn response_variables() {
    assert_eq!(
        render("$status $body_bytes_sent $request_time"),
        "204 1234 1.234"
    );
    assert_eq!(
        render("${response_header_content_type};charset=x"),
        "text/html;charset=x"
    );
    assert_eq!(render("$response_header_Content_Type"), "text/html");
    assert_eq!(render("[$time_local]"), "[22/Nov/2026:06:10:28 +0000]");
}

#[test]
fn absent_values_empty_or_dash() {
    let t = "$status|$body_bytes_sent|$request_time|$response_header_x|$header_none|$uri";
    assert_eq!(render_without_response(t, false), "|||||/c");
    assert_eq!(render_without_response(t, true), "-|-|-|-|-|/c");
    assert_eq!(
        render_without_response("$time_local", false).len(),
        "22/Nov/2026:06:10:28 +0000".len()
    );
}

#[test]
fn unix_socket_and_versions() {
    let mut req = request();
    req.remote = None;
    req.version = Version::HTTP_2;
    let t = Template::compile("[$remote_addr] $request_line", &path()).expect("compiles");
    let got = t.render(&VarContext {
        req: &req,
        response: None,
    });
    assert!(got.starts_with("[unix:] POST /a%20b/"), "{got}");
    assert!(got.ends_with(" HTTP/2.0"), "{got}");
}

#[test]
fn request_id_is_32_hex_stable_within_a_request_and_varies_across() {
    let a = render("$request_id");
    assert_eq!(a.len(), 32);
    assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(render("$request_id"), a);
    let mut other = request();
    other.id = 2;
    let t = Template::compile("$request_id", &JsonPath::root()).unwrap();
    let b = t.render(&VarContext {
        req: &other,
        response: None,
    });
    assert_ne!(a, b);
}

#[test]
fn clf_dates() {
    assert_eq!(clf_time(UNIX_EPOCH), "01/Jan/1970:00:00:00 +0000");
    assert_eq!(
        clf_time(UNIX_EPOCH + Duration::from_secs(951_782_400)),
        "29/Feb/2000:00:00:00 +0000"
    );
    assert_eq!(
        clf_time(UNIX_EPOCH + Duration::from_secs(4_102_444_799)),
        "31/Dec/2099:23:59:59 +0000"
    );
}

#[test]
fn errors_name_the_path_and_variable() {
    assert_eq!(
        err("/www/$nosuch"),
        "routes/0/action/share: unknown variable \"nosuch\""
    );
    assert_eq!(render("$uri1"), "/c1", "a digit ends a bare name");
    assert_eq!(
        err("$host_x"),
        "routes/0/action/share: unknown variable \"host_x\""
    );
    assert_eq!(
        err("cost $"),
        "routes/0/action/share: invalid variable at position 5; write $dollar for a literal \"$\""
    );
    assert_eq!(
        err("a$/b"),
        "routes/0/action/share: invalid variable at position 1; write $dollar for a literal \"$\""
    );
    assert_eq!(
        err("${uri"),
        "routes/0/action/share: invalid variable at position 0; write $dollar for a literal \"$\""
    );
    assert_eq!(
        err("${}"),
        "routes/0/action/share: invalid variable at position 0; write $dollar for a literal \"$\""
    );
    assert_eq!(
        err("${u ri}"),
        "routes/0/action/share: invalid variable at position 0; write $dollar for a literal \"$\""
    );
    assert_eq!(
        err("$header_"),
        "routes/0/action/share: unknown variable \"header_\""
    );
    assert_eq!(
        err("$arg_"),
        "routes/0/action/share: unknown variable \"arg_\""
    );
}

#[test]
fn log_values_are_escaped_as_nginx_does() {
    let mut req = request();
    req.path = "/a\n127.0.0.1 - - \"GET /forged\" 200\r\\é\x1b[31m".to_owned();
    req.headers
        .insert("user-agent", HeaderValue::from_static("x\" \"injected"));
    let t = Template::compile("\"$uri\" \"$header_user_agent\"", &path()).expect("compiles");
    let mut out = String::new();
    t.render_log_into(
        &VarContext {
            req: &req,
            response: None,
        },
        &mut out,
    );
    assert_eq!(
        out,
        r#""/a\x0A127.0.0.1 - - \x22GET /forged\x22 200\x0D\x5C\xC3\xA9\x1B[31m" "x\x22 \x22injected""#
    );
    // Outside the log, values are what they are.
    let plain = Template::compile("$uri", &path()).expect("compiles");
    let ctx = VarContext {
        req: &req,
        response: None,
    };
    assert_eq!(plain.render(&ctx), req.path);
}
