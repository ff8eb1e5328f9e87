//! One client connection: HTTP/1.1 with keep-alive and pipelining through hyper, Unit's timeouts around the
//! socket, and a graceful end when its listener goes away or rein stops.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::handler;
use super::timeouts::{ConnState, TimedIo, Timeouts};
use crate::snapshot::ListenAddr;

/// The largest request head accepted (request line and all fields); a larger one is answered with 431.
const MAX_HEAD: usize = 32 * 1024;

/// What a request needs to know about the connection it came on.
#[derive(Debug)]
pub struct ConnInfo {
    pub listener: ListenAddr,
    pub remote: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
    pub state: Arc<ConnState>,
}

impl ConnInfo {
    pub fn new(
        listener: ListenAddr,
        remote: Option<SocketAddr>,
        local: Option<SocketAddr>,
    ) -> Arc<Self> {
        Arc::new(ConnInfo {
            listener,
            remote,
            local,
            state: Arc::default(),
        })
    }
}

pub async fn serve<S>(io: S, info: Arc<ConnInfo>, shared: Arc<Shared>, stop: CancellationToken)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // Timeouts are those in force when the connection arrived, as in Unit.
    let timeouts = Timeouts::from(&shared.current.load().snapshot.settings);
    let io = TimedIo::new(io, info.state.clone(), timeouts);
    shared.counters.connection_opened();
    let svc = {
        let shared = shared.clone();
        service_fn(move |req| {
            let shared = shared.clone();
            let info = info.clone();
            async move { Ok::<_, Infallible>(handler::handle(req, info, shared).await) }
        })
    };
    let conn = http1::Builder::new()
        .keep_alive(true)
        .max_header_size(MAX_HEAD)
        .serve_connection(TokioIo::new(io), svc)
        .with_upgrades();
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection ended with an error");
    }
    shared.counters.connection_closed();
}
