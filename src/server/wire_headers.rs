//! The header fields the connection adds to a response as it frames it: `Date`, `Content-Length` or
//! `Transfer-Encoding: chunked`. rein's HTTP/1 connection adds them by these rules (`h1::encode`), and so
//! does hyper on HTTP/2 where they apply; the access log's `$response_header_*` reads the same fields, as
//! Unit logs what it sent.

use std::time::SystemTime;

use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Version, header};

use super::passed::View;
use crate::http1::Fields;

/// The response as the connection is about to frame it.
pub(super) struct Framing<'a> {
    pub method: &'a Method,
    pub version: Version,
    pub status: StatusCode,
    /// The body's exact length, when it is known before it is sent.
    pub length: Option<u64>,
}

/// Adds to `headers` the fields written for a response framed as `f` that neither it nor the fields
/// `passed` on with it ([`super::passed`]) already have.
pub(super) fn add(headers: &mut HeaderMap, passed: Option<&Fields>, f: &Framing<'_>) {
    let has = |headers: &HeaderMap, name: &HeaderName| View::new(headers, passed).contains(name);
    if !has(headers, &header::DATE) {
        headers.insert(header::DATE, date());
    }
    if has(headers, &header::CONTENT_LENGTH) || has(headers, &header::TRANSFER_ENCODING) {
        return;
    }
    let no_length = f.status.is_informational()
        || matches!(f.status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED)
        || (f.method == Method::CONNECT && f.status.is_success());
    match f.length {
        // `Content-Length: 0` for an empty body, except to HEAD.
        Some(0) if no_length || f.method == Method::HEAD => {}
        Some(n) if !no_length => {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
        Some(_) => {}
        None if no_length || f.method == Method::HEAD || f.version != Version::HTTP_11 => {}
        None => {
            headers.insert(
                header::TRANSFER_ENCODING,
                HeaderValue::from_static("chunked"),
            );
        }
    }
}

/// The `Date` field's value for now, formatted once a second per thread (every answer carries it).
fn date() -> HeaderValue {
    thread_local! {
        static NOW: std::cell::RefCell<(u64, HeaderValue)> =
            const { std::cell::RefCell::new((u64::MAX, HeaderValue::from_static(""))) };
    }
    let now = SystemTime::now();
    let second = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    NOW.with_borrow_mut(|(at, value)| {
        if *at != second {
            let text = httpdate::fmt_http_date(now);
            *value = HeaderValue::try_from(text).unwrap_or_else(|_| HeaderValue::from_static(""));
            *at = second;
        }
        value.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(method: &Method, status: u16, version: Version, length: Option<u64>) -> HeaderMap {
        let mut h = HeaderMap::new();
        let f = Framing {
            method,
            version,
            status: StatusCode::from_u16(status).unwrap(),
            length,
        };
        add(&mut h, None, &f);
        h
    }

    #[test]
    fn adds_what_hyper_writes() {
        let get = Method::GET;
        let h = framed(&get, 200, Version::HTTP_11, Some(5));
        assert_eq!(h["content-length"], "5");
        assert!(h.contains_key("date"));
        assert_eq!(
            framed(&get, 200, Version::HTTP_11, Some(0))["content-length"],
            "0"
        );
        assert_eq!(
            framed(&get, 200, Version::HTTP_11, None)["transfer-encoding"],
            "chunked"
        );
        assert!(!framed(&get, 200, Version::HTTP_10, None).contains_key("transfer-encoding"));
        assert!(!framed(&get, 204, Version::HTTP_11, Some(0)).contains_key("content-length"));
        assert!(!framed(&get, 304, Version::HTTP_11, None).contains_key("transfer-encoding"));
        let head = Method::HEAD;
        assert!(!framed(&head, 200, Version::HTTP_11, Some(0)).contains_key("content-length"));
        assert_eq!(
            framed(&head, 200, Version::HTTP_11, Some(7))["content-length"],
            "7"
        );
    }

    #[test]
    fn keeps_what_the_response_has() {
        let mut h = HeaderMap::new();
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert(header::DATE, HeaderValue::from_static("then"));
        let f = Framing {
            method: &Method::GET,
            version: Version::HTTP_11,
            status: StatusCode::OK,
            length: Some(3),
        };
        add(&mut h, None, &f);
        assert_eq!(h["date"], "then");
        assert!(!h.contains_key("content-length"));
    }
}
