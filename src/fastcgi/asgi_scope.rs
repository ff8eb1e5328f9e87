//! The ASGI scope of a request, ready-made for rein's Python adapter in one FastCGI param, `REIN_ASGI_SCOPE`.
//!
//! Its value is fields separated by NUL bytes, in this order: method, HTTP version (`1.1`, `2`), scheme, path
//! (percent-decoded, UTF-8), raw path (the target as received, up to `?`), query string, root path (the
//! `prefix` the path is under, or empty), client host and port, server name and port, then each header's name
//! (lowercase) and value, one pair per value as received (ASGI keeps duplicates apart; CGI joins them).
//!
//! Why not the CGI variables: the adapter decodes name-value pairs one by one in Python, and for an ASGI hello
//! that decoding and rebuilding the scope from it was more than half of the adapter's own work per request
//! (callgrind on its Python path: 131,000 instructions a request with a dozen pairs, 85,000 with this one
//! split in C). A request with a browser's fifteen headers saves more.
//!
//! No HTTP field holds a NUL byte (the parser refuses them, and `HeaderValue` cannot carry one); only the
//! percent-decoded path can (`%00`). A request whose path does is sent the CGI variables instead
//! ([`params`] returns `None`), which the adapter reads too.

use http::Version;

use super::params::Params;
use super::request_params::{Script, client, server_name, server_port};
use crate::ascii;
use crate::request::RequestInfo;

/// The param's name, which the adapter looks for.
pub const NAME: &str = "REIN_ASGI_SCOPE";

/// The params of a request to an ASGI app: the scope, then `script.extra` (the target); `None` when a field
/// would hold a NUL byte.
pub fn params(req: &RequestInfo, script: &Script) -> Option<Params> {
    let scope = scope(req, script)?;
    let mut p = Params::with_capacity(scope.len() + 32);
    p.push(NAME, &scope);
    p.extend(script.extra.iter().map(|(n, v)| (n, v)));
    Some(p)
}

fn scope(req: &RequestInfo, script: &Script) -> Option<Vec<u8>> {
    let (name, info) = (script.name.as_bytes(), script.path_info.as_bytes());
    if name.contains(&0) || info.contains(&0) {
        return None;
    }
    let target = req.target();
    let raw_path = target.split_once('?').map_or(target, |(path, _)| path);
    let (host, port) = client(req);
    let server = server_name(req);
    let server_port = ascii::number(server_port(req).into());
    let mut out = Vec::with_capacity(256);
    let method = req.method.as_str().as_bytes();
    for field in [method, version(req.version), req.scheme.as_bytes()] {
        out.extend_from_slice(field);
        out.push(0);
    }
    out.extend_from_slice(name); // the path: the root path and the rest
    out.extend_from_slice(info);
    out.push(0);
    let rest = [
        raw_path.as_bytes(),
        req.query.as_bytes(),
        name,
        host.as_bytes(),
        port.as_bytes(),
        &server,
        server_port.as_bytes(),
    ];
    for field in rest {
        out.extend_from_slice(field);
        out.push(0);
    }
    for (header, value) in &req.headers {
        out.extend_from_slice(header.as_str().as_bytes());
        out.push(0);
        out.extend_from_slice(value.as_bytes());
        out.push(0);
    }
    out.pop(); // the last separator
    Some(out)
}

/// ASGI's `http_version`.
fn version(v: Version) -> &'static [u8] {
    match v {
        Version::HTTP_09 => b"0.9",
        Version::HTTP_10 => b"1.0",
        Version::HTTP_2 => b"2",
        Version::HTTP_3 => b"3",
        _ => b"1.1",
    }
}

#[cfg(test)]
#[path = "asgi_scope_tests.rs"]
mod tests;
