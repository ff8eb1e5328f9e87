//! The HTTP/2 floods the h2 crate leaves to its user, cut off where the client's bytes arrive: frames that cost
//! rein work without carrying any (empty DATA and CONTINUATION frames, CVE-2019-9518; PING, SETTINGS and
//! PRIORITY floods, CVE-2019-9512/9515) and DATA dribbled in tiny frames, each a wake-up and often a write
//! upstream for a byte or two.
//!
//! [`FloodGuard`] wraps the decrypted stream of a connection that may speak HTTP/2 and reads the frame headers
//! as they go by (nine bytes per frame; payloads are skipped, never copied). A connection that breaks a rule
//! gets a read error, which ends it; the h2 crate's own limits (streams, header lists, resets) stay in force.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// The client preface (RFC 9113 §3.4), before the first frame.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Empty frames in a row that do not end anything: no client needs one, a flood sends millions.
const MAX_EMPTY_RUN: u32 = 100;

/// Control frames (PING, SETTINGS and PRIORITY, ACKs aside): a burst, then a steady rate per second. Browsers
/// send a handful per connection and keep-alive PINGs every few seconds.
const CONTROL: Bucket = Bucket {
    burst: 1_000.0,
    per_second: 100.0,
};

/// DATA frames under [`SMALL_DATA`] bytes that do not end their stream: streaming clients send small messages,
/// but not thousands per second on one connection.
const SMALL: Bucket = Bucket {
    burst: 10_000.0,
    per_second: 2_000.0,
};

/// A DATA frame carrying less than this is small.
const SMALL_DATA: u32 = 64;

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

/// Which rule a connection broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Flood {
    #[error("more than {MAX_EMPTY_RUN} empty HTTP/2 frames in a row")]
    Empty,
    #[error("HTTP/2 control frames (PING, SETTINGS, PRIORITY) faster than rein allows")]
    Control,
    #[error("HTTP/2 DATA in frames of under {SMALL_DATA} bytes faster than rein allows")]
    SmallData,
}

/// A token bucket's shape.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    burst: f64,
    per_second: f64,
}

/// A token bucket's state: full at first, refilled with time.
#[derive(Debug)]
struct Tokens {
    left: f64,
    at: Option<Instant>,
}

impl Tokens {
    fn full(shape: Bucket) -> Self {
        Tokens {
            left: shape.burst,
            at: None,
        }
    }

    /// Takes one token; `false` when the bucket is empty.
    fn take(&mut self, shape: Bucket) -> bool {
        let now = Instant::now();
        if let Some(at) = self.at {
            let refill = now.duration_since(at).as_secs_f64() * shape.per_second;
            self.left = (self.left + refill).min(shape.burst);
        }
        self.at = Some(now);
        self.left -= 1.0;
        self.left >= 0.0
    }
}

/// Where the reader stands in the byte stream.
#[derive(Debug)]
enum Position {
    /// Not HTTP/2 (an HTTP/1.1 client of an `h2c` listener, or a plain listener): nothing to look at.
    Off,
    /// This many bytes of the preface seen so far.
    Preface(usize),
    /// Between frames: this many bytes of the next frame header gathered in `head`.
    Header(usize),
    /// Inside a payload: this many bytes left to skip.
    Payload(usize),
}

/// The frame accounting of one connection.
#[derive(Debug)]
pub(crate) struct Frames {
    position: Position,
    head: [u8; 9],
    empty_run: u32,
    control: Tokens,
    small: Tokens,
}

impl Frames {
    /// For a connection that speaks HTTP/2 from its first byte (`true`), or may (an `h2c` listener: the
    /// preface decides); `false` for HTTP/1.1 only.
    pub(crate) fn new(http2: bool) -> Self {
        Frames {
            position: if http2 {
                Position::Preface(0)
            } else {
                Position::Off
            },
            head: [0; 9],
            empty_run: 0,
            control: Tokens::full(CONTROL),
            small: Tokens::full(SMALL),
        }
    }

    /// Accounts for bytes the client sent, in order.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) -> Result<(), Flood> {
        while !bytes.is_empty() {
            match self.position {
                Position::Off => return Ok(()),
                Position::Preface(seen) => {
                    let n = (PREFACE.len() - seen).min(bytes.len());
                    if bytes[..n] != PREFACE[seen..seen + n] {
                        // Not HTTP/2 after all; hyper answers it as HTTP/1.1 or refuses it.
                        self.position = Position::Off;
                        return Ok(());
                    }
                    self.position = if seen + n == PREFACE.len() {
                        Position::Header(0)
                    } else {
                        Position::Preface(seen + n)
                    };
                    bytes = &bytes[n..];
                }
                Position::Header(have) => {
                    let n = (9 - have).min(bytes.len());
                    self.head[have..have + n].copy_from_slice(&bytes[..n]);
                    bytes = &bytes[n..];
                    if have + n < 9 {
                        self.position = Position::Header(have + n);
                        continue;
                    }
                    let length = u32::from_be_bytes([0, self.head[0], self.head[1], self.head[2]]);
                    self.frame(self.head[3], self.head[4], length)?;
                    self.position = if length == 0 {
                        Position::Header(0)
                    } else {
                        Position::Payload(length as usize)
                    };
                }
                Position::Payload(left) => {
                    let n = left.min(bytes.len());
                    bytes = &bytes[n..];
                    self.position = if n == left {
                        Position::Header(0)
                    } else {
                        Position::Payload(left - n)
                    };
                }
            }
        }
        Ok(())
    }

    /// Applies the rules to one frame header.
    fn frame(&mut self, kind: u8, flags: u8, length: u32) -> Result<(), Flood> {
        let empty = length == 0
            && match kind {
                DATA => flags & END_STREAM == 0,
                HEADERS | CONTINUATION => flags & END_HEADERS == 0,
                _ => false,
            };
        if empty {
            self.empty_run += 1;
            if self.empty_run > MAX_EMPTY_RUN {
                return Err(Flood::Empty);
            }
        } else if length > 0 {
            self.empty_run = 0;
        }
        match kind {
            PRIORITY => self.spend_control(),
            SETTINGS | PING if flags & ACK == 0 => self.spend_control(),
            DATA if length > 0 && length < SMALL_DATA && flags & END_STREAM == 0 => {
                if self.small.take(SMALL) {
                    Ok(())
                } else {
                    Err(Flood::SmallData)
                }
            }
            _ => Ok(()),
        }
    }

    fn spend_control(&mut self) -> Result<(), Flood> {
        if self.control.take(CONTROL) {
            Ok(())
        } else {
            Err(Flood::Control)
        }
    }
}

/// A connection's stream with its frames accounted for on the way in.
pub(crate) struct FloodGuard<S> {
    inner: S,
    frames: Frames,
    remote: Option<SocketAddr>,
}

impl<S> FloodGuard<S> {
    pub(crate) fn new(inner: S, frames: Frames, remote: Option<SocketAddr>) -> Self {
        FloodGuard {
            inner,
            frames,
            remote,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for FloodGuard<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        if let Err(flood) = this.frames.feed(&buf.filled()[before..]) {
            tracing::warn!(remote = ?this.remote, reason = %flood, "HTTP/2 flood: connection closed");
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, flood)));
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FloodGuard<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[path = "h2_floods_tests.rs"]
mod tests;
