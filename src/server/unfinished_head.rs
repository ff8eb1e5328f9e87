//! The access log line of a request whose head never became a request, as Unit logs every request it began to
//! read: a head the client cut short (400, nothing sent), one not whole by `header_read_timeout` (408), a
//! malformed one (400) and one too large (431; 414 for a target too long for the HTTP parser).
//!
//! hyper hands rein only the heads it parsed; these are recognised from the error the connection ended with.
//! What is known of them is the connection: `$remote_addr`, `$time_local`, `$status`, `$body_bytes_sent`,
//! `$request_time`; `$request_line`, `$method`, `$uri` and the fields are absent (`-` in the log), as in Unit.

use std::error::Error;
use std::io;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::{HeaderMap, StatusCode};
use http_body::Body as _;

use super::Shared;
use super::conn::ConnInfo;
use super::tracked::{LogEntry, write_log};
use crate::request::RequestInfo;

/// Writes the line for the head `error` left unfinished, if it ended one.
pub(super) fn log(error: &(dyn Error + 'static), info: &ConnInfo, shared: &Shared) {
    // Taken by the handler when a head becomes a request: still here, it never did.
    let began = info.state.take_head_started();
    let Some((status, sent)) = ending(error, began.is_some()) else {
        return;
    };
    write_line(status, sent, began, info, shared);
}

/// Writes the line of a head rein's HTTP/1 connection answered with `status` (or could not answer: `sent`
/// is then 0).
pub(super) fn log_status(status: StatusCode, sent: u64, info: &ConnInfo, shared: &Shared) {
    let began = info.state.take_head_started();
    write_line(status, sent, began, info, shared);
}

fn write_line(
    status: StatusCode,
    sent: u64,
    began: Option<Instant>,
    info: &ConnInfo,
    shared: &Shared,
) {
    let published = info.published(shared);
    let Some(sink) = published.access_log.clone() else {
        return;
    };
    let started = began.unwrap_or_else(Instant::now);
    let wall = SystemTime::now()
        .checked_sub(started.elapsed())
        .unwrap_or_else(SystemTime::now);
    let entry = LogEntry {
        sink,
        published: Arc::clone(&published),
        request: RequestInfo::unparsed(info.scheme, info.remote, info.local),
        status: status.as_u16(),
        headers: HeaderMap::new(),
        started,
        wall,
    };
    write_log(entry, sent);
}

/// The status a head ended with and the body bytes sent with it, or `None` when `error` ended no head.
fn ending(error: &(dyn Error + 'static), began: bool) -> Option<(StatusCode, u64)> {
    if let Some(e) = find::<hyper::Error>(error) {
        // An HTTP/2 preface on an HTTP/1 connection: hyper closes without an answer.
        if e.is_parse_version_h2() {
            return None;
        }
        if e.is_parse_too_large() {
            let status = too_large(e);
            return Some((status, hyper_answer_body(status)));
        }
        if e.is_parse() {
            let status = StatusCode::BAD_REQUEST;
            return Some((status, hyper_answer_body(status)));
        }
        // The client closed before its head was whole: Unit logs a 400 it could not send.
        if e.is_incomplete_message() && began {
            return Some((StatusCode::BAD_REQUEST, 0));
        }
    }
    let timed_out = find::<io::Error>(error).is_some_and(|e| e.kind() == io::ErrorKind::TimedOut);
    (timed_out && began).then(|| (StatusCode::REQUEST_TIMEOUT, timeout_answer_body()))
}

/// hyper says 414 for a target longer than it can hold, 431 for any other head too large.
fn too_large(e: &hyper::Error) -> StatusCode {
    if e.to_string().contains("URI") {
        StatusCode::URI_TOO_LONG
    } else {
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
    }
}

/// The body bytes of hyper's own answer to a head it could not parse: rein's error page, which the socket
/// wrapper puts in that answer (`error_answer`).
fn hyper_answer_body(status: StatusCode) -> u64 {
    super::actions::error_text(status).len() as u64
}

/// The body of the 408 the socket wrapper writes at `header_read_timeout`: rein's error page.
pub(super) fn timeout_answer_body() -> u64 {
    super::actions::error(StatusCode::REQUEST_TIMEOUT)
        .body()
        .size_hint()
        .exact()
        .unwrap_or(0)
}

/// The first error of type `T` in `error`'s chain, `error` itself included.
fn find<'e, T: Error + 'static>(error: &'e (dyn Error + 'static)) -> Option<&'e T> {
    let mut at = Some(error);
    while let Some(e) = at {
        if let Some(found) = e.downcast_ref::<T>() {
            return Some(found);
        }
        at = e.source();
    }
    None
}
