//! One FastCGI connection and one request on it at a time.
//!
//! The request body goes out as STDIN records while the answer comes in: a script may print before it reads
//! its input, and a server that blocks writing its answer stops reading ours. Both directions are driven
//! from whoever polls — [`Conn::send`] until the head is parsed, then [`ResponseBody`] — so no task is
//! spawned, the request body is read only as fast as the application takes it, and the response only as
//! fast as the client does. The request in flight, both directions' state, is [`super::exchange`]'s.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tokio::io::AsyncWriteExt;

use super::cgi::{Head, HeadError};
use super::exchange::{Exchange, READ_CHUNK};
use super::params::Params;
use super::pipeline::{Counted, Handover};
use super::record::{DecodeError, Decoder, ProtocolStatus, Record, RecordType};
use crate::body::Body;
use crate::link::ExchangeError;
use crate::link::ServerAddr;
use crate::link::socket::{Acks, Io};
use crate::link::stall::Stall;
use crate::workers;

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Io(io::Error),
    #[error("the application closed the connection before the end of the response")]
    Closed,
    #[error("no answer within {:.1} s", .0.as_secs_f64())]
    Timeout(Duration),
    #[error("the request was not read within {:.1} s", .0.as_secs_f64())]
    SendTimeout(Duration),
    #[error("malformed FastCGI record: {0}")]
    Decode(#[from] DecodeError),
    #[error("unexpected {kind:?} record for request {id}")]
    Unexpected { kind: RecordType, id: u16 },
    #[error("invalid CGI response head: {0}")]
    Head(#[from] HeadError),
    #[error(
        "the application ended the request without a response (app status {app_status}, {protocol_status:?})"
    )]
    NoResponse {
        app_status: u32,
        protocol_status: ProtocolStatus,
    },
    #[error("the response ended {missing} bytes short of its Content-Length")]
    Truncated { missing: u64 },
    #[error("reading the request body failed: {0}")]
    RequestBody(#[source] io::Error),
    #[error("the request queued ahead of this one on its connection failed")]
    AheadFailed,
}

impl ExchangeError for Error {
    fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout(_) | Error::SendTimeout(_))
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match &e {
            Error::Io(inner) => inner.kind(),
            Error::Closed | Error::Truncated { .. } | Error::AheadFailed => {
                io::ErrorKind::UnexpectedEof
            }
            Error::Timeout(_) | Error::SendTimeout(_) => io::ErrorKind::TimedOut,
            Error::RequestBody(inner) => inner.kind(),
            Error::Decode(_)
            | Error::Unexpected { .. }
            | Error::Head(_)
            | Error::NoResponse { .. } => io::ErrorKind::InvalidData,
        };
        match e {
            Error::Io(inner) => inner,
            e => io::Error::new(kind, e),
        }
    }
}

/// A failed [`Conn::send`].
pub type SendError = crate::link::SendError<Error>;

/// A connection to a FastCGI server, idle between requests.
pub struct Conn {
    pub(super) io: Io,
    /// The server's address, for logs.
    pub(super) label: Arc<str>,
    /// The worker thread whose reactor the socket is registered with.
    pub(super) worker: usize,
    /// Known open: found open by [`Conn::check_open`] when a pool handed it out. [`Conn::send`]
    /// then spares itself the same check, a system call per request.
    pub(super) known_open: AtomicBool,
    /// Counted among its server's connections that take a request queued behind the one in progress (see
    /// [`super::pipeline`]).
    pub(super) pipeline: Option<Counted>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("server", &self.label).finish()
    }
}

/// Dials `addr` within `timeout`.
pub async fn connect(addr: &ServerAddr, timeout: Duration) -> io::Result<Conn> {
    let dial = Io::dial(addr, None, Acks::BeforeWait);
    let io = tokio::time::timeout(timeout, dial)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timeout"))??;
    Ok(Conn {
        io,
        label: addr.to_string().into(),
        worker: workers::current(),
        known_open: AtomicBool::new(false),
        pipeline: None,
    })
}

impl Conn {
    /// The connection, its socket registered with the calling worker's reactor: taken from a shared pool,
    /// it may come from another worker, whose thread would otherwise relay every wake-up to this one.
    /// Moving costs two `epoll_ctl` calls.
    pub fn into_this_worker(self) -> io::Result<Conn> {
        let here = workers::current();
        if self.worker == here {
            return Ok(self);
        }
        let io = self.io.reregister()?;
        Ok(Conn {
            io,
            worker: here,
            ..self
        })
    }

