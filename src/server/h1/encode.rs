//! Response heads as they go out on an HTTP/1 connection: the framing fields completed by the rules the
//! access log reads too ([`wire_headers`]), the connection's fate settled (`close`, `keep-alive`), and the
//! head written in one buffer, field names in canonical case or as their producer spelled them
//! ([`Spelling`]).

use bytes::{BufMut, BytesMut};
use http::response::Parts;
use http::{HeaderValue, Method, StatusCode, Version, header};

use crate::http1::Fields;
use crate::http1::spelling::{self, Spelling};
use crate::server::passed::View;
use crate::server::wire_headers;

/// How a response's body goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BodyOut {
    /// Not at all: an answer to `HEAD`, a 1xx, 204 or 304.
    None,
    Length(u64),
    Chunked,
    /// Delimited by closing the connection (a body of unknown length to an HTTP/1.0 client).
    UntilClose,
}

/// What the answer's head depends on in its request.
pub(super) struct Asked<'a> {
    pub method: &'a Method,
    pub version: Version,
}

/// Completes and writes the head of `parts` into `out`. `length` is the body's exact length when known;
/// `keep_alive` comes in as what the client and the connection allow and leaves as what this answer allows.
pub(super) fn head(
    out: &mut BytesMut,
    parts: &mut Parts,
    length: Option<u64>,
    asked: &Asked<'_>,
    keep_alive: &mut bool,
) -> BodyOut {
    let framing = wire_headers::Framing {
        method: asked.method,
        version: asked.version,
        status: parts.status,
        length,
    };
    let passed = parts.extensions.remove::<Fields>();
    wire_headers::add(&mut parts.headers, passed.as_ref(), &framing);
    let fields = View::new(&parts.headers, passed.as_ref());
    let body = body_out(parts.status, &fields, asked.method);
    if body == BodyOut::UntilClose || says_close(&fields) {
        *keep_alive = false;
    }
    if !fields.contains(&header::CONNECTION) {
        match (*keep_alive, asked.version) {
            (false, Version::HTTP_11) => {
                parts
                    .headers
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            (true, Version::HTTP_10) => {
                parts
                    .headers
                    .insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
            }
            _ => {}
        }
    }
    write(out, parts, passed.as_ref());
    body
}

fn body_out(status: StatusCode, fields: &View<'_>, method: &Method) -> BodyOut {
    if *method == Method::HEAD
        || status.is_informational()
        || matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED)
    {
        return BodyOut::None;
    }
    if fields.contains(&header::TRANSFER_ENCODING) {
        return BodyOut::Chunked;
    }
    match fields.get(&header::CONTENT_LENGTH) {
        Some(v) => match std::str::from_utf8(v).ok().and_then(|s| s.parse().ok()) {
            Some(n) => BodyOut::Length(n),
            None => BodyOut::UntilClose,
        },
        None => BodyOut::UntilClose,
    }
}

fn says_close(fields: &View<'_>) -> bool {
    fields
        .get_all(&header::CONNECTION)
        .flat_map(|v| v.split(|&b| b == b','))
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
}

