//! Unit's connection timeouts, enforced where the bytes move: a wrapper around the client's socket.
//!
//! Neither rein's HTTP/1 connection loop nor hyper's HTTP/2 keeps Unit's four timeouts: [`TimedIo`] does, `header_read_timeout` from the first
//! byte of a request head (answered with 408), `body_read_timeout` between reads of a body the handler is
//! consuming, `send_timeout` between writes that make progress, and `idle_timeout` before the first request and
//! between requests on a keep-alive connection (answered with 408 on HTTP/1, as Unit does). The request handler tells it where the connection stands through
//! [`ConnState`].
//!
//! When rein closes a connection whose peer may still be sending (an error answer, a timeout), dropping the
//! socket at once would make the kernel send a reset that can destroy the answer before the client reads it.
//! So a dropped [`TimedIo`] lingers, as nginx does: it shuts down its side and reads what is left, briefly.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_util::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::{Instant, Sleep, sleep_until};

use super::{error_answer, request_line};
use crate::snapshot::HttpSettings;

/// How long a closing connection keeps reading what its peer still sends.
const LINGER: Duration = Duration::from_secs(2);

/// Written by the socket itself: there is no request to answer when a head never arrives whole.
const REQUEST_TIMEOUT: &[u8] = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\
Content-Type: text/html\r\nContent-Length: 70\r\n\r\n\
<!DOCTYPE html><title>Error 408</title><p>Error 408: Request Timeout.\n";

/// Where a connection stands, shared between the handler (which writes it) and [`TimedIo`] (which reads it).
#[derive(Debug, Default)]
pub struct ConnState {
    /// Requests in progress: at most one on HTTP/1.1, any number of streams on HTTP/2.
    active: AtomicU32,
    reading_body: AtomicBool,
    /// Bumped at each request start and end, so the socket wrapper notices a new phase.
    epoch: AtomicU64,
    /// The task waiting on a read: woken at each change so it re-arms its deadline for the new phase
    /// (hyper does not poll a read it is already waiting on).
    reader: AtomicWaker,
    /// When the first byte of the request head now arriving was read: Unit's `$request_time` counts from it.
    head_started: std::sync::Mutex<Option<std::time::Instant>>,
    /// The client said it sends nothing more (its last request asked to close, and was read whole): the
    /// socket closes without lingering.
    client_done: AtomicBool,
}

impl ConnState {
    /// A request starts; it ends when the returned guard is dropped, however the request ends (answered,
    /// or its stream reset by the client).
    pub fn begin_request(self: &Arc<Self>) -> InRequest {
        self.active.fetch_add(1, Ordering::AcqRel);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.reader.wake();
        InRequest(self.clone())
    }

    fn end_request(&self) {
        self.reading_body.store(false, Ordering::Release);
        self.active.fetch_sub(1, Ordering::AcqRel);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.reader.wake();
    }

    /// When the current request's head began to arrive, taken once: `None` for a request whose bytes came
    /// with the one before it (pipelined) or on HTTP/2, where the request starts when the handler does.
    pub fn take_head_started(&self) -> Option<std::time::Instant> {
        self.head_started.lock().ok()?.take()
    }

    fn head_arrives(&self) {
        if let Ok(mut at) = self.head_started.lock() {
            *at = Some(std::time::Instant::now());
        }
    }

    /// The client's last request asked to close the connection and was read to its end: nothing more is
    /// coming that a close could answer with a reset, so the socket need not linger (a lingering close costs
    /// a task and a wake-up per connection, which a client opening a connection per request pays for each).
    pub fn client_done(&self) {
        self.client_done.store(true, Ordering::Release);
    }

    /// Marks the stretch during which the handler consumes the request body.
    pub fn reading_body(&self, on: bool) {
        self.reading_body.store(on, Ordering::Release);
        self.reader.wake();
    }
}

