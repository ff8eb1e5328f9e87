//! The spelling of an HTTP/1 response's header names that hyper's title case would not give.
//!
//! HTTP/1 connections write names in title case (`title_case_headers`): `Content-Type`, `Last-Modified`, the
//! canonical case of every field rein writes itself but `ETag`. A name spelled otherwise (an upstream's
//! `x-bar`, PHP's `Content-type`, a configuration's `x-Added`, rein's `ETag`) is written from hyper's header
//! case map, a response extension hyper reads when it writes the head (documented with hyper's
//! `preserve_header_case`). That map's type is private to hyper, which fills it only while parsing a head
//! with `preserve_header_case` on. So the map is made by hyper's own HTTP/1 client parsing a head of just those
//! names from memory, once per distinct set of spellings, and kept: each response then carries a clone. The
//! common response, whose names are all title case, needs no map and costs nothing here.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{Extensions, HeaderMap, Request, Response, header};
use http_body_util::Empty;
use hyper::rt::{Read, ReadBufCursor, Write};

use crate::body::Body;
use crate::field_case::FieldCase;

/// Distinct sets of spellings kept at most; past this the store starts again (an upstream that invents
/// names per answer costs a parse per answer, not memory).
const KEPT: usize = 256;

/// The status line of the heads parsed for their names: no body to frame, a reason hyper knows (a reason it
/// does not know would add a second extension).
const STATUS_LINE: &[u8] = b"HTTP/1.1 204 No Content\r\n";

/// Gives `response` the case map its HTTP/1 head needs: the spellings `case` recorded, `Server` aside (rein
/// writes its own), and `ETag` when rein wrote that field itself.
pub(crate) fn apply(response: &mut Response<Body>, case: Option<FieldCase>) {
    let headers = response.headers();
    let map = match &case {
        None if headers.contains_key(header::ETAG) => etag_map().cloned(),
        None => return,
        Some(case) => match spelled_lines(case, headers) {
            Some(lines) => kept_map(&lines),
            None => return,
        },
    };
    if let Some(map) = map {
        response.extensions_mut().extend(map);
    }
}

/// `Spelling: x` for each field of a recorded name that the response still has, `ETag` added when rein
/// wrote it; `None` if there is none.
fn spelled_lines(case: &FieldCase, headers: &HeaderMap) -> Option<Vec<u8>> {
    let mut lines = Vec::new();
    let mut etag_spelled = false;
    for (name, spelling) in case.iter() {
        if name == header::SERVER {
            continue;
        }
        etag_spelled |= name == header::ETAG;
        // hyper takes one spelling per field, in order; a field with none left is written in title case.
        for _ in headers.get_all(name) {
            lines.extend_from_slice(spelling);
            lines.extend_from_slice(b": x\r\n");
        }
    }
    if !etag_spelled && headers.contains_key(header::ETAG) {
        lines.extend_from_slice(b"ETag: x\r\n");
    }
    (!lines.is_empty()).then_some(lines)
}

/// The map of the answers whose only name to spell is rein's `ETag` (every static file's), kept apart.
fn etag_map() -> Option<&'static Extensions> {
    static ETAG: OnceLock<Option<Extensions>> = OnceLock::new();
    ETAG.get_or_init(|| parsed_map(b"ETag: x\r\n")).as_ref()
}

/// The map for `lines`, parsed once and kept.
fn kept_map(lines: &[u8]) -> Option<Extensions> {
    static KEPT_MAPS: OnceLock<Mutex<HashMap<Box<[u8]>, Extensions>>> = OnceLock::new();
    let kept = KEPT_MAPS.get_or_init(Default::default);
    if let Some(map) = kept.lock().unwrap_or_else(|e| e.into_inner()).get(lines) {
        return Some(map.clone());
    }
    let map = parsed_map(lines)?;
    let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
    if kept.len() >= KEPT {
        kept.clear();
    }
    kept.insert(lines.into(), map.clone());
    Some(map)
}

/// The extensions hyper's client gives an answer whose head holds `lines`, parsed with
/// `preserve_header_case`: hyper's case map and nothing else. `None` (names then in title case) if hyper
/// did not answer as expected.
fn parsed_map(lines: &[u8]) -> Option<Extensions> {
    let mut head = Vec::with_capacity(STATUS_LINE.len() + lines.len() + 2);
    head.extend_from_slice(STATUS_LINE);
    head.extend_from_slice(lines);
    head.extend_from_slice(b"\r\n");
    let fields = lines.iter().filter(|&&b| b == b'\n').count();
    let map = parse(
        Canned {
            answer: head,
            asked: false,
        },
        fields,
    );
    if map.is_none() {
        tracing::warn!("hyper made no header case map: header names keep title case");
    }
    map
}

fn parse(io: Canned, fields: usize) -> Option<Extensions> {
    let mut cx = Context::from_waker(Waker::noop());
    let handshake = hyper::client::conn::http1::Builder::new()
        .preserve_header_case(true)
        .max_headers(fields.max(1))
        .handshake::<_, Empty<Bytes>>(io);
    let Poll::Ready(Ok((mut send, conn))) = pin!(handshake).poll(&mut cx) else {
        return None;
    };
    let mut conn = pin!(conn);
    let mut answer = pin!(send.send_request(Request::new(Empty::new())));
    // Everything is in memory: the exchange completes within a few turns or not at all.
    for _ in 0..8 {
        if let Poll::Ready(Err(_)) = conn.as_mut().poll(&mut cx) {
            return None;
        }
        if let Poll::Ready(answer) = answer.as_mut().poll(&mut cx) {
            let mut extensions = std::mem::take(answer.ok()?.extensions_mut());
            return (extensions.len() == 1).then(|| std::mem::take(&mut extensions));
        }
    }
    None
}

/// A peer that takes any request and then answers with `answer` (hyper's client refuses an answer that
/// comes before its request), then waits forever.
struct Canned {
    answer: Vec<u8>,
    asked: bool,
}

impl Read for Canned {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.asked || this.answer.is_empty() {
            return Poll::Pending;
        }
        let n = this.answer.len().min(buf.remaining());
        buf.put_slice(&this.answer[..n]);
        this.answer.drain(..n);
        Poll::Ready(Ok(()))
    }
}

impl Write for Canned {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().asked = true;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
#[path = "case_map_tests.rs"]
mod tests;
