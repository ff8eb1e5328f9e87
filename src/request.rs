//! What routing, actions and variables know about a request: its head, parsed once.
//!
//! A [`RequestInfo`] is built from the hyper request head when it arrives. Its `path` is the percent-decoded,
//! normalised path that Unit's `uri` match and `$uri` variable see; `rewrite` replaces it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use http::{HeaderMap, Method, Version, request::Parts};
use percent_encoding::percent_decode;

use crate::uri_escape;

/// Why a request target cannot be routed: both are a 400 to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("the request path climbs above the root")]
    AboveRoot,
    #[error("the request path contains a NUL byte or is not valid UTF-8")]
    BadBytes,
    /// A `%` not followed by two hexadecimal digits: Unit answers 400 rather than guess what was meant.
    #[error("the request path holds a `%` that is not a percent-escape")]
    BadEscape,
}

/// The request head, as routes and variables see it.
#[derive(Debug, Clone)]
pub struct RequestInfo {
    pub method: Method,
    pub version: Version,
    pub headers: HeaderMap,
    /// The request target exactly as received, path and query (`$request_uri`); a `rewrite` leaves it
    /// as it is, as in Unit.
    pub request_uri: String,
    /// The target a `rewrite` made: its encoded path with the original query. `None` until one runs.
    pub rewritten: Option<String>,
    /// The percent-decoded, normalised path (`$uri`).
    pub path: String,
    /// The query string as received, without the `?` (empty when absent); a `rewrite` never changes it.
    pub query: String,
    /// The `Host` header without its port, lowercased (`$host`); empty when absent.
    pub host: String,
    /// `http` or `https`.
    pub scheme: &'static str,
    /// The client's address; `None` on a Unix-socket listener.
    pub remote: Option<SocketAddr>,
    /// The address the request arrived on; `None` on a Unix-socket listener.
    pub local: Option<SocketAddr>,
    /// A number unique to this request within the process (`$request_id` is built from it).
    pub id: u64,
    /// False for a request whose head never arrived whole or could not be parsed, logged with what is known
    /// of it: its method, target and request line are then absent.
    pub head_parsed: bool,
}

/// The request target as the client sent it, when it holds a `#fragment`, which the parsed URI drops:
/// `$request_uri` keeps it, as Unit's does. A request extension.
#[derive(Clone, Debug)]
pub struct RawTarget(pub String);

/// Request numbers: unique within the process; `$request_id` mixes them with a per-process random key.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl RequestInfo {
    /// Builds the routing view of a request head, taking its headers.
    ///
    /// A target that cannot be normalised still yields a view (with the raw path) for the access log, and the
    /// error to answer with.
    pub fn from_parts(
        parts: &mut Parts,
        scheme: &'static str,
        remote: Option<SocketAddr>,
        local: Option<SocketAddr>,
    ) -> (Self, Option<TargetError>) {
        let request_uri = match parts.extensions.remove::<RawTarget>() {
            Some(RawTarget(raw)) => raw,
            None => parts
                .uri
                .path_and_query()
                .map(|pq| pq.as_str().to_owned())
                .unwrap_or_else(|| "/".to_owned()),
        };
        let raw_path = parts.uri.path();
        let (path, error) = match normalize_path(raw_path) {
            Ok(p) => (p, None),
            Err(e) => (raw_path.to_owned(), Some(e)),
        };
        let query = parts.uri.query().unwrap_or("").to_owned();
        let mut headers = std::mem::take(&mut parts.headers);
        host_from_target(&mut headers, &parts.uri);
        let host = host_of(&headers, &parts.uri);
        let info = RequestInfo {
            method: parts.method.clone(),
            version: parts.version,
            headers,
            request_uri,
            rewritten: None,
            path,
            query,
            host,
            scheme,
            remote,
            local,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            head_parsed: true,
        };
        (info, error)
    }

    /// A request of which only the connection is known: its head was cut short, timed out or malformed.
    pub fn unparsed(
        scheme: &'static str,
        remote: Option<SocketAddr>,
        local: Option<SocketAddr>,
    ) -> Self {
        RequestInfo {
            method: Method::GET,
            version: Version::HTTP_11,
            headers: HeaderMap::new(),
            request_uri: String::new(),
            rewritten: None,
            path: String::new(),
            query: String::new(),
            host: String::new(),
            scheme,
            remote,
            local,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            head_parsed: false,
        }
    }

    /// Replaces the path after a `rewrite`, as Unit does: the arguments stay the client's, for later
    /// matches, `$arg_*` and the target sent on, and a query in the new value is ignored. `$request_uri`
    /// stays the target as received.
    ///
    /// The value is a target as a client would send it, so a `%XX` in it is an encoding; bytes a request
    /// line cannot carry (a space or CR LF from the decoded `$uri`, say) are percent-encoded first, so the
    /// target sent on is the path asked for, never a different one.
    pub fn rewrite(&mut self, target: &str) -> Result<(), TargetError> {
        let encoded = uri_escape::request_target(target);
        let raw_path = encoded.split_once('?').map_or(&*encoded, |(p, _)| p);
        self.path = normalize_path(raw_path)?;
        self.rewritten = Some(if self.query.is_empty() {
            raw_path.to_owned()
        } else {
            format!("{raw_path}?{}", self.query)
        });
        Ok(())
    }

    /// The target to send to an upstream or an application: as received, or as the last `rewrite` made it.
    pub fn target(&self) -> &str {
        self.rewritten.as_deref().unwrap_or(&self.request_uri)
    }
}

