//! The life of an HTTP/1.1 connection: read a head, run its request, write the answer, and again while the
//! client keeps the connection (pipelined heads wait in the read buffer); `100 Continue` when the body is
//! first read, the connection handed over after a `101`, heads that cannot be served answered with their
//! status, and a graceful end when the listener goes away or rein stops.
//!
//! Unit's timeouts stay in the socket wrapper under this loop (`timeouts::TimedIo`), which follows the
//! request's phases through `ConnState`, as it does for hyper's HTTP/2.

use std::fmt::Write as _;
use std::future::{Future, poll_fn};
use std::io::{self, IoSlice};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::{Method, Request, Response, StatusCode, Version};
use http_body::Body as _;
use tokio::io::{AsyncWrite, AsyncWriteExt, WriteHalf};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::body::{Body, BoxIo, Handback, Reader};
use super::encode::{self, Asked, BodyOut};
use super::parse::{self, Framing, Head, HeadError};
use crate::body::Body as ResponseBody;
use crate::http1::chunked::{CHUNK_END, LAST_CHUNK};
use crate::rewind::Rewound;
use crate::server::conn::ConnInfo;
use crate::server::request_body::ClientBody;
use crate::server::{Shared, actions, handler, unfinished_head};

/// A body piece up to this long is copied behind the head (or the pieces before it) so that the answer
/// goes out in one write; a longer one is written from where it lies.
const COPY_MAX: usize = 8 * 1024;
/// Written-out pieces are sent once this much is waiting, without waiting for the body's next piece.
const SEND_AT: usize = 64 * 1024;
/// The most pieces given to one vectored write.
const MAX_SLICES: usize = 32;

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The connection handed to an upgrade, once the `101` answer is out; put in the request's extensions
/// (which take only what can be cloned: the clones share the one receiver).
#[derive(Clone)]
pub(crate) struct PendingUpgrade(Arc<std::sync::Mutex<Option<oneshot::Receiver<BoxIo>>>>);

impl PendingUpgrade {
    pub fn take(&self) -> Option<oneshot::Receiver<BoxIo>> {
        self.0.lock().ok()?.take()
    }
}

/// Serves HTTP/1.1 on `io` until the client or rein ends the connection.
pub(in crate::server) async fn run(
    io: BoxIo,
    info: Arc<ConnInfo>,
    max_head: usize,
    shared: Arc<Shared>,
    stop: CancellationToken,
) -> io::Result<()> {
    let (read, write) = tokio::io::split(io);
    let mut conn = Conn {
        reader: Some(Reader::new(read)),
        write,
        info,
        shared,
        max_head,
    };
    let mut stopped = pin!(stop.cancelled());
    // The ends that write something are awaited after the loop, not in the match on the next head: a value
    // matched on is kept in the connection's future across every await in its arms, and a head takes 250
    // bytes that every idle connection would hold.
    let refused = loop {
        let head = match conn.next_head(stopped.as_mut()).await {
            Next::Head(head) => head,
            Next::Closed => break None,
            Next::Refused(e) => break Some(e),
            Next::CutShort => {
                unfinished_head::log_status(StatusCode::BAD_REQUEST, 0, &conn.info, &conn.shared);
                return Ok(());
            }
            Next::TimedOut => {
                // The socket wrapper has written the 408.
                let sent = unfinished_head::timeout_answer_body();
                unfinished_head::log_status(
                    StatusCode::REQUEST_TIMEOUT,
                    sent,
                    &conn.info,
                    &conn.shared,
                );
                return Ok(());
            }
            Next::Failed(e) => return Err(e),
        };
        // Boxed: an exchange's state (the head, the answer being written) lives while it runs, not in every
        // idle connection's future, which would otherwise keep room for it (about 1.5 kB).
        match Box::pin(conn.exchange(head, &stop)).await? {
            After::Next => {}
            After::Close => break None,
            After::Upgrade(to) => {
                let Conn { reader, write, .. } = conn;
                if let Some(reader) = reader {
                    let (read, buf) = reader.into_parts();
                    let io = read.unsplit(write);
                    let _ = to.send(Box::new(Rewound::new(buf.freeze(), io)));
                }
                return Ok(());
            }
        }
    };
    match refused {
        None => conn.close().await,
        // Boxed, as the exchange: rare, and its state need not take room in every connection.
        Some(e) => Box::pin(conn.refuse(e)).await,
    }
}

