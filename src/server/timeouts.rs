//! Unit's connection timeouts, enforced where the bytes move: a wrapper around the client's socket.
//!
//! hyper knows nothing of Unit's four timeouts, so [`TimedIo`] keeps them: `header_read_timeout` from the first
//! byte of a request head (answered with 408), `body_read_timeout` between reads of a body the handler is
//! consuming, `send_timeout` between writes that make progress, and `idle_timeout` between requests on a
//! keep-alive connection (closed quietly). The request handler tells it where the connection stands through
//! [`ConnState`].

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep, sleep_until};

use crate::snapshot::HttpSettings;

const REQUEST_TIMEOUT: &[u8] =
    b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

/// Where a connection stands, shared between the handler (which writes it) and [`TimedIo`] (which reads it).
#[derive(Debug, Default)]
pub struct ConnState {
    in_request: AtomicBool,
    reading_body: AtomicBool,
    /// Bumped at each request start and end, so the socket wrapper notices a new phase.
    epoch: AtomicU64,
}

impl ConnState {
    pub fn begin_request(&self) {
        self.in_request.store(true, Ordering::Release);
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    pub fn end_request(&self) {
        self.reading_body.store(false, Ordering::Release);
        self.in_request.store(false, Ordering::Release);
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Marks the stretch during which the handler consumes the request body.
    pub fn reading_body(&self, on: bool) {
        self.reading_body.store(on, Ordering::Release);
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub header: Duration,
    pub body: Duration,
    pub send: Duration,
    pub idle: Duration,
}

impl From<&HttpSettings> for Timeouts {
    fn from(s: &HttpSettings) -> Self {
        Timeouts {
            header: s.header_read_timeout,
            body: s.body_read_timeout,
            send: s.send_timeout,
            idle: s.idle_timeout,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Between requests, nothing received yet.
    Idle,
    /// Part of a request head has arrived.
    Header,
    /// The handler is reading the body.
    Body,
    /// A request is being handled and its body is not being read: no read deadline.
    Quiet,
}

/// A client socket with Unit's timeouts.
pub struct TimedIo<S> {
    inner: S,
    state: std::sync::Arc<ConnState>,
    timeouts: Timeouts,
    phase: Phase,
    seen_epoch: u64,
    read_timer: Pin<Box<Sleep>>,
    write_timer: Pin<Box<Sleep>>,
    write_waiting: bool,
}

impl<S> TimedIo<S> {
    pub fn new(inner: S, state: std::sync::Arc<ConnState>, timeouts: Timeouts) -> Self {
        // A fresh connection gets the header timeout to send its first request, closed quietly if silent.
        let first = Instant::now() + timeouts.header;
        TimedIo {
            inner,
            state,
            timeouts,
            phase: Phase::Idle,
            seen_epoch: 0,
            read_timer: Box::pin(sleep_until(first)),
            write_timer: Box::pin(sleep_until(first)),
            write_waiting: false,
        }
    }

    fn arm_read(&mut self, after: Duration) {
        self.read_timer.as_mut().reset(Instant::now() + after);
    }

    /// Follows the handler's view of the connection into the read phase and its deadline.
    fn sync_phase(&mut self) {
        let epoch = self.state.epoch.load(Ordering::Acquire);
        let phase = if self.state.in_request.load(Ordering::Acquire) {
            if self.state.reading_body.load(Ordering::Acquire) {
                Phase::Body
            } else {
                Phase::Quiet
            }
        } else if epoch == self.seen_epoch {
            self.phase
        } else {
            Phase::Idle
        };
        if epoch != self.seen_epoch || phase != self.phase {
            self.seen_epoch = epoch;
            self.phase = phase;
            match phase {
                Phase::Idle => self.arm_read(self.timeouts.idle),
                Phase::Body => self.arm_read(self.timeouts.body),
                Phase::Header | Phase::Quiet => {}
            }
        }
    }

    fn on_bytes(&mut self) {
        match self.phase {
            Phase::Idle => {
                self.phase = Phase::Header;
                self.arm_read(self.timeouts.header);
            }
            Phase::Body => self.arm_read(self.timeouts.body),
            Phase::Header | Phase::Quiet => {}
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TimedIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.sync_phase();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.on_bytes();
                }
                return Poll::Ready(Ok(()));
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {}
        }
        if this.phase == Phase::Quiet || this.read_timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        match this.phase {
            // An idle keep-alive connection simply ends: EOF lets hyper close it cleanly.
            Phase::Idle => Poll::Ready(Ok(())),
            Phase::Header => {
                // Best effort: the client may not be reading either.
                let _ = Pin::new(&mut this.inner).poll_write(cx, REQUEST_TIMEOUT);
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "header_read_timeout",
                )))
            }
            Phase::Body | Phase::Quiet => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "body_read_timeout",
            ))),
        }
    }
}

impl<S: AsyncWrite + Unpin> TimedIo<S> {
    /// Applies `send_timeout` to a write that made no progress.
    fn guard_write<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(r) => {
                self.write_waiting = false;
                Poll::Ready(r)
            }
            Poll::Pending => {
                if !self.write_waiting {
                    self.write_waiting = true;
                    self.write_timer
                        .as_mut()
                        .reset(Instant::now() + self.timeouts.send);
                }
                match self.write_timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "send_timeout",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for TimedIo<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.guard_write(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.guard_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.guard_write(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
