//! The socket under an upstream connection, TCP or Unix, for both transports (HTTP and FastCGI), or TLS over
//! TCP for HTTP: dialled (a server's name resolved at each dial), moved between worker threads, checked for a
//! close while idle, and optionally read with every arrival acknowledged at once on TCP (see [`Acks`]).

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use socket2::SockRef;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::client::TlsStream;

use super::addr::ServerAddr;
use super::tls::TlsTarget;

/// When a TCP connection acknowledges what it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acks {
    /// As the kernel sees fit (delayed ACKs).
    Delayed,
    /// At once, whenever a read has to wait after bytes arrived. PHP-FPM leaves Nagle's algorithm on, so
    /// the last small segment of a long answer waits for the ACK of the ones before, which Linux delays up to
    /// 40 ms on a kept-alive connection: phpinfo() over TCP ran at 150 requests/s. Setting `TCP_QUICKACK`
    /// sends the ACK due, at the cost of a system call, so it is set only when rein waits for more: an answer
    /// that came whole in one read needs none (its ACK rides on the next request), where an ACK after every
    /// read cost a `setsockopt` per request. HTTP servers (Node.js, nginx, gunicorn set `TCP_NODELAY`) need
    /// none of it.
    BeforeWait,
}

/// The longest pause between two connects to a Unix socket whose accept queue is full.
const MAX_CONNECT_PAUSE: Duration = Duration::from_millis(50);

/// Connects to a Unix socket, waiting while its accept queue is full. There, a Unix socket's connect fails at
/// once (EAGAIN) where a TCP connect waits (its SYN is sent again), and a burst of new connections to a server
/// slow to accept would turn into 502s and marks against its health. So it is tried again after a pause,
/// doubling up to [`MAX_CONNECT_PAUSE`], as long as the caller's connect timeout allows.
async fn connect_unix(path: &Path) -> io::Result<UnixStream> {
    let mut pause = Duration::from_millis(1);
    loop {
        match UnixStream::connect(path).await {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_CONNECT_PAUSE);
            }
            done => return done,
        }
    }
}

/// The socket under a connection.
pub struct Io {
    sock: Sock,
    acks: Acks,
    /// Bytes arrived since the last ACK rein asked for (with [`Acks::BeforeWait`]).
    unacked: bool,
}

enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// Boxed: a TLS session is large beside a socket.
    Tls(Box<TlsStream<TcpStream>>),
}

/// An operation only plain sockets offer (FastCGI's, which never runs over TLS).
fn plain_only() -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, "not on a TLS connection")
}

impl Io {
    /// Dials `addr`, with a TLS handshake when `tls` is given (no timeout: the caller bounds it).
    pub async fn dial(addr: &ServerAddr, tls: Option<&TlsTarget>, acks: Acks) -> io::Result<Io> {
        let sock = match addr {
            ServerAddr::Tcp(sa) => Sock::Tcp(connect_tcp(*sa).await?),
            ServerAddr::Name(host, port) => Sock::Tcp(connect_tcp((host.as_str(), *port)).await?),
            ServerAddr::Unix(path) => Sock::Unix(connect_unix(path).await?),
        };
        let sock = match (sock, tls) {
            (Sock::Tcp(tcp), Some(tls)) => Sock::Tls(Box::new(tls.handshake(tcp).await?)),
            (_, Some(_)) => return Err(io::Error::other("TLS needs a TCP server")),
            (plain, None) => plain,
        };
        Ok(Io {
            sock,
            acks,
            unacked: false,
        })
    }

    /// The same socket, registered with the calling thread's reactor instead of the one it was on.
    pub fn reregister(self) -> io::Result<Io> {
        let sock = match self.sock {
            Sock::Tcp(s) => Sock::Tcp(TcpStream::from_std(s.into_std()?)?),
            Sock::Unix(s) => Sock::Unix(UnixStream::from_std(s.into_std()?)?),
            Sock::Tls(_) => return Err(plain_only()),
        };
        Ok(Io { sock, ..self })
    }

    /// A segment that carries data carries the ACK of what arrived before it.
    fn sent(&mut self, polled: &Poll<io::Result<usize>>) {
        if matches!(polled, Poll::Ready(Ok(n)) if *n > 0) {
            self.unacked = false;
        }
    }

    /// Writes without waiting: for a last record on a connection about to be dropped.
    pub fn try_write(&self, data: &[u8]) -> io::Result<usize> {
        match &self.sock {
            Sock::Tcp(s) => s.try_write(data),
            Sock::Unix(s) => s.try_write(data),
            Sock::Tls(_) => Err(plain_only()),
        }
    }

    /// Whether an idle connection can no longer carry a request: the server closed it, reset it, or sent
    /// bytes nobody asked for. On TLS, see [`Io::tls_is_closed`].
    pub fn is_closed(&mut self) -> bool {
        match self.sock {
            Sock::Tls(_) => self.tls_is_closed(),
            _ => self.peek_closed(),
        }
    }

