//! One client connection: TLS when its listener has it, then HTTP/1.1 on rein's own connection loop
//! ([`super::h1`]) or HTTP/2 through hyper (chosen by ALPN; on an `h2c` listener, where the client's preface
//! decides, hyper serves both), Unit's timeouts around the socket, and a graceful end when its listener goes
//! away or rein stops.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::FutureExt;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::coalesce;
use super::handler;
use super::request_body::ClientBody;
use super::timeouts::{ConnState, TimedIo, Timeouts, Timing};
use crate::snapshot::{Http2Settings, ListenAddr};
use crate::stats::counters::ListenerStats;

/// The largest HTTP/2 flow-control window (RFC 9113 §6.9.1).
const MAX_WINDOW: u32 = (1 << 31) - 1;

/// A connection's life once its protocol is known, boxed: the connection's task holds a pointer, whichever
/// protocol it speaks.
pub(super) type Served = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs a hyper connection to its end, pushing out after each of its turns what it left in a [`coalesce`]
/// buffer (`$push`, `()` for none); when `stop` fires, lets it finish the requests it has and close; then
/// `$end` accounts for the connection. A macro rather than a function: the three connection types share
/// `graceful_shutdown` by name only.
///
/// The connection is boxed apart from the future that drives it, and each protocol's separately, so that a
/// connection holds only the state of the protocol it speaks, once: one future for the three would be as
/// large as the largest (HTTP/2 and the `h2c` sniffer), kilobytes that an idle HTTP/1 connection would hold
/// for nothing, and a connection moved into the future that drives it would take its room twice.
macro_rules! drive {
    ($conn:expr, $stop:expr, $push:expr, $end:expr) => {{
        let mut conn = Box::pin($conn);
        let stop = $stop;
        let push = $push;
        let end: Ending = $end;
        async move {
            let mut ended = None;
            let stopped = tokio::select! {
                r = std::future::poll_fn(|cx| coalesce::poll_connection(conn.as_mut(), &mut ended, &push, cx)) => Some(r),
                _ = stop.cancelled() => None,
            };
            let result = match stopped {
                Some(r) => r,
                None => {
                    conn.as_mut().graceful_shutdown();
                    std::future::poll_fn(|cx| coalesce::poll_connection(conn.as_mut(), &mut ended, &push, cx)).await
                }
            };
            end.finish(result);
        }
    }};
}

/// What is left to do when a connection ends: log how, the access log line of a head it left unfinished, and
/// the count of open connections.
struct Ending {
    info: Arc<ConnInfo>,
    shared: Arc<Shared>,
}

impl Ending {
    fn finish(self, result: Result<(), Box<dyn std::error::Error + Send + Sync>>) {
        if let Err(e) = result {
            tracing::debug!(error = %e, "connection ended with an error");
            super::unfinished_head::log(&*e, &self.info, &self.shared);
        }
        self.shared.counters.connection_closed();
    }
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
    /// The listener's counters; `None` if it was removed as the connection arrived.
    pub stats: Option<Arc<ListenerStats>>,
    /// The configuration to finish on once the listener is removed.
    pub last: Arc<std::sync::OnceLock<Arc<super::Published>>>,
}

