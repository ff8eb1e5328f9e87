//! One HTTP/1.1 connection to an upstream server, and one exchange on it at a time.
//!
//! As in the FastCGI client, both directions are driven by whoever polls — [`Conn::send`] until the response
//! head is parsed, then [`ResponseBody`] — so no task runs per connection and nothing crosses a channel: the
//! request body is read only as fast as the server takes it, the response only as fast as the client does,
//! and a server may answer before it has read the whole request. An idle connection is a socket and little
//! else: its read buffer is let go between exchanges.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tokio::io::AsyncWrite;

use super::chunked::{self, ChunkError, Decoded, Decoder};
use super::head::{Framing, HeadError, RequestHead, ResponseHead, parse_response};
use crate::body::Body;
use crate::link::ExchangeError;
use crate::link::ServerAddr;
use crate::link::socket::{Acks, Io};
use crate::link::stall::Stall;
use crate::link::tls::TlsTarget;
use crate::rewind::Rewound;

/// Room made in the read buffer before a read, at first; doubled while reads fill it, up to [`MAX_READ`].
const FIRST_READ: usize = 8 * 1024;
const MAX_READ: usize = 128 * 1024;
/// Writes gathered into one `writev`, at most.
const MAX_SLICES: usize = 16;

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Io(io::Error),
    #[error("the server closed the connection before the end of the response")]
    Closed,
    #[error("no answer within {:.1} s", .0.as_secs_f64())]
    Timeout(Duration),
    #[error("the request was not read within {:.1} s", .0.as_secs_f64())]
    SendTimeout(Duration),
    #[error(transparent)]
    Head(#[from] HeadError),
    #[error("malformed chunked body: {0}")]
    Chunked(#[from] ChunkError),
    #[error("the response ended {missing} bytes short of its Content-Length")]
    Truncated { missing: u64 },
    #[error("reading the request body failed: {0}")]
    RequestBody(#[source] io::Error),
}

impl ExchangeError for Error {
    fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout(_) | Error::SendTimeout(_))
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match &e {
            Error::Io(inner) | Error::RequestBody(inner) => inner.kind(),
            Error::Closed | Error::Truncated { .. } => io::ErrorKind::UnexpectedEof,
            Error::Timeout(_) | Error::SendTimeout(_) => io::ErrorKind::TimedOut,
            Error::Head(_) | Error::Chunked(_) => io::ErrorKind::InvalidData,
        };
        match e {
            Error::Io(inner) => inner,
            e => io::Error::new(kind, e),
        }
    }
}

/// A failed [`Conn::send`].
pub type SendError = crate::link::SendError<Error>;

/// A connection to an HTTP server, idle between requests.
pub struct Conn {
    io: Io,
    /// Bytes read and not yet used; empty (and unallocated) while idle.
    buf: BytesMut,
    /// Room made before the next read.
    read_size: usize,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").finish_non_exhaustive()
    }
}

/// Dials `addr` within `timeout`, the TLS handshake included when `tls` is given.
pub async fn connect(
    addr: &ServerAddr,
    tls: Option<&TlsTarget>,
    timeout: Duration,
) -> io::Result<Conn> {
    let dial = Io::dial(addr, tls, Acks::Delayed);
    let io = tokio::time::timeout(timeout, dial)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timeout"))??;
    Ok(Conn {
        io,
        buf: BytesMut::new(),
        read_size: FIRST_READ,
    })
}

impl Conn {
    /// Whether an idle connection can no longer carry a request (see [`Io::is_closed`]: usually no system
    /// call).
    pub fn is_closed(&mut self) -> bool {
        self.io.is_closed()
    }

    /// Sends one request: the head, then `body` (framed as the head says) while the answer is read. Returns
    /// once the response head is in, its fields as the server wrote them in the response's extensions
    /// ([`super::Fields`]; its header map is left empty); `read_timeout` bounds any wait during which nothing moves either way
    /// (for the head, and then for each later read), so a long upload the server keeps reading is not a
    /// stall.
    pub async fn send(
        self,
        head: &RequestHead,
        body: Option<Body>,
        read_timeout: Duration,
    ) -> Result<Response<ResponseBody>, SendError> {
        self.send_within(head, body, read_timeout, read_timeout)
            .await
    }

