//! Tests of `match` objects: every condition type, their combination, and compile errors with paths.

use http::{HeaderMap, HeaderValue, Method, Version};
use serde_json::json;

use super::*;

pub(crate) fn request(method: &str, target: &str) -> RequestInfo {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    RequestInfo {
        method: Method::from_bytes(method.as_bytes()).expect("method"),
        version: Version::HTTP_11,
        headers: HeaderMap::new(),
        request_uri: target.to_owned(),
        rewritten: None,
        path: crate::request::normalize_path(path).expect("path"),
        query: query.to_owned(),
        host: "example.com".to_owned(),
        scheme: "http",
        remote: Some("192.0.2.10:50000".parse().expect("addr")),
        local: Some("10.0.0.1:8080".parse().expect("addr")),
        id: 1,
        head_parsed: true,
    }
}

fn with_headers(mut req: RequestInfo, headers: &[(&str, &str)]) -> RequestInfo {
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).expect("name");
        req.headers
            .append(name, HeaderValue::from_str(value).expect("value"));
    }
    req
}

fn compile(v: Value) -> Match {
    Match::compile(&v, &JsonPath::root().key("routes").index(0).key("match")).expect("compiles")
}

fn err(v: Value) -> String {
    Match::compile(&v, &JsonPath::root().key("routes").index(0).key("match"))
        .expect_err("must fail")
        .to_string()
}

#[test]
fn empty_match_matches_everything() {
    assert!(compile(json!({})).matches(&request("GET", "/")));
    assert!(Match::always().matches(&request("DELETE", "/x?y")));
}

/// Unit's meaning of empty arrays: no pattern to fail matches any value, no table to fail matches any request,
/// and no address matches no client.
#[test]
fn empty_arrays_mean_what_they_mean_in_unit() {
    let req = request("GET", "/a?x=1");
    for key in [
        "uri",
        "method",
        "host",
        "query",
        "arguments",
        "headers",
        "cookies",
    ] {
        assert!(compile(json!({ key: [] })).matches(&req), "{key}");
    }
    assert!(!compile(json!({"source": []})).matches(&req));
    assert!(!compile(json!({"destination": []})).matches(&req));
}

#[test]
fn method_host_scheme() {
    let m = compile(json!({"method": ["get", "HEAD"], "host": "*.Example.com", "scheme": "HTTPS"}));
    let mut req = request("GET", "/");
    req.host = "www.example.com.".to_owned();
    assert!(!m.matches(&req), "scheme is http");
    req.scheme = "https";
    assert!(m.matches(&req));
    req.method = Method::POST;
    assert!(!m.matches(&req));
    let plain = compile(json!({"host": "example.com"}));
    assert!(plain.matches(&request("GET", "/")));
    let mut other = request("GET", "/");
    other.host = String::new();
    assert!(!plain.matches(&other));
    assert!(compile(json!({"host": ""})).matches(&other));
}

#[test]
fn uri_is_decoded_and_normalised() {
    let m = compile(json!({"uri": ["/a b/*", "!*.secret"]}));
    assert!(m.matches(&request("GET", "/a%20b/./c")));
    assert!(!m.matches(&request("GET", "/a%20b/c.secret")));
    let encoded = compile(json!({"uri": "/caf%C3%A9"}));
    assert!(encoded.matches(&request("GET", "/caf%c3%a9")));
    let case = compile(json!({"uri": "/Admin"}));
    assert!(!case.matches(&request("GET", "/admin")));
}

#[test]
fn query_is_decoded() {
    let m = compile(json!({"query": "%7Efuzzy word search"}));
    assert!(m.matches(&request("GET", "/?~fuzzy%20word+search")));
    assert!(!m.matches(&request("GET", "/?fuzzy")));
    let empty = compile(json!({"query": ""}));
    assert!(empty.matches(&request("GET", "/")));
    let list = compile(json!({"query": ["utf8", "utf16"]}));
    assert!(list.matches(&request("GET", "/?utf16")));
    assert!(!list.matches(&request("GET", "/?utf32")));
}

#[test]
fn arguments_object_and_array() {
    let all = compile(json!({"arguments": {"mode": "strict", "access": "!full"}}));
    assert!(all.matches(&request("GET", "/?mode=strict&access=read")));
    assert!(!all.matches(&request("GET", "/?mode=strict&access=full")));
    assert!(
        !all.matches(&request("GET", "/?mode=strict")),
        "absent argument fails even negated"
    );
    let any = compile(json!({"arguments": [{"a": "1"}, {"b": "2*"}]}));
    assert!(any.matches(&request("GET", "/?b=20")));
    assert!(any.matches(&request("GET", "/?a=1")));
    assert!(!any.matches(&request("GET", "/?a=2&b=3")));
    let decoded = compile(json!({"arguments": {"na%6De": "x y", "w": "*%C3*"}}));
    assert!(decoded.matches(&request("GET", "/?name=x+y&w=%C3%85sa")));
    let case = compile(json!({"arguments": {"Key": "v"}}));
    assert!(!case.matches(&request("GET", "/?key=v")));
}

#[test]
fn repeated_arguments_must_all_match() {
    let star = compile(json!({"arguments": {"key": "*"}}));
    assert!(star.matches(&request("GET", "/?key=4861&key=a4f3")));
    let a = compile(json!({"arguments": {"key": "a*"}}));
    assert!(!a.matches(&request("GET", "/?key=4861&key=a4f3")));
    assert!(a.matches(&request("GET", "/?key=a1&key=a4f3")));
}

