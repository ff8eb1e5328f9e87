//! Listening sockets: bound before a configuration is published, accepting until told to stop.

use std::net::SocketAddr;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Socket, Type};
use tokio::net::{TcpListener, UnixListener};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Shared;
use super::conn::{self, ConnInfo};
use crate::snapshot::ListenAddr;

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
                let std = std::os::unix::net::UnixListener::bind(path)?;
                std.set_nonblocking(true)?;
                Ok(Bound::Unix(std))
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
        Ok(match self {
            Bound::Tcp(l) => Accepting::Tcp(TcpListener::from_std(l)?),
            Bound::Unix(l) => Accepting::Unix(UnixListener::from_std(l)?),
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

/// Accepts connections on `bound` until `stop` fires; each connection runs on `conns` and drains on `stop`.
/// A Unix socket's file is not this loop's to remove: the server removes it when it stops the listener,
/// before a later change may bind the path again.
pub async fn accept_loop(
    bound: Bound,
    addr: ListenAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
    conns: TaskTracker,
) {
    let bound = match bound.register() {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(listener = %addr, error = %e, "cannot accept");
            return;
        }
    };
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            r = accept(&bound, &addr) => r,
        };
        match accepted {
            Ok((io, info)) => {
                let shared = shared.clone();
                let stop = stop.clone();
                conns.spawn(async move {
                    match io {
                        Stream::Tcp(s) => conn::serve(s, info, shared, stop).await,
                        Stream::Unix(s) => conn::serve(s, info, shared, stop).await,
                    }
                });
            }
            Err(e) => {
                // Out of descriptors or memory: back off instead of spinning; the kernel keeps the queue.
                tracing::warn!(listener = %addr, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

enum Stream {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

enum Accepting {
    Tcp(TcpListener),
    Unix(UnixListener),
}

async fn accept(bound: &Accepting, addr: &ListenAddr) -> std::io::Result<(Stream, Arc<ConnInfo>)> {
    match bound {
        Accepting::Tcp(l) => {
            let (s, remote) = l.accept().await?;
            let _ = s.set_nodelay(true);
            let local = s.local_addr().ok();
            Ok((
                Stream::Tcp(s),
                ConnInfo::new(addr.clone(), Some(remote), local),
            ))
        }
        Accepting::Unix(l) => {
            let (s, _) = l.accept().await?;
            Ok((Stream::Unix(s), ConnInfo::new(addr.clone(), None, None)))
        }
    }
}
