//! A request body read straight from the client's connection: while the request's body is being read, the
//! connection's reading side (its socket half and read buffer) belongs to the body, so data reaches the
//! action without crossing a channel or a task; when the body ends, or is dropped unread, the reading side
//! goes back to the connection, with what is left of the body to skip and any pipelined request behind it.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes, BytesMut};
use futures_util::task::AtomicWaker;
use http_body::SizeHint;
use tokio::io::{AsyncRead, AsyncWrite, ReadHalf};

use super::parse::Framing;
use crate::http1::chunked::{ChunkError, Decoded, Decoder};

/// A client connection's socket, whatever its transport, erased to one type so that requests and bodies
/// need not be generic over it.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}
pub(crate) type BoxIo = Box<dyn Io>;

/// Room for at least this much is made before each read.
const MIN_READ: usize = 1024;
/// What a read buffer grows by.
const READ_SIZE: usize = 8 * 1024;

/// The connection's reading side: the socket's read half and what was read from it but not used yet.
pub(crate) struct Reader {
    /// Reached only through `&mut` (`Mutex::get_mut`, which takes no lock): the mutex only makes the reader
    /// `Sync`, as the body types it travels in must be, which a socket need not be.
    io: Mutex<ReadHalf<BoxIo>>,
    pub buf: BytesMut,
}

impl Reader {
    pub fn new(io: ReadHalf<BoxIo>) -> Reader {
        Reader {
            io: Mutex::new(io),
            buf: BytesMut::new(),
        }
    }

    /// Reads more into the buffer; `Ok(0)` at the end of the stream.
    pub fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.buf.capacity() - self.buf.len() < MIN_READ {
            self.buf.reserve(READ_SIZE);
        }
        let io = self.io.get_mut().unwrap_or_else(PoisonError::into_inner);
        tokio_util::io::poll_read_buf(Pin::new(io), cx, &mut self.buf)
    }

    /// The socket's read half, and what was read from it but not used.
    pub fn into_parts(self) -> (ReadHalf<BoxIo>, BytesMut) {
        let io = self.io.into_inner().unwrap_or_else(PoisonError::into_inner);
        (io, self.buf)
    }
}

/// Where a body stands.
#[derive(Debug)]
pub(crate) enum Left {
    /// Read to its end.
    Done,
    Length(u64),
    Chunked(Decoder),
    /// Broken (malformed, cut short, timed out): the connection cannot go on.
    Failed,
}

impl Left {
    fn of(framing: Framing) -> Left {
        match framing {
            Framing::Empty => Left::Done,
            Framing::Length(n) => Left::Length(n),
            Framing::Chunked => Left::Chunked(Decoder::default()),
        }
    }

    /// Consumes from `buf` what it holds of the rest of the body; whether that was all of it.
    pub fn skip_buffered(&mut self, buf: &mut BytesMut) -> bool {
        loop {
            match self {
                Left::Done => return true,
                Left::Failed => return false,
                Left::Length(n) => {
                    let take = (*n).min(buf.len() as u64);
                    buf.advance(take as usize);
                    *n -= take;
                    if *n > 0 {
                        return false;
                    }
                    *self = Left::Done;
                }
                Left::Chunked(decoder) => match decoder.decode(buf) {
                    Ok(Decoded::Data(_)) => {}
                    Ok(Decoded::Done) => *self = Left::Done,
                    Ok(Decoded::NeedMore) => return false,
                    Err(_) => *self = Left::Failed,
                },
            }
        }
    }
}

/// The reading side on its way back to the connection, with what is left of the body it was lent for.
pub(crate) struct Returned {
    pub reader: Reader,
    pub left: Left,
}

/// Shared by a body and its connection: the slot the reading side comes back through, and the body's
/// request for `100 Continue`, which the connection writes (it holds the writing side).
#[derive(Default)]
pub(crate) struct Handback {
    slot: Mutex<Option<Returned>>,
    conn: AtomicWaker,
    continue_wanted: AtomicBool,
}

impl Handback {
    /// Registers the connection's task to be woken when the body gives the reader back or asks for `100
    /// Continue`.
    pub fn register(&self, cx: &Context<'_>) {
        self.conn.register(cx.waker());
    }

    pub fn take(&self) -> Option<Returned> {
        self.slot.lock().ok()?.take()
    }

    /// Whether the body asked for `100 Continue` since the last call.
    pub fn take_continue(&self) -> bool {
        self.continue_wanted.swap(false, Ordering::AcqRel)
    }

    fn give(&self, returned: Returned) {
        if let Ok(mut slot) = self.slot.lock() {
            *slot = Some(returned);
        }
        self.conn.wake();
    }

