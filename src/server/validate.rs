//! Request heads hyper accepts but a server must not: ambiguous framing, ambiguous or malformed hosts, and
//! `CONNECT`.
//!
//! These are the request-smuggling and cache-poisoning shapes (RFC 9112 §6.3, §3.2): answered before routing,
//! with the connection closed afterwards so no bytes of a doubtful body are read as a next request.
//! (A head with both `Content-Length` and `Transfer-Encoding: chunked` never reaches this check: hyper frames it
//! by the transfer coding, as RFC 9112 §6.3 says, and drops the `Content-Length`, so no backend can see it.)

use http::{HeaderMap, Method, StatusCode, Version, header, request::Parts};

/// Checks the method, framing and `Host`; an error carries the status to answer.
pub fn check(parts: &Parts) -> Result<(), (StatusCode, &'static str)> {
    if parts.method == Method::CONNECT {
        // rein is no forward proxy: a tunnel request has no route to take (its authority-form target has no
        // path), and a 2xx answer would make hyper treat the connection as a tunnel.
        return Err((StatusCode::NOT_IMPLEMENTED, "CONNECT"));
    }
    let headers = &parts.headers;
    let hosts = headers.get_all(header::HOST).iter().count();
    if hosts > 1 {
        return Err((StatusCode::BAD_REQUEST, "more than one Host header"));
    }
    if headers.get(header::HOST).is_some_and(|h| !valid_host(h)) {
        return Err((StatusCode::BAD_REQUEST, "a Host that is not host[:port]"));
    }
    if parts
        .uri
        .authority()
        .map(|a| crate::request::authority_host(a.as_str()))
        .is_some_and(|h| !valid_host_name(h.as_bytes()))
    {
        return Err((
            StatusCode::BAD_REQUEST,
            "a target whose host is not a name or address",
        ));
    }
    if hosts == 0 && parts.version == Version::HTTP_11 {
        return Err((
            StatusCode::BAD_REQUEST,
            "HTTP/1.1 request without a Host header",
        ));
    }
    if headers.contains_key(header::TRANSFER_ENCODING) {
        if headers.contains_key(header::CONTENT_LENGTH) {
            return Err((
                StatusCode::BAD_REQUEST,
                "both Content-Length and Transfer-Encoding",
            ));
        }
        if !only_chunked(headers) {
            return Err((
                StatusCode::NOT_IMPLEMENTED,
                "a transfer coding other than chunked",
            ));
        }
    }
    Ok(())
}

/// `uri-host [":" port]` (RFC 9112 §3.2), or empty. A value with spaces, a path or userinfo could be read as a
/// different host by a backend, a cache or `$host`, so it is refused (RFC 9112: a 400).
fn valid_host(value: &http::HeaderValue) -> bool {
    let bytes = value.as_bytes();
    if bytes.is_empty() {
        return true;
    }
    let (host, port) = match bytes.iter().position(|&b| b == b']') {
        Some(end) if bytes[0] == b'[' => bytes.split_at(end + 1),
        _ => match bytes.iter().position(|&b| b == b':') {
            Some(colon) => bytes.split_at(colon),
            None => (bytes, &b""[..]),
        },
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(b":")
            .is_some_and(|p| p.iter().all(u8::is_ascii_digit));
    port_ok && valid_host_name(host)
}

/// An IP literal (`[...]`) or a registered name (RFC 3986 §3.2.2) made of non-empty dot-separated labels, one
/// trailing dot allowed (`example.com.`; `$host` drops it). `$host` is pasted into `share` paths, so `.`,
/// `..`, `...` (which would become `..` once its trailing dot is dropped), `a..b`, `/`, `\`, control bytes
/// and percent-encodings (which a backend might decode into any of these) never get this far.
fn valid_host_name(host: &[u8]) -> bool {
    if let Some(literal) = host.strip_prefix(b"[") {
        return literal.strip_suffix(b"]").is_some_and(valid_ip_literal);
    }
    let name = host.strip_suffix(b".").unwrap_or(host);
    !name.is_empty()
        && name
            .split(|&b| b == b'.')
            .all(|label| !label.is_empty() && label.iter().all(|&b| is_name_byte(b)))
}

/// RFC 3986's `unreserved` and `sub-delims`, but not `%`.
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_~!$&'()*+,;=".contains(&b)
}

/// `IPv6address` or `IPvFuture` (`v` HEXDIG+ `.` (unreserved / sub-delims / `:`)+), between the brackets.
fn valid_ip_literal(inner: &[u8]) -> bool {
    if let Some(future) = inner
        .strip_prefix(b"v")
        .or_else(|| inner.strip_prefix(b"V"))
    {
        let Some(dot) = future.iter().position(|&b| b == b'.') else {
            return false;
        };
        let (version, rest) = (&future[..dot], &future[dot + 1..]);
        return !version.is_empty()
            && version.iter().all(u8::is_ascii_hexdigit)
            && !rest.is_empty()
            && rest
                .iter()
                .all(|&b| is_name_byte(b) || b == b'.' || b == b':');
    }
    std::str::from_utf8(inner).is_ok_and(|s| s.parse::<std::net::Ipv6Addr>().is_ok())
}

