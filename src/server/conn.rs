//! One client connection: TLS when its listener has it, then HTTP/1.1 (keep-alive, pipelining, upgrades) or
//! HTTP/2 (chosen by ALPN, or by the client's preface on an `h2c` listener) through hyper, Unit's timeouts
//! around the socket, and a graceful end when its listener goes away or rein stops.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::{Service, service_fn};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::coalesce;
use super::handler;
use super::timeouts::{ConnState, TimedIo, Timeouts};
use crate::body::Body;
use crate::snapshot::{Http2Settings, ListenAddr};

/// The largest HTTP/2 flow-control window (RFC 9113 §6.9.1).
const MAX_WINDOW: u32 = (1 << 31) - 1;

/// Runs a hyper connection to its end, pushing out after each of its turns what it left in a [`coalesce`]
/// buffer (`$push`, `()` for none); when `stop` fires, lets it finish the requests it has and close. A macro
/// rather than a function: the three connection types share `graceful_shutdown` by name only.
macro_rules! drive {
    ($conn:expr, $stop:expr, $push:expr) => {{
        let conn = $conn;
        let push = $push;
        tokio::pin!(conn);
        let mut ended = None;
        let stopped = tokio::select! {
            r = std::future::poll_fn(|cx| coalesce::poll_connection(conn.as_mut(), &mut ended, &push, cx)) => Some(r),
            _ = $stop.cancelled() => None,
        };
        match stopped {
            Some(r) => r,
            None => {
                conn.as_mut().graceful_shutdown();
                std::future::poll_fn(|cx| coalesce::poll_connection(conn.as_mut(), &mut ended, &push, cx)).await
            }
        }
    }};
}

/// What a request needs to know about the connection it came on.
pub struct ConnInfo {
    pub listener: ListenAddr,
    pub remote: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
    /// `https` on a TLS listener, else `http`.
    pub scheme: &'static str,
    /// HTTP/2 (or h2c, which may become HTTP/2): requests share the connection.
    pub multiplexed: bool,
    pub state: Arc<ConnState>,
    /// The configuration to finish on once the listener is removed.
    pub last: Arc<std::sync::OnceLock<Arc<super::Published>>>,
}

/// The protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Http1,
    Http2,
    /// HTTP/2 if the client opens with its preface, else HTTP/1.1 (an `h2c` listener).
    Either,
}

/// The peer addresses of an accepted connection.
pub struct Peer {
    pub remote: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
}

/// Serves a connection accepted on `listener`: with TLS if the snapshot current now says so.
pub async fn start<S>(
    io: S,
    listener: ListenAddr,
    peer: Peer,
    shared: Arc<Shared>,
    drain: super::Drain,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let stop = drain.stop;
    let (tls, h2c, timeouts, http2, max_head) = {
        let current = shared.current.load();
        let settings = &current.snapshot.settings;
        let l = current.snapshot.listeners.get(&listener);
        (
            l.and_then(|l| l.tls.as_ref().map(|t| t.config.clone())),
            l.is_some_and(|l| l.h2c),
            Timeouts::from(settings),
            settings.http2.clone(),
            settings.max_head(),
        )
    };
    // Limits, like timeouts, are those in force when the connection arrived, as in Unit.
    let limits = Limits {
        timeouts,
        http2,
        max_head,
    };
    let info = |scheme, protocol| ConnInfo {
        listener: listener.clone(),
        remote: peer.remote,
        local: peer.local,
        scheme,
        multiplexed: protocol != Protocol::Http1,
        state: Arc::default(),
        last: drain.last.clone(),
    };
    let Some(config) = tls else {
        let protocol = if h2c {
            Protocol::Either
        } else {
            Protocol::Http1
        };
        return serve(
            io,
            Arc::new(info("http", protocol)),
            protocol,
            limits,
            shared,
            stop,
        )
        .await;
    };
    let handshake = tokio_rustls::TlsAcceptor::from(config).accept(io);
    let stream = match tokio::time::timeout(limits.timeouts.header, handshake).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, remote = ?peer.remote, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(remote = ?peer.remote, "TLS handshake timed out");
            return;
        }
    };
    let protocol = match stream.get_ref().1.alpn_protocol() {
        Some(b"h2") => Protocol::Http2,
        // An ACME CA's TLS-ALPN-01 validation: the handshake was the whole exchange (RFC 8737 §3).
        Some(crate::tls::ACME_TLS) => return,
        _ => Protocol::Http1,
    };
    serve(
        stream,
        Arc::new(info("https", protocol)),
        protocol,
        limits,
        shared,
        stop,
    )
    .await;
}

