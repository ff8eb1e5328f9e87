//! One FastCGI connection and one request on it at a time.
//!
//! The request body goes out as STDIN records while the answer comes in: a script may print before it reads
//! its input, and a server that blocks writing its answer stops reading ours. Both directions are driven
//! from whoever polls — [`Conn::send`] until the head is parsed, then [`ResponseBody`] — so no task is
//! spawned, the request body is read only as fast as the application takes it, and the response only as
//! fast as the client does.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::cgi::{Head, HeadError, HeadParser};
use super::params::Params;
use super::pipeline::{Counted, Handover, Offered};
use super::record::{
    self, DecodeError, Decoder, HEADER_LEN, KEEP_CONN, ProtocolStatus, Record, RecordType, Role,
};
use crate::body::Body;
use crate::upstream::ExchangeError;
use crate::upstream::conf::ServerAddr;
use crate::upstream::socket::{Acks, Io};
use crate::upstream::stall::Stall;
use crate::workers;

/// The one request id: a connection carries one request at a time (PHP-FPM does not multiplex).
const REQUEST_ID: u16 = 1;
/// Room made in the read buffer before each read.
const READ_CHUNK: usize = 16 * 1024;
/// A STDERR line longer than this is logged in pieces, so a script cannot grow the buffer without bound.
const MAX_LOG_LINE: usize = 8 * 1024;

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
pub type SendError = crate::upstream::SendError<Error>;

/// A connection to a FastCGI server, idle between requests.
pub struct Conn {
    io: Io,
    /// The server's address, for logs.
    label: Arc<str>,
    /// The worker thread whose reactor the socket is registered with.
    worker: usize,
    /// Known open: found open by [`Conn::check_open`] when a pool handed it out. [`Conn::send`]
    /// then spares itself the same check, a system call per request.
    known_open: AtomicBool,
    /// Counted among its server's connections that take a request queued behind the one in progress (see
    /// [`super::pipeline`]).
    pipeline: Option<Counted>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("server", &self.label).finish()
    }
}

