//! Keep-alive connections to one server: dialled over TCP or a Unix socket, kept idle for reuse up to the
//! upstream's idle timeout, and dropped when the server closes them. One pool per transport: HTTP senders
//! here, FastCGI connections in [`crate::fastcgi`].

use std::collections::VecDeque;
use std::io;
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};

use super::conf::ServerAddr;
use crate::body::Body;

/// Idle connections kept per server, at most (nginx's `keepalive` is a per-worker 64 in common setups; a
/// larger pool spares new connections under bursts, each idle one costs a few KB).
const MAX_IDLE: usize = 256;

pub type Sender = SendRequest<Body>;

/// A connection that can wait in a pool.
pub trait Pooled {
    /// Whether the server closed it (then it is not worth handing out).
    fn is_closed(&self) -> bool;
}

impl Pooled for Sender {
    fn is_closed(&self) -> bool {
        SendRequest::is_closed(self)
    }
}

/// An idle connection, the moment it became idle, and the thread that last used it.
struct Idle<C> {
    sender: C,
    since: Instant,
    thread: ThreadId,
}

/// How many of the most recent idle connections `take` looks through for one last used on its own thread.
const AFFINITY_WINDOW: usize = 16;

/// Idle connections, oldest first.
pub struct Pool<C> {
    idle: Mutex<VecDeque<Idle<C>>>,
}

impl<C> Default for Pool<C> {
    fn default() -> Self {
        Pool {
            idle: Mutex::new(VecDeque::new()),
        }
    }
}

impl<C: Pooled> Pool<C> {
    /// The most recently used idle connection still open and within `idle_timeout`. It may need a moment
    /// to be ready (its last exchange just ended): the caller awaits `ready()`.
    pub fn take(&self, idle_timeout: Duration) -> Option<C> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        // Expired connections gather at the front; dropping them there is cheap.
        while idle
            .front()
            .is_some_and(|i| now.duration_since(i.since) >= idle_timeout)
        {
            idle.pop_front();
        }
        // A connection last used on this thread has its driving task here too: taking it spares a wake-up
        // across worker threads on every exchange.
        let here = std::thread::current().id();
        let local = idle
            .iter()
            .rev()
            .take(AFFINITY_WINDOW)
            .position(|i| i.thread == here)
            .map(|from_back| idle.len() - 1 - from_back);
        if let Some(at) = local
            && let Some(i) = idle.remove(at)
            && !i.sender.is_closed()
        {
            return Some(i.sender);
        }
        while let Some(i) = idle.pop_back() {
            if !i.sender.is_closed() {
                return Some(i.sender);
            }
        }
        None
    }

    /// Returns a connection whose exchange is complete, for reuse.
    pub fn put(&self, sender: C) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() >= MAX_IDLE {
            idle.pop_front();
        }
        idle.push_back(Idle {
            sender,
            since: Instant::now(),
            thread: std::thread::current().id(),
        });
    }

    /// Closes every idle connection.
    pub fn clear(&self) {
        let drained = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()));
        drop(drained);
    }

    pub fn idle_count(&self) -> usize {
        self.idle.lock().map(|i| i.len()).unwrap_or(0)
    }
}

/// Dials `addr` and completes the HTTP/1.1 handshake within `timeout`.
pub async fn connect(addr: &ServerAddr, timeout: Duration) -> io::Result<Sender> {
    let dial = async {
        match addr {
            ServerAddr::Tcp(sa) => {
                let s = TcpStream::connect(sa).await?;
                let _ = s.set_nodelay(true);
                handshake(s).await
            }
            ServerAddr::Unix(path) => handshake(UnixStream::connect(path).await?).await,
        }
    };
    tokio::time::timeout(timeout, dial)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timeout"))?
}

async fn handshake<S>(stream: S) -> io::Result<Sender>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(io::Error::other)?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "upstream connection ended with an error");
        }
    });
    Ok(sender)
}