    /// [`Conn::send`], with `send_timeout` instead of the read timeout for a wait during which request bytes
    /// are queued that the server does not take.
    pub async fn send_within(
        mut self,
        head: &RequestHead,
        body: Option<Body>,
        read_timeout: Duration,
        send_timeout: Duration,
    ) -> Result<Response<ResponseBody>, SendError> {
        if self.is_closed() {
            // Found out before writing anything (it costs no system call unless something arrived): the body
            // is intact and this is surely the stale case.
            return Err(SendError {
                error: Error::Closed,
                unsent: body,
                stale: true,
            });
        }
        let stall = Stall::new(read_timeout, send_timeout);
        let mut ex = Exchange::new(self, head, body, stall);
        match poll_fn(|cx| ex.poll_head(cx, head)).await {
            Ok(answer) => Ok(ResponseBody::response(answer, ex)),
            Err(error) => {
                let stale = !ex.answered && matches!(error, Error::Io(_) | Error::Closed);
                Err(SendError {
                    error,
                    unsent: ex.take_unsent(),
                    stale,
                })
            }
        }
    }
}

/// One request in flight: the connection and both directions' state.
struct Exchange {
    conn: Conn,
    /// Bytes queued for the server, in order: the head, then the body with its framing.
    out: VecDeque<Bytes>,
    /// The request body, until it ends; its frames are taken only when `out` is empty (backpressure).
    body: Option<Body>,
    chunked: bool,
    /// A frame was taken from the body: it can no longer go elsewhere.
    consumed: bool,
    /// Some byte came back from the server.
    answered: bool,
    /// A write failed: nothing more is written, the answer is still read.
    write_failed: bool,
    /// Bytes written that TLS still holds (the socket was full): they need a flush to go out.
    unflushed: bool,
    stall: Stall,
}

impl Exchange {
    fn new(conn: Conn, head: &RequestHead, body: Option<Body>, stall: Stall) -> Exchange {
        Exchange {
            conn,
            out: VecDeque::from([head.bytes()]),
            body,
            chunked: head.chunked(),
            consumed: false,
            answered: false,
            write_failed: false,
            unflushed: false,
            stall,
        }
    }

    /// The body, if none of it was taken.
    fn take_unsent(&mut self) -> Option<Body> {
        if self.consumed {
            None
        } else {
            self.body.take()
        }
    }

