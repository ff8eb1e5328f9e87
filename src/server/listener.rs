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
    Tcp(TcpListener),
    Unix(UnixListener),
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
                UnixListener::from_std(std).map(Bound::Unix)
            }
        }
    }

    /// The address actually bound (the port chosen for `:0`).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Bound::Tcp(l) => l.local_addr().ok(),
            Bound::Unix(_) => None,
        }
    }
}

fn bind_tcp(addr: SocketAddr, backlog: i32) -> std::io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    TcpListener::from_std(socket.into())
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
pub async fn accept_loop(
    bound: Bound,
    addr: ListenAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
    conns: TaskTracker,
) {
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
    if let (Bound::Unix(_), ListenAddr::Unix(path)) = (&bound, &addr) {
        drop(bound);
        let _ = std::fs::remove_file(path);
    }
}

enum Stream {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

async fn accept(bound: &Bound, addr: &ListenAddr) -> std::io::Result<(Stream, Arc<ConnInfo>)> {
    match bound {
        Bound::Tcp(l) => {
            let (s, remote) = l.accept().await?;
            let _ = s.set_nodelay(true);
            let local = s.local_addr().ok();
            Ok((
                Stream::Tcp(s),
                ConnInfo::new(addr.clone(), Some(remote), local),
            ))
        }
        Bound::Unix(l) => {
            let (s, _) = l.accept().await?;
            Ok((Stream::Unix(s), ConnInfo::new(addr.clone(), None, None)))
        }
    }
}
