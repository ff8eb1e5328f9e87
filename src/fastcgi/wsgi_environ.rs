//! The WSGI environ of a request, ready-made for rein's Python adapter in one FastCGI param,
//! `REIN_WSGI_ENVIRON`.
//!
//! Its value is the environ's string entries, each name and value followed by a NUL byte but the last: the
//! variables of [`Cgi::Lean`](super::Cgi::Lean) as PEP 3333 names them (`REQUEST_METHOD`, `PATH_INFO`,
//! `HTTP_*`, ...), in the same order, then `wsgi.url_scheme` when the request came over https. The adapter
//! splits it once and puts the pairs in the environ as they are.
//!
//! Why not the CGI variables: the adapter decodes name-value pairs one by one in Python, and for a WSGI hello
//! with a dozen of them that decoding was the largest part of its own work per request (3.2 µs, against
//! 1.0 µs for this one split in C and the dict filled from it).
//!
//! No HTTP field holds a NUL byte (the parser refuses them, and `HeaderValue` cannot carry one); the
//! percent-decoded path can (`%00`), and so could a configured value. A request with a NUL byte in any of
//! them is sent the CGI variables instead ([`params`] returns `None`), which the adapter reads too.

use super::params::Params;
use super::request_params::{Pairs, Script, variables};
use crate::request::RequestInfo;

/// The param's name, which the adapter looks for.
pub const NAME: &str = "REIN_WSGI_ENVIRON";

/// The params of a request to a WSGI app: the environ in one param; `None` when an entry would hold a NUL
/// byte.
pub fn params(req: &RequestInfo, script: &Script, body_len: Option<u64>) -> Option<Params> {
    let nul = |s: &str| s.as_bytes().contains(&0);
    let extra = script.extra.iter().any(|(n, v)| nul(n) || nul(v));
    if extra || nul(&script.name) || nul(&script.path_info) {
        return None;
    }
    let mut environ = Entries(Vec::with_capacity(512));
    variables(&mut environ, req, script, body_len);
    if req.scheme == "https" {
        environ.push("wsgi.url_scheme", "https");
    }
    environ.0.pop(); // the last separator
    let mut p = Params::with_capacity(environ.0.len() + 32);
    p.push(NAME, &environ.0);
    Some(p)
}

/// Entries written as `name NUL value NUL`.
struct Entries(Vec<u8>);

impl Pairs for Entries {
    fn push(&mut self, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        let out = &mut self.0;
        out.extend_from_slice(name.as_ref());
        out.push(0);
        out.extend_from_slice(value.as_ref());
        out.push(0);
    }

    fn push_with(&mut self, name_len: usize, value_len: usize, write: impl FnOnce(&mut Vec<u8>)) {
        let out = &mut self.0;
        out.reserve(name_len + value_len + 2);
        let start = out.len();
        write(out);
        debug_assert_eq!(out.len() - start, name_len + value_len);
        // The separator between name and value: the value's bytes move up by one (a header's value is short).
        out.insert(start + name_len, 0);
        out.push(0);
    }
}

#[cfg(test)]
#[path = "wsgi_environ_tests.rs"]
mod tests;