#[test]
fn headers_case_and_repeats() {
    let m = compile(json!({"headers": [
        {"Accept-Encoding": "*gzip*", "User-Agent": "Mozilla/5.0*"},
        {"user-agent": "curl*"}
    ]}));
    let firefox = with_headers(
        request("GET", "/"),
        &[
            ("accept-encoding", "GZIP, br"),
            ("user-agent", "mozilla/5.0 x"),
        ],
    );
    assert!(m.matches(&firefox));
    let curl = with_headers(request("GET", "/"), &[("user-agent", "curl/8")]);
    assert!(m.matches(&curl));
    let bare = with_headers(request("GET", "/"), &[("user-agent", "Mozilla/5.0")]);
    assert!(!m.matches(&bare));
    let neg = compile(json!({"headers": {"X-Debug": "!1"}}));
    assert!(
        !neg.matches(&request("GET", "/")),
        "absent header fails even negated"
    );
    assert!(neg.matches(&with_headers(request("GET", "/"), &[("x-debug", "0")])));
    let repeated = with_headers(request("GET", "/"), &[("x-debug", "0"), ("x-debug", "1")]);
    assert!(!neg.matches(&repeated), "every occurrence must match");
}

#[test]
fn cookies_are_case_sensitive() {
    let m = compile(json!({"cookies": [{"cookie1": "yes"}, {"Session": "~^[0-9a-f]+$"}]}));
    let one = with_headers(request("GET", "/"), &[("cookie", "a=b; cookie1=yes")]);
    assert!(m.matches(&one));
    let sess = with_headers(request("GET", "/"), &[("cookie", "Session=00ff")]);
    assert!(m.matches(&sess));
    let wrong_case = with_headers(
        request("GET", "/"),
        &[("cookie", "session=00ff; cookie1=YES")],
    );
    assert!(!m.matches(&wrong_case));
    assert!(!m.matches(&request("GET", "/")));
}

#[test]
fn source_and_destination() {
    let m = compile(json!({"source": ["!192.0.2.9", "192.0.2.0/24"], "destination": "*:8080"}));
    assert!(m.matches(&request("GET", "/")));
    let mut req = request("GET", "/");
    req.remote = Some("192.0.2.9:1".parse().expect("addr"));
    assert!(!m.matches(&req));
    req.remote = Some("192.0.2.8:1".parse().expect("addr"));
    req.local = Some("10.0.0.1:80".parse().expect("addr"));
    assert!(!m.matches(&req));
    let unix = compile(json!({"source": "unix"}));
    req.remote = None;
    assert!(unix.matches(&req));
}

#[test]
fn all_conditions_combine_with_and() {
    let m = compile(json!({
        "host": "example.com",
        "method": "!DELETE",
        "uri": ["/api/*", "!/api/private/*"],
        "arguments": {"v": "2"},
        "cookies": [{"c1": "x"}, {"c2": "y"}],
        "headers": [{"h1": "a"}, {"h2": "b", "h3": "c"}]
    }));
    let good = with_headers(
        request("GET", "/api/x?v=2"),
        &[("cookie", "c2=y"), ("h2", "B"), ("h3", "c")],
    );
    assert!(m.matches(&good));
    let half = with_headers(
        request("GET", "/api/x?v=2"),
        &[("cookie", "c2=y"), ("h2", "b")],
    );
    assert!(!m.matches(&half));
    let private = with_headers(
        request("GET", "/api/private/x?v=2"),
        &[("cookie", "c1=x"), ("h1", "a")],
    );
    assert!(!m.matches(&private));
}

#[test]
fn compile_errors_name_the_path() {
    assert_eq!(
        err(json!({"uri": "/", "url": "/"})),
        "routes/0/match/url: unknown option; expected one of: arguments, cookies, destination, headers, host, method, query, scheme, source, uri"
    );
    assert_eq!(
        err(json!([])),
        "routes/0/match: must be an object, not an array"
    );
    assert_eq!(
        err(json!({"headers": [{"Accept": "*"}, {"Accept": ["ok", "a**"]}]})),
        "routes/0/match/headers/1/Accept/1: a pattern must not contain a double \"**\""
    );
    assert_eq!(
        err(json!({"headers": [{"Accept": "x"}, "Accept"]})),
        "routes/0/match/headers/1: must be an object, not a string"
    );
    assert_eq!(
        err(json!({"headers": {"Bad Name": "x"}})),
        "routes/0/match/headers/Bad Name: not a valid header field name"
    );
    assert_eq!(
        err(json!({"cookies": {"": "x"}})),
        "routes/0/match/cookies/: the name must not be empty"
    );
    assert_eq!(
        err(json!({"arguments": {"a%G1": "x"}})),
        "routes/0/match/arguments/a%G1: the argument name has an invalid percent-encoding"
    );
    assert_eq!(
        err(json!({"arguments": "a=1"})),
        "routes/0/match/arguments: must be an object or an array of objects, not a string"
    );
    assert_eq!(
        err(json!({"scheme": "ftp"})),
        "routes/0/match/scheme: must be either \"http\" or \"https\""
    );
    assert_eq!(
        err(json!({"scheme": ["http"]})),
        "routes/0/match/scheme: must be a string, not an array"
    );
    assert_eq!(
        err(json!({"source": "10.0.0.1/40"})),
        "routes/0/match/source: \"40\" is not a CIDR prefix length (0-32) in address \"10.0.0.1/40\""
    );
    assert!(
        err(json!({"uri": ["/", "~a("]}))
            .starts_with("routes/0/match/uri/1: invalid regular expression")
    );
}