/// A request in progress on its connection.
#[derive(Debug)]
pub struct InRequest(Arc<ConnState>);

impl Drop for InRequest {
    fn drop(&mut self) {
        self.0.end_request();
    }
}

/// How a connection's reads are timed: by requests (HTTP/1.1), by idleness only (HTTP/2, where requests share
/// the connection), or as its client's first bytes say (an `h2c` listener takes both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    Http1,
    Multiplexed,
    Either,
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
pub struct TimedIo<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> {
    /// Always `Some` until dropped, when the socket moves to its lingering close.
    inner: Option<S>,
    /// The peer closed its side: there is nothing left to linger for.
    peer_closed: bool,
    /// Our side is shut down already (the HTTP layer closed the connection): the lingering close only reads.
    shut_down: bool,
    state: std::sync::Arc<ConnState>,
    timeouts: Timeouts,
    /// HTTP/2: many requests share the socket, so no one request's phase is the connection's. The socket
    /// then has only an idle deadline (no request in progress), and a timeout never writes an HTTP/1 answer.
    multiplexed: bool,
    phase: Phase,
    seen_epoch: u64,
    /// The read deadline of the current phase, fixed when a read first has to wait in it: a phase that never
    /// waits (a request head read whole, the common case) costs no clock read and no timer change.
    read_deadline: Option<Instant>,
    read_timer: Pin<Box<Sleep>>,
    /// Made when a write first has to wait: most connections never wait to write, and a timer kept for
    /// nothing would take room in every idle one.
    write_timer: Option<Pin<Box<Sleep>>>,
    write_waiting: bool,
    /// What is left to write of an answer put in place of hyper's own error answer (`error_answer`), which
    /// hyper was told is written: it goes out before any other byte, flush or shutdown.
    owed: Vec<u8>,
    /// What is left to hand hyper of a request line made longer by escaping (`request_line`).
    pending: Vec<u8>,
    /// On a listener that takes both protocols (`h2c`): how much of the HTTP/2 preface the client's first
    /// bytes matched so far, until they tell which protocol it speaks; `None` once known.
    sniffing: Option<usize>,
}