/// Unit's `large_header_buffer_size`: a field line (`Name: value` and its CR LF) longer than `limit` bytes
/// does not fit one of its buffers and is answered with 431.
pub fn oversized_field(headers: &HeaderMap, limit: usize) -> bool {
    headers
        .iter()
        .any(|(name, value)| name.as_str().len() + value.len() + 4 > limit)
}

fn only_chunked(headers: &HeaderMap) -> bool {
    let mut codings = headers
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("?").split(','))
        .map(str::trim)
        .filter(|c| !c.is_empty());
    matches!((codings.next(), codings.next()), (Some(c), None) if c.eq_ignore_ascii_case("chunked"))
}

/// Unit's `discard_unsafe_fields`: drops fields whose names hold anything but letters, digits and `-`
/// (an underscore can be read as a dash by CGI-style backends and spoof another header).
pub fn discard_unsafe_fields(headers: &mut HeaderMap) {
    let unsafe_names: Vec<_> = headers
        .keys()
        .filter(|name| {
            !name
                .as_str()
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        .cloned()
        .collect();
    for name in unsafe_names {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(req: http::request::Builder) -> Parts {
        req.body(()).unwrap().into_parts().0
    }

    #[test]
    fn host_rules() {
        assert!(check(&parts(http::Request::get("/").header("host", "a"))).is_ok());
        assert_eq!(
            check(&parts(http::Request::get("/"))).unwrap_err().0,
            StatusCode::BAD_REQUEST
        );
        for bad in [
            "a b", "a/b", "user@a", "a:b", "a?b", "a#b", ".", "..", "...", "...:80", "a..b", ".a",
            "a.b..", "a\\b", "%2e%2e", "a%2fb", ":80", "[::1", "[zz]", "[::1]x", "[v1.]", "a\tb",
        ] {
            let req = http::Request::get("/").header("host", bad);
            let status = check(&parts(req)).map_err(|e| e.0);
            assert_eq!(status, Err(StatusCode::BAD_REQUEST), "{bad}");
        }
        for good in [
            "",
            "a.example:8080",
            "[::1]:80",
            "127.0.0.1",
            "xn--bcher-kva.example",
            "example.com.",
            "example.com.:443",
            "a:",
            "under_score-and~tilde",
            "[v1.fe80::a+en1]",
            "[2001:db8::7]",
        ] {
            assert!(
                check(&parts(http::Request::get("/").header("host", good))).is_ok(),
                "{good}"
            );
        }
        let http10 = http::Request::get("/").version(Version::HTTP_10);
        assert!(check(&parts(http10)).is_ok());
        let two = http::Request::get("/")
            .header("host", "a")
            .header("host", "b");
        assert_eq!(check(&parts(two)).unwrap_err().0, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn an_absolute_form_target_needs_a_valid_host_too() {
        for bad in ["http://.../x", "http://a..b/x", "http://..:80/x"] {
            let req = http::Request::get(bad).header("host", "a");
            assert_eq!(
                check(&parts(req)).unwrap_err().0,
                StatusCode::BAD_REQUEST,
                "{bad}"
            );
        }
        for good in [
            "http://a.example./x",
            "http://[::1]:80/x",
            "http://user@a/x",
        ] {
            let req = http::Request::get(good).header("host", "a");
            assert!(check(&parts(req)).is_ok(), "{good}");
        }
    }

    #[test]
    fn connect_is_not_implemented() {
        let connect = http::Request::connect("evil:443").header("host", "evil:443");
        assert_eq!(
            check(&parts(connect)).unwrap_err().0,
            StatusCode::NOT_IMPLEMENTED
        );
    }

    #[test]
    fn framing_rules() {
        let base = || http::Request::post("/").header("host", "a");
        assert!(check(&parts(base().header("transfer-encoding", "chunked"))).is_ok());
        let both = base()
            .header("transfer-encoding", "chunked")
            .header("content-length", "3");
        assert_eq!(check(&parts(both)).unwrap_err().0, StatusCode::BAD_REQUEST);
        let gzip = base().header("transfer-encoding", "gzip, chunked");
        assert_eq!(
            check(&parts(gzip)).unwrap_err().0,
            StatusCode::NOT_IMPLEMENTED
        );
    }

    #[test]
    fn a_field_line_must_fit_one_large_buffer() {
        let mut h = HeaderMap::new();
        h.insert("x-a", "v".repeat(8192 - 7).parse().unwrap());
        assert!(!oversized_field(&h, 8192), "8192 bytes with its CR LF fit");
        h.insert("x-a", "v".repeat(8192 - 6).parse().unwrap());
        assert!(oversized_field(&h, 8192));
    }

    #[test]
    fn drops_unsafe_names() {
        let mut h = HeaderMap::new();
        h.insert("x_forwarded_for", "1".parse().unwrap());
        h.insert("x-ok", "1".parse().unwrap());
        discard_unsafe_fields(&mut h);
        assert!(h.contains_key("x-ok"));
        assert!(!h.contains_key("x_forwarded_for"));
    }
}
