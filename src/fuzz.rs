//! Entry points of the fuzz targets (fuzz/, run by scripts/fuzz.sh): one function per parser or decoder of
//! rein's own, taking any bytes. Each feeds them to the parser and asserts what must hold for every input
//! (no panic, and the invariants below); a failed assertion is a crash the fuzzer reports.
//!
//! They live in the library, behind the `fuzzing` feature, so the parsers can stay `pub(crate)`; the unit
//! tests run every seed of fuzz/seeds/ and every crash found so far through them (`fuzz_tests.rs`).

use bytes::BytesMut;
use http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use serde_json::Value;

use crate::config::JsonPath;
use crate::fastcgi::cgi::{HeadParser, parse_head};
use crate::fastcgi::params::Params;
use crate::fastcgi::record::{Decoder as RecordDecoder, Record};
use crate::http1::chunked::{Decoded, Decoder as ChunkDecoder};
use crate::http1::head::{Framing, RequestHead, parse_response};
use crate::request::{RequestInfo, normalize_path};
use crate::route::pattern::{Encoding, PatternSet};
use crate::share::conditional::{Validators, evaluate, if_range_allows};
use crate::share::range::{MAX_RANGES, RangeOutcome, resolve};
use crate::vars::{ResponseInfo, Template, VarContext};

/// The configuration compiler: any JSON document compiles or is refused with a `ConfigError`.
pub fn config(data: &[u8]) {
    if let Ok(doc) = serde_json::from_slice::<Value>(data) {
        let _ = crate::compile::compile(&doc);
    }
}

/// A route pattern (first line; its first byte picks the encoding and case rule) against a value (the
/// rest). A wildcard pattern must match itself with each `*` replaced by the value.
pub fn pattern(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (text, value) = split_line(rest);
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let encoding = [Encoding::None, Encoding::Uri, Encoding::UriPlus][usize::from(mode % 3)];
    let case_insensitive = mode & 0x10 != 0;
    let Ok(set) = PatternSet::compile_encoded(
        &Value::String(text.to_owned()),
        &JsonPath::root(),
        case_insensitive,
        encoding,
    ) else {
        return;
    };
    let _ = set.matches_bytes(value);
    if encoding == Encoding::None && !text.starts_with(['!', '~']) {
        let filled = text.as_bytes().split(|&b| b == b'*').collect::<Vec<_>>();
        let filled = filled.join(value);
        assert!(set.matches_bytes(&filled), "{text:?} misses {filled:?}");
    }
}

/// A template (first line) rendered against a request whose target is the second line and whose header
/// fields are the other lines. Every expansion starts with the template's fixed prefix: a share's
/// confinement rests on it.
pub fn template(data: &[u8]) {
    let (text, rest) = split_line(data);
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let Ok(template) = Template::compile(text, &JsonPath::root()) else {
        return;
    };
    let Some(req) = request(rest) else {
        return;
    };
    let response = ResponseInfo {
        status: 200,
        body_bytes_sent: data.len() as u64,
        headers: req.headers.clone(),
        request_time: std::time::Duration::from_millis(data.len() as u64),
        started: std::time::SystemTime::UNIX_EPOCH,
    };
    for response in [None, Some(&response)] {
        let ctx = VarContext {
            req: &req,
            response,
        };
        let out = template.render(&ctx);
        assert!(out.starts_with(template.fixed_prefix()), "{out:?}");
        if template.is_literal() {
            assert_eq!(out, template.source());
        }
        let mut log = String::new();
        template.render_log_into(&ctx, &mut log);
    }
}

/// Path normalisation, of a request's path and of a `rewrite` result: a normal path starts with `/`, has
/// no empty, `.` or `..` segment and no NUL, and normalises to itself; a rewritten target holds only bytes
/// a request line can carry.
pub fn path(data: &[u8]) {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(path) = normalize_path(raw) {
        assert_normal(&path);
    }
    let Some(mut req) = request(b"/") else {
        return;
    };
    if req.rewrite(raw).is_ok() {
        assert_normal(&req.path);
        assert!(
            req.target().bytes().all(|b| b.is_ascii_graphic()),
            "{:?}",
            req.target()
        );
    }
}

fn assert_normal(path: &str) {
    assert!(path.starts_with('/'), "{path:?}");
    assert!(!path.contains('\0'), "{path:?}");
    let inner = path[1..].strip_suffix('/').unwrap_or(&path[1..]);
    if !inner.is_empty() {
        assert!(
            inner.split('/').all(|s| !matches!(s, "" | "." | "..")),
            "{path:?}"
        );
    }
    if !path.contains('%') {
        assert_eq!(normalize_path(path).as_deref(), Ok(path));
    }
}

/// A `Range` header (after 8 bytes of representation size): every range served lies inside the file.
pub fn range(data: &[u8]) {
    let (size, header) = take_u64(data);
    let size = size % (1 << 40);
    if let RangeOutcome::Partial(ranges) = resolve(header, size) {
        assert!(!ranges.is_empty() && ranges.len() <= MAX_RANGES);
        for r in &ranges {
            assert!(r.first <= r.last && r.last < size, "{r:?} of {size}");
            let _ = r.content_range(size);
        }
    }
}

