//! The control API: Unit's REST interface to the configuration and status, on a Unix socket (mode 0600) or a
//! TCP address.

mod api;
mod certificates;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, UnixListener};
use tokio_util::sync::CancellationToken;

use crate::engine::Engine;

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

pub enum ControlListener {
    Unix(UnixListener, PathBuf),
    Tcp(TcpListener),
}

impl ControlListener {
    /// Binds the control socket; a Unix socket is made readable and writable by its owner only.
    pub async fn bind(addr: &ControlAddr) -> std::io::Result<ControlListener> {
        match addr {
            ControlAddr::Unix(path) => {
                if std::os::unix::net::UnixStream::connect(path).is_ok() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::AddrInUse,
                        format!("another process already serves {}", path.display()),
                    ));
                }
                let listener = bind_private(path)?;
                Ok(ControlListener::Unix(listener, path.clone()))
            }
            ControlAddr::Tcp(sa) => Ok(ControlListener::Tcp(TcpListener::bind(sa).await?)),
        }
    }

    /// Serves the API until `stop` fires.
    pub async fn serve(self, engine: Arc<Engine>, stop: CancellationToken) {
        loop {
            let engine = engine.clone();
            tokio::select! {
                _ = stop.cancelled() => break,
                accepted = self.accept_one(engine) => {
                    if let Err(e) = accepted {
                        tracing::warn!(error = %e, "control socket accept failed");
                    }
                }
            }
        }
        if let ControlListener::Unix(_, path) = &self {
            remove(path);
        }
    }

    async fn accept_one(&self, engine: Arc<Engine>) -> std::io::Result<()> {
        match self {
            ControlListener::Unix(l, _) => {
                let (s, _) = l.accept().await?;
                tokio::spawn(serve_conn(TokioIo::new(s), engine));
            }
            ControlListener::Tcp(l) => {
                let (s, _) = l.accept().await?;
                tokio::spawn(serve_conn(TokioIo::new(s), engine));
            }
        }
        Ok(())
    }
}

/// Binds a Unix socket at `path` that never exists with a mode wider than 0600.
///
/// `bind` creates the file with the process's umask, so a bind then chmod would leave a moment in which others
/// may connect. A temporary umask would close it but is process-wide: another thread creating a file meanwhile
/// would get the narrowed mode. Instead the socket is bound inside a fresh 0700 directory beside `path` (no one
/// else can reach it there), made 0600, and renamed into place, which is atomic, keeps the mode and replaces a
/// stale socket file left by a rein that did not stop cleanly.
fn bind_private(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::DirBuilderExt;
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // Short, so that the staged path fits a socket address (108 bytes) about as well as `path` itself.
    let private = parent.join(format!(".rein.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new().mode(0o700).create(&private)?;
    let staged = private.join("s");
    let bound = UnixListener::bind(&staged).and_then(|listener| {
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&staged, path)?;
        Ok(listener)
    });
    let _ = std::fs::remove_dir_all(&private);
    bound
}

fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

async fn serve_conn<I>(io: I, engine: Arc<Engine>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| {
        let engine = engine.clone();
        async move { Ok::<_, std::convert::Infallible>(api::handle(req, &engine).await) }
    });
    if let Err(e) = http1::Builder::new().serve_connection(io, svc).await {
        tracing::debug!(error = %e, "control connection ended with an error");
    }
}
