//! The CGI/1.1 variables of a request, as PHP-FPM and the PHP frameworks expect them (nginx's
//! `fastcgi_params` plus `SCRIPT_FILENAME`, `PATH_INFO` and `PATH_TRANSLATED`), or the part of them that WSGI
//! and ASGI read, for rein's Python adapter ([`Cgi::Lean`]).
//!
//! Choices where CGI leaves room:
//! - On a Unix-socket listener there is no peer address: `REMOTE_ADDR` is `127.0.0.1` and `REMOTE_PORT` `0`
//!   (the peer is on this machine; nginx's `unix:` breaks the many apps that validate `REMOTE_ADDR` as an IP),
//!   and `SERVER_ADDR` is `127.0.0.1`, `SERVER_PORT` the `Host` port or the scheme's default.
//! - Request headers become `HTTP_*`, except `Proxy` (httpoxy: it would become `HTTP_PROXY`, which CGI
//!   libraries read as their outgoing proxy), `Content-Type` and `Content-Length` (their own variables), and
//!   names containing `_`: `X_Real_IP` would map to the same `HTTP_X_REAL_IP` as `X-Real-IP` and could
//!   forge it (nginx drops them by default too).
//! - `Script::extra` comes last: PHP-FPM keeps the last of duplicate names, so it overrides what is here.

use std::borrow::Cow;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use http::header::{CONTENT_LENGTH, CONTENT_TYPE, COOKIE, HOST};
use http::{HeaderName, Version};

use super::params::Params;
use crate::ascii;
use crate::request::RequestInfo;

/// The script a request runs, as the router resolved it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// The file on disk (`SCRIPT_FILENAME`).
    pub filename: PathBuf,
    /// Its URI path (`SCRIPT_NAME`), e.g. `/index.php`.
    pub name: String,
    /// What follows the script in the URI path (`PATH_INFO`), e.g. `/users/7`; empty when nothing does.
    pub path_info: String,
    pub document_root: PathBuf,
    /// User-configured params, sent last.
    pub extra: Vec<(String, String)>,
    /// Which variables the server reads.
    pub cgi: Cgi,
}

/// Which CGI variables go with a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Cgi {
    /// CGI/1.1's full set, as PHP-FPM and other FastCGI responders expect it.
    #[default]
    Full,
    /// What WSGI and ASGI read, for rein's Python adapter: not `SCRIPT_FILENAME`, `PATH_TRANSLATED`,
    /// `DOCUMENT_ROOT`, `DOCUMENT_URI`, `GATEWAY_INTERFACE`, `SERVER_SOFTWARE` (the adapter sets it),
    /// `REQUEST_SCHEME` (`HTTPS` says it) nor `REDIRECT_STATUS`. Every pair is decoded in Python: a GET with
    /// one header carries 12 instead of 19 (ASGI hello: 2.5 µs less of the adapter's 14 µs per request).
    /// What `Asgi` and `Wsgi` fall back to.
    Lean,
    /// The ASGI scope ready-made in one param, for rein's adapter running an ASGI app (see
    /// [`super::asgi_scope`]); `Lean` for a request whose decoded path holds a NUL byte. The headers go as
    /// received, `Content-Length` among them: `body_len` is not used (an ASGI app reads the body to its
    /// last `http.request` event, not to a length).
    Asgi,
    /// `Lean`'s variables as the WSGI environ's entries, ready-made in one param, for rein's adapter running
    /// a WSGI app (see [`super::wsgi_environ`]); `Lean` for a request whose decoded path holds a NUL byte.
    Wsgi,
}

/// Where the variables go: FastCGI name-value pairs ([`Params`]), or the WSGI environ's NUL-separated
/// entries.
pub(super) trait Pairs {
    fn push(&mut self, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>);

    /// A pair that `write` puts together in place: exactly `name_len` bytes of name, then `value_len` bytes
    /// of value.
    fn push_with(&mut self, name_len: usize, value_len: usize, write: impl FnOnce(&mut Vec<u8>));
}

impl Pairs for Params {
    fn push(&mut self, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        Params::push(self, name, value);
    }

    fn push_with(&mut self, name_len: usize, value_len: usize, write: impl FnOnce(&mut Vec<u8>)) {
        Params::push_with(self, name_len, value_len, write);
    }
}

