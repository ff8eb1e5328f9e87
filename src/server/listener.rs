//! Listening sockets: bound before a configuration is published, accepting until told to stop.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use socket2::{Domain, Socket, Type};
use tokio::io::unix::AsyncFd;
use tokio_util::task::TaskTracker;

use super::conn::{self, Peer};
use super::{Shared, admission};
use crate::snapshot::ListenAddr;
use crate::workers;

/// A socket that is bound and listening, not yet accepting.
pub enum Bound {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

impl Bound {
    /// Binds `addr`; a stale Unix socket file left by a dead process is replaced, a live one is not.
    pub fn bind(addr: &ListenAddr, backlog: i32) -> std::io::Result<Bound> {
        match addr {
            ListenAddr::Tcp(sa) => bind_tcp(*sa, backlog).map(Bound::Tcp),
            ListenAddr::Unix(path) => {
                remove_stale_socket(path)?;
                bind_unix(path, backlog).map(Bound::Unix)
            }
        }
    }

    /// `n` descriptors (at least this one) for this socket, one for each worker to accept on.
    pub fn copies(self, n: usize) -> std::io::Result<Vec<Bound>> {
        let mut all = Vec::with_capacity(n.max(1));
        for _ in 1..n {
            all.push(match &self {
                Bound::Tcp(l) => Bound::Tcp(l.try_clone()?),
                Bound::Unix(l) => Bound::Unix(l.try_clone()?),
            });
        }
        all.push(self);
        Ok(all)
    }

    /// Registers the socket with the calling runtime's reactor.
    fn register(self) -> std::io::Result<Accepting> {
        // SAFETY: the listener moves into the `AsyncFd`, which owns its descriptor until dropped, so the
        // descriptor stays open while registered.
        Ok(match self {
            Bound::Tcp(l) => Accepting::Tcp(unsafe { AsyncFd::register(l) }?),
            Bound::Unix(l) => Accepting::Unix(unsafe { AsyncFd::register(l) }?),
        })
    }

    /// The address actually bound (the port chosen for `:0`).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Bound::Tcp(l) => l.local_addr().ok(),
            Bound::Unix(_) => None,
        }
    }
}

fn bind_tcp(addr: SocketAddr, backlog: i32) -> std::io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    Ok(socket.into())
}

/// Binds through socket2 rather than `UnixListener::bind`, whose backlog is fixed: `backlog` applies to Unix
/// listeners as to TCP ones.
fn bind_unix(path: &Path, backlog: i32) -> std::io::Result<std::os::unix::net::UnixListener> {
    let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    socket.set_nonblocking(true)?;
    socket.bind(&socket2::SockAddr::unix(path)?)?;
    socket.listen(backlog)?;
    Ok(socket.into())
}

