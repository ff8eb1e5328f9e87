//! The control API: Unit's REST interface to the configuration and status, on a Unix socket (mode 0600) or a
//! TCP address.
//!
//! Over TCP every request needs the bearer token and must name the control address ([`guard`]); both
//! transports close slow and idle clients ([`conn`]). The accept loop never spins: an error backs off, and
//! when descriptors run out a few kept in [`reserve`] let the operator in while the data plane is full.

mod api;
mod certificates;
mod conn;
mod fleet;
mod guard;
mod history;
mod invalid;
mod metrics;
pub(crate) use metrics::exposition;
mod reserve;
mod routes;
pub(crate) mod token;
mod unix_socket;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio_util::sync::CancellationToken;

use crate::engine::Engine;
use conn::Peer;
use guard::Guard;
use reserve::{Released, Reserve};
use unix_socket::OwnedSocket;

/// The pause after a failed accept: the connection stays queued, and trying again at once would spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Where the control API listens: `unix:/path` or `IP:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlAddr {
    Unix(PathBuf),
    Tcp(std::net::SocketAddr),
}

impl std::str::FromStr for ControlAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(path) = s.strip_prefix("unix:") {
            return Ok(ControlAddr::Unix(PathBuf::from(path)));
        }
        s.parse()
            .map(ControlAddr::Tcp)
            .map_err(|_| format!("{s:?} is not \"unix:/PATH\" or \"IP:PORT\""))
    }
}

impl std::fmt::Display for ControlAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlAddr::Unix(p) => write!(f, "unix:{}", p.display()),
            ControlAddr::Tcp(a) => write!(f, "{a}"),
        }
    }
}

/// Why the control API could not start listening.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BindError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Token(#[from] token::TokenError),
}

/// A bound control socket, not yet serving.
pub(crate) struct ControlListener(Listening);

enum Listening {
    Unix(OwnedSocket),
    Tcp(TcpListener, Arc<Guard>),
}

impl ControlListener {
    /// Binds the control socket: a Unix socket readable and writable by its owner only, or a TCP address whose
    /// clients must present the token in `token_file` (created if missing).
    pub(crate) async fn bind(
        addr: &ControlAddr,
        token_file: &Path,
    ) -> Result<ControlListener, BindError> {
        match addr {
            ControlAddr::Unix(path) => {
                Ok(ControlListener(Listening::Unix(OwnedSocket::bind(path)?)))
            }
            ControlAddr::Tcp(sa) => {
                let token = token::load_or_create(token_file)?;
                let listener = TcpListener::bind(sa).await?;
                warn_if_exposed(*sa);
                let guard = Arc::new(Guard::new(token));
                Ok(ControlListener(Listening::Tcp(listener, guard)))
            }
        }
    }

    /// Serves the API until `stop` fires; a Unix socket's file is removed then.
    pub(crate) async fn serve(self, engine: Arc<Engine>, stop: CancellationToken) {
        // A listener's `metrics` action reads what `GET /metrics` does, from the same engine.
        let _ = engine.server().shared().engine.set(Arc::downgrade(&engine));
        let reserve = Reserve::new();
        loop {
            let accepted = tokio::select! {
                _ = stop.cancelled() => break,
                accepted = self.accept(&reserve) => accepted,
            };
            match accepted {
                Ok((conn, released)) => {
                    tokio::spawn(serve_conn(conn, engine.clone(), released));
                    // A spare that could not be reopened when its connection ended is tried again here.
                    reserve.refill();
                }
                Err(e) => {
                    crate::log_limit::warn_limited!(error = %e, "control socket accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
    }

    /// The next connection. Out of descriptors, one is taken from the reserve for it.
    async fn accept(
        &self,
        reserve: &Arc<Reserve>,
    ) -> std::io::Result<(Accepted, Option<Released>)> {
        match self.accept_one().await {
            Err(e) if reserve::out_of_descriptors(&e) => {
                let Some(released) = reserve.release() else {
                    return Err(e);
                };
                crate::log_limit::warn_limited!(
                    "out of descriptors: a control connection is let in from the reserve"
                );
                Ok((self.accept_one().await?, Some(released)))
            }
            accepted => accepted.map(|a| (a, None)),
        }
    }

    async fn accept_one(&self) -> std::io::Result<Accepted> {
        match &self.0 {
            Listening::Unix(socket) => {
                let (s, _) = socket.listener.accept().await?;
                Ok(Accepted::Unix(s))
            }
            Listening::Tcp(l, guard) => {
                let (s, _) = l.accept().await?;
                let local = s.local_addr()?;
                Ok(Accepted::Tcp(s, guard.clone(), local))
            }
        }
    }
}

enum Accepted {
    Unix(UnixStream),
    Tcp(TcpStream, Arc<Guard>, SocketAddr),
}

/// Serves one connection; a descriptor taken from the reserve goes back when it ends.
async fn serve_conn(conn: Accepted, engine: Arc<Engine>, released: Option<Released>) {
    match conn {
        Accepted::Unix(s) => conn::serve(TokioIo::new(s), engine, Peer::Local).await,
        Accepted::Tcp(s, guard, local) => {
            let peer = Peer::Tcp { guard, local };
            conn::serve(TokioIo::new(s), engine, peer).await;
        }
    }
    drop(released);
}

/// A control API that other machines can reach is a root shell for anyone who learns the token: say so.
fn warn_if_exposed(addr: SocketAddr) {
    if !addr.ip().is_loopback() {
        tracing::warn!(
            control = %addr,
            "the control API listens on a non-loopback address: other machines can reach it, and its \
             token travels in clear text; prefer the Unix socket or a loopback address"
        );
    }
}
