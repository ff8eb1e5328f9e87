//! The heads of an exchange: the request's, encoded once per request and written as is on every attempt,
//! and the response's, parsed with `httparse` and read for how its body is framed (RFC 9112 §6.3).

use std::borrow::Cow;
use std::mem::MaybeUninit;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::{HeaderMap, Method, StatusCode, Version, header};

use super::fields::{Fields, Span};

/// Most fields accepted in a response head (hyper's default too).
const MAX_HEADERS: usize = 100;
/// The longest response head accepted.
pub const MAX_HEAD: usize = 64 * 1024;

/// A request head ready to go out, and what the answer's framing depends on.
#[derive(Clone, Debug)]
pub struct RequestHead {
    bytes: Bytes,
    chunked: bool,
    is_head: bool,
    upgrade: bool,
}

impl RequestHead {
    /// The head of a request with `headers` as they are (see [`HeadWriter`] for the rest).
    pub fn new(
        method: &Method,
        target: &str,
        headers: &HeaderMap,
        body: bool,
        upgrade: bool,
    ) -> RequestHead {
        let fields: usize = headers
            .iter()
            .map(|(n, v)| n.as_str().len() + v.len() + 4)
            .sum();
        let mut head = HeadWriter::new(method, target, fields);
        for (name, value) in headers {
            head.field(name.as_str(), value.as_bytes());
        }
        head.finish(body, upgrade)
    }

    /// The encoded head.
    pub fn bytes(&self) -> Bytes {
        self.bytes.clone()
    }

    /// Whether the body goes out in chunks.
    pub fn chunked(&self) -> bool {
        self.chunked
    }
}

/// A request head being written: the request line, then the fields one by one, straight into the bytes
/// that go out (a proxy need not copy the client's header map to change a few fields).
pub struct HeadWriter {
    out: BytesMut,
    method: Method,
    has_length: bool,
}

impl HeadWriter {
    /// Starts a head for `target` (origin-form, as received), with room for `fields` bytes of fields. A
    /// target with a control character or a space would split the request line: such bytes are
    /// percent-encoded (the targets rein builds are encoded already; this holds for any caller).
    pub fn new(method: &Method, target: &str, fields: usize) -> HeadWriter {
        let target = if is_safe_target(target) {
            Cow::Borrowed(target)
        } else if target.is_empty() {
            Cow::Borrowed("/")
        } else {
            crate::uri_escape::request_target(target)
        };
        let mut out = BytesMut::with_capacity(method.as_str().len() + target.len() + fields + 64);
        out.put_slice(method.as_str().as_bytes());
        out.put_u8(b' ');
        out.put_slice(target.as_bytes());
        out.put_slice(b" HTTP/1.1\r\n");
        HeadWriter {
            out,
            method: method.clone(),
            has_length: false,
        }
    }

    /// One field. `name` must be a valid field name and `value` a valid field value (as `http`'s types
    /// guarantee): nothing is checked here.
    pub fn field(&mut self, name: &str, value: &[u8]) {
        self.has_length |= name.eq_ignore_ascii_case("content-length");
        self.out.put_slice(name.as_bytes());
        self.out.put_slice(b": ");
        self.out.put_slice(value);
        self.out.put_slice(b"\r\n");
    }

    /// One field whose value `value` writes in place (no string to build first). Like [`HeadWriter::field`],
    /// nothing is checked: `name` must be a valid field name and what `value` writes a valid field value.
    pub fn field_with(&mut self, name: &str, value: impl FnOnce(&mut BytesMut)) {
        self.has_length |= name.eq_ignore_ascii_case("content-length");
        self.out.put_slice(name.as_bytes());
        self.out.put_slice(b": ");
        value(&mut self.out);
        self.out.put_slice(b"\r\n");
    }