    /// Takes part in pipelining, counted by `counted` until it closes: once its request is written, an
    /// exchange on it offers a seat to a request without a body.
    pub fn counted(self, counted: Counted) -> Conn {
        Conn {
            pipeline: Some(counted),
            ..self
        }
    }

    /// The worker thread whose reactor the socket is registered with.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// Whether an idle connection can no longer carry a request: the server closed it, reset it, or sent
    /// bytes nobody asked for (see [`Io::peek_closed`]: usually no system call).
    pub fn is_closed(&self) -> bool {
        self.io.peek_closed()
    }

    /// Whether the server closed it, as [`Conn::is_closed`]; if not, the next [`Conn::send`] takes it as open
    /// without looking again. For a pool handing the connection out.
    pub fn check_open(&self) -> bool {
        let open = !self.is_closed();
        self.known_open.store(open, Ordering::Relaxed);
        open
    }

    /// Sends one request with FCGI_KEEP_CONN, request id 1 (one request at a time per connection; no
    /// multiplexing).
    ///
    /// Streams `body` as STDIN records concurrently with reading the answer, ending with an empty STDIN
    /// record. Returns once the CGI head is parsed; `read_timeout` bounds any wait during which nothing moves
    /// either way (for the head, and then for each later read): a long upload the application keeps reading
    /// is not a stall.
    #[cfg(test)]
    pub async fn send(
        self,
        params: &Params,
        body: Option<Body>,
        read_timeout: Duration,
    ) -> Result<Response<ResponseBody>, SendError> {
        self.send_within(params, body, read_timeout, read_timeout)
            .await
    }

    /// [`Conn::send`], with `send_timeout` instead of the read timeout for a wait during which records are
    /// queued that the application does not take.
    pub async fn send_within(
        self,
        params: &Params,
        body: Option<Body>,
        read_timeout: Duration,
        send_timeout: Duration,
    ) -> Result<Response<ResponseBody>, SendError> {
        if !self.known_open.swap(false, Ordering::Relaxed) && self.is_closed() {
            // Found out before writing anything: the body is intact and this is surely the stale case.
            return Err(SendError {
                error: Error::Closed,
                unsent: body,
                stale: true,
            });
        }
        let stall = Stall::new(read_timeout, send_timeout);
        Exchange::new(self, params, body, stall).head().await
    }

    /// Goes on with the request a rider queued behind an exchange that has now ended (see
    /// [`super::pipeline`]): its answer is read from where that exchange stopped.
    ///
    /// The socket stays registered where it was: with riders lined up, its next exchange is as likely to be on
    /// another worker again, and the rider's answer is often read already (in the handover's decoder), so
    /// moving it (two `epoll_ctl` calls, once per request under load) would cost more than the wake-ups its
    /// worker relays.
    pub async fn resume(
        handover: Handover,
        read_timeout: Duration,
        send_timeout: Duration,
    ) -> Result<Response<ResponseBody>, SendError> {
        let stall = Stall::new(read_timeout, send_timeout);
        Exchange::resumed(handover, stall).head().await
    }

    /// FCGI_GET_VALUES for FCGI_MAX_CONNS/FCGI_MAX_REQS/FCGI_MPXS_CONNS, for readiness probes: Ok when the
    /// server answers with GET_VALUES_RESULT. (PHP-FPM closes the connection after answering.)
    pub async fn probe(&mut self, timeout: Duration) -> io::Result<()> {
        self.get_values(timeout).await.map(drop)
    }

    /// The answer to FCGI_GET_VALUES: the values the server chose to give.
    pub async fn get_values(&mut self, timeout: Duration) -> io::Result<Params> {
        let names: Params = ["FCGI_MAX_CONNS", "FCGI_MAX_REQS", "FCGI_MPXS_CONNS"]
            .into_iter()
            .map(|n| (n, ""))
            .collect();
        let mut content = BytesMut::new();
        names.encode(&mut content);
        let mut out = BytesMut::new();
        Record::GetValues {
            data: content.freeze(),
        }
        .encode(&mut out);
        let exchange = async {
            self.io.write_all(&out).await?;
            let mut decoder = Decoder::new();
            loop {
                match decoder.decode().map_err(invalid)? {
                    Some(Record::GetValuesResult { .. }) if decoder.buffered() > 0 => {
                        return Err(invalid("bytes after GET_VALUES_RESULT"));
                    }
                    Some(Record::GetValuesResult { data }) => {
                        return Params::decode(&data).map_err(invalid);
                    }
                    Some(other) => {
                        let kind = other.record_type();
                        return Err(invalid(format!("unexpected {kind:?} record")));
                    }
                    None => {}
                }
                let buf = decoder.buffer_mut();
                buf.reserve(READ_CHUNK);
                let n =
                    poll_fn(|cx| tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, buf))
                        .await?;
                if n == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
            }
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no answer to FCGI_GET_VALUES"))?
    }
}