struct Conn {
    /// The reading side; lent to a request's body while it is read.
    reader: Option<Reader>,
    write: WriteHalf<BoxIo>,
    info: Arc<ConnInfo>,
    shared: Arc<Shared>,
    max_head: usize,
}

/// What came instead of the next request. A head is large, but it lives for one turn and goes straight into
/// the exchange's boxed future: boxing it too would be a second allocation per request.
#[allow(clippy::large_enum_variant)]
enum Next {
    Head(Head),
    /// The client closed between requests, or rein stops: nothing to answer.
    Closed,
    Refused(HeadError),
    /// The client closed in the middle of a head.
    CutShort,
    /// `header_read_timeout` ran out in the middle of a head.
    TimedOut,
    Failed(io::Error),
}

/// What the connection does after an exchange.
enum After {
    Next,
    Close,
    Upgrade(oneshot::Sender<BoxIo>),
}

impl Conn {
    /// Waits for the next head. Between requests (nothing of a head read yet) the read buffer is given up
    /// while the read waits, so an idle connection holds none; a stop ends the connection only there, as a
    /// head begun is finished and served.
    async fn next_head(&mut self, mut stopped: Pin<&mut impl Future<Output = ()>>) -> Next {
        let max_head = self.max_head;
        let Some(reader) = self.reader.as_mut() else {
            return Next::Closed;
        };
        poll_fn(|cx| {
            loop {
                if reader.buf.is_empty() {
                    if stopped.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Next::Closed);
                    }
                } else {
                    match parse::parse(&mut reader.buf, max_head) {
                        Ok(Some(head)) => return Poll::Ready(Next::Head(head)),
                        Ok(None) => {}
                        Err(e) => return Poll::Ready(Next::Refused(e)),
                    }
                }
                match reader.poll_fill(cx) {
                    Poll::Pending => {
                        if reader.buf.is_empty() {
                            reader.buf = BytesMut::new();
                        }
                        return Poll::Pending;
                    }
                    Poll::Ready(Ok(0)) if reader.buf.is_empty() => {
                        return Poll::Ready(Next::Closed);
                    }
                    Poll::Ready(Ok(0)) => return Poll::Ready(Next::CutShort),
                    Poll::Ready(Ok(_)) => {}
                    Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::TimedOut => {
                        return Poll::Ready(Next::TimedOut);
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Next::Failed(e)),
                }
            }
        })
        .await
    }

    /// Runs one request and writes its answer.
    async fn exchange(&mut self, head: Head, stop: &CancellationToken) -> io::Result<After> {
        let Head {
            mut parts,
            framing,
            keep_alive,
            expect_continue,
            upgrade,
        } = head;
        let (body, handback) = match (framing, self.reader.take()) {
            (Framing::Empty, reader) => {
                self.reader = reader;
                (Body::empty(), None)
            }
            (_, None) => return Ok(After::Close),
            (framing, Some(reader)) => {
                let handback = Arc::new(Handback::default());
                let body = Body::new(reader, framing, handback.clone(), expect_continue);
                (body, Some(handback))
            }
        };
        let upgrade = upgrade.then(|| {
            let (to, from) = oneshot::channel();
            parts
                .extensions
                .insert(PendingUpgrade(Arc::new(std::sync::Mutex::new(Some(from)))));
            to
        });
        let method = parts.method.clone();
        let version = parts.version;
        let request = Request::from_parts(parts, ClientBody::H1(body));
        // Inline: this exchange's future is boxed while it runs (`run`), so the request's state is too.
        let handling = pin!(handler::handle(
            request,
            self.info.clone(),
            self.shared.clone()
        ));
        let response = self.run_handler(handling, handback.as_deref()).await;
        let client_closes = !keep_alive;
        let mut keep_alive = keep_alive && !stop.is_cancelled();
        let switching = response.status() == StatusCode::SWITCHING_PROTOCOLS && upgrade.is_some();
        let asked = Asked {
            method: &method,
            version,
        };
        self.send(response, &asked, &mut keep_alive).await?;
        if switching && let Some(to) = upgrade {
            return Ok(After::Upgrade(to));
        }
        let mut read_whole = true;
        if let Some(handback) = handback {
            match handback.take() {
                Some(mut back) => {
                    // What the client already sent of a body the action did not read is skipped; a body
                    // still on its way would have to be read to the end: the connection closes instead.
                    read_whole = back.left.skip_buffered(&mut back.reader.buf);
                    self.reader = Some(back.reader);
                }
                None => read_whole = false,
            }
        }
        keep_alive &= read_whole;
        let nothing_left = self.reader.as_ref().is_some_and(|r| r.buf.is_empty());
        if client_closes && read_whole && nothing_left {
            self.info.state.client_done();
        }
        Ok(if keep_alive {
            After::Next
        } else {
            After::Close
        })
    }

    /// Polls the request's handling to its answer, writing `100 Continue` when its body asks for it.
    async fn run_handler(
        &mut self,
        mut handling: Pin<&mut impl Future<Output = Response<ResponseBody>>>,
        handback: Option<&Handback>,
    ) -> Response<ResponseBody> {
        let mut continuing: Option<usize> = None;
        let write = &mut self.write;
        poll_fn(|cx| {
            if let Some(handback) = handback {
                handback.register(cx);
                if handback.take_continue() {
                    continuing = Some(0);
                }
            }
            if let Some(sent) = continuing.as_mut() {
                poll_continue(write, sent, cx);
                if *sent >= CONTINUE.len() {
                    continuing = None;
                }
            }
            handling.as_mut().poll(cx)
        })
        .await
    }

    /// Writes the answer: its head, then its body as the body yields it, framed as the head says.
    async fn send(
        &mut self,
        response: Response<ResponseBody>,
        asked: &Asked<'_>,
        keep_alive: &mut bool,
    ) -> io::Result<()> {
        let (mut parts, mut body) = response.into_parts();
        let mut out = Outgoing::default();
        let how = encode::head(
            &mut out.tail,
            &mut parts,
            body.size_hint().exact(),
            asked,
            keep_alive,
        );
        if how == BodyOut::None {
            drop(body);
            return self.write_out(&mut out).await;
        }
        let chunked = how == BodyOut::Chunked;
        let mut sent = 0u64;
        loop {
            let frame = poll_fn(|cx| match Pin::new(&mut body).poll_frame(cx) {
                Poll::Ready(frame) => Poll::Ready(Some(frame)),
                Poll::Pending if out.is_empty() => Poll::Pending,
                // Nothing more yet: what is gathered goes out while the body waits.
                Poll::Pending => Poll::Ready(None),
            })
            .await;
            match frame {
                None => self.write_out(&mut out).await?,
                Some(None) => break,
                Some(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if data.is_empty() {
                        continue;
                    }
                    sent += data.len() as u64;
                    if let BodyOut::Length(n) = how
                        && sent > n
                    {
                        return Err(io::Error::other("a body longer than its Content-Length"));
                    }
                    out.data(data, chunked);
                    if out.len >= SEND_AT {
                        self.write_out(&mut out).await?;
                    }
                }
                Some(Some(Err(e))) => return Err(e),
            }
        }
        if let BodyOut::Length(n) = how
            && sent < n
        {
            return Err(io::Error::other("a body shorter than its Content-Length"));
        }
        if chunked {
            out.tail.put_slice(LAST_CHUNK);
        }
        // The request's books (the counters, the access log line) close when its body is dropped: before the
        // last bytes go, so that a client reading its answer finds the request counted as done.
        drop(body);
        self.write_out(&mut out).await
    }

    /// Writes everything gathered in `out`.
    async fn write_out(&mut self, out: &mut Outgoing) -> io::Result<()> {
        if out.pieces.is_empty() {
            // The usual answer, head and body gathered in one buffer: written from there.
            while !out.tail.is_empty() {
                let n = self.write.write(&out.tail).await?;
                if n == 0 {
                    return Err(io::ErrorKind::WriteZero.into());
                }
                out.tail.advance(n);
            }
            out.len = 0;
            return self.write.flush().await;
        }
        out.seal();
        let mut first = 0;
        while first < out.pieces.len() {
            let mut slices = [IoSlice::new(&[]); MAX_SLICES];
            let count = out.pieces.len().min(first + MAX_SLICES) - first;
            for (slice, piece) in slices.iter_mut().zip(&out.pieces[first..]) {
                *slice = IoSlice::new(piece);
            }
            let mut n = match count {
                1 => self.write.write(&out.pieces[first]).await?,
                _ => self.write.write_vectored(&slices[..count]).await?,
            };
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            while n > 0 {
                let piece = &mut out.pieces[first];
                let take = n.min(piece.len());
                piece.advance(take);
                n -= take;
                if piece.is_empty() {
                    first += 1;
                }
            }
        }
        out.pieces.clear();
        out.len = 0;
        self.write.flush().await
    }

    /// Answers a head that cannot be served with its status and rein's error page, then closes.
    async fn refuse(mut self, e: HeadError) -> io::Result<()> {
        tracing::debug!(error = %e, "refused request head");
        if e == HeadError::Http2 {
            return self.close().await;
        }
        let status = e.status();
        let published = self.info.published(&self.shared);
        let mut response = actions::error(status);
        response
            .headers_mut()
            .insert(http::header::SERVER, handler::server_field(&published));
        let sent = response.body().size_hint().exact().unwrap_or(0);
        let asked = Asked {
            method: &Method::GET,
            version: Version::HTTP_11,
        };
        let result = self.send(response, &asked, &mut false).await;
        unfinished_head::log_status(status, sent, &self.info, &self.shared);
        result?;
        self.close().await
    }

    /// Ends the connection on rein's side (the socket wrapper then lingers to read what the client still
    /// sends, so that its answer is not destroyed by a reset).
    async fn close(&mut self) -> io::Result<()> {
        self.write.shutdown().await
    }
}

