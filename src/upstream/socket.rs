//! The socket under an upstream connection, TCP or Unix, for both transports (HTTP and FastCGI): dialled,
//! moved between worker threads, checked for a close while idle, and optionally read with every arrival
//! acknowledged at once on TCP (see [`Acks`]).

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll};

use socket2::SockRef;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use super::conf::ServerAddr;

/// When a TCP connection acknowledges what it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acks {
    /// As the kernel sees fit (delayed ACKs).
    Delayed,
    /// At once, after every read. PHP-FPM leaves Nagle's algorithm on, so the last small segment of a long
    /// answer waits for the ACK of the ones before, which Linux delays up to 40 ms on a kept-alive
    /// connection: phpinfo() over TCP ran at 150 requests/s. It costs a system call per read, which HTTP
    /// servers (Node.js, nginx, gunicorn set `TCP_NODELAY`) do not need.
    EveryRead,
}

/// The socket under a connection.
pub struct Io {
    sock: Sock,
    acks: Acks,
}

enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Io {
    /// Dials `addr` (no timeout: the caller bounds it).
    pub async fn dial(addr: &ServerAddr, acks: Acks) -> io::Result<Io> {
        let sock = match addr {
            ServerAddr::Tcp(sa) => {
                let s = TcpStream::connect(sa).await?;
                // Requests are small and answers wait on them: Nagle would only add delay.
                let _ = s.set_nodelay(true);
                Sock::Tcp(s)
            }
            ServerAddr::Unix(path) => Sock::Unix(UnixStream::connect(path).await?),
        };
        Ok(Io { sock, acks })
    }

    /// The same socket, registered with the calling thread's reactor instead of the one it was on.
    pub fn reregister(self) -> io::Result<Io> {
        let sock = match self.sock {
            Sock::Tcp(s) => Sock::Tcp(TcpStream::from_std(s.into_std()?)?),
            Sock::Unix(s) => Sock::Unix(UnixStream::from_std(s.into_std()?)?),
        };
        Ok(Io { sock, ..self })
    }

    pub fn sock(&self) -> SockRef<'_> {
        match &self.sock {
            Sock::Tcp(s) => SockRef::from(s),
            Sock::Unix(s) => SockRef::from(s),
        }
    }

    /// Writes without waiting: for a last record on a connection about to be dropped.
    pub fn try_write(&self, data: &[u8]) -> io::Result<usize> {
        match &self.sock {
            Sock::Tcp(s) => s.try_write(data),
            Sock::Unix(s) => s.try_write(data),
        }
    }

    /// Whether an idle connection can no longer carry a request: the server closed it, reset it, or sent
    /// bytes nobody asked for. Nothing is consumed.
    ///
    /// The reactor already watches the socket: unless it saw it become readable since the last read ran
    /// dry, nothing arrived, not even a close, and no system call is needed. Otherwise a non-blocking peek
    /// tells (and clears the readiness if it finds nothing).
    pub fn is_closed(&self) -> bool {
        let peek = || {
            let mut byte = [MaybeUninit::<u8>::uninit()];
            self.sock().peek(&mut byte)
        };
        let peeked = match &self.sock {
            Sock::Tcp(s) => s.try_io(Interest::READABLE, peek),
            Sock::Unix(s) => s.try_io(Interest::READABLE, peek),
        };
        match peeked {
            // 0 is end of file; a byte is an answer to no question. Either way it is unusable.
            Ok(_) => true,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ),
        }
    }
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let acks = self.acks;
        match &mut self.get_mut().sock {
            Sock::Tcp(s) => {
                let before = buf.filled().len();
                let polled = Pin::new(&mut *s).poll_read(cx, buf);
                let arrived = matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before;
                if arrived && acks == Acks::EveryRead {
                    let _ = SockRef::from(&*s).set_tcp_quickack(true);
                }
                polled
            }
            Sock::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().sock {
            Sock::Tcp(s) => Pin::new(s).poll_write(cx, data),
            Sock::Unix(s) => Pin::new(s).poll_write(cx, data),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().sock {
            Sock::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Sock::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().sock {
            Sock::Tcp(s) => Pin::new(s).poll_flush(cx),
            Sock::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().sock {
            Sock::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Sock::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