fn invalid(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

type ReuseHook = Box<dyn FnOnce(Conn) + Send>;

/// The response body: STDOUT content after the head, until END_REQUEST.
pub struct ResponseBody {
    /// `None` once the exchange ended, well or not.
    exchange: Option<Exchange>,
    /// Body bytes that came in the same records as the head.
    first: Option<Bytes>,
    /// What is left of the head's `Content-Length`, when it had one.
    remaining: Option<u64>,
    warned_excess: bool,
    /// Who takes the connection after a clean end (behind a mutex only so the body is `Sync`).
    hook: Mutex<Option<ReuseHook>>,
    /// A connection that ended cleanly before anyone asked for it.
    spare: Option<Conn>,
}

impl ResponseBody {
    pub(super) fn response(head: Head, first: Bytes, exchange: Exchange) -> Response<ResponseBody> {
        let body = ResponseBody {
            remaining: head.content_length(),
            first: (!first.is_empty()).then_some(first),
            exchange: Some(exchange),
            warned_excess: false,
            hook: Mutex::new(None),
            spare: None,
        };
        let mut response = Response::new(body);
        *response.status_mut() = head.status;
        *response.headers_mut() = head.headers;
        if !head.spelling.is_empty() {
            response.extensions_mut().insert(head.spelling);
        }
        response
    }

    /// When the exchange ends cleanly (END_REQUEST received, the whole STDIN written, no leftover bytes), the
    /// connection is handed to `f`, for the caller's pool; otherwise it is dropped and `f` never called.
    pub fn on_reuse(&mut self, f: impl FnOnce(Conn) + Send + 'static) {
        match self.spare.take() {
            Some(conn) => f(conn),
            None => *self.hook.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(f)),
        }
    }

    /// Keeps `data` within the declared `Content-Length`: the excess is dropped (with a warning, once), as
    /// nginx does, since the client frames the response by that length.
    fn limit(&mut self, mut data: Bytes) -> Option<Bytes> {
        if let Some(left) = self.remaining.as_mut() {
            if data.len() as u64 > *left {
                if !self.warned_excess {
                    let server = self.exchange.as_ref().map(|e| e.server().clone());
                    tracing::warn!(server = ?server, "response longer than its Content-Length, excess dropped");
                    self.warned_excess = true;
                }
                data.truncate(*left as usize);
            }
            *left -= data.len() as u64;
        }
        (!data.is_empty()).then_some(data)
    }

    /// END_REQUEST came: a short body is an error, otherwise the connection may be reused.
    fn finish(&mut self, cx: &mut Context<'_>) -> Option<Error> {
        let exchange = self.exchange.take()?;
        if let Some(missing) = self.remaining.filter(|&n| n > 0) {
            return Some(Error::Truncated { missing });
        }
        if let Some(conn) = exchange.into_reusable(cx) {
            let hook = self.hook.get_mut().unwrap_or_else(|e| e.into_inner());
            match hook.take() {
                Some(f) => f(conn),
                None => self.spare = Some(conn),
            }
        }
        None
    }
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseBody")
            .field("server", &self.exchange.as_ref().map(Exchange::server))
            .field("remaining", &self.remaining)
            .field("ended", &self.is_end_stream())
            .finish()
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
        loop {
            let data = match this.first.take() {
                Some(data) => data,
                None => {
                    let Some(exchange) = this.exchange.as_mut() else {
                        return Poll::Ready(None);
                    };
                    match ready!(exchange.poll_stdout(cx)) {
                        Ok(Some(data)) => data,
                        Ok(None) => return Poll::Ready(this.finish(cx).map(Err)),
                        Err(e) => {
                            if let Some(exchange) = this.exchange.take() {
                                exchange.abort();
                            }
                            return Poll::Ready(Some(Err(e)));
                        }
                    }
                }
            };
            if let Some(data) = this.limit(data) {
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.exchange.is_none() && self.first.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.remaining {
            Some(n) => SizeHint::with_exact(n),
            None if self.is_end_stream() => SizeHint::with_exact(0),
            None => SizeHint::default(),
        }
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        // Dropped before the end: the client went away.
        if let Some(exchange) = &self.exchange {
            exchange.abort();
        }
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
pub(super) mod tests;
