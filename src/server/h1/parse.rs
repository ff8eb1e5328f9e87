//! Request heads as they arrive on an HTTP/1 connection: parsed with `httparse` in the connection's read
//! buffer, the head's bytes frozen once and every field value sliced out of them without a copy, and read for
//! what the connection needs to know: how the body is framed, whether the client keeps the connection, expects
//! `100 Continue` or asks for an upgrade.

use std::mem::MaybeUninit;

use bytes::BytesMut;
use http::request::Parts;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri, Version, header};

use crate::request::RawTarget;

/// Most fields accepted in a request head; more is answered 431 (hyper's limit too).
pub(crate) const MAX_HEADERS: usize = 100;

/// How a request's body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body.
    Empty,
    Length(u64),
    Chunked,
}

/// A parsed request head.
#[derive(Debug)]
pub(crate) struct Head {
    pub parts: Parts,
    pub framing: Framing,
    /// The client keeps the connection open after the answer (HTTP/1.1 without `close`, HTTP/1.0 asking
    /// `keep-alive`).
    pub keep_alive: bool,
    /// HTTP/1.1 `Expect: 100-continue`: the client waits for `100 Continue` before sending the body.
    pub expect_continue: bool,
    /// The client asks to switch protocols (`Connection: upgrade` and an `Upgrade` field).
    pub upgrade: bool,
}

/// Why a head was refused: each is answered with its status and the connection closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HeadError {
    #[error("malformed request head: {0}")]
    Malformed(&'static str),
    #[error("request head larger than allowed")]
    TooLarge,
    #[error("a transfer coding rein does not implement")]
    UnknownCoding,
    /// The HTTP/2 preface on a listener that does not take HTTP/2 without TLS: closed without an answer, as
    /// an HTTP/1 answer would mean nothing to the client.
    #[error("an HTTP/2 preface on an HTTP/1 connection")]
    Http2,
}

/// The first line of the HTTP/2 client preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0";

impl HeadError {
    pub fn status(self) -> StatusCode {
        match self {
            HeadError::Malformed(_) | HeadError::Http2 => StatusCode::BAD_REQUEST,
            HeadError::TooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            HeadError::UnknownCoding => StatusCode::NOT_IMPLEMENTED,
        }
    }
}

/// The head at the start of `buf`, taken out of it; `Ok(None)` while it is not whole and may still fit in
/// `max_head` bytes.
pub(crate) fn parse(buf: &mut BytesMut, max_head: usize) -> Result<Option<Head>, HeadError> {
    let mut fields = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, &mut fields) {
        Ok(httparse::Status::Complete(len)) if len <= max_head => len,
        Ok(httparse::Status::Complete(_)) => return Err(HeadError::TooLarge),
        Ok(httparse::Status::Partial) if buf.len() >= max_head => {
            return Err(HeadError::TooLarge);
        }
        Err(httparse::Error::Version) if buf.starts_with(H2_PREFACE) => {
            return Err(HeadError::Http2);
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
        Err(e) => return Err(HeadError::Malformed(malformed(e))),
    };
    let base = buf.as_ptr() as usize;
    let offset = |s: &[u8]| s.as_ptr() as usize - base;
    let target = {
        let t = req.path.unwrap_or("/").as_bytes();
        (offset(t), t.len())
    };
    let method = Method::from_bytes(req.method.unwrap_or("").as_bytes())
        .map_err(|_| HeadError::Malformed("method"))?;
    let version = match req.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    // Where each field's name and value lie in the head, so that the values can be slices of its bytes once
    // they are frozen (the parsed fields borrow the buffer that freezing splits).
    // (A vector sized to the fields: an array for the most fields would be zeroed whole for every request.)
    let spans: Vec<Span> = req
        .headers
        .iter()
        .map(|h| Span {
            name: offset(h.name.as_bytes()),
            name_len: h.name.len(),
            value: offset(h.value),
            value_len: h.value.len(),
        })
        .collect();
    let count = spans.len();
    let bytes = buf.split_to(len).freeze();
    let target = bytes.slice(target.0..target.0 + target.1);
    let fragment = memchr::memchr(b'#', &target).is_some();
    let raw = fragment.then(|| String::from_utf8_lossy(&target).into_owned());
    let uri = Uri::from_maybe_shared(target).map_err(|_| HeadError::Malformed("request target"))?;
    let mut headers = HeaderMap::with_capacity(count);
    for s in &spans {
        let name = HeaderName::from_bytes(&bytes[s.name..s.name + s.name_len])
            .map_err(|_| HeadError::Malformed("field name"))?;
        let value = HeaderValue::from_maybe_shared(bytes.slice(s.value..s.value + s.value_len))
            .map_err(|_| HeadError::Malformed("field value"))?;
        headers.append(name, value);
    }
    let mut head = head(method, uri, version, headers)?;
    if let Some(raw) = raw {
        head.parts.extensions.insert(RawTarget(raw));
    }
    Ok(Some(head))
}

