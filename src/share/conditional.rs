//! Validators of a served representation (ETag, Last-Modified) and the conditional request headers that test
//! them, evaluated in RFC 9110 §13.2.2 order: `If-Match`, else `If-Unmodified-Since` (412 on failure); then
//! `If-None-Match`, else `If-Modified-Since` (304); `If-Range` is asked separately by the range logic.
//!
//! The ETag is nginx's strong `"<mtime hex>-<size hex>"`, with `-br` / `-gzip` appended for a precompressed
//! sibling so the two representations never share a tag. A header that cannot be parsed is treated as
//! absent (dates) or as matching nothing (tag lists), never as an error.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderName, HeaderValue, header};

/// httpdate cannot format dates before 1970 or after 9999: mtimes are clamped into that range.
const MAX_HTTP_DATE: u64 = 253_402_300_799;

/// What a representation is compared by, with its header values ready: made once per version of a cached
/// file rather than formatted for every response.
#[derive(Debug, Clone)]
pub struct Validators {
    /// With its quotes: `"65f1c2a0-1a2b"`.
    pub etag: HeaderValue,
    /// Whole seconds since the epoch, as HTTP dates carry them.
    pub mtime: u64,
    /// `mtime` as an HTTP date.
    pub last_modified: HeaderValue,
}

impl Validators {
    pub fn new(mtime: i64, size: u64, coding: Option<&str>) -> Self {
        let mtime = u64::try_from(mtime).unwrap_or(0).min(MAX_HTTP_DATE);
        let etag = match coding {
            Some(c) => format!("\"{mtime:x}-{size:x}-{c}\""),
            None => format!("\"{mtime:x}-{size:x}\""),
        };
        let date = httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(mtime));
        Validators {
            etag: ascii(etag),
            mtime,
            last_modified: ascii(date),
        }
    }
}

/// A header value from text formatted here (hex digits, quotes, a coding token, an HTTP date), which is always
/// valid; an empty value stands in should that ever change.
fn ascii(text: String) -> HeaderValue {
    HeaderValue::try_from(text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The verdict of the precondition headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    Proceed,
    NotModified,
    Failed,
}

pub fn evaluate(headers: &HeaderMap, v: &Validators) -> Precondition {
    if headers.contains_key(header::IF_MATCH) {
        if !tag_list_matches(headers, header::IF_MATCH, &v.etag, true) {
            return Precondition::Failed;
        }
    } else if let Some(since) = date(headers, header::IF_UNMODIFIED_SINCE)
        && v.mtime > since
    {
        return Precondition::Failed;
    }
    if headers.contains_key(header::IF_NONE_MATCH) {
        if tag_list_matches(headers, header::IF_NONE_MATCH, &v.etag, false) {
            return Precondition::NotModified;
        }
    } else if let Some(since) = date(headers, header::IF_MODIFIED_SINCE)
        && v.mtime <= since
    {
        return Precondition::NotModified;
    }
    Precondition::Proceed
}

/// Whether a `Range` may be honoured: no `If-Range`, or one naming the current representation (a strong
/// ETag match, or exactly its Last-Modified date).
pub fn if_range_allows(headers: &HeaderMap, v: &Validators) -> bool {
    let Some(value) = headers.get(header::IF_RANGE) else {
        return true;
    };
    let bytes = value.as_bytes().trim_ascii();
    if bytes.starts_with(b"\"") || bytes.starts_with(b"W/") {
        return match parse_tags(bytes) {
            Some(tags) => tags.iter().any(|t| matches(t, &v.etag, true)),
            None => false,
        };
    }
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| httpdate::parse_http_date(s).ok())
        .is_some_and(|d| secs(d) == Some(v.mtime))
}

fn date(headers: &HeaderMap, name: HeaderName) -> Option<u64> {
    let s = headers.get(name)?.to_str().ok()?;
    secs(httpdate::parse_http_date(s.trim()).ok()?)
}

fn secs(t: SystemTime) -> Option<u64> {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// One element of an ETag list.
#[derive(Debug, PartialEq, Eq)]
enum Tag<'a> {
    Any,
    /// The opaque tag with its quotes, and whether it was weak (`W/`).
    Entity(&'a [u8], bool),
}

fn tag_list_matches(
    headers: &HeaderMap,
    name: HeaderName,
    etag: &HeaderValue,
    strong: bool,
) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value: &HeaderValue| parse_tags(value.as_bytes()))
        .flatten()
        .any(|t| matches(&t, etag, strong))
}

/// Strong comparison needs both tags strong; weak comparison ignores `W/`. Our own tags are always strong.
fn matches(tag: &Tag<'_>, etag: &HeaderValue, strong: bool) -> bool {
    match tag {
        Tag::Any => true,
        Tag::Entity(opaque, weak) => !(strong && *weak) && *opaque == etag.as_bytes(),
    }
}