impl ConnInfo {
    /// The configuration a request on this connection runs on: the current one, or, once the listener has been
    /// removed, the last one that had it, so requests in flight finish on their configuration.
    pub fn published(&self, shared: &Shared) -> Arc<super::Published> {
        match shared.current.load_full() {
            p if !p.snapshot.listeners.contains_key(&self.listener) => {
                self.last.get().cloned().unwrap_or(p)
            }
            p => p,
        }
    }
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

/// Serves a connection accepted on `listener`: with TLS if the snapshot current now says so. Not an `async fn`:
/// a plain connection's protocol is known at once, so its task awaits the protocol's boxed state directly,
/// and no future around it keeps room for this function's arguments and the TLS handshake for as long as the
/// connection lives.
pub(super) fn start<S>(
    io: S,
    listener: ListenAddr,
    peer: Peer,
    shared: Arc<Shared>,
    drain: super::Drain,
) -> Served
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (tls, h2c, limits, stats) = {
        let current = shared.current.load();
        let settings = &current.snapshot.settings;
        let l = current.snapshot.listeners.get(&listener);
        // Limits, like timeouts, are those in force when the connection arrived, as in Unit.
        let limits = Limits {
            timeouts: Timeouts::from(settings),
            http2: settings.http2.clone(),
            max_head: settings.max_head(),
        };
        (
            l.and_then(|l| l.tls.as_ref().map(|t| t.config.clone())),
            l.is_some_and(|l| l.h2c),
            limits,
            l.map(|l| l.stats.clone()),
        )
    };
    if let Some(stats) = &stats {
        stats.accepted();
    }
    let arrival = Arrival {
        listener,
        peer,
        stats,
        last: drain.last,
    };
    let stop = drain.stop;
    match tls {
        None => {
            let protocol = if h2c {
                Protocol::Either
            } else {
                Protocol::Http1
            };
            let info = Arc::new(arrival.info("http", protocol));
            serve(io, info, protocol, limits, shared, stop)
        }
        Some(config) => Box::pin(handshake(io, config, arrival, limits, shared, stop)),
    }
}

/// What a connection's [`ConnInfo`] is made of, once its protocol is known.
struct Arrival {
    listener: ListenAddr,
    peer: Peer,
    stats: Option<Arc<ListenerStats>>,
    last: Arc<std::sync::OnceLock<Arc<super::Published>>>,
}

impl Arrival {
    fn info(self, scheme: &'static str, protocol: Protocol) -> ConnInfo {
        ConnInfo {
            listener: self.listener,
            remote: self.peer.remote,
            local: self.peer.local,
            scheme,
            multiplexed: protocol != Protocol::Http1,
            state: Arc::default(),
            stats: self.stats,
            last: self.last,
        }
    }

    fn handshaken(&self, completed: bool) {
        if let Some(stats) = &self.stats {
            stats.handshake(completed);
        }
    }
}

/// The TLS handshake, then the connection in the protocol ALPN chose.
async fn handshake<S>(
    io: S,
    config: Arc<rustls::ServerConfig>,
    arrival: Arrival,
    limits: Limits,
    shared: Arc<Shared>,
    stop: CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // Boxed: the handshake's state (a whole rustls connection) is needed only until it completes; inline, the
    // connection's task would keep room for it as long as the connection lives.
    let handshake = Box::pin(tokio::time::timeout(
        limits.timeouts.header,
        tokio_rustls::TlsAcceptor::from(config).accept(io),
    ));
    let remote = arrival.peer.remote;
    // The stream goes into its boxed connection inside the match: a local holding it across the await below
    // would keep room for a second copy in this future.
    let served = match handshake.await {
        Ok(Ok(stream)) => {
            arrival.handshaken(true);
            let protocol = match stream.get_ref().1.alpn_protocol() {
                Some(b"h2") => Protocol::Http2,
                // An ACME CA's TLS-ALPN-01 validation: the handshake was the whole exchange (RFC 8737 §3).
                Some(crate::tls::ACME_TLS) => return,
                _ => Protocol::Http1,
            };
            let info = Arc::new(arrival.info("https", protocol));
            serve(stream, info, protocol, limits, shared, stop)
        }
        Ok(Err(e)) => {
            arrival.handshaken(false);
            tracing::debug!(error = %e, ?remote, "TLS handshake failed");
            return;
        }
        Err(_) => {
            arrival.handshaken(false);
            tracing::debug!(?remote, "TLS handshake timed out");
            return;
        }
    };
    served.await;
}

/// What a connection is held to, fixed when it arrives.
struct Limits {
    timeouts: Timeouts,
    http2: Http2Settings,
    /// The largest HTTP/1 request head (request line and all fields); a larger one is answered with 431.
    max_head: usize,
}

