//! A connection handed over after a protocol switch, with the bytes already read from it put back in front:
//! a peer may send its first frames of the new protocol right behind the head that switched (the client behind
//! its upgrade request on rein's server side, the upstream behind its `101` on the proxy's client side).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub(crate) struct Rewound<T> {
    read: Bytes,
    io: T,
}

impl<T> Rewound<T> {
    pub fn new(read: Bytes, io: T) -> Rewound<T> {
        Rewound { read, io }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Rewound<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.read.is_empty() {
            return Pin::new(&mut self.io).poll_read(cx, buf);
        }
        let n = self.read.len().min(buf.remaining());
        buf.put_slice(&self.read[..n]);
        self.read.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Rewound<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