/// Writes what is left of `100 Continue`; an error is left for the body's read to meet.
fn poll_continue(write: &mut WriteHalf<BoxIo>, sent: &mut usize, cx: &mut Context<'_>) {
    while *sent < CONTINUE.len() {
        match Pin::new(&mut *write).poll_write(cx, &CONTINUE[*sent..]) {
            Poll::Ready(Ok(n)) if n > 0 => *sent += n,
            Poll::Ready(_) => {
                *sent = CONTINUE.len();
                return;
            }
            Poll::Pending => return,
        }
    }
    let _ = Pin::new(&mut *write).poll_flush(cx);
}

/// An answer's bytes on their way out: pieces to write as they are, then `tail`, where the head and small
/// body pieces are gathered so that a small answer is one buffer and one write.
#[derive(Default)]
struct Outgoing {
    pieces: Vec<Bytes>,
    tail: BytesMut,
    /// Bytes waiting in `pieces` and `tail`.
    len: usize,
}

impl Outgoing {
    fn is_empty(&self) -> bool {
        self.pieces.is_empty() && self.tail.is_empty()
    }

    fn data(&mut self, data: Bytes, chunked: bool) {
        if chunked {
            let _ = write!(self.tail, "{:x}\r\n", data.len());
        }
        self.len += data.len();
        if data.len() <= COPY_MAX {
            self.tail.put_slice(&data);
        } else {
            self.seal();
            self.pieces.push(data);
        }
        if chunked {
            self.tail.put_slice(CHUNK_END);
        }
    }

    /// Moves `tail` to the pieces.
    fn seal(&mut self) {
        if !self.tail.is_empty() {
            self.pieces.push(self.tail.split().freeze());
        }
    }
}

#[cfg(test)]
mod tests {
    /// The loop's future lives as long as its connection, so what it holds inline every idle connection holds:
    /// an exchange and a refusal are boxed while they run (inline, they made it 1.8 kB), and no head is kept
    /// across an await (one was: 688 bytes).
    #[test]
    fn an_idle_connection_holds_little() {
        fn size<A, B, C, D, E, F: std::future::Future>(_: fn(A, B, C, D, E) -> F) -> usize {
            std::mem::size_of::<F>()
        }
        let size = size(super::run);
        assert!(
            size <= 400,
            "the connection loop's future takes {size} bytes"
        );
    }
}
