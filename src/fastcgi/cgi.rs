//! The CGI response head at the start of the STDOUT stream: header lines up to an empty line, `Status:`
//! giving the status.
//!
//! Lines end with `\r\n` or a bare `\n` (PHP writes the first, hand-written scripts often the second). The
//! status is 200 unless `Status:` says otherwise, and 302 for a `Location:` without `Status:`, as nginx and
//! PHP do. A head over 64 KiB, a line that is not `Name: value`, or a `Content-Length` that is not one
//! number is an error: passing it on would hand the client a response nobody can frame.

use bytes::{Bytes, BytesMut};
use http::header::{CONTENT_LENGTH, LOCATION};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use crate::http1::spelling::Spelling;

/// The largest head accepted, its empty line included.
pub const MAX_HEAD: usize = 64 * 1024;

/// A parsed response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub status: StatusCode,
    /// The header fields in order, `Status` removed; `Content-Length`, if any, checked and single.
    pub headers: HeaderMap,
    /// How the application spelled the field names that are not in canonical case.
    pub spelling: Spelling,
}

impl Head {
    pub fn content_length(&self) -> Option<u64> {
        self.headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("response head larger than {MAX_HEAD} bytes")]
    TooLarge,
    #[error("header line without a colon")]
    NoColon,
    #[error("invalid header name {0:?}")]
    Name(String),
    #[error("invalid value for header {0}")]
    Value(HeaderName),
    #[error("invalid Status {0:?}")]
    Status(String),
    #[error("invalid Content-Length")]
    ContentLength,
}

/// Where the search for the empty line stands: so bytes arriving in small records are scanned once.
#[derive(Debug, Default, Clone, Copy)]
struct Scan {
    /// Bytes already searched for line ends.
    scanned: usize,
    /// Where the current line starts.
    line_start: usize,
}

impl Scan {
    /// The length of the head, its empty line included, once `buf` holds it.
    fn find_end(&mut self, buf: &[u8]) -> Option<usize> {
        while let Some(at) = buf[self.scanned..].iter().position(|&b| b == b'\n') {
            let nl = self.scanned + at;
            let line = &buf[self.line_start..nl];
            self.scanned = nl + 1;
            self.line_start = nl + 1;
            if line.is_empty() || line == b"\r" {
                return Some(nl + 1);
            }
        }
        self.scanned = buf.len();
        None
    }
}

/// Collects STDOUT content until the head is complete.
#[derive(Debug, Default)]
pub struct HeadParser {
    buf: BytesMut,
    scan: Scan,
}

impl HeadParser {
    pub fn new() -> Self {
        HeadParser::default()
    }

    /// Adds the content of one STDOUT record. Once the head is complete: the head, and the bytes after it
    /// (the first bytes of the body).
    pub fn push(&mut self, data: Bytes) -> Result<Option<(Head, Bytes)>, HeadError> {
        let found = if self.buf.is_empty() {
            // The common case, the whole head in the first record: parsed where it lies, no copy.
            if let Some(end) = self.scan.find_end(&data) {
                self.scan = Scan::default();
                return finish(data, end).map(Some);
            }
            self.buf.extend_from_slice(&data);
            None
        } else {
            self.buf.extend_from_slice(&data);
            self.scan.find_end(&self.buf)
        };
        match found {
            Some(end) => {
                // Ready for another head: a caller that keeps pushing gets one, not a panic.
                self.scan = Scan::default();
                finish(std::mem::take(&mut self.buf).freeze(), end).map(Some)
            }
            None if self.buf.len() > MAX_HEAD => Err(HeadError::TooLarge),
            None => Ok(None),
        }
    }
}

/// Parses the head at the start of `bytes`: the head and its length, or `None` when incomplete.
#[cfg(any(test, feature = "fuzzing"))]
pub fn parse_head(bytes: &[u8]) -> Result<Option<(Head, usize)>, HeadError> {
    match Scan::default().find_end(bytes) {
        Some(end) if end > MAX_HEAD => Err(HeadError::TooLarge),
        Some(end) => parse_lines(&bytes[..end]).map(|h| Some((h, end))),
        None if bytes.len() > MAX_HEAD => Err(HeadError::TooLarge),
        None => Ok(None),
    }
}

fn finish(all: Bytes, end: usize) -> Result<(Head, Bytes), HeadError> {
    if end > MAX_HEAD {
        return Err(HeadError::TooLarge);
    }
    let head = parse_lines(&all[..end])?;
    Ok((head, all.slice(end..)))
}

fn parse_lines(head: &[u8]) -> Result<Head, HeadError> {
    let mut headers = HeaderMap::new();
    let mut spelling = Spelling::default();
    let mut status = None;
    for line in head.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or(HeadError::NoColon)?;
        let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
        if name.eq_ignore_ascii_case(b"status") {
            status = Some(parse_status(value)?);
            continue;
        }
        spelling.note(name);
        let name = HeaderName::from_bytes(name).map_err(|_| HeadError::Name(shown(name)))?;
        let value = HeaderValue::from_bytes(value).map_err(|_| HeadError::Value(name.clone()))?;
        headers.append(name, value);
    }
    single_content_length(&mut headers)?;
    let status = status.unwrap_or(if headers.contains_key(LOCATION) {
        StatusCode::FOUND
    } else {
        StatusCode::OK
    });
    Ok(Head {
        status,
        headers,
        spelling,
    })
}

