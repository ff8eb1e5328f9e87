//! The response body wrapper that closes a request's books: when the connection has sent (or dropped) the body, the
//! connection returns to idle, the counters move, and the access log line is written with the bytes sent.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body as HttpBody, Frame, SizeHint};

use super::access_log::Sink;
use super::timeouts::{ConnState, InRequest};
use super::{Published, Shared};
use crate::body::Body;
use crate::request::RequestInfo;
use crate::stats::counters::TargetStats;
use crate::vars::{ResponseInfo, VarContext};

/// What the access log needs once the response is done.
pub struct LogEntry {
    pub sink: Sink,
    pub published: Arc<Published>,
    pub request: RequestInfo,
    pub status: u16,
    pub headers: HeaderMap,
    pub started: Instant,
    pub wall: SystemTime,
}

/// A request counted as in progress, on its connection and in the counters, until dropped: with the response
/// body once there is one, or with the handler if the client goes away first (an HTTP/2 stream reset).
pub struct Books {
    _request: InRequest,
    shared: Arc<Shared>,
}

impl Books {
    pub fn open(state: &Arc<ConnState>, shared: &Arc<Shared>) -> Books {
        shared.counters.request_started();
        Books {
            _request: state.begin_request(),
            shared: shared.clone(),
        }
    }
}

impl Drop for Books {
    fn drop(&mut self) {
        self.shared.counters.request_finished();
    }
}

/// What the metrics count of a finished request, on its listener and its route target: the counters were
/// reached when the connection arrived and when the request was routed, so finishing is a few atomic adds.
pub struct Meter {
    /// The connection, for its listener's counters: the connection's own `Arc`, which no other worker touches
    /// (cloning the listener's shared handle per request would bounce its count between cores).
    pub conn: Arc<super::conn::ConnInfo>,
    pub target: Option<Arc<TargetStats>>,
    pub status: u16,
    pub started: Instant,
}

impl Meter {
    fn finished(&self, sent: u64) {
        let took = self.started.elapsed();
        for stats in [
            self.conn.stats.as_deref().map(|l| &l.requests),
            self.target.as_deref().map(|t| &t.requests),
        ]
        .into_iter()
        .flatten()
        {
            stats.finished(self.status, took, sent);
        }
    }
}

pub struct Tracked {
    inner: Body,
    _books: Books,
    meter: Meter,
    log: Option<Box<LogEntry>>,
    sent: u64,
}

impl Tracked {
    pub fn new(inner: Body, books: Books, meter: Meter, log: Option<LogEntry>) -> Self {
        Tracked {
            inner,
            _books: books,
            meter,
            log: log.map(Box::new),
            sent: 0,
        }
    }
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.sent += data.len() as u64;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.meter.finished(self.sent);
        if let Some(entry) = self.log.take() {
            write_log(*entry, self.sent);
        }
    }
}

/// Writes the line for a finished request, `sent` its body bytes, if the log's `if` admits it.
pub(super) fn write_log(entry: LogEntry, sent: u64) {
    let Some(conf) = entry.published.snapshot.access_log.as_ref() else {
        return;
    };
    let response = ResponseInfo {
        status: entry.status,
        body_bytes_sent: sent,
        headers: entry.headers,
        request_time: entry.started.elapsed(),
        started: entry.wall,
    };
    let ctx = VarContext {
        req: &entry.request,
        response: Some(&response),
    };
    if conf.condition.as_ref().is_some_and(|c| !c.admits(&ctx)) {
        return;
    }
    entry.sink.log(conf.format.line(&ctx));
}
