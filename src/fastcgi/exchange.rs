//! One request in flight on a FastCGI connection: the records that go out (BEGIN_REQUEST, PARAMS, STDIN from
//! the request body, and a rider's records queued behind, see [`super::pipeline`]) and those that come back
//! (STDOUT, STDERR logged line by line, END_REQUEST), both driven by whoever polls. At a clean end the
//! connection is reusable, or handed to the rider.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes, BytesMut};
use http::Response;
use http_body::Body as HttpBody;
use tokio::io::AsyncWrite;

use super::cgi::{Head, HeadParser};
use super::client::{Conn, Error, ResponseBody, SendError};
use super::params::Params;
use super::pipeline::{Handover, Line};
use super::record::{
    self, Decoder, HEADER_LEN, KEEP_CONN, ProtocolStatus, Record, RecordType, Role,
};
use crate::body::Body;
use crate::link::stall::Stall;

/// The one request id: a connection carries one request at a time (PHP-FPM does not multiplex).
pub(super) const REQUEST_ID: u16 = 1;
/// Room made in the read buffer before each read.
pub(super) const READ_CHUNK: usize = 16 * 1024;
/// A STDERR line longer than this is logged in pieces, so a script cannot grow the buffer without bound.
const MAX_LOG_LINE: usize = 8 * 1024;

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

/// One request in flight: the connection and both directions' state.
pub(super) struct Exchange {
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
    /// The seats behind this exchange (see [`super::pipeline`]): riders' records written after ours, and the
    /// connection theirs after our end.
    behind: Line,
}

impl Exchange {
    pub(super) fn new(conn: Conn, params: &Params, body: Option<Body>, stall: Stall) -> Exchange {
        let mut ex = Exchange::with_records(conn, encode_start(params), body, stall);
        if ex.body.is_none() {
            ex.end_stdin();
        }
        ex
    }

    /// The exchange of a request queued behind another on `conn` (see [`super::pipeline`]): the records already
    /// read past the end of the one ahead, and what of the request is still to be written.
    pub(super) fn resumed(handover: Handover, stall: Stall) -> Exchange {
        let Handover {
            conn,
            decoder,
            unwritten,
            behind,
        } = handover;
        let mut ex = Exchange::with_records(conn, unwritten, None, stall);
        ex.answered = decoder.buffered() > 0;
        ex.decoder = decoder;
        ex.behind = behind;
        ex
    }

    /// The server's address, for logs.
    pub(super) fn server(&self) -> &Arc<str> {
        &self.conn.label
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
            behind: Line::default(),
        }
    }

    /// Runs the exchange until the CGI head is parsed: the response, its body streaming on.
    pub(super) async fn head(mut self) -> Result<Response<ResponseBody>, SendError> {
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
    pub(super) fn abort(&self) {
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

    /// Once the whole request is written (on a connection that takes part in pipelining): offers seats, and
    /// returns riders' records as they come, to be written after ours.
    fn rider_records(&mut self, cx: &mut Context<'_>) -> Option<BytesMut> {
        if !self.stdin_ended || self.ended.is_some() || self.write_failed {
            return None;
        }
        let counted = self.conn.pipeline.as_ref()?;
        let (seats, depth) = (counted.seats().clone(), counted.depth());
        self.behind.next_records(&seats, depth, cx.waker())
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
    pub(super) fn poll_stdout(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, Error>> {
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
    pub(super) fn into_reusable(mut self, cx: &mut Context<'_>) -> Option<Conn> {
        let complete = matches!(self.ended, Some((_, ProtocolStatus::RequestComplete)));
        // Dropped unless closed below: riders sitting there learn that the connection is not coming.
        let line = std::mem::take(&mut self.behind);
        if !complete || self.write_failed {
            return None;
        }
        let carried = line.carried();
        if let Some((to, untaken, behind)) = line.close() {
            // Our request was all written before the first seat was offered: what is left in `out` is riders'.
            let unwritten = untaken.unwrap_or(self.out);
            let (conn, decoder) = (self.conn, self.decoder);
            // A rider that gave up leaves a request on the way to the server: the connection goes with it.
            let _ = to.send(Handover {
                conn,
                decoder,
                unwritten,
                behind,
            });
            return None;
        }
        // A rider's request went out after ours, and the rider gave up: its answer is nobody's.
        if carried || self.decoder.buffered() > 0 {
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