/// `404`, `404 Not Found`: the reason is the client's business, hyper writes its own.
fn parse_status(value: &[u8]) -> Result<StatusCode, HeadError> {
    let code = value.split(|&b| b == b' ').next().unwrap_or(value);
    StatusCode::from_bytes(code)
        .ok()
        .filter(|s| s.as_u16() >= 100)
        .ok_or_else(|| HeadError::Status(shown(value)))
}

/// Bytes quoted in an error: a hostile head must not become a 64 KiB log line.
fn shown(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(64)]).into_owned()
}

/// Repeated `Content-Length` fields must agree; they become one.
fn single_content_length(headers: &mut HeaderMap) -> Result<(), HeadError> {
    let mut values = headers.get_all(CONTENT_LENGTH).iter();
    let Some(first) = values.next() else {
        return Ok(());
    };
    let parsed = |v: &HeaderValue| {
        let s = v.to_str().ok()?;
        s.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    let n = parsed(first).ok_or(HeadError::ContentLength)?;
    if values.any(|v| parsed(v) != Some(n)) {
        return Err(HeadError::ContentLength);
    }
    headers.insert(CONTENT_LENGTH, HeaderValue::from(n));
    Ok(())
}

fn trim(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_headers_and_body_start() {
        let raw = "Status: 404 Not Found\r\nContent-Type: text/html\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n<h1>";
        let (head, len) = parse_head(raw.as_bytes()).unwrap().unwrap();
        assert_eq!(&raw[len..], "<h1>");
        assert_eq!(head.status, StatusCode::NOT_FOUND);
        assert_eq!(head.headers["content-type"], "text/html");
        assert_eq!(head.headers.get_all("set-cookie").iter().count(), 2);
        assert!(!head.headers.contains_key("status"));
    }

    #[test]
    fn defaults_and_redirects() {
        let (h, _) = parse_head(b"Content-Type: text/plain\n\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.status, StatusCode::OK);
        let (h, _) = parse_head(b"Location: /login\n\n").unwrap().unwrap();
        assert_eq!(h.status, StatusCode::FOUND);
        let (h, _) = parse_head(b"Location: /x\r\nStatus: 301\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.status, StatusCode::MOVED_PERMANENTLY);
        let (h, len) = parse_head(b"\r\nbody").unwrap().unwrap();
        assert_eq!((h.status, h.headers.len(), len), (StatusCode::OK, 0, 2));
    }

    #[test]
    fn mixed_line_ends_and_whitespace() {
        let (h, len) = parse_head(b"A:  1 \r\nB:\t2\n\r\nrest").unwrap().unwrap();
        assert_eq!(h.headers["a"], "1");
        assert_eq!(h.headers["b"], "2");
        assert_eq!(len, 15);
    }

    #[test]
    fn incomplete_and_invalid() {
        assert_eq!(parse_head(b"Content-Type: text/plain\r\n"), Ok(None));
        assert_eq!(parse_head(b""), Ok(None));
        assert_eq!(parse_head(b"no colon\n\n"), Err(HeadError::NoColon));
        assert!(matches!(
            parse_head(b"Bad Name: x\n\n"),
            Err(HeadError::Name(_))
        ));
        assert!(matches!(
            parse_head(b"Status: abc\n\n"),
            Err(HeadError::Status(_))
        ));
        assert!(matches!(
            parse_head(b"Status: 42\n\n"),
            Err(HeadError::Status(_))
        ));
        assert!(matches!(
            parse_head(b"X: a\x00b\n\n"),
            Err(HeadError::Value(_))
        ));
        assert_eq!(
            parse_head(b"Content-Length: 5\nContent-Length: 6\n\n"),
            Err(HeadError::ContentLength)
        );
        assert_eq!(
            parse_head(b"Content-Length: -1\n\n"),
            Err(HeadError::ContentLength)
        );
        let (h, _) = parse_head(b"Content-Length: 5\nContent-Length: 5\n\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.headers.get_all("content-length").iter().count(), 1);
        assert_eq!(h.content_length(), Some(5));
    }

    #[test]
    fn too_large() {
        let mut big = Vec::new();
        while big.len() <= MAX_HEAD {
            big.extend_from_slice(b"X-Filler: 0123456789012345678901234567890123456789\r\n");
        }
        assert_eq!(parse_head(&big), Err(HeadError::TooLarge));
        big.extend_from_slice(b"\r\n");
        assert_eq!(parse_head(&big), Err(HeadError::TooLarge));
        let mut p = HeadParser::new();
        let mut result = Ok(None);
        for chunk in big.chunks(1000) {
            result = p.push(Bytes::copy_from_slice(chunk));
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(HeadError::TooLarge));
    }

    #[test]
    fn parser_across_records() {
        let raw = b"Status: 201\r\nX-A: 1\r\n\r\nbody bytes";
        for split in 1..raw.len() {
            let mut p = HeadParser::new();
            let mut found = None;
            for chunk in raw.chunks(split) {
                if let Some(f) = p.push(Bytes::copy_from_slice(chunk)).unwrap() {
                    found = Some(f);
                    break;
                }
            }
            let (head, rest) = found.unwrap();
            assert_eq!(head.status, StatusCode::CREATED);
            assert_eq!(head.headers["x-a"], "1");
            assert!(b"body bytes".starts_with(&rest), "split {split}: {rest:?}");
        }
        // One byte per record, the `\r\n\r\n` straddling records.
        let mut p = HeadParser::new();
        let mut out = None;
        for b in raw.iter() {
            out = out.or(p.push(Bytes::copy_from_slice(&[*b])).unwrap());
        }
        assert!(out.is_some());
    }
}
