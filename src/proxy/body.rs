//! Bodies crossing the proxy, streamed with backpressure in both directions.
//!
//! [`Upload`] carries the client's body upstream, enforcing `max_body_size` and telling the connection that a
//! body is being read (so `body_read_timeout` applies). [`Held`] carries the server's answer back (the
//! transport's client bounds the waits between reads) and tells passive health how it ended. [`Gathered`]
//! holds the start of an answer read before the client sees any of it.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use crate::server::RequestBody;
use bytes::{Bytes, BytesMut};
use http_body::{Body as HttpBody, Frame, SizeHint};

use crate::server::ConnState;
use crate::upstream::Slot;

/// What the proxy can see of an upload in flight: whether it broke `max_body_size` (a 413), or whether the
/// client's body itself failed (a malformed chunk: 400; `body_read_timeout`: 408). Neither is a server's
/// failure, so neither may count against the server's health.
#[derive(Debug, Default)]
pub struct UploadWatch {
    too_large: AtomicBool,
    client_failed: AtomicBool,
    client_timed_out: AtomicBool,
}

impl UploadWatch {
    pub fn too_large(&self) -> bool {
        self.too_large.load(Ordering::Acquire)
    }

    /// The answer a failed client body calls for, if the client's body failed.
    pub fn client_failure(&self) -> Option<http::StatusCode> {
        if self.client_timed_out.load(Ordering::Acquire) {
            return Some(http::StatusCode::REQUEST_TIMEOUT);
        }
        self.client_failed
            .load(Ordering::Acquire)
            .then_some(http::StatusCode::BAD_REQUEST)
    }
}

/// The client's request body on its way upstream.
pub struct Upload {
    inner: RequestBody,
    limit: u64,
    seen: u64,
    watch: Arc<UploadWatch>,
    state: Arc<ConnState>,
}

impl Upload {
    pub fn new(inner: RequestBody, limit: u64, state: Arc<ConnState>) -> (Self, Arc<UploadWatch>) {
        let watch = Arc::new(UploadWatch::default());
        state.reading_body(true);
        let upload = Upload {
            inner,
            limit,
            seen: 0,
            watch: watch.clone(),
            state,
        };
        (upload, watch)
    }
}

impl HttpBody for Upload {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                self.seen += frame.data_ref().map_or(0, |d| d.len() as u64);
                if self.seen > self.limit {
                    self.watch.too_large.store(true, Ordering::Release);
                    return Poll::Ready(Some(Err(std::io::Error::other("max_body_size exceeded"))));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                let flag = match e.is_timeout() {
                    true => &self.watch.client_timed_out,
                    false => &self.watch.client_failed,
                };
                flag.store(true, Ordering::Release);
                Poll::Ready(Some(Err(std::io::Error::other(e))))
            }
            Poll::Ready(None) => {
                self.state.reading_body(false);
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        self.state.reading_body(false);
    }
}

/// A server's answer on its way to the client, for either transport: it holds the server's slot (the request
/// counts as active there) until it ends, and tells passive health how it ended. A failure of the server's
/// counts against it; a client that leaves early does not.
pub struct Held<B: HttpBody> {
    inner: B,
    slot: Option<Slot>,
}

impl<B: HttpBody> Held<B> {
    pub fn new(inner: B, slot: Slot) -> Self {
        Held {
            inner,
            slot: Some(slot),
        }
    }

    fn finish(&mut self, ok: bool) {
        if let Some(slot) = self.slot.take() {
            slot.record(ok);
        }
    }
}

impl<B> HttpBody for Held<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<std::io::Error>,
{
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match polled {
            Poll::Ready(None) => self.finish(true),
            Poll::Ready(Some(Err(_))) => self.finish(false),
            _ => {}
        }
        polled.map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B: HttpBody> Drop for Held<B> {
    fn drop(&mut self) {
        // A body that had ended may be dropped without its end being polled; otherwise the client left early
        // and the slot goes without a word to passive health.
        if self.inner.is_end_stream() {
            self.finish(true);
        }
    }
}

/// Pieces of a body gathered into one: the first kept as it came (a small answer nearly always arrives in
/// one), copied only when a second follows.
#[derive(Default)]
pub(crate) struct Gathered {
    first: Bytes,
    joined: Option<BytesMut>,
}

impl Gathered {
    pub fn push(&mut self, data: Bytes) {
        match &mut self.joined {
            Some(joined) => joined.extend_from_slice(&data),
            None if self.first.is_empty() => self.first = data,
            None if data.is_empty() => {}
            None => {
                let mut both = BytesMut::with_capacity(self.first.len() + data.len());
                both.extend_from_slice(&self.first);
                both.extend_from_slice(&data);
                self.joined = Some(both);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.joined.as_ref().map_or(self.first.len(), BytesMut::len)
    }

    pub fn into_bytes(self) -> Bytes {
        self.joined.map_or(self.first, BytesMut::freeze)
    }
}

/// A body with its first frame already taken (to see whether it was an error) and put back in front.
pub struct Prefixed<B> {
    first: Option<Frame<Bytes>>,
    inner: B,
}

impl<B> Prefixed<B> {
    pub fn new(first: Option<Frame<Bytes>>, inner: B) -> Self {
        Prefixed { first, inner }
    }
}

impl<B> HttpBody for Prefixed<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(frame) = self.first.take() {
            return Poll::Ready(Some(Ok(frame)));
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.inner.size_hint();
        let Some(n) = self
            .first
            .as_ref()
            .and_then(Frame::data_ref)
            .map(|d| d.len() as u64)
        else {
            return inner;
        };
        // The upper bound first: `set_lower` refuses a lower bound above the current upper one.
        let mut hint = SizeHint::new();
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(n));
        }
        hint.set_lower(inner.lower().saturating_add(n));
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathered_pieces_keep_the_first_as_it_came_and_join_the_rest() {
        let g = Gathered::default();
        assert_eq!((g.len(), g.into_bytes()), (0, Bytes::new()));
        let hello = Bytes::from_static(b"hello");
        let mut g = Gathered::default();
        g.push(hello.clone());
        g.push(Bytes::new());
        assert_eq!(g.len(), 5);
        let one = g.into_bytes();
        assert_eq!(one.as_ptr(), hello.as_ptr(), "one piece is not copied");
        let mut g = Gathered::default();
        for piece in ["", "he", "llo", "", " world"] {
            g.push(Bytes::from_static(piece.as_bytes()));
        }
        assert_eq!(g.len(), 11);
        assert_eq!(g.into_bytes(), "hello world");
    }
}