/// An absolute-form target (`GET http://example.com/ HTTP/1.1`) names the host itself: RFC 9112 §3.2.2 says the
/// received `Host` is then ignored and, by a proxy, replaced with the target's. Replacing it here keeps `$host`,
/// `host` matching and the `Host` sent upstream in agreement with the target, so no two readers of the request
/// disagree on its host.
///
/// Every HTTP/2 request has this form (`:authority`), so the common case, an authority that is already
/// `host[:port]` as it would be rebuilt, is taken as it is, without formatting.
fn host_from_target(headers: &mut HeaderMap, uri: &http::Uri) {
    let Some(authority) = uri.authority() else {
        return;
    };
    let raw = authority.as_str();
    let host = authority_host(raw);
    // Without userinfo, what follows the host is `:port` or nothing; with it, what follows holds the `@`.
    let value = match raw.strip_prefix(host) {
        Some("") => http::HeaderValue::from_str(host),
        Some(port) if port.strip_prefix(':').is_some_and(is_plain_port) => {
            http::HeaderValue::from_str(raw)
        }
        _ => match uri.port_u16() {
            Some(port) => http::HeaderValue::try_from(format!("{host}:{port}")),
            None => http::HeaderValue::from_str(host),
        },
    };
    if let Ok(value) = value {
        headers.insert(http::header::HOST, value);
    }
}

/// The host of an authority (`[userinfo@]host[:port]`), as `http`'s `Authority::host` finds it, by byte
/// searches rather than `str` patterns: every HTTP/2 request has an authority, and it is looked at twice.
pub(crate) fn authority_host(authority: &str) -> &str {
    let bytes = authority.as_bytes();
    let start = bytes
        .iter()
        .rposition(|&b| b == b'@')
        .map_or(0, |at| at + 1);
    let rest = &bytes[start..];
    let len = if rest.first() == Some(&b'[') {
        rest.iter()
            .position(|&b| b == b']')
            .map_or(rest.len(), |end| end + 1)
    } else {
        rest.iter().position(|&b| b == b':').unwrap_or(rest.len())
    };
    // Both ends sit next to ASCII bytes (or at the ends of the string): character boundaries.
    &authority[start..start + len]
}

/// A port written as `u16` would print it: no leading zero, in range.
fn is_plain_port(port: &str) -> bool {
    !port.starts_with('0') && port.parse::<u16>().is_ok()
}

/// `Host` without port and trailing dot, lowercased, as Unit's `$host` and `SERVER_NAME`; falls back to the
/// authority of an absolute-form target.
fn host_of(headers: &HeaderMap, uri: &http::Uri) -> String {
    let raw = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.host())
        .unwrap_or("");
    let name = strip_port(raw);
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        // An IPv6 literal: keep the brackets, drop what follows `]`.
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    // A byte search: the `str` pattern machinery cost more than the rest of this per request.
    match host.bytes().rposition(|b| b == b':') {
        Some(colon) => &host[..colon],
        None => host,
    }
}