    /// Writes what is queued and queues more of the body, until the socket or the body has to wait.
    fn poll_write_side(&mut self, cx: &mut Context<'_>) -> Result<(), Error> {
        while !self.write_failed {
            if !self.out.is_empty() {
                let mut slices = [IoSlice::new(&[]); MAX_SLICES];
                let n = self.out.len().min(MAX_SLICES);
                for (slice, bytes) in slices.iter_mut().zip(&self.out) {
                    *slice = IoSlice::new(bytes);
                }
                match Pin::new(&mut self.conn.io).poll_write_vectored(cx, &slices[..n]) {
                    Poll::Ready(Ok(0)) => self.write_failed(io::ErrorKind::WriteZero.into()),
                    Poll::Ready(Ok(written)) => {
                        advance(&mut self.out, written);
                        self.stall.moved();
                    }
                    Poll::Ready(Err(e)) => self.write_failed(e),
                    Poll::Pending => return Ok(()),
                }
                continue;
            }
            let Some(body) = self.body.as_mut() else {
                self.poll_flush(cx);
                return Ok(());
            };
            match Pin::new(body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    self.consumed = true;
                    self.stall.moved();
                    // Trailers are dropped: few servers read them, and the head did not announce them.
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        self.queue_data(data);
                    }
                }
                Poll::Ready(None) => {
                    self.body = None;
                    if self.chunked {
                        self.out.push_back(Bytes::from_static(chunked::LAST_CHUNK));
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    self.body = None;
                    self.consumed = true;
                    return Err(Error::RequestBody(e));
                }
                Poll::Pending => {
                    self.poll_flush(cx);
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Pushes out what was written and TLS holds back (its records wait for room in the socket); a plain
    /// socket holds nothing back and is ready at once. Called whenever nothing is left to write for now.
    fn poll_flush(&mut self, cx: &mut Context<'_>) {
        match Pin::new(&mut self.conn.io).poll_flush(cx) {
            Poll::Ready(Ok(())) => self.unflushed = false,
            Poll::Ready(Err(e)) => self.write_failed(e),
            Poll::Pending => self.unflushed = true,
        }
    }

    /// Request bytes are waiting for the server to take them.
    fn sending(&self) -> bool {
        !self.write_failed && (!self.out.is_empty() || self.unflushed)
    }

    fn queue_data(&mut self, data: Bytes) {
        if self.chunked {
            self.out.push_back(chunked::chunk_header(data.len()));
            self.out.push_back(data);
            self.out.push_back(Bytes::from_static(chunked::CHUNK_END));
        } else {
            self.out.push_back(data);
        }
    }

    /// The server may have answered and closed without reading all of the request: its answer is still
    /// read. If there is none, reading ends in EOF or a reset, which says what happened.
    fn write_failed(&mut self, e: io::Error) {
        tracing::debug!(error = %e, "upstream write failed");
        self.write_failed = true;
    }

    /// Reads more into the buffer: `Ok(0)` at end of file. A read that waits past the stall timeout is an
    /// error.
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, Error>> {
        let conn = &mut self.conn;
        conn.buf.reserve(conn.read_size);
        let room = conn.buf.capacity() - conn.buf.len();
        match tokio_util::io::poll_read_buf(Pin::new(&mut conn.io), cx, &mut conn.buf) {
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    self.answered = true;
                    self.stall.moved();
                    if n == room {
                        conn.read_size = (conn.read_size * 2).min(MAX_READ);
                    }
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(Error::Io(e))),
            Poll::Pending => {
                // Bytes queued that the server does not take: it is not reading the request.
                let sending = self.sending();
                ready!(self.stall.poll(cx, sending));
                let timeout = self.stall.timeout(sending);
                Poll::Ready(Err(match sending {
                    true => Error::SendTimeout(timeout),
                    false => Error::Timeout(timeout),
                }))
            }
        }
    }

    /// Sends what it can and reads until the response head is complete.
    fn poll_head(
        &mut self,
        cx: &mut Context<'_>,
        head: &RequestHead,
    ) -> Poll<Result<ResponseHead, Error>> {
        loop {
            self.poll_write_side(cx)?;
            if !self.conn.buf.is_empty()
                && let Some(answer) = parse_response(&mut self.conn.buf, head)?
            {
                return Poll::Ready(Ok(answer));
            }
            if ready!(self.poll_read(cx))? == 0 {
                return Poll::Ready(Err(Error::Closed));
            }
        }
    }

    /// After the whole response: the connection, if the next request can follow on it. That needs the whole
    /// request written (else the server would read our leftover body as its next request) and nothing
    /// more read.
    fn into_reusable(mut self, cx: &mut Context<'_>) -> Option<Conn> {
        if self.body.is_some() || !self.conn.buf.is_empty() {
            return None;
        }
        // Only framing may be left to write (the last chunk): the server answered without waiting for it.
        let _ = self.poll_write_side(cx);
        if self.write_failed || self.sending() {
            return None;
        }
        let mut conn = self.conn;
        // Whatever allocation is left goes with the frames still on their way to the client.
        conn.buf = BytesMut::new();
        conn.read_size = FIRST_READ;
        Some(conn)
    }
}

/// Drops `n` written bytes from the front of `out`.
fn advance(out: &mut VecDeque<Bytes>, mut n: usize) {
    while n > 0 {
        let Some(front) = out.front_mut() else { return };
        if n < front.len() {
            front.advance(n);
            return;
        }
        n -= front.len();
        out.pop_front();
    }
}

type ReuseHook = Box<dyn FnOnce(Conn) + Send>;

/// The body being read, by its framing.
enum Reading {
    Length(u64),
    Chunked(Decoder),
    Close,
    /// None: the connection switched protocols, and waits for [`ResponseBody::take_upgraded`].
    Upgrade,
}

/// The response body, read from the connection as the client takes it.
pub struct ResponseBody {
    /// `None` once the body ended, well or not (or for a body that never had any bytes).
    exchange: Option<Exchange>,
    reading: Reading,
    keep_alive: bool,
    /// Who takes the connection after a clean end (behind a mutex only so the body is `Sync`).
    hook: Mutex<Option<ReuseHook>>,
    /// A connection that ended cleanly before anyone asked for it.
    spare: Option<Conn>,
}

impl ResponseBody {
    fn response(head: ResponseHead, exchange: Exchange) -> Response<ResponseBody> {
        let mut body = ResponseBody {
            exchange: None,
            reading: Reading::Close,
            keep_alive: head.keep_alive,
            hook: Mutex::new(None),
            spare: None,
        };
        match head.framing {
            Framing::Upgrade => body.start(exchange, Reading::Upgrade),
            Framing::Empty | Framing::Length(0) => body.finish(exchange, true),
            Framing::Length(n) => body.start(exchange, Reading::Length(n)),
            Framing::Chunked => body.start(exchange, Reading::Chunked(Decoder::default())),
            Framing::Close => body.start(exchange, Reading::Close),
        }
        let mut response = Response::new(body);
        *response.status_mut() = head.status;
        *response.version_mut() = head.version;
        response.extensions_mut().insert(head.fields);
        response
    }

    fn start(&mut self, exchange: Exchange, reading: Reading) {
        self.exchange = Some(exchange);
        self.reading = reading;
    }

    /// When the exchange ends cleanly (the whole response read, the whole request written, the connection
    /// persistent, no bytes left over), the connection is handed to `f`, for the caller's pool; otherwise
    /// it is dropped and `f` never called.
    pub fn on_reuse(&mut self, f: impl FnOnce(Conn) + Send + 'static) {
        match self.spare.take() {
            Some(conn) => f(conn),
            None => *self.hook.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(f)),
        }
    }

    /// After a `101 Switching Protocols`: the connection, now the server's side of a tunnel.
    pub fn take_upgraded(&mut self) -> Option<Upgraded> {
        if !matches!(self.reading, Reading::Upgrade) {
            return None;
        }
        let conn = self.exchange.take()?.conn;
        Some(Rewound::new(conn.buf.freeze(), conn.io))
    }

    /// The body ended: the connection goes to the hook if it can carry another request.
    fn finish(&mut self, exchange: Exchange, clean: bool) {
        let reusable = clean && self.keep_alive;
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        if let Some(conn) = reusable.then(|| exchange.into_reusable(&mut cx)).flatten() {
            match self
                .hook
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .take()
            {
                Some(f) => f(conn),
                None => self.spare = Some(conn),
            }
        }
    }

    /// The next data already read, if any; ends the body when its framing says so.
    fn buffered(&mut self) -> Result<Option<Bytes>, Error> {
        let Some(ex) = self.exchange.as_mut() else {
            return Ok(None);
        };
        let buf = &mut ex.conn.buf;
        let (data, done) = match &mut self.reading {
            Reading::Length(left) => {
                let take = (*left).min(buf.len() as u64) as usize;
                let data = (take > 0).then(|| buf.split_to(take).freeze());
                *left -= take as u64;
                (data, *left == 0)
            }
            Reading::Chunked(decoder) => {
                let data = match decoder.decode(buf)? {
                    Decoded::Data(data) => Some(data),
                    Decoded::NeedMore | Decoded::Done => None,
                };
                decoder.skip_framing(buf)?;
                (data, decoder.is_done())
            }
            Reading::Close => {
                let data = (!buf.is_empty()).then(|| buf.split().freeze());
                (data, false)
            }
            Reading::Upgrade => return Ok(None),
        };
        if done && let Some(exchange) = self.exchange.take() {
            self.finish(exchange, true);
        }
        Ok(data)
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Error>>> {
        loop {
            if let Some(data) = self.buffered().transpose() {
                return Poll::Ready(Some(data));
            }
            let Some(ex) = self.exchange.as_mut() else {
                return Poll::Ready(None);
            };
            if matches!(self.reading, Reading::Upgrade) {
                return Poll::Ready(None);
            }
            ex.poll_write_side(cx)?;
            if ready!(ex.poll_read(cx))? > 0 {
                continue;
            }
            // End of file: the end of a body delimited by the close, else an error.
            let error = match self.reading {
                Reading::Close | Reading::Upgrade => None,
                Reading::Length(missing) => Some(Error::Truncated { missing }),
                Reading::Chunked(_) => Some(Error::Closed),
            };
            self.exchange = None;
            return Poll::Ready(error.map(Err));
        }
    }
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseBody")
            .field("ended", &self.is_end_stream())
            .finish_non_exhaustive()
    }
}

impl HttpBody for ResponseBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = self.get_mut();
        let polled = ready!(this.poll_next(cx));
        if matches!(polled, Some(Err(_))) {
            // The connection is in an unknown state: closed.
            this.exchange = None;
        }
        Poll::Ready(polled.map(|r| r.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        self.exchange.is_none() || matches!(self.reading, Reading::Upgrade)
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.exchange, &self.reading) {
            (None, _) | (_, Reading::Upgrade) => SizeHint::with_exact(0),
            (Some(_), Reading::Length(left)) => SizeHint::with_exact(*left),
            _ => SizeHint::default(),
        }
    }
}

/// The server's side of a connection that switched protocols: what it sent after the 101 comes first.
pub type Upgraded = Rewound<Io>;

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