/// Where a field lies in the head's bytes.
struct Span {
    name: usize,
    name_len: usize,
    value: usize,
    value_len: usize,
}

/// Reads the fields that concern the connection and puts the head together.
fn head(
    method: Method,
    uri: Uri,
    version: Version,
    mut headers: HeaderMap,
) -> Result<Head, HeadError> {
    let (framing, ambiguous) = framing(&mut headers, version)?;
    let tokens = ConnectionTokens::of(&headers);
    let keep_alive = !ambiguous
        && match version {
            Version::HTTP_10 => tokens.keep_alive && !tokens.close,
            _ => !tokens.close,
        };
    let expect_continue = version == Version::HTTP_11
        && headers
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let upgrade = tokens.upgrade && headers.contains_key(header::UPGRADE);
    let (mut parts, ()) = Request::new(()).into_parts();
    parts.method = method;
    parts.uri = uri;
    parts.version = version;
    parts.headers = headers;
    Ok(Head {
        parts,
        framing,
        keep_alive,
        expect_continue,
        upgrade,
    })
}

fn malformed(e: httparse::Error) -> &'static str {
    match e {
        httparse::Error::HeaderName => "field name",
        httparse::Error::HeaderValue => "field value",
        httparse::Error::NewLine => "line ending",
        httparse::Error::Status => "status",
        httparse::Error::Token => "method or request target",
        httparse::Error::TooManyHeaders => "too many fields",
        httparse::Error::Version => "HTTP version",
    }
}

/// The body's framing (RFC 9112 §6.1–6.3). A transfer coding overrides a `Content-Length` beside it, which
/// is then dropped so that it is not forwarded (such a request is how requests are smuggled: its connection
/// closes after the answer, [`Head::keep_alive`]). The last coding must be `chunked` (400 otherwise), and
/// codings before it are not implemented (501). Lengths must be digits, and repeated ones identical.
fn framing(headers: &mut HeaderMap, version: Version) -> Result<(Framing, bool), HeadError> {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        if version == Version::HTTP_10 {
            return Err(HeadError::Malformed(
                "Transfer-Encoding in an HTTP/1.0 request",
            ));
        }
        let ambiguous = headers.remove(header::CONTENT_LENGTH).is_some();
        return Ok((codings(headers)?, ambiguous));
    }
    let mut length = None;
    let mut repeated = false;
    for value in headers.get_all(header::CONTENT_LENGTH) {
        let n = decimal(value.as_bytes()).ok_or(HeadError::Malformed("Content-Length"))?;
        if length.is_some_and(|l| l != n) {
            return Err(HeadError::Malformed("Content-Length values that differ"));
        }
        repeated = length.is_some();
        length = Some(n);
    }
    if repeated && let Some(n) = length {
        // One length goes on, as one field.
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
    }
    Ok(match length {
        None | Some(0) => (Framing::Empty, false),
        Some(n) => (Framing::Length(n), false),
    })
}

/// The framing a request's `Transfer-Encoding` fields give.
fn codings(headers: &HeaderMap) -> Result<Framing, HeadError> {
    let mut count = 0;
    let mut last = None;
    for value in headers.get_all(header::TRANSFER_ENCODING) {
        for coding in value
            .as_bytes()
            .split(|&b| b == b',')
            .map(<[u8]>::trim_ascii)
        {
            count += 1;
            last = Some(coding);
        }
    }
    match last {
        Some(c) if c.eq_ignore_ascii_case(b"chunked") && count == 1 => Ok(Framing::Chunked),
        Some(c) if c.eq_ignore_ascii_case(b"chunked") => Err(HeadError::UnknownCoding),
        _ => Err(HeadError::Malformed(
            "a transfer coding that does not end in chunked",
        )),
    }
}

/// A `Content-Length`: digits only, no sign, no overflow.
fn decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// The `Connection` options the connection acts on.
#[derive(Default)]
struct ConnectionTokens {
    close: bool,
    keep_alive: bool,
    upgrade: bool,
}

impl ConnectionTokens {
    fn of(headers: &HeaderMap) -> Self {
        let mut t = ConnectionTokens::default();
        for value in headers.get_all(header::CONNECTION) {
            for token in value.as_bytes().split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    t.close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    t.keep_alive = true;
                } else if token.eq_ignore_ascii_case(b"upgrade") {
                    t.upgrade = true;
                }
            }
        }
        t
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