fn remove_stale_socket(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_err() {
                std::fs::remove_file(path)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Accepts connections on `bound` until `stop` fires; each connection runs on `conns`, on the worker
/// [`workers::place`] chooses, and drains on `stop`, unless the listener hands it to an application's
/// instance ([`crate::handoff`]). A Unix socket's file is not this loop's to remove: the server removes it
/// when it stops the listener, before a later change may bind the path again.
pub async fn accept_loop(
    bound: Bound,
    addr: ListenAddr,
    shared: Arc<Shared>,
    drain: super::Drain,
    conns: TaskTracker,
) {
    let bound = match bound.register() {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(listener = %addr, error = %e, "cannot accept");
            return;
        }
    };
    let intake = Arc::new(Intake {
        id: NEXT_INTAKE.fetch_add(1, Ordering::Relaxed),
        addr,
        shared,
        drain,
        conns,
    });
    loop {
        let accepted = tokio::select! {
            _ = intake.drain.stop.cancelled() => break,
            r = accept(&bound) => r,
        };
        match accepted {
            Ok((io, peer)) => intake.dispatch(io, peer),
            Err(e) => {
                // Out of descriptors or memory: back off instead of spinning; the kernel keeps the queue.
                crate::log_limit::warn_limited!(listener = %intake.addr, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Numbers the accept loops, so that a connection an instance hands back finds its way home.
static NEXT_INTAKE: AtomicU64 = AtomicU64::new(1);

/// Where one listener's connections go once accepted, or handed back by an application's instance.
struct Intake {
    id: u64,
    addr: ListenAddr,
    shared: Arc<Shared>,
    drain: super::Drain,
    conns: TaskTracker,
}

impl Intake {
    /// Hands the connection to an instance when the listener says so, else serves it.
    fn dispatch(self: &Arc<Self>, io: Stream, peer: Peer) {
        let Some(io) = self.hand_off(io) else {
            return;
        };
        let admitted = match admission::admit(&self.shared, &self.addr, peer.remote) {
            Ok(a) => a,
            Err(why) => {
                crate::log_limit::warn_limited!(listener = %self.addr, remote = ?peer.remote, ?why, "connection refused: over a connection limit");
                return;
            }
        };
        let placed = workers::place();
        let worker = workers::handle(placed.worker());
        let accepted = Box::new(Accepted {
            io,
            addr: self.addr.clone(),
            peer,
            shared: self.shared.clone(),
            drain: self.drain.clone(),
        });
        let task = serve(accepted, (placed, admitted));
        match worker {
            Some(handle) => drop(self.conns.spawn_on(task, handle)),
            None => drop(self.conns.spawn(task)),
        }
    }

    /// Passes the connection to the next instance of the application the listener hands off to; gives it
    /// back when there is none (no instance ready yet: rein serves it, its requests wait for one).
    fn hand_off(self: &Arc<Self>, io: Stream) -> Option<Stream> {
        let Some(channel) = self.channel() else {
            return Some(io);
        };
        let back: Arc<dyn crate::handoff::Returner> = self.clone();
        match channel.give(io.into(), back) {
            Ok(()) => None,
            Err(fd) => Some(Stream::from_fd(fd, &self.addr)),
        }
    }

    fn channel(&self) -> Option<Arc<crate::handoff::Channel>> {
        let published = self.shared.current.load();
        let app = published
            .snapshot
            .listeners
            .get(&self.addr)?
            .handoff
            .as_ref()?;
        crate::handoff::pick(published.upstreams.apps.get(&**app)?)
    }
}

impl crate::handoff::Returner for Intake {
    fn id(&self) -> u64 {
        self.id
    }

    /// A connection back from an instance (idle) or never taken by one: served or passed on as if just
    /// accepted; closed once the listener is stopping, as rein closes its own idle connections then.
    fn take_back(self: Arc<Self>, fd: OwnedFd) {
        if self.drain.stop.is_cancelled() {
            return;
        }
        let io = Stream::from_fd(fd, &self.addr);
        let peer = io.peer();
        self.dispatch(io, peer);
    }
}

/// A connection as accepted, boxed until its task starts: the task lives as long as the connection, and a
/// future keeps room for everything it was given, used or not, so it is given one pointer.
struct Accepted {
    io: Stream,
    addr: ListenAddr,
    peer: Peer,
    shared: Arc<Shared>,
    drain: super::Drain,
}

impl Accepted {
    /// Registers the socket with the calling worker's reactor and starts serving it. Takes the box, so that it
    /// is freed here: a box moved out of in the task would stay allocated until the connection ends.
    #[expect(
        clippy::boxed_local,
        reason = "the box must be consumed here, not where the connection is awaited"
    )]
    fn start(self: Box<Self>) -> std::io::Result<conn::Served> {
        let Accepted {
            io,
            addr,
            peer,
            shared,
            drain,
        } = *self;
        Ok(match io {
            Stream::Tcp(s) => conn::start(
                tokio::net::TcpStream::from_std(s)?,
                addr,
                peer,
                shared,
                drain,
            ),
            Stream::Unix(s) => conn::start(
                tokio::net::UnixStream::from_std(s)?,
                addr,
                peer,
                shared,
                drain,
            ),
        })
    }
}

/// Serves a connection on the worker it was placed on, its socket registered with that worker's reactor.
async fn serve(accepted: Box<Accepted>, _held: (workers::Placed, admission::Admitted)) {
    match accepted.start() {
        Ok(conn) => conn.await,
        Err(e) => tracing::warn!(error = %e, "cannot register a connection"),
    }
}

/// An accepted connection, not yet registered with any reactor.
enum Stream {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Stream {
    /// The connection on `fd`, of the kind the listener `addr` accepts.
    fn from_fd(fd: OwnedFd, addr: &ListenAddr) -> Stream {
        match addr {
            ListenAddr::Tcp(_) => Stream::Tcp(fd.into()),
            ListenAddr::Unix(_) => Stream::Unix(fd.into()),
        }
    }

    fn peer(&self) -> Peer {
        match self {
            Stream::Tcp(s) => Peer {
                remote: s.peer_addr().ok(),
                local: s.local_addr().ok(),
            },
            Stream::Unix(_) => Peer {
                remote: None,
                local: None,
            },
        }
    }
}

impl From<Stream> for OwnedFd {
    fn from(s: Stream) -> OwnedFd {
        match s {
            Stream::Tcp(s) => s.into(),
            Stream::Unix(s) => s.into(),
        }
    }
}

enum Accepting {
    Tcp(AsyncFd<std::net::TcpListener>),
    Unix(AsyncFd<std::os::unix::net::UnixListener>),
}

async fn accept(bound: &Accepting) -> std::io::Result<(Stream, Peer)> {
    match bound {
        Accepting::Tcp(l) => {
            let (s, remote) = accept_ready(l, accept_tcp).await?;
            let _ = s.set_nodelay(true);
            let local = s.local_addr().ok();
            let peer = Peer {
                remote: Some(remote),
                local,
            };
            Ok((Stream::Tcp(s), peer))
        }
        Accepting::Unix(l) => {
            let (s, _) = accept_ready(l, |l| l.accept()).await?;
            s.set_nonblocking(true)?;
            let peer = Peer {
                remote: None,
                local: None,
            };
            Ok((Stream::Unix(s), peer))
        }
    }
}

/// Takes a queued TCP connection, non-blocking from the start (`accept4`): one system call fewer per
/// connection than setting it afterwards.
fn accept_tcp(
    listener: &std::net::TcpListener,
) -> std::io::Result<(std::net::TcpStream, SocketAddr)> {
    let (socket, addr) =
        socket2::SockRef::from(listener).accept4(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)?;
    let remote = addr
        .as_socket()
        .ok_or_else(|| std::io::Error::other("a TCP connection without an IP address"))?;
    Ok((socket.into(), remote))
}

/// Waits until `listener` has a connection queued and takes it.
async fn accept_ready<L: std::os::fd::AsRawFd, T>(
    listener: &AsyncFd<L>,
    accept: impl Fn(&L) -> std::io::Result<T>,
) -> std::io::Result<T> {
    loop {
        let mut ready = listener.readable().await?;
        if let Ok(result) = ready.try_io(|l| accept(l.get_ref())) {
            return result;
        }
    }
}

#[cfg(test)]
mod tests {
    /// A connection's task lives as long as the connection, so what its future holds every idle connection
    /// holds: the accepted socket and its addresses are boxed until it starts, the protocol's state after.
    #[test]
    fn a_connection_task_holds_little() {
        fn size<A, B, F: std::future::Future>(_: fn(A, B) -> F) -> usize {
            std::mem::size_of::<F>()
        }
        let size = size(super::serve);
        assert!(
            size <= 192,
            "the connection task's future takes {size} bytes"
        );
    }
}