/// Parses `*` or `"a", W/"b"`. Commas may occur inside quotes, so this scans instead of splitting.
/// `None` for a malformed list: it then matches nothing.
fn parse_tags(mut s: &[u8]) -> Option<Vec<Tag<'_>>> {
    let mut tags = Vec::new();
    loop {
        s = s.trim_ascii_start();
        while let Some(rest) = s.strip_prefix(b",") {
            s = rest.trim_ascii_start();
        }
        if s.is_empty() {
            return Some(tags);
        }
        if let Some(rest) = s.strip_prefix(b"*") {
            tags.push(Tag::Any);
            s = rest;
        } else {
            let (weak, rest) = match s.strip_prefix(b"W/") {
                Some(rest) => (true, rest),
                None => (false, s),
            };
            let body = rest.strip_prefix(b"\"")?;
            let close = body.iter().position(|&b| b == b'"')?;
            tags.push(Tag::Entity(&rest[..close + 2], weak));
            s = &body[close + 1..];
        }
        // After an element: end, or a comma.
        s = s.trim_ascii_start();
        if !s.is_empty() && !s.starts_with(b",") {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v() -> Validators {
        Validators::new(1_700_000_000, 1234, None)
    }

    fn h(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, val) in pairs {
            m.append(*k, HeaderValue::from_str(val).expect("test header"));
        }
        m
    }

    const DATE: &str = "Tue, 14 Nov 2023 22:13:20 GMT"; // = 1_700_000_000
    const EARLIER: &str = "Tue, 14 Nov 2023 22:13:19 GMT";

    #[test]
    fn validators() {
        let v = v();
        assert_eq!(v.etag, "\"6553f100-4d2\"");
        assert_eq!(v.last_modified, DATE);
        assert_eq!(Validators::new(1, 2, Some("br")).etag, "\"1-2-br\"");
        assert_eq!(
            Validators::new(-5, 0, None).last_modified,
            "Thu, 01 Jan 1970 00:00:00 GMT"
        );
        assert_eq!(Validators::new(i64::MAX, 0, None).mtime, MAX_HTTP_DATE);
    }

    #[test]
    fn tag_lists() {
        let got = parse_tags(br#" "a,b" , W/"c",, *"#).expect("valid");
        assert_eq!(
            got,
            vec![
                Tag::Entity(br#""a,b""#, false),
                Tag::Entity(br#""c""#, true),
                Tag::Any
            ]
        );
        assert_eq!(parse_tags(b""), Some(vec![]));
        assert_eq!(parse_tags(b"abc"), None);
        assert_eq!(parse_tags(br#""unterminated"#), None);
        assert_eq!(parse_tags(br#""a" "b""#), None);
    }

    #[test]
    fn if_none_match_uses_weak_comparison() {
        let etag = v().etag.to_str().expect("ascii").to_owned();
        assert_eq!(
            evaluate(&h(&[("if-none-match", &etag)]), &v()),
            Precondition::NotModified
        );
        let weak = format!("\"x\", W/{etag}");
        assert_eq!(
            evaluate(&h(&[("if-none-match", &weak)]), &v()),
            Precondition::NotModified
        );
        assert_eq!(
            evaluate(&h(&[("if-none-match", "*")]), &v()),
            Precondition::NotModified
        );
        assert_eq!(
            evaluate(&h(&[("if-none-match", "\"x\"")]), &v()),
            Precondition::Proceed
        );
        // If-None-Match present: If-Modified-Since is not consulted.
        let hm = h(&[("if-none-match", "\"x\""), ("if-modified-since", DATE)]);
        assert_eq!(evaluate(&hm, &v()), Precondition::Proceed);
    }

    #[test]
    fn if_modified_since() {
        assert_eq!(
            evaluate(&h(&[("if-modified-since", DATE)]), &v()),
            Precondition::NotModified
        );
        assert_eq!(
            evaluate(&h(&[("if-modified-since", EARLIER)]), &v()),
            Precondition::Proceed
        );
        assert_eq!(
            evaluate(&h(&[("if-modified-since", "garbage")]), &v()),
            Precondition::Proceed
        );
    }

    #[test]
    fn if_match_and_unmodified_since() {
        let etag = v().etag.to_str().expect("ascii").to_owned();
        assert_eq!(
            evaluate(&h(&[("if-match", &etag)]), &v()),
            Precondition::Proceed
        );
        assert_eq!(
            evaluate(&h(&[("if-match", "*")]), &v()),
            Precondition::Proceed
        );
        let weak = format!("W/{etag}");
        assert_eq!(
            evaluate(&h(&[("if-match", &weak)]), &v()),
            Precondition::Failed
        );
        assert_eq!(
            evaluate(&h(&[("if-match", "\"nope\"")]), &v()),
            Precondition::Failed
        );
        assert_eq!(
            evaluate(&h(&[("if-unmodified-since", EARLIER)]), &v()),
            Precondition::Failed
        );
        assert_eq!(
            evaluate(&h(&[("if-unmodified-since", DATE)]), &v()),
            Precondition::Proceed
        );
        // If-Match present and passing: If-Unmodified-Since is ignored.
        let hm = h(&[("if-match", "*"), ("if-unmodified-since", EARLIER)]);
        assert_eq!(evaluate(&hm, &v()), Precondition::Proceed);
    }

    #[test]
    fn if_range() {
        let etag = v().etag.to_str().expect("ascii").to_owned();
        assert!(if_range_allows(&h(&[]), &v()));
        assert!(if_range_allows(&h(&[("if-range", &etag)]), &v()));
        assert!(!if_range_allows(
            &h(&[("if-range", &format!("W/{etag}"))]),
            &v()
        ));
        assert!(!if_range_allows(&h(&[("if-range", "\"other\"")]), &v()));
        assert!(if_range_allows(&h(&[("if-range", DATE)]), &v()));
        assert!(!if_range_allows(&h(&[("if-range", EARLIER)]), &v()));
        assert!(!if_range_allows(&h(&[("if-range", "junk")]), &v()));
    }
}
