//! Write coalescing for HTTP/2: the frames of every stream answered in one turn of the connection leave in
//! one write, so over TLS in one record (up to its 16 KiB) and one system call, instead of one of each per
//! response.
//!
//! h2 flushes its codec after each DATA frame whose payload it sends from the body's own buffer (any payload
//! of 256 bytes or more), and each flush of a TLS stream seals a record and writes it to the socket. With ten
//! streams answered at once that is ten records and ten `writev`s where one would do. [`Coalesce`] stands
//! between h2 and the socket: it takes h2's writes into a buffer and answers its flushes at once; the
//! connection's driver ([`Flusher::poll_push`]) writes the buffer out each time the connection future has
//! done all it could for now. Nothing waits longer than that turn, so latency is unchanged.
//!
//! Only a connection that speaks HTTP/2 from its first byte uses this: HTTP/1.1 hands its socket to upgraded
//! streams (WebSocket tunnels) that no driver would flush after.

use std::error::Error as StdError;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes held before a write pushes them out anyway, as a bound on memory: four full TLS records.
const HIGH_WATER: usize = 64 * 1024;

/// The buffer's first allocation in a turn: one full TLS record, so a turn's frames rarely regrow it.
const FIRST: usize = 16 * 1024;

struct Shared<S> {
    io: S,
    /// Written by h2, not yet by the socket: `buf[sent..]`.
    buf: Vec<u8>,
    sent: usize,
}

impl<S: AsyncWrite + Unpin> Shared<S> {
    /// Writes out the buffer, then flushes the socket below.
    fn poll_push(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.buf[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        // Released, not kept: an idle HTTP/2 connection holds no buffer (one allocation per busy turn instead).
        self.buf = Vec::new();
        self.sent = 0;
        Pin::new(&mut self.io).poll_flush(cx)
    }
}

/// The socket as h2 sees it: reads pass through, writes are buffered until the driver pushes them.
pub(crate) struct Coalesce<S> {
    shared: Arc<Mutex<Shared<S>>>,
}

/// The driver's handle on the same buffer.
pub(crate) struct Flusher<S> {
    shared: Arc<Mutex<Shared<S>>>,
}

/// Wraps `io`; the [`Flusher`] must be polled after every poll of the connection that owns the [`Coalesce`].
pub(crate) fn new<S>(io: S) -> (Coalesce<S>, Flusher<S>) {
    let shared = Arc::new(Mutex::new(Shared {
        io,
        buf: Vec::new(),
        sent: 0,
    }));
    (
        Coalesce {
            shared: shared.clone(),
        },
        Flusher { shared },
    )
}

/// Locks the state; it is only ever locked by the one task driving the connection, so never contended, and a
/// panic while holding it ends that task, so a poisoned lock is taken as it is.
fn lock<S>(shared: &Mutex<Shared<S>>) -> MutexGuard<'_, Shared<S>> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<S: AsyncRead + Unpin> AsyncRead for Coalesce<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut lock(&self.shared).io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> Coalesce<S> {
    /// Makes room by pushing once the buffer holds [`HIGH_WATER`] bytes, then takes `bufs` whole.
    fn take(&self, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let mut shared = lock(&self.shared);
        if shared.buf.len() >= HIGH_WATER {
            ready!(shared.poll_push(cx))?;
        }
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if shared.buf.capacity() == 0 {
            shared.buf.reserve(total.max(FIRST));
        }
        let mut n = 0;
        for b in bufs {
            shared.buf.extend_from_slice(b);
            n += b.len();
        }
        Poll::Ready(Ok(n))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Coalesce<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.take(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.take(cx, bufs)
    }

    /// Vectored, so that h2 hands over a frame's head and its payload in one call.
    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Answered at once: the driver pushes the buffer when the connection's turn ends.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut shared = lock(&self.shared);
        ready!(shared.poll_push(cx))?;
        Pin::new(&mut shared.io).poll_shutdown(cx)
    }
}

type BoxError = Box<dyn StdError + Send + Sync>;

/// What a connection's driver pushes after each poll: a [`Flusher`], or nothing (`()`) for a connection
/// that writes straight through.
pub(crate) trait Push {
    fn poll_push(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
}

impl Push for () {
    fn poll_push(&self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> Push for Flusher<S> {
    fn poll_push(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        lock(&self.shared).poll_push(cx)
    }
}

/// Polls `conn` (until it has ended, its result then kept in `ended`), then pushes what it wrote. A
/// connection that has ended waits for its last bytes to leave; a push that fails ends the connection with
/// its error (h2 might otherwise wait on a read that never comes).
pub(crate) fn poll_connection<F, E>(
    conn: Pin<&mut F>,
    ended: &mut Option<Result<(), BoxError>>,
    push: &impl Push,
    cx: &mut Context<'_>,
) -> Poll<Result<(), BoxError>>
where
    F: Future<Output = Result<(), E>>,
    E: Into<BoxError>,
{
    if ended.is_none()
        && let Poll::Ready(r) = conn.poll(cx)
    {
        *ended = Some(r.map_err(Into::into));
    }
    match push.poll_push(cx) {
        Poll::Ready(Err(e)) => Poll::Ready(Err(e.into())),
        Poll::Ready(Ok(())) => match ended.take() {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        },
        Poll::Pending => Poll::Pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// What the peer has received so far, without waiting for more.
    async fn received(peer: &mut tokio::io::DuplexStream) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while let Ok(Ok(n)) =
            tokio::time::timeout(std::time::Duration::from_millis(20), peer.read(&mut buf)).await
        {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got
    }

    #[tokio::test]
    async fn writes_and_flushes_wait_for_the_push_then_leave_together() {
        let (ours, mut peer) = tokio::io::duplex(1 << 20);
        let (mut io, flusher) = new(ours);
        io.write_all(b"one ").await.expect("write");
        io.flush().await.expect("flush");
        io.write_all(b"two").await.expect("write");
        assert!(received(&mut peer).await.is_empty(), "held until the push");
        std::future::poll_fn(|cx| flusher.poll_push(cx))
            .await
            .expect("push");
        assert_eq!(received(&mut peer).await, b"one two");
    }

    #[tokio::test]
    async fn shutdown_pushes_first_and_a_full_buffer_pushes_itself() {
        let (ours, mut peer) = tokio::io::duplex(1 << 20);
        let (mut io, _flusher) = new(ours);
        let big = vec![7u8; HIGH_WATER];
        io.write_all(&big).await.expect("write");
        io.write_all(b"x").await.expect("write");
        assert_eq!(received(&mut peer).await.len(), HIGH_WATER);
        io.write_all(b"y").await.expect("write");
        io.shutdown().await.expect("shutdown");
        assert_eq!(received(&mut peer).await, b"xy");
    }

    #[tokio::test]
    async fn an_ended_connection_returns_once_its_bytes_are_out() {
        let (ours, mut peer) = tokio::io::duplex(1 << 20);
        let (mut io, flusher) = new(ours);
        let conn = async move {
            io.write_all(b"last").await?;
            Ok::<_, io::Error>(())
        };
        tokio::pin!(conn);
        let mut ended = None;
        std::future::poll_fn(|cx| poll_connection(conn.as_mut(), &mut ended, &flusher, cx))
            .await
            .expect("ended");
        assert_eq!(received(&mut peer).await, b"last");
    }
}
