//! Bodies crossing the proxy, streamed with backpressure in both directions.
//!
//! [`Upload`] carries the client's body upstream, enforcing `max_body_size` and telling the connection that a
//! body is being read (so `body_read_timeout` applies). [`Download`] carries the server's answer back,
//! enforcing the upstream read timeout between chunks; when it ends cleanly the connection goes back to the
//! pool and the request counts as a success for passive health.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use crate::server::ConnState;
use crate::upstream::{Sender, Slot};

/// What the proxy can see of an upload in flight.
#[derive(Debug)]
pub struct UploadWatch {
    too_large: AtomicBool,
    /// When a chunk last went upstream, in milliseconds since `base`: a long upload that keeps moving is not a
    /// server that fails to answer.
    last_progress_ms: AtomicU64,
    base: Instant,
}

impl UploadWatch {
    pub fn too_large(&self) -> bool {
        self.too_large.load(Ordering::Acquire)
    }

    pub fn last_progress(&self) -> Instant {
        self.base + Duration::from_millis(self.last_progress_ms.load(Ordering::Acquire))
    }

    fn touch(&self) {
        let ms = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_progress_ms.store(ms, Ordering::Release);
    }
}

/// The client's request body on its way upstream.
pub struct Upload {
    inner: Incoming,
    limit: u64,
    seen: u64,
    watch: Arc<UploadWatch>,
    state: Arc<ConnState>,
}

impl Upload {
    pub fn new(inner: Incoming, limit: u64, state: Arc<ConnState>) -> (Self, Arc<UploadWatch>) {
        let watch = Arc::new(UploadWatch {
            too_large: AtomicBool::new(false),
            last_progress_ms: AtomicU64::new(0),
            base: Instant::now(),
        });
        state.reading_body(true);
        let upload = Upload {
            inner,
            limit,
            seen: 0,
            watch: watch.clone(),
            state,
        };
        (upload, watch)
    }
}

impl HttpBody for Upload {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                self.seen += frame.data_ref().map_or(0, |d| d.len() as u64);
                self.watch.touch();
                if self.seen > self.limit {
                    self.watch.too_large.store(true, Ordering::Release);
                    return Poll::Ready(Some(Err(std::io::Error::other("max_body_size exceeded"))));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(std::io::Error::other(e)))),
            Poll::Ready(None) => {
                self.state.reading_body(false);
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        self.state.reading_body(false);
    }
}

/// The server's response body on its way to the client.
pub struct Download {
    inner: Incoming,
    read_timeout: Duration,
    timer: Pin<Box<Sleep>>,
    /// Returned to the pool when the body ends cleanly.
    sender: Option<Sender>,
    /// Held (the request counts as active on its server) until the body is done.
    slot: Option<Slot>,
}

impl Download {
    pub fn new(inner: Incoming, sender: Sender, read_timeout: Duration, slot: Slot) -> Self {
        Download {
            inner,
            read_timeout,
            timer: Box::pin(tokio::time::sleep(read_timeout)),
            sender: Some(sender),
            slot: Some(slot),
        }
    }

    /// Releases the server: `Some(true)` the body ended cleanly (the connection is reused), `Some(false)` the
    /// server failed, `None` the client went away (nothing to hold against the server).
    fn finish(&mut self, outcome: Option<bool>) {
        if let Some(sender) = self.sender.take()
            && outcome == Some(true)
            && let Some(slot) = &self.slot
        {
            slot.server.pool.put(sender);
        }
        if let Some(slot) = self.slot.take()
            && let Some(ok) = outcome
        {
            slot.record(ok);
        }
    }
}

impl HttpBody for Download {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let deadline = Instant::now() + self.read_timeout;
                self.timer.as_mut().reset(deadline);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                self.finish(Some(false));
                Poll::Ready(Some(Err(std::io::Error::other(e))))
            }
            Poll::Ready(None) => {
                self.finish(Some(true));
                Poll::Ready(None)
            }
            Poll::Pending => match self.timer.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.finish(Some(false));
                    Poll::Ready(Some(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "upstream read timeout",
                    ))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Download {
    fn drop(&mut self) {
        // An empty body may be dropped without being polled to its end; otherwise the client left early.
        let outcome = self.inner.is_end_stream().then_some(true);
        self.finish(outcome);
    }
}