/// The conditional headers (after 8 bytes of mtime and 8 of size), one per line, the line's first byte
/// picking which: the verdict never panics, and a request without them proceeds.
pub fn conditional(data: &[u8]) {
    let (mtime, rest) = take_u64(data);
    let (size, rest) = take_u64(rest);
    let v = Validators::new(mtime as i64, size, (size % 3 == 0).then_some("gzip"));
    assert!(!v.last_modified.is_empty() && !v.etag.is_empty());
    const NAMES: [HeaderName; 5] = [
        header::IF_MATCH,
        header::IF_NONE_MATCH,
        header::IF_MODIFIED_SINCE,
        header::IF_UNMODIFIED_SINCE,
        header::IF_RANGE,
    ];
    let mut headers = HeaderMap::new();
    for line in rest.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if let Ok(value) = HeaderValue::from_bytes(&line[1..]) {
            headers.append(NAMES[usize::from(line[0]) % NAMES.len()].clone(), value);
        }
    }
    let _ = evaluate(&headers, &v);
    let _ = if_range_allows(&headers, &v);
    if headers.is_empty() {
        assert_eq!(
            evaluate(&headers, &v),
            crate::share::conditional::Precondition::Proceed
        );
    }
}

/// The HTTP/1 client's response head parser (the first byte says the request's method and whether it asked
/// to upgrade, and the size of the pieces the answer arrives in), then the body's chunked decoder when the
/// head says chunked. The pieces' size changes nothing: the answer parsed whole parses alike.
pub fn http1_response(data: &[u8]) {
    let Some((&mode, wire)) = data.split_first() else {
        return;
    };
    let method = if mode & 1 == 0 {
        Method::GET
    } else {
        Method::HEAD
    };
    let request = RequestHead::new(&method, "/", &HeaderMap::new(), false, mode & 2 != 0);
    let step = 1 + usize::from(mode >> 2);
    let whole = read_response(&request, wire, wire.len().max(1));
    let pieces = read_response(&request, wire, step);
    assert_eq!(whole, pieces, "pieces of {step}");
}

/// rein's HTTP/1 server reading request heads: the whole input at once and in pieces of the first byte's
/// size give the same head (or the same refusal); a parsed head consumes bytes; and the body its framing
/// announces, when chunked, decodes the same both ways.
pub fn http1_request(data: &[u8]) {
    let Some((&step, wire)) = data.split_first() else {
        return;
    };
    let whole = read_request(wire, wire.len().max(1));
    let step = usize::from(step).max(1);
    let pieces = read_request(wire, step);
    assert_eq!(whole, pieces, "pieces of {step}");
}

/// What [`read_request`] made of a request: its method, target, fields and framing (or the status it was
/// refused with), and its chunked body.
type Asked = Option<
    Result<
        (
            String,
            String,
            Vec<(String, Vec<u8>)>,
            String,
            Option<Vec<u8>>,
        ),
        u16,
    >,
>;

/// A small limit, so that heads too large are reached.
const FUZZ_MAX_HEAD: usize = 2048;

fn read_request(wire: &[u8], step: usize) -> Asked {
    use crate::server::{RequestFraming, parse_request_head};
    let mut input = wire.chunks(step);
    let mut buf = BytesMut::new();
    let head = loop {
        let before = buf.len();
        match parse_request_head(&mut buf, FUZZ_MAX_HEAD) {
            Ok(Some(head)) => {
                assert!(buf.len() < before, "a parsed head consumes bytes");
                break head;
            }
            Ok(None) => buf.extend_from_slice(input.next()?),
            Err(e) => return Some(Err(e.status().as_u16())),
        }
    };
    let parts = &head.parts;
    let fields = parts
        .headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
        .collect();
    let body = match head.framing {
        RequestFraming::Chunked => dechunk(&mut buf, &mut input),
        _ => None,
    };
    Some(Ok((
        parts.method.to_string(),
        parts.uri.to_string(),
        fields,
        format!("{:?}", head.framing),
        body,
    )))
}

/// What [`read_response`] made of an answer: its status and framing, and its chunked body.
type Answer = Option<(u16, Framing, Option<Vec<u8>>)>;

fn read_response(request: &RequestHead, wire: &[u8], step: usize) -> Answer {
    let mut input = wire.chunks(step);
    let mut buf = BytesMut::new();
    let head = loop {
        let before = buf.len();
        match parse_response(&mut buf, request) {
            Ok(Some(head)) => {
                assert!(buf.len() < before, "a parsed head consumes bytes");
                break head;
            }
            Ok(None) => buf.extend_from_slice(input.next()?),
            Err(_) => return None,
        }
    };
    let body = match head.framing {
        Framing::Chunked => dechunk(&mut buf, &mut input),
        _ => None,
    };
    Some((head.status.as_u16(), head.framing, body))
}