/// The HTTP/2 client preface (RFC 9113 §3.4), by which an `h2c` client is told from an HTTP/1 one.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> TimedIo<S> {
    pub fn new(
        inner: S,
        state: std::sync::Arc<ConnState>,
        timeouts: Timeouts,
        protocol: Timing,
    ) -> Self {
        // A fresh connection waits for its first request as a keep-alive one does for its next: Unit's
        // `idle_timeout`, then 408.
        let first = Instant::now() + timeouts.idle;
        TimedIo {
            inner: Some(inner),
            peer_closed: false,
            shut_down: false,
            state,
            timeouts,
            multiplexed: protocol != Timing::Http1,
            phase: Phase::Idle,
            seen_epoch: 0,
            read_deadline: Some(first),
            read_timer: Box::pin(sleep_until(first)),
            write_timer: None,
            write_waiting: false,
            owed: Vec::new(),
            pending: Vec::new(),
            sniffing: (protocol == Timing::Either).then_some(0),
        }
    }

    /// Follows the client's first bytes on an `h2c` listener: an HTTP/1 client is timed as HTTP/1
    /// (`header_read_timeout` for its heads, `body_read_timeout` for its bodies), an HTTP/2 one as multiplexed.
    fn sniff(&mut self, data: &[u8]) {
        let Some(seen) = self.sniffing else { return };
        let n = data.len().min(PREFACE.len() - seen);
        if data[..n] != PREFACE[seen..seen + n] {
            self.multiplexed = false;
            self.sniffing = None;
        } else if seen + n == PREFACE.len() {
            self.sniffing = None;
        } else {
            self.sniffing = Some(seen + n);
        }
    }

    fn io(&mut self) -> Pin<&mut S> {
        Pin::new(
            self.inner
                .as_mut()
                .expect("the socket is present until drop"),
        )
    }

    /// A new phase: its deadline starts with its first wait.
    fn rearm_read(&mut self) {
        self.read_deadline = None;
    }

    /// Ready once a wait in the current phase outlasts its timeout (never in `Quiet`).
    fn poll_read_deadline(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let limit = match self.phase {
            Phase::Quiet => return Poll::Pending,
            Phase::Idle => self.timeouts.idle,
            Phase::Header => self.timeouts.header,
            Phase::Body => self.timeouts.body,
        };
        let deadline = *self
            .read_deadline
            .get_or_insert_with(|| Instant::now() + limit);
        // The timer only has to fire no later than the deadline. Each keep-alive request moves the idle
        // deadline later, so the timer set for an earlier one is kept, and moved on once, when it fires
        // (one early wake per timeout, instead of a timer reset per request).
        if self.read_timer.deadline() > deadline {
            self.read_timer.as_mut().reset(deadline);
        }
        loop {
            ready!(self.read_timer.as_mut().poll(cx));
            if self.read_timer.deadline() >= deadline {
                return Poll::Ready(());
            }
            self.read_timer.as_mut().reset(deadline);
        }
    }

    /// Follows the handler's view of the connection into the read phase and its deadline.
    fn sync_phase(&mut self) {
        let epoch = self.state.epoch.load(Ordering::Acquire);
        let phase = if self.state.active.load(Ordering::Acquire) > 0 {
            if !self.multiplexed && self.state.reading_body.load(Ordering::Acquire) {
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
                Phase::Idle | Phase::Body => self.rearm_read(),
                Phase::Header | Phase::Quiet => {}
            }
        }
    }

    /// Percent-encodes the bytes the parser refuses in a request target (`request_line`), what does not fit in
    /// `buf` kept for the next read.
    fn escape_request_line(&mut self, buf: &mut ReadBuf<'_>, before: usize) {
        let Some(data) = request_line::escaped(&buf.filled()[before..]) else {
            return;
        };
        buf.set_filled(before);
        let n = data.len().min(buf.remaining());
        buf.put_slice(&data[..n]);
        self.pending = data[n..].to_vec();
    }

    fn on_bytes(&mut self) {
        match self.phase {
            // HTTP/2 control frames (PING, SETTINGS, WINDOW_UPDATE) arrive between requests: they neither start
            // a request head nor extend the idle deadline.
            Phase::Idle if self.multiplexed => {}
            Phase::Idle => {
                self.phase = Phase::Header;
                self.rearm_read();
                self.state.head_arrives();
            }
            Phase::Body => self.rearm_read(),
            Phase::Header | Phase::Quiet => {}
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> AsyncRead for TimedIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.pending.is_empty() {
            let n = this.pending.len().min(buf.remaining());
            buf.put_slice(&this.pending[..n]);
            this.pending.drain(..n);
            return Poll::Ready(Ok(()));
        }
        this.sync_phase();
        let idle = this.phase == Phase::Idle;
        let before = buf.filled().len();
        match this.io().poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.sniff(&buf.filled()[before..]);
                    // HTTP/1: the first bytes of a request start with its request line.
                    if idle && !this.multiplexed {
                        this.escape_request_line(buf, before);
                    }
                    this.on_bytes();
                } else {
                    this.peer_closed = true;
                }
                return Poll::Ready(Ok(()));
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {}
        }
        this.state.reader.register(cx.waker());
        if this.poll_read_deadline(cx).is_pending() {
            return Poll::Pending;
        }
        // HTTP/1: Unit answers 408 both to a connection that sent nothing for `idle_timeout` and to a head
        // not complete by `header_read_timeout`. Best effort: the client may not be reading either.
        if !this.multiplexed && this.phase != Phase::Quiet && this.phase != Phase::Body {
            let _ = this.io().poll_write(cx, REQUEST_TIMEOUT);
        }
        match this.phase {
            // Then EOF lets the HTTP layer close an idle connection cleanly.
            Phase::Idle => Poll::Ready(Ok(())),
            Phase::Header => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "header_read_timeout",
            ))),
            Phase::Body | Phase::Quiet => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "body_read_timeout",
            ))),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> TimedIo<S> {
    /// Applies `send_timeout` to a write that made no progress.
    fn guard_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(r) => {
                self.write_waiting = false;
                Poll::Ready(r)
            }
            Poll::Pending => {
                let timer = match &mut self.write_timer {
                    Some(timer) if self.write_waiting => timer,
                    Some(timer) => {
                        timer.as_mut().reset(Instant::now() + self.timeouts.send);
                        timer
                    }
                    None => self
                        .write_timer
                        .insert(Box::pin(sleep_until(Instant::now() + self.timeouts.send))),
                };
                self.write_waiting = true;
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "send_timeout")))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> TimedIo<S> {
    /// A write of hyper's: its own bodiless error answer is replaced by one with rein's error page. Only a
    /// write made while no request is in progress can be that answer, and hyper closes the connection after it.
    fn poll_write_bufs(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_owed(cx))?;
        if self.state.active.load(Ordering::Acquire) == 0 {
            let first = bufs.iter().find(|b| !b.is_empty());
            if let Some(page) = first.and_then(|head| error_answer::replacement(head)) {
                self.owed = page;
                let n = first.map_or(0, |b| b.len());
                return match self.poll_owed(cx) {
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    Poll::Ready(Ok(())) | Poll::Pending => Poll::Ready(Ok(n)),
                };
            }
        }
        match bufs {
            [one] => self.io().poll_write(cx, one),
            _ => self.io().poll_write_vectored(cx, bufs),
        }
    }

    /// Writes what is owed of a replaced answer (nearly always nothing).
    #[inline]
    fn poll_owed(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.owed.is_empty() {
            return Poll::Ready(Ok(()));
        }
        self.poll_owed_slow(cx)
    }

    #[cold]
    fn poll_owed_slow(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.owed.is_empty() {
            let owed = std::mem::take(&mut self.owed);
            let r = self.io().poll_write(cx, &owed);
            self.owed = owed;
            match ready!(r)? {
                0 => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                n => drop(self.owed.drain(..n)),
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> AsyncWrite for TimedIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = this.poll_write_bufs(cx, &[IoSlice::new(buf)]);
        this.guard_write(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = this.poll_write_bufs(cx, bufs);
        this.guard_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.as_ref().is_some_and(|s| s.is_write_vectored())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = match this.poll_owed(cx) {
            Poll::Ready(Ok(())) => this.io().poll_flush(cx),
            other => other,
        };
        this.guard_write(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_owed(cx))?;
        let done = ready!(this.io().poll_shutdown(cx));
        this.shut_down = done.is_ok();
        Poll::Ready(done)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Drop for TimedIo<S> {
    fn drop(&mut self) {
        let Some(socket) = self.inner.take() else {
            return;
        };
        if self.peer_closed || (self.shut_down && self.state.client_done.load(Ordering::Acquire)) {
            return;
        }
        let owed = std::mem::take(&mut self.owed);
        let shut_down = self.shut_down && owed.is_empty();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(linger(socket, owed, shut_down));
        }
    }
}

/// Writes what is owed of an answer, closes our side (unless `shut_down` says it is closed already), then reads
/// and discards until the peer closes too or [`LINGER`] passes.
async fn linger<S: AsyncRead + AsyncWrite + Unpin>(mut socket: S, owed: Vec<u8>, shut_down: bool) {
    if !owed.is_empty() {
        let _ = tokio::time::timeout(LINGER, socket.write_all(&owed)).await;
    }
    if !shut_down {
        let _ = socket.shutdown().await;
    }
    let _ = tokio::time::timeout(LINGER, discard_input(&mut socket)).await;
}

thread_local! {
    /// Where lingering connections read what they throw away: one buffer per thread, borrowed only while a
    /// read runs, so that a lingering close holds none (a stop closes every idle connection at once: with a
    /// buffer each, 10,000 of them took 47 MB).
    static SINK: std::cell::RefCell<[u8; 4096]> = const { std::cell::RefCell::new([0; 4096]) };
}

/// Reads and discards until the peer closes or the read fails.
async fn discard_input<S: AsyncRead + Unpin>(socket: &mut S) {
    std::future::poll_fn(|cx| {
        loop {
            let read = SINK.with_borrow_mut(|sink| {
                let mut buf = ReadBuf::new(sink);
                Pin::new(&mut *socket)
                    .poll_read(cx, &mut buf)
                    .map_ok(|()| buf.filled().len())
            });
            match ready!(read) {
                Ok(0) | Err(_) => return Poll::Ready(()),
                Ok(_) => {}
            }
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A stop lingers on every connection it closes at once, each in a task of its own: the task must not
    /// carry a read buffer (4 kB inline made 10,000 idle connections take 47 MB as rein stopped).
    #[test]
    fn a_lingering_close_holds_no_buffer() {
        fn size<A, B, C, F: std::future::Future>(_: fn(A, B, C) -> F) -> usize {
            std::mem::size_of::<F>()
        }
        let size = size(linger::<tokio::net::TcpStream>);
        assert!(
            size <= 1024,
            "a lingering close's future takes {size} bytes"
        );
    }

    /// What the peer still sends is read and dropped until it closes.
    #[tokio::test]
    async fn a_lingering_close_reads_until_the_peer_closes() {
        let (mut client, server) = tokio::io::duplex(64);
        let closing = tokio::spawn(linger(server, b"bye".to_vec(), false));
        client
            .write_all(&[7u8; 10_000])
            .await
            .expect("the peer's late bytes are read");
        let mut got = Vec::new();
        client
            .read_to_end(&mut got)
            .await
            .expect("read the owed answer");
        assert_eq!(got, b"bye");
        drop(client);
        closing
            .await
            .expect("the lingering close ends when the peer closes");
    }

    fn timeouts() -> Timeouts {
        Timeouts {
            header: Duration::from_secs(5),
            body: Duration::from_secs(5),
            send: Duration::from_secs(5),
            idle: Duration::from_secs(10),
        }
    }

    /// The timer set for the first idle deadline (10 s) is kept when a request moves the deadline on (to
    /// 16 s): when it fires, the connection must wait on, not close.
    #[tokio::test(start_paused = true)]
    async fn a_keep_alive_request_moves_the_idle_deadline_on() {
        let (mut client, server) = tokio::io::duplex(1024);
        let state = Arc::new(ConnState::default());
        let mut io = TimedIo::new(server, state.clone(), timeouts(), Timing::Http1);
        tokio::time::advance(Duration::from_secs(6)).await;
        client.write_all(b"GET").await.expect("write");
        let mut buf = [0u8; 16];
        assert_eq!(io.read(&mut buf).await.expect("read"), 3);
        drop(state.begin_request());
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 16];
            let n = io.read(&mut buf).await;
            (n.map_err(|e| e.kind()), Instant::now())
        });
        let start = Instant::now();
        let (n, at) = reader.await.expect("the reader task");
        assert_eq!(n, Ok(0), "an idle connection ends with EOF");
        // Paused time moves only from timer to timer: the close comes at the second deadline (the timer
        // wheel rounds up to its millisecond), not at the first.
        let waited = at - start;
        assert!(
            waited >= Duration::from_secs(10) && waited < Duration::from_secs(11),
            "the idle timeout counts from the end of the last request: {waited:?}"
        );
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.expect("read the 408");
        assert!(answer.starts_with(b"HTTP/1.1 408"));
    }
}
