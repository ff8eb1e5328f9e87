//! The client's request body with a clock of its own, carried with the request: the type the actions, the
//! proxy and its bodies read, with errors of rein's own; hyper's body stays inside it.
//!
//! On HTTP/1.1 the socket wrapper ([`super::timeouts`]) times the gaps between a body's reads, since one
//! request owns the connection. On HTTP/2 many bodies share it, so each request's body keeps its own
//! `body_read_timeout` between data frames here. On both, a body must also keep up a minimum average rate
//! (`settings.http.body_min_rate`, after a grace period of one `body_read_timeout`): a client trickling one byte
//! every few seconds would otherwise hold its request, and what it holds upstream, forever.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use super::conn::ConnInfo;

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The client's side failed: malformed framing, a disconnect, or the socket's `body_read_timeout`.
    #[error("{source}")]
    Client {
        source: Box<dyn std::error::Error + Send + Sync>,
        timed_out: bool,
    },
    #[error("body_read_timeout: no data from the client")]
    Stalled,
    #[error("the client sends its body slower than body_min_rate")]
    TooSlow,
}

/// A client's body as the server connection hands it over: hyper's (HTTP/2, `h2c` listeners) or rein's own
/// HTTP/1 connection's.
pub(crate) enum ClientBody {
    Hyper(Incoming),
    H1(super::h1::Body),
}

impl BodyError {
    /// A timeout of the client's (answered 408), rather than a broken body (400).
    pub fn is_timeout(&self) -> bool {
        match self {
            BodyError::Client { timed_out, .. } => *timed_out,
            BodyError::Stalled | BodyError::TooSlow => true,
        }
    }

    /// The error of hyper's body, told a timeout or not once, here.
    fn client(e: hyper::Error) -> Self {
        BodyError::Client {
            timed_out: timed_out(&e),
            source: Box::new(e),
        }
    }

    fn h1(e: super::h1::BodyReadError) -> Self {
        BodyError::Client {
            timed_out: e.timed_out(),
            source: Box::new(e),
        }
    }
}

/// Whether a client body failed by `body_read_timeout` (the socket wrapper's `TimedOut`) rather than by
/// malformed framing or a disconnect.
fn timed_out(e: &hyper::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::TimedOut;
        }
        source = s.source();
    }
    false
}

/// What a body's clock enforces.
#[derive(Debug, Clone, Copy)]
pub struct BodyClock {
    /// The longest gap between data frames; `None` where the socket already times them (HTTP/1.1).
    pub between_reads: Option<Duration>,
    /// The lowest average rate in bytes per second once `grace` has passed; 0 for none.
    pub min_rate: u64,
    pub grace: Duration,
}

pub struct RequestBody {
    inner: ClientBody,
    clock: BodyClock,
    received: u64,
    /// Time spent waiting on the client in earlier gaps: the rate counts only time the client had to send,
    /// not time rein was not reading (an upstream slow to take the body).
    waited: Duration,
    /// When the current wait for data began; `None` while data flows.
    wait_began: Option<Instant>,
    /// Armed while a read waits: the earlier of the gap's end and the moment the rate falls short.
    timer: Option<Pin<Box<Sleep>>>,
    /// The listener's counters, given the bytes received once the body is done with.
    /// The connection, for its listener's counters (its own `Arc`: cloning it touches no line another worker
    /// writes, as the listener's shared handle would).
    conn: Arc<ConnInfo>,
}

impl RequestBody {
    pub fn new(inner: ClientBody, clock: BodyClock, conn: Arc<ConnInfo>) -> Self {
        RequestBody {
            inner,
            clock,
            received: 0,
            waited: Duration::ZERO,
            wait_began: None,
            timer: None,
            conn,
        }
    }

    /// When, in the wait that began at `began`, the average rate falls below the minimum.
    fn rate_deadline(&self, began: Instant) -> Option<Instant> {
        if self.clock.min_rate == 0 {
            return None;
        }
        let earned = Duration::from_secs_f64(self.received as f64 / self.clock.min_rate as f64);
        Some(began + (self.clock.grace + earned).saturating_sub(self.waited))
    }

    fn deadline(&mut self, now: Instant) -> Option<(Instant, BodyError)> {
        let began = *self.wait_began.get_or_insert(now);
        let gap = self
            .clock
            .between_reads
            .map(|d| (began + d, BodyError::Stalled));
        let rate = self.rate_deadline(began).map(|at| (at, BodyError::TooSlow));
        match (gap, rate) {
            (Some(g), Some(r)) => Some(if g.0 <= r.0 { g } else { r }),
            (one, other) => one.or(other),
        }
    }

    /// Arms the timer for a read that has to wait; `Ready` with the error when it has run out.
    fn poll_clock(&mut self, cx: &mut Context<'_>) -> Poll<BodyError> {
        let now = Instant::now();
        let Some((at, why)) = self.deadline(now) else {
            return Poll::Pending;
        };
        let timer = match &mut self.timer {
            Some(t) => {
                if t.deadline() != at {
                    t.as_mut().reset(at);
                }
                t
            }
            None => self.timer.insert(Box::pin(tokio::time::sleep_until(at))),
        };
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(why),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for RequestBody {
    fn drop(&mut self) {
        if let Some(stats) = &self.conn.stats
            && self.received > 0
        {
            stats.requests.received(self.received);
        }
    }
}

impl HttpBody for RequestBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let polled = match &mut self.inner {
            ClientBody::Hyper(body) => match Pin::new(body).poll_frame(cx) {
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(BodyError::client(e)))),
                Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
            ClientBody::H1(body) => match body.poll_data(cx) {
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(BodyError::h1(e)))),
                Poll::Ready(Some(Ok(data))) => Poll::Ready(Some(Ok(Frame::data(data)))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
        };
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                self.received += frame.data_ref().map_or(0, |d| d.len() as u64);
                if let Some(began) = self.wait_began.take() {
                    self.waited += began.elapsed();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match self.poll_clock(cx) {
                Poll::Ready(why) => Poll::Ready(Some(Err(why))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            ClientBody::Hyper(body) => body.is_end_stream(),
            ClientBody::H1(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            ClientBody::Hyper(body) => body.size_hint(),
            ClientBody::H1(body) => body.size_hint(),
        }
    }
}