/// What a connection is held to, fixed when it arrives.
struct Limits {
    timeouts: Timeouts,
    http2: Http2Settings,
    /// The largest HTTP/1 request head (request line and all fields); a larger one is answered with 431.
    max_head: usize,
}

async fn serve<S>(
    io: S,
    info: Arc<ConnInfo>,
    protocol: Protocol,
    limits: Limits,
    shared: Arc<Shared>,
    stop: CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Limits {
        timeouts,
        http2,
        max_head,
    } = limits;
    let frames = super::h2_floods::Frames::new(protocol != Protocol::Http1);
    let io = super::h2_floods::FloodGuard::new(io, frames, info.remote);
    let io = TimedIo::new(io, info.state.clone(), timeouts, info.multiplexed);
    shared.counters.connection_opened();
    let svc = {
        let shared = shared.clone();
        service_fn(move |req| {
            let shared = shared.clone();
            let info = info.clone();
            async move { Ok::<_, Infallible>(handler::handle(req, info, shared).await) }
        })
    };
    let result = match protocol {
        Protocol::Http1 => {
            let conn = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .max_header_size(max_head)
                .serve_connection(TokioIo::new(io), svc)
                .with_upgrades();
            drive!(conn, stop, ())
        }
        Protocol::Http2 => {
            let (io, flusher) = coalesce::new(io);
            let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            configure_http2(&mut builder, &http2);
            drive!(
                builder.serve_connection(TokioIo::new(io), boxed(svc)),
                stop,
                flusher
            )
        }
        Protocol::Either => {
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder.http1().keep_alive(true).max_buf_size(max_head);
            configure_http2(&mut builder.http2(), &http2);
            drive!(
                builder.serve_connection_with_upgrades(TokioIo::new(io), boxed(svc)),
                stop,
                ()
            )
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection ended with an error");
    }
    shared.counters.connection_closed();
}

/// A request's future as HTTP/2 runs it: one task per stream, which hyper and tokio move by value several
/// times before and after it runs (into the stream's future, into the task cell, out at the end). Boxed, each
/// move is of a pointer, not of the whole handler's state; HTTP/1 keeps the future unboxed, in the place
/// hyper keeps for it on the connection.
type Handled = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

fn boxed<S>(
    svc: S,
) -> impl Service<Request<Incoming>, Response = Response<Body>, Error = Infallible, Future = Handled>
+ Clone
where
    S: Service<Request<Incoming>, Response = Response<Body>, Error = Infallible> + Clone,
    S::Future: Send + 'static,
{
    service_fn(move |req| -> Handled { Box::pin(svc.call(req)) })
}

/// The limits of `settings.http.http2`, which bound what one client can make rein hold: streams at once, the
/// header list, flow-control windows, and streams the client resets before rein answers them (the "rapid
/// reset" flood) or makes rein reset for its errors.
fn configure_http2<B: Http2Knobs>(builder: &mut B, s: &Http2Settings) {
    builder.apply(s);
}

trait Http2Knobs {
    fn apply(&mut self, s: &Http2Settings);
}

macro_rules! http2_knobs {
    ($t:ty) => {
        impl Http2Knobs for $t {
            fn apply(&mut self, s: &Http2Settings) {
                self.timer(TokioTimer::new())
                    .max_concurrent_streams(s.max_concurrent_streams)
                    .max_header_list_size(s.max_header_list_size)
                    .initial_stream_window_size(s.initial_window_size)
                    .initial_connection_window_size(
                        s.initial_window_size.saturating_mul(4).min(MAX_WINDOW),
                    )
                    .max_pending_accept_reset_streams(s.max_pending_reset_streams)
                    .max_local_error_reset_streams(Some(s.max_local_error_resets));
            }
        }
    };
}

http2_knobs!(hyper::server::conn::http2::Builder<TokioExecutor>);
http2_knobs!(auto::Http2Builder<'_, TokioExecutor>);