    fn want_continue(&self) {
        self.continue_wanted.store(true, Ordering::Release);
        self.conn.wake();
    }
}

/// Why the body could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyReadError {
    #[error("reading the request body: {0}")]
    Io(#[from] io::Error),
    #[error("chunked request body: {0}")]
    Chunk(#[from] ChunkError),
    #[error("the client closed the connection before the end of its body")]
    Incomplete,
}

impl BodyReadError {
    /// `body_read_timeout` ran out (the socket's timer), rather than a broken body.
    pub fn timed_out(&self) -> bool {
        matches!(self, BodyReadError::Io(e) if e.kind() == io::ErrorKind::TimedOut)
    }
}

/// A request body on an HTTP/1 connection.
pub(crate) struct Body {
    /// Lent by the connection while the body is read; `None` for a request without a body and once the
    /// body is over.
    reader: Option<Reader>,
    left: Left,
    handback: Option<Arc<Handback>>,
    /// The client waits for `100 Continue`, not asked for yet.
    expect_continue: bool,
}

impl Body {
    /// The body of a request without one.
    pub fn empty() -> Body {
        Body {
            reader: None,
            left: Left::Done,
            handback: None,
            expect_continue: false,
        }
    }

    pub fn new(
        reader: Reader,
        framing: Framing,
        handback: Arc<Handback>,
        expect_continue: bool,
    ) -> Body {
        Body {
            reader: Some(reader),
            left: Left::of(framing),
            handback: Some(handback),
            expect_continue,
        }
    }

    pub fn is_end_stream(&self) -> bool {
        matches!(self.left, Left::Done)
    }

    pub fn size_hint(&self) -> SizeHint {
        match self.left {
            Left::Done => SizeHint::with_exact(0),
            Left::Length(n) => SizeHint::with_exact(n),
            Left::Chunked(_) | Left::Failed => SizeHint::default(),
        }
    }

    pub fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, BodyReadError>>> {
        loop {
            if self.reader.is_none() {
                return Poll::Ready(match self.left {
                    Left::Failed => Some(Err(BodyReadError::Incomplete)),
                    _ => None,
                });
            }
            match self.next_buffered() {
                Ok(Some(data)) => return Poll::Ready(Some(Ok(data))),
                Ok(None) if matches!(self.left, Left::Done) => {
                    self.give_back();
                    return Poll::Ready(None);
                }
                Ok(None) => {}
                Err(e) => return Poll::Ready(Some(Err(self.fail(e)))),
            }
            if std::mem::take(&mut self.expect_continue)
                && let Some(h) = &self.handback
            {
                h.want_continue();
            }
            let Some(reader) = self.reader.as_mut() else {
                continue;
            };
            match ready!(reader.poll_fill(cx)) {
                Ok(0) => return Poll::Ready(Some(Err(self.fail(BodyReadError::Incomplete)))),
                Ok(_) => {}
                Err(e) => return Poll::Ready(Some(Err(self.fail(e.into())))),
            }
        }
    }

    /// The next piece of the body already in the read buffer.
    fn next_buffered(&mut self) -> Result<Option<Bytes>, BodyReadError> {
        let Some(reader) = self.reader.as_mut() else {
            return Ok(None);
        };
        let buf = &mut reader.buf;
        match &mut self.left {
            Left::Done | Left::Failed => Ok(None),
            Left::Length(n) => {
                if buf.is_empty() {
                    return Ok(None);
                }
                let take = (*n).min(buf.len() as u64);
                let data = buf.split_to(take as usize).freeze();
                *n -= take;
                if *n == 0 {
                    self.left = Left::Done;
                    self.give_back();
                }
                Ok(Some(data))
            }
            Left::Chunked(decoder) => match decoder.decode(buf)? {
                Decoded::Data(data) => Ok(Some(data)),
                Decoded::Done => {
                    self.left = Left::Done;
                    Ok(None)
                }
                Decoded::NeedMore => Ok(None),
            },
        }
    }

    fn fail(&mut self, e: BodyReadError) -> BodyReadError {
        self.left = Left::Failed;
        self.give_back();
        e
    }

    /// Hands the reading side back to the connection, with what is left of the body.
    fn give_back(&mut self) {
        if let (Some(reader), Some(handback)) = (self.reader.take(), &self.handback) {
            let left = std::mem::replace(&mut self.left, Left::Failed);
            self.left = match left {
                Left::Done => Left::Done,
                _ => Left::Failed,
            };
            handback.give(Returned { reader, left });
        }
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        self.give_back();
    }
}