/// Percent-decodes a path and resolves `.` and `..` segments and repeated slashes, as Unit does before matching.
///
/// Decoding comes first, so `%2e%2e` and `%2f` cannot smuggle a climb past this check.
pub fn normalize_path(raw: &str) -> Result<String, TargetError> {
    if is_normal(raw) {
        return Ok(raw.to_owned());
    }
    normalize_slow(raw)
}

/// Whether a path is already what [`normalize_path`] would make of it (nearly every request's): it starts
/// with `/`, has nothing to decode, and no empty (but a trailing one), `.` or `..` segment. One pass over
/// the bytes instead of a decode, a split and a rebuild.
fn is_normal(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    if bytes.first() != Some(&b'/') {
        return false;
    }
    let mut start = 1;
    for (i, &b) in bytes.iter().enumerate().skip(1) {
        match b {
            b'%' | 0 => return false,
            b'/' => {
                if matches!(&bytes[start..i], b"" | b"." | b"..") {
                    return false;
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    !matches!(&bytes[start..], b"." | b"..")
}

fn normalize_slow(raw: &str) -> Result<String, TargetError> {
    if !escapes_are_whole(raw.as_bytes()) {
        return Err(TargetError::BadEscape);
    }
    let decoded = percent_decode(raw.as_bytes())
        .decode_utf8()
        .map_err(|_| TargetError::BadBytes)?;
    if decoded.contains('\0') {
        return Err(TargetError::BadBytes);
    }
    let mut segments: Vec<&str> = Vec::new();
    for segment in decoded.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop().ok_or(TargetError::AboveRoot)?;
            }
            s => segments.push(s),
        }
    }
    let trailing = decoded.ends_with('/') || decoded.ends_with("/.") || decoded.ends_with("/..");
    let mut out = String::with_capacity(decoded.len() + 1);
    for s in &segments {
        out.push('/');
        out.push_str(s);
    }
    if out.is_empty() || trailing {
        out.push('/');
    }
    Ok(out)
}

/// Whether every `%` starts a `%XX` escape.
fn escapes_are_whole(bytes: &[u8]) -> bool {
    let mut i = 0;
    while let Some(at) = bytes[i..].iter().position(|&b| b == b'%') {
        let escape = &bytes[i + at + 1..];
        if escape.len() < 2 || !escape[..2].iter().all(u8::is_ascii_hexdigit) {
            return false;
        }
        i += at + 3;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_path_takes_only_paths_that_are_already_normal() {
        let paths = [
            "/",
            "/a",
            "/a/",
            "/a/b",
            "/a/b/",
            "/a.b/c..d/.e/f.",
            "/..a",
            "/a..",
            "//",
            "/a//b",
            "/a/",
            "/.",
            "/..",
            "/a/.",
            "/a/..",
            "/./a",
            "/../a",
            "/a/./b",
            "/a/../b",
            "/a%2fb",
            "/%2e",
            "/a\0b",
            "",
            "a",
            "a/b",
            "/ä/ö",
            "/a b",
            "/a?b",
        ];
        for p in paths {
            let slow = normalize_slow(p);
            if is_normal(p) {
                assert_eq!(slow.as_deref(), Ok(p), "{p:?} taken as normal");
            }
            assert_eq!(normalize_path(p), slow, "{p:?}");
        }
        assert!(is_normal("/a/b/") && is_normal("/") && !is_normal("/a//b") && !is_normal("/a/.."));
    }

    #[test]
    fn normalizes_dots_slashes_and_encodings() {
        assert_eq!(normalize_path("/").unwrap(), "/");
        assert_eq!(normalize_path("/a/./b//c/").unwrap(), "/a/b/c/");
        assert_eq!(normalize_path("/a/../b").unwrap(), "/b");
        assert_eq!(normalize_path("/a/%2e%2e/b").unwrap(), "/b");
        assert_eq!(normalize_path("/a%2fb").unwrap(), "/a/b");
        assert_eq!(normalize_path("/a/..").unwrap(), "/");
        assert_eq!(normalize_path("/%20x").unwrap(), "/ x");
    }

    #[test]
    fn rejects_climbs_and_nul() {
        assert_eq!(normalize_path("/.."), Err(TargetError::AboveRoot));
        assert_eq!(
            normalize_path("/a/%2e%2e/%2e%2e/etc"),
            Err(TargetError::AboveRoot)
        );
        assert_eq!(normalize_path("/a%00b"), Err(TargetError::BadBytes));
        assert_eq!(normalize_path("/%ff"), Err(TargetError::BadBytes));
        for bad in ["/%", "/a%2", "/%zz", "/a%g0b", "/%2f%"] {
            assert_eq!(normalize_path(bad), Err(TargetError::BadEscape), "{bad}");
        }
        assert_eq!(normalize_path("/%25%2F"), Ok("/%/".to_owned()));
    }

    #[test]
    fn an_absolute_form_target_replaces_the_host_header() {
        let mut parts = http::Request::get("http://user@Evil.example:81/x?q")
            .header("host", "good.example")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        let (info, error) = RequestInfo::from_parts(&mut parts, "http", None, None);
        assert_eq!(error, None);
        assert_eq!(info.headers["host"], "Evil.example:81");
        assert_eq!(info.host, "evil.example");
        assert_eq!(info.request_uri, "/x?q");
    }

    #[test]
    fn an_authority_s_host_is_the_one_http_finds() {
        for authority in [
            "a.example",
            "a.example:8443",
            "a.example:",
            "[::1]",
            "[::1]:8443",
            "u:p@a.example:81",
            "u@[::1]:1",
            "xn--d-eka.example:443",
        ] {
            let parsed: http::uri::Authority = authority.parse().expect("valid authority");
            assert_eq!(authority_host(authority), parsed.host(), "{authority}");
        }
    }

    #[test]
    fn the_host_taken_from_a_target_is_host_and_port_as_written_once_canonical() {
        let cases = [
            ("https://a.example/x", "a.example"),
            ("https://a.example:8443/x", "a.example:8443"),
            ("https://[::1]:8443/x", "[::1]:8443"),
            ("https://a.example:08443/x", "a.example:8443"),
            ("https://a.example:/x", "a.example"),
            ("https://u:p@a.example:81/x", "a.example:81"),
        ];
        for (target, host) in cases {
            let mut parts = http::Request::get(target).body(()).unwrap().into_parts().0;
            let (info, _) = RequestInfo::from_parts(&mut parts, "https", None, None);
            assert_eq!(info.headers["host"], host, "{target}");
        }
    }

    /// A plain-HTTP `GET target` with a Host.
    fn get(target: &str) -> RequestInfo {
        let mut parts = http::Request::get(target)
            .header("host", "h")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        RequestInfo::from_parts(&mut parts, "http", None, None).0
    }

    #[test]
    fn a_rewrite_encodes_what_a_target_cannot_carry() {
        let mut info = get("/a%20b%0D%0Ac");
        assert_eq!(info.path, "/a b\r\nc");
        let new = format!("/v1{}?q=x y", info.path);
        info.rewrite(&new).unwrap();
        assert_eq!(info.target(), "/v1/a%20b%0D%0Ac");
        assert_eq!(info.path, "/v1/a b\r\nc");
        assert_eq!(info.query, "", "a rewrite's query is ignored, as in Unit");
        assert_eq!(
            info.request_uri, "/a%20b%0D%0Ac",
            "$request_uri stays as received"
        );
        info.rewrite("/kept%2Fas/is").unwrap();
        assert_eq!(info.target(), "/kept%2Fas/is");
    }

    #[test]
    fn a_rewrite_keeps_the_clients_arguments() {
        let mut info = get("/a?x=1");
        info.rewrite("/new?some").unwrap();
        assert_eq!((info.path.as_str(), info.query.as_str()), ("/new", "x=1"));
        assert_eq!(info.target(), "/new?x=1");
        assert_eq!(info.request_uri, "/a?x=1");
    }

    #[test]
    fn host_loses_port_and_case() {
        assert_eq!(strip_port("Example.com:8080"), "Example.com");
        assert_eq!(strip_port("[::1]:8080"), "[::1]");
        assert_eq!(strip_port("localhost"), "localhost");
    }
}