/// The connection served in `protocol`. Not an `async fn`: its arguments (the TLS stream among them) would
/// stay in the connection's future, moved out but still taking room, for as long as the connection lives.
fn serve<S>(
    io: S,
    info: Arc<ConnInfo>,
    protocol: Protocol,
    limits: Limits,
    shared: Arc<Shared>,
    stop: CancellationToken,
) -> Served
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Limits {
        timeouts,
        http2,
        max_head,
    } = limits;
    shared.counters.connection_opened();
    // Each request's future is boxed: hyper keeps the slot for the request in flight allocated for the whole
    // connection, so an unboxed future (every action's state) would be held by every idle keep-alive
    // connection; boxed, the slot is a pointer and the request's state lives only while it runs.
    let end = Ending {
        info: info.clone(),
        shared: shared.clone(),
    };
    if protocol == Protocol::Http1 {
        // No HTTP/2 frames to watch for: the flood guard would only take room in every connection.
        let io: super::h1::BoxIo = Box::new(TimedIo::new(
            io,
            info.state.clone(),
            timeouts,
            Timing::Http1,
        ));
        // A combinator rather than an async block, which would keep room for the arguments it moves into
        // `run` beside `run`'s own future.
        return Box::pin(
            super::h1::run(io, info, max_head, shared, stop)
                .map(move |result| end.finish(result.map_err(Into::into))),
        );
    }
    let frames = super::h2_floods::Frames::new(true);
    let io = super::h2_floods::FloodGuard::new(io, frames, info.remote);
    let timing = match protocol {
        Protocol::Http2 => Timing::Multiplexed,
        _ => Timing::Either,
    };
    let io = TimedIo::new(io, info.state.clone(), timeouts, timing);
    let svc = {
        let shared = shared.clone();
        service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let shared = shared.clone();
            let info = info.clone();
            let req = req.map(ClientBody::Hyper);
            Box::pin(async move {
                let mut response = handler::handle(req, info, shared).await;
                // hyper writes the header map only: the fields passed on as bytes join it.
                super::passed::merge(&mut response);
                Ok::<_, Infallible>(response)
            })
        })
    };
    match protocol {
        Protocol::Http1 => unreachable!("served above"),
        Protocol::Http2 => {
            let (io, flusher) = coalesce::new(io);
            let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            configure_http2(&mut builder, &http2);
            let conn = builder.serve_connection(TokioIo::new(io), svc);
            Box::pin(drive!(conn, stop, flusher, end))
        }
        Protocol::Either => {
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder.http1().keep_alive(true).max_buf_size(max_head);
            configure_http2(&mut builder.http2(), &http2);
            // The connection borrows the builder that made it: both live in the one future.
            Box::pin(async move {
                let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
                drive!(conn, stop, (), end).await;
            })
        }
    }
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

#[cfg(test)]
mod tests {
    use std::future::Future;

    use super::handshake;
    use crate::server::handler::handle;

    /// The size of the future an `async fn` returns, read from its signature: nothing is built or run.
    fn future_size3<A, B, C, F: Future>(_: fn(A, B, C) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    fn future_size6<A, B, C, D, E, G, F: Future>(_: fn(A, B, C, D, E, G) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// A TLS connection's future lives as long as the connection, so what it holds inline every idle
    /// connection holds: a few hundred bytes, the handshake and its protocol's state being boxed apart. Either
    /// inline, or a moved-out copy of the TLS stream kept across an await, would make it kilobytes.
    #[test]
    fn a_tls_connection_holds_little_inline() {
        let size = future_size6(handshake::<tokio::net::TcpStream>);
        assert!(size <= 1024, "the connection's future takes {size} bytes");
    }

    /// Each request's future is copied into a box when it starts, so it must stay small: a pass to an upstream
    /// or application inline would make every request's copy about 5 kB long.
    #[test]
    fn a_request_future_is_small_enough_to_box_cheaply() {
        let size = future_size3(handle);
        assert!(size <= 3072, "the request's future takes {size} bytes");
    }
}