/// Writes the head: the passed fields as they came (names as spelled), then the map's.
fn write(out: &mut BytesMut, parts: &Parts, passed: Option<&Fields>) {
    let fields: usize = parts
        .headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum();
    out.reserve(fields + passed.map_or(0, Fields::byte_len) + 48);
    out.put_slice(b"HTTP/1.1 ");
    out.put_slice(parts.status.as_str().as_bytes());
    out.put_u8(b' ');
    out.put_slice(
        parts
            .status
            .canonical_reason()
            .unwrap_or("Unknown")
            .as_bytes(),
    );
    out.put_slice(b"\r\n");
    for (name, value) in View::new(&parts.headers, passed).passed() {
        out.put_slice(name);
        out.put_slice(b": ");
        out.put_slice(value);
        out.put_slice(b"\r\n");
    }
    let spelled = parts.extensions.get::<Spelling>().filter(|s| !s.is_empty());
    for (name, value) in &parts.headers {
        spelling::put_name(out, name, spelled);
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Response;

    fn encode(
        method: Method,
        version: Version,
        r: Response<()>,
        length: Option<u64>,
    ) -> (String, BodyOut, bool) {
        let (mut parts, ()) = r.into_parts();
        let mut out = BytesMut::new();
        let mut keep = true;
        let asked = Asked {
            method: &method,
            version,
        };
        let body = head(&mut out, &mut parts, length, &asked, &mut keep);
        (String::from_utf8(out.to_vec()).unwrap(), body, keep)
    }

    #[test]
    fn a_known_length_is_written_and_names_are_title_case() {
        let r = Response::builder()
            .header("x-powered-by", "t")
            .body(())
            .unwrap();
        let (head, body, keep) = encode(Method::GET, Version::HTTP_11, r, Some(5));
        assert!(
            head.starts_with("HTTP/1.1 200 OK\r\nX-Powered-By: t\r\n"),
            "{head}"
        );
        assert!(
            head.contains("\r\nContent-Length: 5\r\n") && head.contains("\r\nDate: "),
            "{head}"
        );
        assert!(head.ends_with("\r\n\r\n"));
        assert_eq!((body, keep), (BodyOut::Length(5), true));
    }

    #[test]
    fn unknown_lengths_are_chunked_or_close_the_connection() {
        let r = || Response::builder().body(()).unwrap();
        let (head, body, keep) = encode(Method::GET, Version::HTTP_11, r(), None);
        assert!(head.contains("Transfer-Encoding: chunked"), "{head}");
        assert_eq!((body, keep), (BodyOut::Chunked, true));
        let (head, body, keep) = encode(Method::GET, Version::HTTP_10, r(), None);
        assert!(
            !head.contains("Transfer-Encoding") && !head.contains("Connection"),
            "{head}"
        );
        assert_eq!((body, keep), (BodyOut::UntilClose, false));
    }

    #[test]
    fn passed_fields_go_out_as_spelled_unless_the_map_hides_them() {
        let mut buf = bytes::BytesMut::from(
            "HTTP/1.1 200 OK\r\nserver: up\r\nx-Foo: 1\r\nContent-Length: 2\r\nx-foo: 2\r\n\r\n",
        );
        let request = crate::http1::RequestHead::new(
            &Method::GET,
            "/",
            &http::HeaderMap::new(),
            false,
            false,
        );
        let parsed = crate::http1::head::parse_response(&mut buf, &request)
            .unwrap()
            .unwrap();
        let mut r = Response::builder()
            .header("server", "rein")
            .body(())
            .unwrap();
        r.extensions_mut().insert(parsed.fields);
        let (head, body, keep) = encode(Method::GET, Version::HTTP_11, r, Some(2));
        assert!(
            head.starts_with("HTTP/1.1 200 OK\r\nx-Foo: 1\r\nContent-Length: 2\r\nx-foo: 2\r\n"),
            "{head}"
        );
        assert!(
            head.contains("\r\nServer: rein\r\n") && !head.contains("up"),
            "{head}"
        );
        assert_eq!(head.matches("Content-Length").count(), 1, "{head}");
        assert!(head.contains("\r\nDate: "), "{head}");
        assert_eq!((body, keep), (BodyOut::Length(2), true));
    }

    #[test]
    fn the_connection_field_follows_the_fate_of_the_connection() {
        let r = || Response::builder().body(()).unwrap();
        let (head, _, keep) = encode(Method::GET, Version::HTTP_10, r(), Some(0));
        assert!(head.contains("Connection: keep-alive"), "{head}");
        assert!(keep);
        let closing = Response::builder()
            .header("connection", "close")
            .body(())
            .unwrap();
        let (_, _, keep) = encode(Method::GET, Version::HTTP_11, closing, Some(0));
        assert!(!keep);
        let (head, body, _) = encode(Method::HEAD, Version::HTTP_11, r(), Some(7));
        assert!(head.contains("Content-Length: 7"), "{head}");
        assert_eq!(body, BodyOut::None);
    }
}