/// Dials `addr` within `timeout`.
pub async fn connect(addr: &ServerAddr, timeout: Duration) -> io::Result<Conn> {
    let dial = Io::dial(addr, Acks::BeforeWait);
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

/// The records of a request without a body: BEGIN_REQUEST, the params and their end, the end of STDIN.
pub fn encode_bodiless(params: &Params) -> BytesMut {
    let mut out = encode_start(params);
    record::encode_stream_end(&mut out, RecordType::Stdin, REQUEST_ID);
    out
}

/// What goes out first: BEGIN_REQUEST, the params' records and their end, sized once with room for the end of
/// STDIN (growing it as the records were appended cost three reallocations per request).
fn encode_start(params: &Params) -> BytesMut {
    let encoded = params.encoded();
    let records = encoded.len().div_ceil(record::MAX_CONTENT);
    let mut out = BytesMut::with_capacity(encoded.len() + (records + 3) * 16);
    Record::BeginRequest {
        id: REQUEST_ID,
        role: Role::Responder as u16,
        flags: KEEP_CONN,
    }
    .encode(&mut out);
    record::encode_stream_data(&mut out, RecordType::Params, REQUEST_ID, encoded);
    record::encode_stream_end(&mut out, RecordType::Params, REQUEST_ID);
    out
}

impl Conn {
    /// The connection, its socket registered with the calling worker's reactor: taken from a shared pool,
    /// it may come from another worker, whose thread would otherwise relay every wake-up to this one.
    /// Moving costs two `epoll_ctl` calls.
    pub fn to_this_worker(self) -> io::Result<Conn> {
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

    /// The server's address, as given to [`connect`].
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The worker thread whose reactor the socket is registered with.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// Whether an idle connection can no longer carry a request: the server closed it, reset it, or sent
    /// bytes nobody asked for (see [`Io::is_closed`]: usually no system call).
    pub fn is_closed(&self) -> bool {
        self.io.is_closed()
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
    pub async fn resume(
        handover: Handover,
        read_timeout: Duration,
        send_timeout: Duration,
    ) -> Result<Response<ResponseBody>, SendError> {
        let Handover {
            conn,
            decoder,
            unwritten,
        } = handover;
        let conn = conn.to_this_worker().map_err(|e| SendError {
            error: Error::Io(e),
            unsent: None,
            stale: false,
        })?;
        let stall = Stall::new(read_timeout, send_timeout);
        let mut ex = Exchange::with_records(conn, unwritten, None, stall);
        ex.answered = decoder.buffered() > 0;
        ex.decoder = decoder;
        ex.head().await
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

/// One request in flight: the connection and both directions' state.
struct Exchange {
    conn: Conn,
    decoder: Decoder,
    /// Encoded records not yet written.
    out: BytesMut,
    /// The request body, until it ends; its frames are taken only when `out` is empty (backpressure).
    body: Option<Body>,
    /// The empty STDIN record that ends the input has been queued: it is the last 8 bytes of `out`.
    stdin_ended: bool,
    /// A frame was taken from the body: it can no longer go elsewhere.
    consumed: bool,
    /// Some byte came back from the server.
    answered: bool,
    /// A write failed: nothing more is written, the answer is still read.
    write_failed: bool,
    /// END_REQUEST, once received.
    ended: Option<(u32, ProtocolStatus)>,
    /// The start of a STDERR line whose end has not arrived.
    stderr: Vec<u8>,
    stall: Stall,
    /// The seat behind this exchange, once offered (see [`super::pipeline`]).
    seat: Option<Offered>,
    /// A seat was offered (or could not be): once per exchange.
    offered: bool,
    /// A rider's records were taken to be written after ours: the connection is theirs after our end.
    carried_rider: bool,
}

impl Exchange {
    fn new(conn: Conn, params: &Params, body: Option<Body>, stall: Stall) -> Exchange {
        let mut ex = Exchange::with_records(conn, encode_start(params), body, stall);
        if ex.body.is_none() {
            ex.end_stdin();
        }
        ex
    }

    /// An exchange with `out` to write first; STDIN is taken as ended unless there is a `body`.
    fn with_records(conn: Conn, out: BytesMut, body: Option<Body>, stall: Stall) -> Exchange {
        Exchange {
            conn,
            decoder: Decoder::new(),
            out,
            stdin_ended: body.is_none(),
            body,
            consumed: false,
            answered: false,
            write_failed: false,
            ended: None,
            stderr: Vec::new(),
            stall,
            seat: None,
            offered: false,
            carried_rider: false,
        }
    }

    /// Runs the exchange until the CGI head is parsed: the response, its body streaming on.
    async fn head(mut self) -> Result<Response<ResponseBody>, SendError> {
        let mut parser = HeadParser::new();
        let head = poll_fn(|cx| self.poll_head(cx, &mut parser)).await;
        match head {
            Ok((head, first)) => Ok(ResponseBody::response(head, first, self)),
            Err(error) => {
                let stale = !self.answered && matches!(error, Error::Io(_) | Error::Closed);
                let unsent = self.take_unsent();
                self.abort();
                Err(SendError {
                    error,
                    unsent,
                    stale,
                })
            }
        }
    }

    fn end_stdin(&mut self) {
        record::encode_stream_end(&mut self.out, RecordType::Stdin, REQUEST_ID);
        self.stdin_ended = true;
    }

    /// The body, if none of it was taken.
    fn take_unsent(&mut self) -> Option<Body> {
        if self.consumed {
            None
        } else {
            self.body.take()
        }
    }

    /// Tells the application the request is abandoned, if the record can go out whole at once: the
    /// connection is dropped right after, which is what really stops it.
    fn abort(&self) {
        if self.ended.is_some() || self.write_failed || !self.out.is_empty() {
            return;
        }
        let mut rec = BytesMut::new();
        Record::AbortRequest { id: REQUEST_ID }.encode(&mut rec);
        let _ = self.conn.io.try_write(&rec);
    }

    /// Writes what is queued and queues more of the body, until the socket or the body has to wait.
    fn poll_write_side(&mut self, cx: &mut Context<'_>) -> Result<(), Error> {
        while !self.write_failed {
            if !self.out.is_empty() {
                match Pin::new(&mut self.conn.io).poll_write(cx, &self.out) {
                    Poll::Ready(Ok(0)) => self.write_failed(io::ErrorKind::WriteZero.into()),
                    Poll::Ready(Ok(n)) => {
                        self.out.advance(n);
                        self.stall.moved();
                    }
                    Poll::Ready(Err(e)) => self.write_failed(e),
                    Poll::Pending => return Ok(()),
                }
                continue;
            }
            let Some(body) = self.body.as_mut() else {
                match self.rider_records(cx) {
                    Some(records) => self.out = records,
                    None => return Ok(()),
                }
                continue;
            };
            match Pin::new(body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    self.consumed = true;
                    self.stall.moved();
                    // Trailers have no place in FastCGI: dropped.
                    if let Ok(data) = frame.into_data() {
                        let (out, id) = (&mut self.out, REQUEST_ID);
                        record::encode_stream_data(out, RecordType::Stdin, id, &data);
                    }
                }
                Poll::Ready(None) => {
                    self.body = None;
                    self.end_stdin();
                }
                Poll::Ready(Some(Err(e))) => {
                    self.body = None;
                    self.consumed = true;
                    return Err(Error::RequestBody(e));
                }
                Poll::Pending => return Ok(()),
            }
        }
        Ok(())
    }

    /// Once the whole request is written (on a connection that takes part in pipelining): offers a seat, and
    /// returns a rider's records when they come, to be written after ours.
    fn rider_records(&mut self, cx: &mut Context<'_>) -> Option<BytesMut> {
        if !self.stdin_ended || self.ended.is_some() || self.write_failed {
            return None;
        }
        if !self.offered {
            self.offered = true;
            self.seat = self
                .conn
                .pipeline
                .as_ref()
                .and_then(|c| Offered::new(c.seats()));
        }
        let records = self.seat.as_ref()?.seat().take_request(cx.waker())?;
        self.carried_rider = true;
        Some(records)
    }

    /// The application may have answered and closed without reading all of our input: its answer is still
    /// read. If there is none, reading ends in EOF or a reset, which says what happened.
    fn write_failed(&mut self, e: io::Error) {
        tracing::debug!(server = %self.conn.label, error = %e, "FastCGI write failed");
        self.write_failed = true;
    }

    /// The next record, reading only when none is buffered.
    fn poll_record(&mut self, cx: &mut Context<'_>) -> Poll<Result<Record, Error>> {
        loop {
            if let Some(record) = self.decoder.decode()? {
                return Poll::Ready(Ok(record));
            }
            let buf = self.decoder.buffer_mut();
            buf.reserve(READ_CHUNK);
            match ready!(tokio_util::io::poll_read_buf(
                Pin::new(&mut self.conn.io),
                cx,
                buf
            )) {
                Ok(0) => return Poll::Ready(Err(Error::Closed)),
                Ok(_) => {
                    self.answered = true;
                    self.stall.moved();
                }
                Err(e) => return Poll::Ready(Err(Error::Io(e))),
            }
        }
    }

    /// The next STDOUT content, `None` at END_REQUEST; STDERR is logged on the way, the body sent meanwhile.
    fn poll_stdout(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, Error>> {
        loop {
            self.poll_write_side(cx)?;
            let record = match self.poll_record(cx) {
                Poll::Ready(r) => r?,
                Poll::Pending => {
                    // Records queued that the application does not take: it is not reading the request.
                    let sending = !self.write_failed && !self.out.is_empty();
                    ready!(self.stall.poll(cx, sending));
                    let timeout = self.stall.timeout(sending);
                    return Poll::Ready(Err(match sending {
                        true => Error::SendTimeout(timeout),
                        false => Error::Timeout(timeout),
                    }));
                }
            };
            match record {
                Record::Stdout {
                    id: REQUEST_ID,
                    data,
                } if !data.is_empty() => return Poll::Ready(Ok(Some(data))),
                // The end of STDOUT: END_REQUEST follows.
                Record::Stdout { id: REQUEST_ID, .. } => {}
                Record::Stderr {
                    id: REQUEST_ID,
                    data,
                } => self.log_stderr(&data),
                Record::EndRequest {
                    id: REQUEST_ID,
                    app_status,
                    protocol_status,
                } => {
                    self.flush_stderr();
                    if app_status != 0 || protocol_status != ProtocolStatus::RequestComplete {
                        let server = &self.conn.label;
                        tracing::debug!(%server, app_status, ?protocol_status, "FastCGI request ended");
                    }
                    self.ended = Some((app_status, protocol_status));
                    return Poll::Ready(Ok(None));
                }
                other => {
                    let (kind, id) = (other.record_type(), other.request_id());
                    return Poll::Ready(Err(Error::Unexpected { kind, id }));
                }
            }
        }
    }

    /// Reads STDOUT until the head is complete.
    fn poll_head(
        &mut self,
        cx: &mut Context<'_>,
        parser: &mut HeadParser,
    ) -> Poll<Result<(Head, Bytes), Error>> {
        loop {
            match ready!(self.poll_stdout(cx))? {
                Some(data) => {
                    if let Some(found) = parser.push(data)? {
                        return Poll::Ready(Ok(found));
                    }
                }
                None => {
                    let (app_status, protocol_status) =
                        self.ended.unwrap_or((0, ProtocolStatus::RequestComplete));
                    return Poll::Ready(Err(Error::NoResponse {
                        app_status,
                        protocol_status,
                    }));
                }
            }
        }
    }

    /// After END_REQUEST: the connection, if the next request can follow on it. That needs the whole input
    /// sent (else the application would read our leftover STDIN as its next request) and nothing more read.
    fn into_reusable(mut self, cx: &mut Context<'_>) -> Option<Conn> {
        let complete = matches!(self.ended, Some((_, ProtocolStatus::RequestComplete)));
        // Dropped unless closed below: a rider sitting there learns that the connection is not coming.
        let seat = self.seat.take();
        if !complete || self.write_failed {
            return None;
        }
        if let Some((to, untaken)) = seat.and_then(Offered::close) {
            // Our request was all written before the seat was offered: what is left in `out` is the rider's.
            let unwritten = untaken.unwrap_or(self.out);
            let (conn, decoder) = (self.conn, self.decoder);
            // A rider that gave up leaves a request on the way to the server: the connection goes with it.
            let _ = to.send(Handover {
                conn,
                decoder,
                unwritten,
            });
            return None;
        }
        // A rider's request went out after ours, and the rider gave up: its answer is nobody's.
        if self.carried_rider || self.decoder.buffered() > 0 {
            return None;
        }
        if let Some(body) = self.body.as_mut() {
            // Only the end of the body may be missing: data would be input the application never read.
            if !self.out.is_empty() || !matches!(Pin::new(body).poll_frame(cx), Poll::Ready(None)) {
                return None;
            }
            self.body = None;
            self.end_stdin();
        }
        // What is left to write, if anything, is (part of) the final empty STDIN record.
        if !self.stdin_ended || self.out.len() > HEADER_LEN {
            return None;
        }
        while !self.out.is_empty() {
            match Pin::new(&mut self.conn.io).poll_write(cx, &self.out) {
                Poll::Ready(Ok(n)) if n > 0 => self.out.advance(n),
                _ => return None,
            }
        }
        Some(self.conn)
    }

    fn log_stderr(&mut self, data: &[u8]) {
        self.stderr.extend_from_slice(data);
        let mut start = 0;
        while let Some(at) = self.stderr[start..].iter().position(|&b| b == b'\n') {
            log_line(&self.conn.label, &self.stderr[start..start + at]);
            start += at + 1;
        }
        self.stderr.drain(..start);
        if self.stderr.len() > MAX_LOG_LINE {
            self.flush_stderr();
        }
    }

    fn flush_stderr(&mut self) {
        log_line(&self.conn.label, &self.stderr);
        self.stderr.clear();
    }
}

/// One line the application wrote to STDERR (PHP's warnings and `error_log()` arrive this way).
fn log_line(server: &str, line: &[u8]) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if !line.is_empty() {
        let line = String::from_utf8_lossy(line);
        tracing::warn!(server = %server, "{line}");
    }
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
    fn response(head: Head, first: Bytes, exchange: Exchange) -> Response<ResponseBody> {
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
                    let server = self.exchange.as_ref().map(|e| e.conn.label.clone());
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
            .field("server", &self.exchange.as_ref().map(|e| &e.conn.label))
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