    /// Ends the head. `body` says whether a body follows: one of unknown length (no `Content-Length` among
    /// the fields) is sent chunked; a `POST`, `PUT` or `PATCH` without one gets `Content-Length: 0`, which
    /// some servers insist on.
    pub fn finish(mut self, body: bool, upgrade: bool) -> RequestHead {
        let chunked = body && !self.has_length;
        if chunked {
            self.out.put_slice(b"transfer-encoding: chunked\r\n");
        } else if !body && !self.has_length && expects_body(&self.method) {
            self.out.put_slice(b"content-length: 0\r\n");
        }
        self.out.put_slice(b"\r\n");
        RequestHead {
            bytes: self.out.freeze(),
            chunked,
            is_head: self.method == Method::HEAD,
            upgrade,
        }
    }
}

/// Visible ASCII only: what a request line can carry between its spaces.
fn is_safe_target(target: &str) -> bool {
    !target.is_empty() && target.bytes().all(|b| (0x21..0x7f).contains(&b))
}

fn expects_body(method: &Method) -> bool {
    matches!(*method, Method::POST | Method::PUT | Method::PATCH)
}

/// How a response's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// None at all: an answer to `HEAD`, a 204 or a 304.
    Empty,
    Length(u64),
    Chunked,
    /// Until the server closes the connection.
    Close,
    /// The connection switches protocols after the head (a 101 to an `Upgrade` request).
    Upgrade,
}

/// A parsed response head.
#[derive(Debug)]
pub struct ResponseHead {
    pub status: StatusCode,
    pub version: Version,
    /// The fields, as the server wrote them.
    pub fields: Fields,
    pub framing: Framing,
    /// Whether the connection may carry another request once this body ends.
    pub keep_alive: bool,
}

/// Why a response head was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HeadError {
    #[error("malformed response head: {0}")]
    Malformed(httparse::Error),
    #[error("response head longer than {MAX_HEAD} bytes")]
    TooLarge,
    #[error("invalid Content-Length")]
    Length,
    #[error("101 Switching Protocols to a request that did not ask to switch")]
    UnaskedUpgrade,
}

/// Parses the final response head at the start of `buf` and removes it; interim (1xx) answers other than
/// 101 are skipped. `None`: the head is not complete yet.
pub fn parse_response(
    buf: &mut BytesMut,
    request: &RequestHead,
) -> Result<Option<ResponseHead>, HeadError> {
    loop {
        // Left uninitialised: httparse writes the fields it finds, and zeroing 100 of them for every response
        // was a tenth of the proxy's user-space instructions.
        let mut fields = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut parsed = httparse::Response::new(&mut []);
        let parsed_len = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut parsed,
            buf,
            &mut fields,
        );
        let len = match parsed_len.map_err(HeadError::Malformed)? {
            httparse::Status::Complete(len) => len,
            httparse::Status::Partial if buf.len() > MAX_HEAD => return Err(HeadError::TooLarge),
            httparse::Status::Partial => return Ok(None),
        };
        // httparse checked the code's three digits.
        let code = parsed.code.unwrap_or(502);
        let status = StatusCode::from_u16(code)
            .map_err(|_| HeadError::Malformed(httparse::Error::Status))?;
        if status.is_informational() && status != StatusCode::SWITCHING_PROTOCOLS {
            buf.advance(len);
            continue;
        }
        let version = match parsed.version {
            Some(0) => Version::HTTP_10,
            _ => Version::HTTP_11,
        };
        // Where each field lies in the head: the fields stay in its bytes, as the server wrote them.
        let spans: Vec<Span> = parsed
            .headers
            .iter()
            .map(|field| Span::of(buf, field.name.as_bytes(), field.value))
            .collect();
        let fields = Fields::new(buf.split_to(len).freeze(), spans);
        let (framing, delimited) = framing(status, &fields, request)?;
        let keep_alive = delimited && persistent(version, &fields);
        return Ok(Some(ResponseHead {
            status,
            version,
            fields,
            framing,
            keep_alive,
        }));
    }
}

