//! The socket under a FastCGI connection, TCP or Unix: dialled, moved between worker threads, and read with
//! every arrival acknowledged at once on TCP (see [`Io`]'s `AsyncRead`).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use socket2::SockRef;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use crate::upstream::conf::ServerAddr;

/// The socket under a connection.
pub enum Io {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Io {
    /// Dials `addr` (no timeout: the caller bounds it).
    pub async fn dial(addr: &ServerAddr) -> io::Result<Io> {
        Ok(match addr {
            ServerAddr::Tcp(sa) => {
                let s = TcpStream::connect(sa).await?;
                // Records are small and answers wait on them: Nagle would only add delay.
                let _ = s.set_nodelay(true);
                Io::Tcp(s)
            }
            ServerAddr::Unix(path) => Io::Unix(UnixStream::connect(path).await?),
        })
    }

    /// The same socket, registered with the calling thread's reactor instead of the one it was on.
    pub fn reregister(self) -> io::Result<Io> {
        Ok(match self {
            Io::Tcp(s) => Io::Tcp(TcpStream::from_std(s.into_std()?)?),
            Io::Unix(s) => Io::Unix(UnixStream::from_std(s.into_std()?)?),
        })
    }

    pub fn sock(&self) -> SockRef<'_> {
        match self {
            Io::Tcp(s) => SockRef::from(s),
            Io::Unix(s) => SockRef::from(s),
        }
    }

    /// Writes without waiting: for a last record on a connection about to be dropped.
    pub fn try_write(&self, data: &[u8]) -> io::Result<usize> {
        match self {
            Io::Tcp(s) => s.try_write(data),
            Io::Unix(s) => s.try_write(data),
        }
    }
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => {
                let before = buf.filled().len();
                let polled = Pin::new(&mut *s).poll_read(cx, buf);
                if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
                    // Acknowledge at once what arrived. PHP-FPM leaves Nagle's algorithm on, so the last small
                    // segment of a long answer waits for the ACK of the ones before, which Linux delays up to
                    // 40 ms on a kept-alive connection: phpinfo() over TCP ran at 150 requests/s.
                    let _ = SockRef::from(&*s).set_tcp_quickack(true);
                }
                polled
            }
            Io::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_write(cx, data),
            Io::Unix(s) => Pin::new(s).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_flush(cx),
            Io::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Io::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
