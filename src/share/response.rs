//! The HTTP half of a share request: turning an opened representation plus the request's conditional and
//! `Range` headers into 200 / 206 / 304 / 412 / 416, and the small fixed answers (301, 405, 500).
//!
//! Responses are built by inserting into a `Response`'s header map, never through `Response::builder`, so
//! there is no `Result` to unwrap; a value that is not a valid header (impossible for what is formatted here)
//! is skipped.

use http::header::{self, HeaderName};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

use super::conditional::{self, Precondition, Validators};
use super::lookup::Representation;
use super::multipart::Multipart;
use super::range::{self, ByteRange, RangeOutcome};
use super::stream::{self, Segment};
use crate::body::{self, Body};

/// What must be escaped for a decoded path to be a valid `Location`.
const LOCATION: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b']')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// A file response's header map, sized for all its fields and those added after it (`Server`, and `Date` on
/// HTTP/2, where hyper inserts it into the map): the default size is full at six and would be regrown, a
/// copy of every field, on each response.
fn fields() -> HeaderMap {
    HeaderMap::with_capacity(12)
}

fn bare(status: StatusCode) -> Response<Body> {
    let mut resp = Response::new(body::empty());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(0u64));
    resp
}

fn set(headers: &mut HeaderMap, name: HeaderName, value: impl AsRef<str>) {
    if let Ok(v) = HeaderValue::from_str(value.as_ref()) {
        headers.insert(name, v);
    }
}

pub fn method_not_allowed() -> Response<Body> {
    let mut resp = bare(StatusCode::METHOD_NOT_ALLOWED);
    set(resp.headers_mut(), header::ALLOW, "GET, HEAD");
    resp
}

pub fn internal_error() -> Response<Body> {
    bare(StatusCode::INTERNAL_SERVER_ERROR)
}

/// 301 to the directory's URI with a trailing slash.
pub fn directory_redirect(uri_path: &str, query: &str) -> Response<Body> {
    let mut resp = bare(StatusCode::MOVED_PERMANENTLY);
    let mut location = format!("{}/", utf8_percent_encode(uri_path, LOCATION));
    if !query.is_empty() {
        location.push('?');
        location.push_str(query);
    }
    set(resp.headers_mut(), header::LOCATION, location);
    resp
}

/// The answer for a regular file (or its sibling) of type `mime` (`None`: no `Content-Type`, as in Unit).
pub fn file(
    rep: Representation,
    vary: bool,
    mime: Option<HeaderValue>,
    head: bool,
    req: &HeaderMap,
) -> Response<Body> {
    let v = rep.validators.clone();
    let mut resp = match conditional::evaluate(req, &v) {
        Precondition::Failed => bare(StatusCode::PRECONDITION_FAILED),
        Precondition::NotModified => not_modified(&v),
        Precondition::Proceed => content(rep, &v, mime, head, req),
    };
    if vary {
        set(resp.headers_mut(), header::VARY, "Accept-Encoding");
    }
    resp
}

fn not_modified(v: &Validators) -> Response<Body> {
    let mut resp = Response::new(body::empty());
    *resp.status_mut() = StatusCode::NOT_MODIFIED;
    validator_headers(resp.headers_mut(), v);
    resp
}

fn validator_headers(h: &mut HeaderMap, v: &Validators) {
    h.insert(header::ETAG, v.etag.clone());
    h.insert(header::LAST_MODIFIED, v.last_modified.clone());
}

fn content(
    rep: Representation,
    v: &Validators,
    mime: Option<HeaderValue>,
    head: bool,
    req: &HeaderMap,
) -> Response<Body> {
    let size = rep.size;
    let (status, segments, mut h) = match requested_ranges(req, v, size) {
        RangeOutcome::Full => (StatusCode::OK, whole(size), fields()),
        RangeOutcome::Partial(ranges) => {
            let name = mime
                .as_ref()
                .and_then(|m| std::str::from_utf8(m.as_bytes()).ok());
            partial(&ranges, size, name)
        }
        RangeOutcome::Unsatisfiable => return unsatisfiable(size),
    };
    if let Some(mime) = mime.filter(|_| !h.contains_key(header::CONTENT_TYPE)) {
        h.insert(header::CONTENT_TYPE, mime);
    }
    let length: u64 = segments.iter().map(Segment::len).sum();
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if let Some(coding) = rep.coding {
        set(&mut h, header::CONTENT_ENCODING, coding.token());
    }
    validator_headers(&mut h, v);
    let body = if head {
        body::empty()
    } else {
        stream::body(rep.source, segments)
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    *resp.headers_mut() = h;
    resp
}

/// A `Range` is used only when it is the only one and `If-Range` (if any) still names this representation.
fn requested_ranges(req: &HeaderMap, v: &Validators, size: u64) -> RangeOutcome {
    let mut values = req.get_all(header::RANGE).iter();
    match (values.next(), values.next()) {
        (Some(value), None) if conditional::if_range_allows(req, v) => {
            range::resolve(value.as_bytes(), size)
        }
        _ => RangeOutcome::Full,
    }
}

fn whole(size: u64) -> Vec<Segment> {
    vec![Segment::File {
        offset: 0,
        len: size,
    }]
}

fn partial(
    ranges: &[ByteRange],
    size: u64,
    mime: Option<&str>,
) -> (StatusCode, Vec<Segment>, HeaderMap) {
    let mut h = fields();
    let segments = match ranges {
        [one] => {
            set(&mut h, header::CONTENT_RANGE, one.content_range(size));
            vec![Segment::File {
                offset: one.first,
                len: one.len(),
            }]
        }
        _ => {
            let multipart = Multipart::new(ranges, size, mime);
            set(&mut h, header::CONTENT_TYPE, multipart.content_type());
            multipart.segments
        }
    };
    (StatusCode::PARTIAL_CONTENT, segments, h)
}

fn unsatisfiable(size: u64) -> Response<Body> {
    let mut resp = bare(StatusCode::RANGE_NOT_SATISFIABLE);
    set(
        resp.headers_mut(),
        header::CONTENT_RANGE,
        format!("bytes */{size}"),
    );
    resp
}
