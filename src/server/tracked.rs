//! The response body wrapper that closes a request's books: when hyper has sent (or dropped) the body, the
//! connection returns to idle, the counters move, and the access log line is written with the bytes sent.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body as HttpBody, Frame, SizeHint};

use super::access_log::Sink;
use super::timeouts::ConnState;
use super::{Published, Shared};
use crate::body::Body;
use crate::request::RequestInfo;
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

pub struct Tracked {
    inner: Body,
    state: Arc<ConnState>,
    shared: Arc<Shared>,
    log: Option<Box<LogEntry>>,
    sent: u64,
}

impl Tracked {
    pub fn new(
        inner: Body,
        state: Arc<ConnState>,
        shared: Arc<Shared>,
        log: Option<LogEntry>,
    ) -> Self {
        Tracked {
            inner,
            state,
            shared,
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
        self.state.end_request();
        self.shared.counters.request_finished();
        if let Some(entry) = self.log.take() {
            write_log(*entry, self.sent);
        }
    }
}

fn write_log(entry: LogEntry, sent: u64) {
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
    if let Some(cond) = &conf.condition {
        let value = cond.template.render(&ctx);
        let truthy = !matches!(value.as_str(), "" | "0" | "false" | "null" | "undefined");
        if truthy == cond.negate {
            return;
        }
    }
    let mut line = String::with_capacity(128);
    conf.format.render_log_into(&ctx, &mut line);
    entry.sink.log(line);
}