    /// [`Io::is_closed`] for a plain socket, through a shared reference: nothing is consumed. (On TLS, any
    /// byte that arrived counts, a session ticket too: FastCGI's, which never runs over TLS.)
    ///
    /// The reactor already watches the socket: unless it saw it become readable since the last read ran
    /// dry, nothing arrived, not even a close, and no system call is needed. Otherwise a non-blocking peek
    /// tells (and clears the readiness if it finds nothing).
    pub fn peek_closed(&self) -> bool {
        let peek = |sock: SockRef<'_>| {
            let mut byte = [MaybeUninit::<u8>::uninit()];
            sock.peek(&mut byte)
        };
        let peeked = match &self.sock {
            Sock::Tcp(s) => s.try_io(Interest::READABLE, || peek(SockRef::from(s))),
            Sock::Unix(s) => s.try_io(Interest::READABLE, || peek(SockRef::from(s))),
            Sock::Tls(s) => {
                let tcp = s.get_ref().0;
                tcp.try_io(Interest::READABLE, || peek(SockRef::from(tcp)))
            }
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

    /// On TLS, what arrived must be decrypted to be told apart: a session ticket or a key update (which the
    /// session takes in) leave the connection usable; a `close_notify`, an end of file or application data
    /// (arrived now, or left in the session) do not. A read that does not wait: as on a plain socket, no
    /// system call unless the reactor saw the socket become readable.
    fn tls_is_closed(&mut self) -> bool {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut byte = [0u8; 1];
        let mut buf = ReadBuf::new(&mut byte);
        !matches!(Pin::new(self).poll_read(&mut cx, &mut buf), Poll::Pending)
    }
}

/// Connects over TCP, the name resolved now if it is one (each resolved address tried in turn).
async fn connect_tcp(addr: impl tokio::net::ToSocketAddrs) -> io::Result<TcpStream> {
    let s = TcpStream::connect(addr).await?;
    // Requests are small and answers wait on them: Nagle would only add delay.
    let _ = s.set_nodelay(true);
    Ok(s)
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let io = self.get_mut();
        match &mut io.sock {
            Sock::Tcp(s) => {
                let before = buf.filled().len();
                let polled = Pin::new(&mut *s).poll_read(cx, buf);
                if io.acks == Acks::BeforeWait {
                    match polled {
                        Poll::Ready(Ok(())) if buf.filled().len() > before => io.unacked = true,
                        Poll::Pending if io.unacked => {
                            io.unacked = false;
                            let _ = SockRef::from(&*s).set_tcp_quickack(true);
                        }
                        _ => {}
                    }
                }
                polled
            }
            Sock::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Sock::Tls(s) => match Pin::new(&mut **s).poll_read(cx, buf) {
                // A server that closes without `close_notify`: an end of file, as browsers take it. A
                // body's framing (length or chunks) still tells a truncated answer.
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    Poll::Ready(Ok(()))
                }
                polled => polled,
            },
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let io = self.get_mut();
        let polled = match &mut io.sock {
            Sock::Tcp(s) => Pin::new(s).poll_write(cx, data),
            Sock::Unix(s) => Pin::new(s).poll_write(cx, data),
            Sock::Tls(s) => Pin::new(&mut **s).poll_write(cx, data),
        };
        io.sent(&polled);
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let io = self.get_mut();
        let polled = match &mut io.sock {
            Sock::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Sock::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Sock::Tls(s) => Pin::new(&mut **s).poll_write_vectored(cx, bufs),
        };
        io.sent(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().sock {
            Sock::Tcp(s) => Pin::new(s).poll_flush(cx),
            Sock::Unix(s) => Pin::new(s).poll_flush(cx),
            Sock::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().sock {
            Sock::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Sock::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Sock::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use futures_util::FutureExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// When rein owes the server an ACK: after bytes arrived, until it either sends something (the ACK rides
    /// along) or waits for more (it asks for the ACK then).
    #[tokio::test]
    async fn an_ack_is_asked_for_only_when_a_read_waits_after_an_arrival() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = ServerAddr::Tcp(listener.local_addr().unwrap());
        let (io, accepted) =
            tokio::join!(Io::dial(&addr, None, Acks::BeforeWait), listener.accept());
        let (mut io, (mut server, _)) = (io.unwrap(), accepted.unwrap());
        let mut buf = [0u8; 16];

        server.write_all(b"part").await.unwrap();
        assert_eq!(io.read(&mut buf).await.unwrap(), 4);
        assert!(io.unacked, "bytes arrived");
        io.write_all(b"next request").await.unwrap();
        assert!(!io.unacked, "the ACK went with the request");

        server.write_all(b"more").await.unwrap();
        assert_eq!(io.read(&mut buf).await.unwrap(), 4);
        let mut rb = ReadBuf::new(&mut buf);
        let waited = poll_fn(|cx| Poll::Ready(Pin::new(&mut io).poll_read(cx, &mut rb)))
            .now_or_never()
            .unwrap();
        assert!(waited.is_pending(), "nothing more to read yet");
        assert!(!io.unacked, "asked for at the wait");
    }
}