/// The params for `req` running `script`. `body_len` is the exact length of the body that will be sent when
/// the caller knows it (a body buffered because it came chunked: PHP reads `CONTENT_LENGTH` bytes of input
/// and no more); `None` falls back to the `Content-Length` header, and to no `CONTENT_LENGTH` without one.
pub fn request_params(req: &RequestInfo, script: &Script, body_len: Option<u64>) -> Params {
    let ready_made = match script.cgi {
        Cgi::Asgi => super::asgi_scope::params(req, script),
        Cgi::Wsgi => super::wsgi_environ::params(req, script, body_len),
        Cgi::Full | Cgi::Lean => None,
    };
    if let Some(p) = ready_made {
        return p;
    }
    // About what a GET with a few headers needs: the pairs are encoded into one buffer as they come.
    let mut p = Params::with_capacity(1024);
    variables(&mut p, req, script, body_len);
    p
}

/// The variables of `script.cgi`'s set (`Lean`'s for `Asgi` and `Wsgi`), in order, into `p`.
pub(super) fn variables(
    p: &mut impl Pairs,
    req: &RequestInfo,
    script: &Script,
    body_len: Option<u64>,
) {
    p.push("SCRIPT_NAME", &script.name);
    p.push("PATH_INFO", &script.path_info);
    p.push("REQUEST_URI", req.target());
    p.push("QUERY_STRING", &req.query);
    p.push("REQUEST_METHOD", req.method.as_str());
    if let Some(ct) = req.headers.get(CONTENT_TYPE) {
        p.push("CONTENT_TYPE", ct.as_bytes());
    }
    let header_len = req.headers.get(CONTENT_LENGTH).map(|v| v.as_bytes());
    match (body_len, header_len) {
        (Some(n), _) => p.push("CONTENT_LENGTH", ascii::number(n).as_bytes()),
        (None, Some(h)) => p.push("CONTENT_LENGTH", h),
        (None, None) => {}
    }
    p.push("SERVER_PROTOCOL", protocol(req.version));
    addresses(p, req);
    if req.scheme == "https" {
        p.push("HTTPS", "on");
    }
    if script.cgi == Cgi::Full {
        cgi_extras(p, req, script);
    }
    headers(p, req);
    for (name, value) in &script.extra {
        p.push(name, value);
    }
}

/// What CGI/1.1 and PHP add to the variables WSGI and ASGI read.
fn cgi_extras(p: &mut impl Pairs, req: &RequestInfo, script: &Script) {
    let root = script.document_root.as_os_str().as_bytes();
    p.push("SCRIPT_FILENAME", script.filename.as_os_str().as_bytes());
    if !script.path_info.is_empty() {
        let root = root.strip_suffix(b"/").unwrap_or(root);
        p.push(
            "PATH_TRANSLATED",
            [root, script.path_info.as_bytes()].concat(),
        );
    }
    p.push("DOCUMENT_ROOT", root);
    let (name, info) = (script.name.as_bytes(), script.path_info.as_bytes());
    p.push_with("DOCUMENT_URI".len(), name.len() + info.len(), |w| {
        w.extend_from_slice(b"DOCUMENT_URI");
        w.extend_from_slice(name);
        w.extend_from_slice(info);
    });
    p.push("GATEWAY_INTERFACE", "CGI/1.1");
    p.push("SERVER_SOFTWARE", "rein");
    p.push("REQUEST_SCHEME", req.scheme);
    p.push("REDIRECT_STATUS", "200");
}

fn protocol(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

fn addresses(p: &mut impl Pairs, req: &RequestInfo) {
    let (client, client_port) = client(req);
    p.push("REMOTE_ADDR", client.as_bytes());
    p.push("REMOTE_PORT", client_port.as_bytes());
    let local_ip = req.local.map(|a: SocketAddr| a.ip().to_canonical());
    match local_ip {
        Some(ip) => p.push("SERVER_ADDR", ascii::ip(ip).as_bytes()),
        None => p.push("SERVER_ADDR", "127.0.0.1"),
    }
    p.push(
        "SERVER_PORT",
        ascii::number(server_port(req).into()).as_bytes(),
    );
    p.push("SERVER_NAME", server_name(req));
}

/// The client's address and port; on a Unix-socket listener `127.0.0.1` and `0` (see the module's header).
pub(super) fn client(req: &RequestInfo) -> (ascii::Text, ascii::Text) {
    match req.remote {
        Some(a) => (
            ascii::ip(a.ip().to_canonical()),
            ascii::number(a.port().into()),
        ),
        None => (ascii::ip(Ipv4Addr::LOCALHOST.into()), ascii::number(0)),
    }
}

/// The port the request came to: the listener's, else the `Host` header's, else the scheme's default.
pub(super) fn server_port(req: &RequestInfo) -> u16 {
    req.local
        .map(|a| a.port())
        .or_else(|| host_port(req))
        .unwrap_or(if req.scheme == "https" { 443 } else { 80 })
}

/// The `Host` name, else the address the request came to, else `localhost`.
pub(super) fn server_name(req: &RequestInfo) -> Cow<'_, [u8]> {
    match (&*req.host, req.local) {
        ("", Some(a)) => Cow::Owned(ascii::ip(a.ip().to_canonical()).as_bytes().to_vec()),
        ("", None) => Cow::Borrowed(b"localhost"),
        (host, _) => Cow::Borrowed(host.as_bytes()),
    }
}