/// How the body is delimited, and whether the connection can outlive it as far as framing goes.
fn framing(
    status: StatusCode,
    fields: &Fields,
    request: &RequestHead,
) -> Result<(Framing, bool), HeadError> {
    if status == StatusCode::SWITCHING_PROTOCOLS {
        return match request.upgrade {
            true => Ok((Framing::Upgrade, false)),
            false => Err(HeadError::UnaskedUpgrade),
        };
    }
    if request.is_head || status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
        return Ok((Framing::Empty, true));
    }
    if fields.contains("transfer-encoding") {
        // Chunked only if it is the last coding; a Content-Length beside it is ignored, and since such a
        // message may be an attempt at smuggling, the connection is not reused after it.
        let clean = !fields.contains("content-length");
        return Ok(match last_coding_is_chunked(fields) {
            true => (Framing::Chunked, clean),
            false => (Framing::Close, false),
        });
    }
    match content_length(fields)? {
        Some(n) => Ok((Framing::Length(n), true)),
        None => Ok((Framing::Close, false)),
    }
}

fn last_coding_is_chunked(fields: &Fields) -> bool {
    let last = fields.get_all("transfer-encoding").last();
    last.and_then(|v| v.rsplit(|&b| b == b',').next())
        .is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

/// The Content-Length, if any: every value (several fields, or a list in one) must be the same number.
fn content_length(fields: &Fields) -> Result<Option<u64>, HeadError> {
    let mut found = None;
    for value in fields.get_all("content-length") {
        let text = std::str::from_utf8(value).map_err(|_| HeadError::Length)?;
        for item in text.split(',') {
            let item = item.trim();
            if item.is_empty() || !item.bytes().all(|b| b.is_ascii_digit()) {
                return Err(HeadError::Length);
            }
            let n: u64 = item.parse().map_err(|_| HeadError::Length)?;
            if found.is_some_and(|f| f != n) {
                return Err(HeadError::Length);
            }
            found = Some(n);
        }
    }
    Ok(found)
}

/// HTTP/1.1 keeps the connection unless told `close`; HTTP/1.0 closes it unless told `keep-alive`.
fn persistent(version: Version, fields: &Fields) -> bool {
    let lists = |token: &str| {
        fields
            .get_all("connection")
            .flat_map(|v| v.split(|&b| b == b','))
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
    };
    match version {
        Version::HTTP_10 => lists("keep-alive"),
        _ => !lists("close"),
    }
}

/// Whether the `Connection` fields list `token` (case-insensitive).
pub fn connection_lists(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn get() -> RequestHead {
        RequestHead::new(&Method::GET, "/", &HeaderMap::new(), false, false)
    }

    fn parse(text: &str, request: &RequestHead) -> Result<Option<ResponseHead>, HeadError> {
        let mut buf = BytesMut::from(text);
        parse_response(&mut buf, request)
    }

    fn framing_of(text: &str) -> (Framing, bool) {
        let head = parse(text, &get()).unwrap().unwrap();
        (head.framing, head.keep_alive)
    }

    #[test]
    fn a_request_head_is_encoded_with_its_framing() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("example.com"));
        let head = RequestHead::new(&Method::GET, "/a?b=c", &headers, false, false);
        assert_eq!(
            head.bytes(),
            "GET /a?b=c HTTP/1.1\r\nhost: example.com\r\n\r\n"
        );
        let chunked = RequestHead::new(&Method::POST, "/", &headers, true, false);
        assert!(chunked.chunked());
        assert!(
            chunked
                .bytes()
                .ends_with(b"transfer-encoding: chunked\r\n\r\n")
        );
        let empty = RequestHead::new(&Method::POST, "/", &headers, false, false);
        assert!(empty.bytes().ends_with(b"content-length: 0\r\n\r\n"));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("3"));
        let sized = RequestHead::new(&Method::PUT, "/", &headers, true, false);
        assert!(!sized.chunked());
        assert!(sized.bytes().ends_with(b"content-length: 3\r\n\r\n"));
    }

    #[test]
    fn a_target_that_would_split_the_request_line_is_encoded() {
        for (bad, sent) in [
            ("/a b", "/a%20b"),
            ("/a\r\nX: y", "/a%0D%0AX:%20y"),
            ("", "/"),
            ("/\u{e9}", "/%C3%A9"),
        ] {
            let head = RequestHead::new(&Method::GET, bad, &HeaderMap::new(), false, false);
            let line = format!("GET {sent} HTTP/1.1\r\n");
            assert!(head.bytes().starts_with(line.as_bytes()), "{bad:?}");
        }
    }

    #[test]
    fn a_partial_head_waits_and_a_complete_one_is_consumed() {
        let mut buf = BytesMut::from("HTTP/1.1 200 OK\r\nContent-Len");
        assert!(parse_response(&mut buf, &get()).unwrap().is_none());
        buf.extend_from_slice(b"gth: 5\r\nX-A: 1\r\nX-A: 2\r\n\r\nhello");
        let head = parse_response(&mut buf, &get()).unwrap().unwrap();
        assert_eq!(head.status, StatusCode::OK);
        assert_eq!(head.fields.get_all("x-a").count(), 2);
        assert_eq!(head.framing, Framing::Length(5));
        assert_eq!(&buf[..], b"hello");
    }

    #[test]
    fn interim_answers_are_skipped() {
        let text = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
        let head = parse(text, &get()).unwrap().unwrap();
        assert_eq!(head.status, StatusCode::CREATED);
        assert!(head.fields.get("link").is_none());
    }

    #[test]
    fn framing_follows_rfc_9112() {
        assert_eq!(
            framing_of("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n"),
            (Framing::Length(3), true)
        );
        assert_eq!(
            framing_of("HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n"),
            (Framing::Length(3), true)
        );
        assert_eq!(
            framing_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
            (Framing::Chunked, true)
        );
        assert_eq!(
            framing_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            (Framing::Chunked, true)
        );
        assert_eq!(
            framing_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"),
            (Framing::Close, false)
        );
        // Both: the length is ignored, and the connection is not trusted afterwards.
        assert_eq!(
            framing_of(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\r\n"
            ),
            (Framing::Chunked, false)
        );
        assert_eq!(
            framing_of("HTTP/1.1 200 OK\r\n\r\n"),
            (Framing::Close, false)
        );
        assert_eq!(
            framing_of("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n"),
            (Framing::Empty, true)
        );
        assert_eq!(
            framing_of("HTTP/1.1 304 Not Modified\r\n\r\n"),
            (Framing::Empty, true)
        );
        let head = RequestHead::new(&Method::HEAD, "/", &HeaderMap::new(), false, false);
        let answer = parse("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", &head)
            .unwrap()
            .unwrap();
        assert_eq!(answer.framing, Framing::Empty);
        assert_eq!(answer.fields.get("content-length"), Some(&b"9"[..]));
    }

    #[test]
    fn persistence_follows_the_version_and_connection_field() {
        assert!(!framing_of("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").1);
        assert!(!framing_of("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").1);
        assert!(
            framing_of("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n").1
        );
    }

    #[test]
    fn bad_heads_are_refused() {
        let bad = |text: &str| parse(text, &get()).unwrap_err();
        assert_eq!(
            bad("HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n"),
            HeadError::Length
        );
        assert_eq!(
            bad("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
            HeadError::Length
        );
        assert_eq!(
            bad("HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n"),
            HeadError::Length
        );
        assert_eq!(
            bad("HTTP/1.1 101 Switching Protocols\r\n\r\n"),
            HeadError::UnaskedUpgrade
        );
        assert!(matches!(
            bad("HTTP/1.1 2000 OK\r\n\r\n"),
            HeadError::Malformed(_)
        ));
        assert!(matches!(
            bad("SSH-2.0-OpenSSH\r\n\r\n"),
            HeadError::Malformed(_)
        ));
        let huge = format!("HTTP/1.1 200 OK\r\nX: {}", "a".repeat(MAX_HEAD));
        assert_eq!(bad(&huge), HeadError::TooLarge);
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: 1\r\n")).collect();
        assert!(matches!(
            bad(&format!("HTTP/1.1 200 OK\r\n{many}\r\n")),
            HeadError::Malformed(_)
        ));
    }

    #[test]
    fn a_switch_is_accepted_when_asked_for() {
        let head = RequestHead::new(&Method::GET, "/ws", &HeaderMap::new(), false, true);
        let answer = parse(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\nframe",
            &head,
        );
        let answer = answer.unwrap().unwrap();
        assert_eq!(
            (answer.framing, answer.keep_alive),
            (Framing::Upgrade, false)
        );
    }
}