/// The chunked decoder alone, fed the whole body at once and in pieces of the first byte's size: both give
/// the same body, or both fail.
pub fn chunked(data: &[u8]) {
    let Some((&step, body)) = data.split_first() else {
        return;
    };
    let whole = dechunk(&mut BytesMut::new(), &mut body.chunks(body.len().max(1)));
    let step = usize::from(step).max(1);
    let pieces = dechunk(&mut BytesMut::new(), &mut body.chunks(step));
    assert_eq!(whole, pieces, "pieces of {step}");
}

/// The body `input` carries (after what `buf` holds), `None` on an error or a body cut short.
fn dechunk<'a>(buf: &mut BytesMut, input: &mut impl Iterator<Item = &'a [u8]>) -> Option<Vec<u8>> {
    let mut decoder = ChunkDecoder::default();
    let mut body = Vec::new();
    loop {
        match decoder.decode(buf).ok()? {
            Decoded::Data(data) => {
                assert!(!data.is_empty(), "empty data");
                body.extend_from_slice(&data);
            }
            Decoded::Done => return Some(body),
            Decoded::NeedMore => buf.extend_from_slice(input.next()?),
        }
    }
}

/// The FastCGI record decoder over a stream arriving in pieces of the first byte's size; each record's
/// content goes through the CGI head parser and the name-value pair decoder, and every record encodes back
/// to one that decodes equal.
pub fn fastcgi(data: &[u8]) {
    let Some((&step, stream)) = data.split_first() else {
        return;
    };
    let mut decoder = RecordDecoder::new();
    let mut input = stream.chunks(usize::from(step).max(1));
    let mut head = HeadParser::new();
    loop {
        match decoder.decode() {
            Ok(Some(record)) => check_record(&record, &mut head),
            Ok(None) => match input.next() {
                Some(piece) => decoder.push(piece),
                None => return,
            },
            Err(_) => return,
        }
    }
}

fn check_record(record: &Record, head: &mut HeadParser) {
    match record {
        Record::Stdout { data, .. } => {
            let _ = head.push(data.clone());
            let _ = parse_head(data);
        }
        Record::Params { data, .. }
        | Record::GetValues { data }
        | Record::GetValuesResult { data } => {
            if let Ok(params) = Params::decode(data) {
                let again = Params::decode(params.encoded()).map(|p| p.iter().count());
                assert_eq!(
                    again,
                    Ok(params.iter().count()),
                    "params re-encoded decode alike"
                );
            }
        }
        _ => {}
    }
    let mut buf = BytesMut::new();
    record.encode(&mut buf);
    let mut again = RecordDecoder::new();
    again.push(&buf);
    assert_eq!(again.decode().ok().flatten().as_ref(), Some(record));
}

/// A CGI response head (FastCGI's stdout) fed in pieces of the first byte's size parses as it does whole.
pub fn cgi_head(data: &[u8]) {
    let Some((&step, stdout)) = data.split_first() else {
        return;
    };
    let whole = parse_head(stdout).map(|found| found.map(|(head, _)| head));
    let mut parser = HeadParser::new();
    let mut pieces = Ok(None);
    for piece in stdout.chunks(usize::from(step).max(1)) {
        pieces = parser
            .push(bytes::Bytes::copy_from_slice(piece))
            .map(|found| found.map(|(head, _)| head));
        if !matches!(pieces, Ok(None)) {
            break;
        }
    }
    assert_eq!(whole, pieces, "pieces of {step}");
}

/// A certificate bundle (PEM: chain and key), as uploaded to `/certificates`.
pub fn tls_bundle(data: &[u8]) {
    let _ = crate::tls::Bundle::parse(data, None);
    let _ = crate::tls::Bundle::parse(data, Some(0));
}

/// The line before the first `\n`, and what follows it.
fn split_line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[]),
    }
}

/// A big-endian `u64` from the first 8 bytes (zero-padded), and the rest.
fn take_u64(data: &[u8]) -> (u64, &[u8]) {
    let n = data.len().min(8);
    let mut be = [0; 8];
    be[..n].copy_from_slice(&data[..n]);
    (u64::from_be_bytes(be), &data[n..])
}

/// A request whose target is the first line and whose header fields are the other lines (`name: value`);
/// `None` when the target is not one.
fn request(data: &[u8]) -> Option<RequestInfo> {
    let (target, fields) = split_line(data);
    let mut builder = http::Request::builder().uri(target);
    for line in fields.split(|&b| b == b'\n') {
        if let Some(colon) = line.iter().position(|&b| b == b':')
            && let Ok(name) = HeaderName::from_bytes(&line[..colon])
            && let Ok(value) = HeaderValue::from_bytes(line[colon + 1..].trim_ascii())
        {
            builder = builder.header(name, value);
        }
    }
    let (mut parts, ()) = builder.body(()).ok()?.into_parts();
    let remote = "192.0.2.1:1234".parse().ok();
    Some(RequestInfo::from_parts(&mut parts, "http", remote, None).0)
}

#[cfg(test)]
#[path = "fuzz_tests.rs"]
mod tests;