/// The port of the `Host` header, if it names one.
fn host_port(req: &RequestInfo) -> Option<u16> {
    let host = req.headers.get(HOST)?.to_str().ok()?;
    let (name, port) = host.rsplit_once(':')?;
    // `[::1]` alone has colons but no port.
    if name.starts_with('[') && !name.ends_with(']') {
        return None;
    }
    port.parse().ok()
}

fn headers(p: &mut impl Pairs, req: &RequestInfo) {
    for name in req.headers.keys() {
        if skipped(name) {
            continue;
        }
        let sep: &[u8] = if name == COOKIE { b"; " } else { b", " };
        let values = req.headers.get_all(name);
        let (count, bytes) = values
            .iter()
            .fold((0usize, 0usize), |(n, len), v| (n + 1, len + v.len()));
        let value_len = bytes + sep.len() * count.saturating_sub(1);
        // Written in place: `HTTP_` and the name upper-cased with `-` as `_`, then the values joined.
        p.push_with(5 + name.as_str().len(), value_len, |w| {
            w.extend_from_slice(b"HTTP_");
            w.extend(name.as_str().bytes().map(cgi_name_byte));
            for (i, v) in values.iter().enumerate() {
                if i > 0 {
                    w.extend_from_slice(sep);
                }
                w.extend_from_slice(v.as_bytes());
            }
        });
    }
}

fn cgi_name_byte(b: u8) -> u8 {
    match b {
        b'-' => b'_',
        b => b.to_ascii_uppercase(),
    }
}

fn skipped(name: &HeaderName) -> bool {
    // A name with `_` reaches this point only when `discard_unsafe_fields` is off: the user chose to pass it,
    // as Unit does (`X_Foo` and `X-Foo` then both become `HTTP_X_FOO`).
    name == CONTENT_TYPE || name == CONTENT_LENGTH || name == "proxy"
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A POST over https for `target`, as the router sees it (also used by `asgi_scope`'s tests).
    pub(in crate::fastcgi) fn info(
        target: &str,
        headers: &[(&str, &str)],
        remote: Option<&str>,
        local: Option<&str>,
    ) -> RequestInfo {
        let mut b = http::Request::builder().method("POST").uri(target);
        for (n, v) in headers {
            b = b.header(*n, *v);
        }
        let (mut parts, ()) = b.body(()).unwrap().into_parts();
        let (info, _) = RequestInfo::from_parts(
            &mut parts,
            "https",
            remote.map(|r| r.parse().unwrap()),
            local.map(|l| l.parse().unwrap()),
        );
        info
    }

    fn script() -> Script {
        Script {
            filename: "/srv/www/index.php".into(),
            name: "/index.php".into(),
            path_info: "/users/7".into(),
            document_root: "/srv/www/".into(),
            extra: vec![
                ("APP_ENV".into(), "prod".into()),
                ("HTTPS".into(), "".into()),
            ],
            cgi: Cgi::Full,
        }
    }

    fn get<'a>(p: &'a Params, name: &str) -> Option<&'a str> {
        p.get(name).map(|v| std::str::from_utf8(v).unwrap())
    }

    /// With `discard_unsafe_fields` off the router keeps `X_Foo`, and the application sees it, as in Unit.
    #[test]
    fn underscored_names_kept_by_the_router_are_passed() {
        let req = info("/", &[("host", "a"), ("x_foo", "1")], None, None);
        let p = request_params(&req, &script(), None);
        assert_eq!(get(&p, "HTTP_X_FOO"), Some("1"));
    }

    #[test]
    fn cgi_variables() {
        let req = info(
            "/index.php/users/7?a=1&b=%20",
            &[
                ("host", "Example.com:8443"),
                ("content-type", "application/x-www-form-urlencoded"),
                ("content-length", "11"),
                ("x-forwarded-for", "1.1.1.1"),
                ("x-forwarded-for", "2.2.2.2"),
                ("cookie", "a=1"),
                ("cookie", "b=2"),
                ("proxy", "http://evil"),
                ("accept", "*/*"),
            ],
            Some("[::ffff:10.0.0.9]:51000"),
            Some("10.0.0.1:8443"),
        );
        let p = request_params(&req, &script(), None);
        let expect = [
            ("SCRIPT_FILENAME", "/srv/www/index.php"),
            ("SCRIPT_NAME", "/index.php"),
            ("PATH_INFO", "/users/7"),
            ("PATH_TRANSLATED", "/srv/www/users/7"),
            ("DOCUMENT_ROOT", "/srv/www/"),
            ("REQUEST_URI", "/index.php/users/7?a=1&b=%20"),
            ("DOCUMENT_URI", "/index.php/users/7"),
            ("QUERY_STRING", "a=1&b=%20"),
            ("REQUEST_METHOD", "POST"),
            ("CONTENT_TYPE", "application/x-www-form-urlencoded"),
            ("CONTENT_LENGTH", "11"),
            ("SERVER_PROTOCOL", "HTTP/1.1"),
            ("GATEWAY_INTERFACE", "CGI/1.1"),
            ("SERVER_SOFTWARE", "rein"),
            ("REMOTE_ADDR", "10.0.0.9"),
            ("REMOTE_PORT", "51000"),
            ("SERVER_ADDR", "10.0.0.1"),
            ("SERVER_PORT", "8443"),
            ("SERVER_NAME", "example.com"),
            ("REQUEST_SCHEME", "https"),
            ("REDIRECT_STATUS", "200"),
            ("HTTP_HOST", "Example.com:8443"),
            ("HTTP_X_FORWARDED_FOR", "1.1.1.1, 2.2.2.2"),
            ("HTTP_COOKIE", "a=1; b=2"),
            ("HTTP_ACCEPT", "*/*"),
            ("APP_ENV", "prod"),
        ];
        for (name, value) in expect {
            assert_eq!(get(&p, name), Some(value), "{name}");
        }
        for absent in ["HTTP_PROXY", "HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"] {
            assert_eq!(get(&p, absent), None, "{absent}");
        }
        // `extra` comes last and wins.
        assert_eq!(p.iter().last().unwrap().0, b"HTTPS");
        assert_eq!(get(&p, "HTTPS"), Some(""));
    }

    #[test]
    fn the_python_adapter_gets_what_wsgi_and_asgi_read() {
        let req = info(
            "/app/users?x=1",
            &[("host", "example.com"), ("accept", "*/*")],
            Some("10.0.0.9:51000"),
            Some("10.0.0.1:443"),
        );
        let script = Script {
            name: "/app".into(),
            path_info: "/users".into(),
            cgi: Cgi::Lean,
            ..Script::default()
        };
        let p = request_params(&req, &script, None);
        let names: Vec<&str> = p
            .iter()
            .map(|(n, _)| std::str::from_utf8(n).unwrap())
            .collect();
        let expect = [
            "SCRIPT_NAME",
            "PATH_INFO",
            "REQUEST_URI",
            "QUERY_STRING",
            "REQUEST_METHOD",
            "SERVER_PROTOCOL",
            "REMOTE_ADDR",
            "REMOTE_PORT",
            "SERVER_ADDR",
            "SERVER_PORT",
            "SERVER_NAME",
            "HTTPS",
            "HTTP_HOST",
            "HTTP_ACCEPT",
        ];
        assert_eq!(names, expect);
        assert_eq!(get(&p, "HTTPS"), Some("on"));
        assert_eq!(get(&p, "PATH_INFO"), Some("/users"));
    }

    #[test]
    fn unix_listener_and_known_body_length() {
        let req = info("/", &[("host", "app.test:9000")], None, None);
        let mut s = script();
        s.path_info.clear();
        let p = request_params(&req, &s, Some(42));
        assert_eq!(get(&p, "REMOTE_ADDR"), Some("127.0.0.1"));
        assert_eq!(get(&p, "REMOTE_PORT"), Some("0"));
        assert_eq!(get(&p, "SERVER_ADDR"), Some("127.0.0.1"));
        assert_eq!(get(&p, "SERVER_PORT"), Some("9000"));
        assert_eq!(get(&p, "CONTENT_LENGTH"), Some("42"));
        assert_eq!(get(&p, "PATH_INFO"), Some(""));
        assert_eq!(get(&p, "PATH_TRANSLATED"), None);
        assert_eq!(get(&p, "DOCUMENT_URI"), Some("/index.php"));
        assert_eq!(get(&p, "CONTENT_TYPE"), None);

        let bare = info("/", &[], None, None);
        let p = request_params(&bare, &s, None);
        assert_eq!(get(&p, "CONTENT_LENGTH"), None);
        assert_eq!(get(&p, "SERVER_NAME"), Some("localhost"));
        assert_eq!(get(&p, "SERVER_PORT"), Some("443"));
        let v6 = info("/", &[("host", "[::1]")], None, None);
        assert_eq!(
            get(&request_params(&v6, &s, None), "SERVER_PORT"),
            Some("443")
        );
    }
}
