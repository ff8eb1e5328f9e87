//! The reverse proxy: a request forwarded to a server of an upstream, with retries, and its answer streamed
//! back.
//!
//! Retry rules: a request whose connection failed before any byte was sent is always tried again on another
//! server; once sent, it is tried again only if its method is idempotent and it has no body. Attempts are
//! bounded by `retries.tries` and `retries.timeout`. When no server is available, the request waits up to
//! `queue_timeout` for one (a restarting backend) before 503.

mod body;
mod error;
pub mod headers;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri, Version, header};
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use crate::body::{self as rbody, Body};
use crate::request::RequestInfo;
use crate::server::ConnState;
use crate::upstream::{Sender, ServerState, Slot, Upstream, connect};
use body::{Download, Upload, UploadWatch};
pub use error::ProxyError;

/// Sends on reused connections that the server turned out to have closed, retried at no cost to `tries`.
const MAX_STALE: u32 = 4;

/// What the proxy needs from the request and its connection.
pub struct Outgoing<'a> {
    pub request: &'a RequestInfo,
    pub body: Option<Incoming>,
    pub upgrade: Option<OnUpgrade>,
    pub max_body_size: u64,
    pub state: &'a Arc<ConnState>,
}

/// Forwards a request to `upstream` and returns the answer (or the mapped error).
pub async fn forward(upstream: &Arc<Upstream>, out: Outgoing<'_>) -> Response<Body> {
    let result = try_forward(upstream, out).await;
    upstream.count(result.is_ok());
    match result {
        Ok(response) => response,
        Err(e) => e.into_response(&upstream.name),
    }
}

async fn try_forward(
    upstream: &Arc<Upstream>,
    out: Outgoing<'_>,
) -> Result<Response<Body>, ProxyError> {
    let started = Instant::now();
    let req = out.request;
    let upgrading = headers::wants_upgrade(&req.headers);
    let head = upstream_head(req, upgrading);
    let (mut body, upload) = match out.body {
        Some(b) if !http_body::Body::is_end_stream(&b) => {
            let (upload, watch) = Upload::new(b, out.max_body_size, out.state.clone());
            (Some(Body::new(upload)), Some(watch))
        }
        _ => (None, None),
    };
    let replayable = body.is_none() && is_idempotent(&req.method);
    let client_ip = client_ip(req.remote);
    let retries = upstream.conf.retries;
    let mut excluded: Vec<Arc<ServerState>> = Vec::new();
    let mut last_error = ProxyError::NoServer;
    let (mut attempts, mut stale_left) = (0, MAX_STALE);
    while attempts < retries.tries {
        if attempts > 0 && started.elapsed() >= retries.timeout {
            break;
        }
        let Some(slot) = wait_for_server(upstream, client_ip, &excluded).await else {
            break;
        };
        let server = slot.server.clone();
        let outgoing = build(&head, body.take().unwrap_or_else(rbody::empty));
        let failed = match attempt_one(upstream, slot, outgoing, upload.as_deref()).await {
            Ok(sent) if replayable && !upgrading && is_small(&sent.response) => {
                match buffered(upstream, sent).await {
                    Ok(response) => return Ok(response),
                    Err(error) => Failed {
                        error,
                        unsent: None,
                        stale: false,
                    },
                }
            }
            Ok(sent) => return Ok(respond(upstream, sent, upgrading, out.upgrade)),
            Err(failed) => failed,
        };
        if upload.as_ref().is_some_and(|w| w.too_large()) {
            return Err(ProxyError::BodyTooLarge);
        }
        tracing::debug!(upstream = %upstream.name, attempts, error = %failed.error, stale = failed.stale, "attempt failed");
        if failed.stale && stale_left > 0 {
            // The server had closed an idle connection: try again, on a fresh one if need be.
            stale_left -= 1;
        } else {
            attempts += 1;
            upstream.record(&server, false);
            excluded.push(server);
        }
        last_error = failed.error;
        match failed.unsent {
            // Never written: the same body can go to the next server.
            Some(returned) => body = Some(returned.into_body()),
            None if replayable => {}
            None => break,
        }
    }
    Err(last_error)
}

/// A server to send to: one available now, or the first to become available within `queue_timeout`.
/// Servers this request already failed on are not candidates: an application instance that just died may
/// still be listed for a moment, and its replacement is worth the wait.
async fn wait_for_server(
    upstream: &Arc<Upstream>,
    client: Option<std::net::IpAddr>,
    excluded: &[Arc<ServerState>],
) -> Option<Slot> {
    let deadline = tokio::time::Instant::now() + upstream.conf.queue_timeout;
    loop {
        // Register interest before looking, so a change between the look and the wait is not missed.
        let changed = upstream.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if let Some(found) = upstream.pick(client, excluded) {
            return Some(found);
        }
        let wake = upstream
            .next_return()
            .map(tokio::time::Instant::from_std)
            .map_or(deadline, |t| t.min(deadline));
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::select! {
            _ = &mut changed => {}
            _ = tokio::time::sleep_until(wake) => {}
        }
    }
}

struct Failed {
    error: ProxyError,
    /// The request, when it was never written: safe to send elsewhere.
    unsent: Option<Request<Body>>,
    /// It failed on a reused keep-alive connection the server had already closed: no fault of the server's.
    stale: bool,
}

struct Sent {
    response: Response<Incoming>,
    sender: Sender,
    slot: Slot,
}

/// One try on one server: a pooled connection if one is idle, else a new one.
async fn attempt_one(
    upstream: &Upstream,
    slot: Slot,
    req: Request<Body>,
    upload: Option<&UploadWatch>,
) -> Result<Sent, Failed> {
    let server = slot.server.clone();
    let timeouts = upstream.conf.timeouts;
    let (mut sender, reused) = match reuse(&server.pool, timeouts).await {
        Some(s) => (s, true),
        None => match connect(&server.addr, timeouts.connect).await {
            Ok(s) => (s, false),
            Err(source) => {
                let error = if source.kind() == std::io::ErrorKind::TimedOut {
                    ProxyError::Timeout {
                        server: server.addr.to_string(),
                        secs: timeouts.connect.as_secs_f64(),
                    }
                } else {
                    ProxyError::Unreachable {
                        server: server.addr.to_string(),
                        source,
                    }
                };
                return Err(Failed {
                    error,
                    unsent: Some(req),
                    stale: false,
                });
            }
        },
    };
    let send = sender.try_send_request(req);
    match await_answer(send, timeouts.read, upload).await {
        Ok(Ok(response)) => Ok(Sent {
            response,
            sender,
            slot,
        }),
        Ok(Err(mut e)) => {
            let unsent = e.take_message();
            let stale = reused && unsent.is_some();
            let error = ProxyError::Broken {
                server: server.addr.to_string(),
                source: e.into_error(),
            };
            Err(Failed {
                error,
                unsent,
                stale,
            })
        }
        Err(_) => Err(Failed {
            error: ProxyError::Timeout {
                server: server.addr.to_string(),
                secs: timeouts.read.as_secs_f64(),
            },
            unsent: None,
            stale: false,
        }),
    }
}

/// Waits for the response head: at most `read` after the request body last made progress (so a long upload
/// that keeps moving never times out, and a server that stops reading or answering does).
async fn await_answer<F: std::future::Future>(
    send: F,
    read: Duration,
    upload: Option<&UploadWatch>,
) -> Result<F::Output, ()> {
    tokio::pin!(send);
    let mut deadline = tokio::time::Instant::now() + read;
    loop {
        tokio::select! {
            out = &mut send => return Ok(out),
            _ = tokio::time::sleep_until(deadline) => {
                let moved = upload.map(|u| u.last_progress() + read);
                match moved {
                    Some(later) if later > deadline => deadline = later,
                    _ => return Err(()),
                }
            }
        }
    }
}

/// A pooled connection, once it is ready for a new request.
async fn reuse(
    pool: &crate::upstream::Pool,
    timeouts: crate::upstream::conf::Timeouts,
) -> Option<Sender> {
    while let Some(mut sender) = pool.take(timeouts.idle) {
        if let Ok(Ok(())) = tokio::time::timeout(timeouts.connect, sender.ready()).await {
            return Some(sender);
        }
    }
    None
}

/// The request head as it goes upstream: the target as received (after `rewrite`), hop-by-hop fields removed,
/// `X-Forwarded-*` added.
struct Head {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
}

fn upstream_head(req: &RequestInfo, upgrading: bool) -> Head {
    let mut headers = req.headers.clone();
    headers::strip_hop_by_hop(&mut headers, upgrading);
    let host = req.headers.get(header::HOST).cloned();
    headers::add_forwarded(&mut headers, req.remote, req.scheme, host);
    if !headers.contains_key(header::HOST) {
        headers.insert(header::HOST, HeaderValue::from_static("localhost"));
    }
    Head {
        method: req.method.clone(),
        uri: req
            .request_uri
            .parse()
            .unwrap_or_else(|_| Uri::from_static("/")),
        headers,
    }
}

fn build(head: &Head, body: Body) -> Request<Body> {
    let mut req = Request::new(body);
    *req.method_mut() = head.method.clone();
    *req.uri_mut() = head.uri.clone();
    *req.version_mut() = Version::HTTP_11;
    *req.headers_mut() = head.headers.clone();
    req
}

fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// Small answers to requests that could be sent again are read whole before the client sees anything, so a
/// server that dies in the middle of one costs a retry rather than a truncated response.
const BUFFERED: u64 = 64 * 1024;

fn is_small(response: &Response<Incoming>) -> bool {
    http_body::Body::size_hint(response.body())
        .exact()
        .is_some_and(|n| n <= BUFFERED)
}

async fn buffered(upstream: &Upstream, sent: Sent) -> Result<Response<Body>, ProxyError> {
    let Sent {
        response,
        sender,
        slot,
    } = sent;
    let (mut parts, incoming) = response.into_parts();
    let server = slot.server.addr.to_string();
    let read = upstream.conf.timeouts.read;
    let bytes = match tokio::time::timeout(read, http_body_util::BodyExt::collect(incoming)).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(source)) => return Err(ProxyError::Broken { server, source }),
        Err(_) => {
            return Err(ProxyError::Timeout {
                server,
                secs: read.as_secs_f64(),
            });
        }
    };
    slot.server.pool.put(sender);
    slot.record(true);
    drop(slot);
    headers::strip_hop_by_hop(&mut parts.headers, false);
    Ok(Response::from_parts(parts, rbody::full(bytes)))
}

/// The server's answer as it goes to the client: hop-by-hop fields removed, the body streamed back, or, for a
/// `101 Switching Protocols`, a tunnel between the two upgraded connections.
fn respond(
    upstream: &Arc<Upstream>,
    sent: Sent,
    upgrading: bool,
    client: Option<OnUpgrade>,
) -> Response<Body> {
    let Sent {
        mut response,
        sender,
        slot,
    } = sent;
    let switching = upgrading && response.status() == StatusCode::SWITCHING_PROTOCOLS;
    headers::strip_hop_by_hop(response.headers_mut(), switching);
    if switching && let Some(client) = client {
        let server = hyper::upgrade::on(&mut response);
        slot.record(true);
        tokio::spawn(tunnel(client, server, slot));
        drop(sender);
        let (parts, _) = response.into_parts();
        return Response::from_parts(parts, rbody::empty());
    }
    let (parts, incoming) = response.into_parts();
    let download = Download::new(incoming, sender, upstream.conf.timeouts.read, slot);
    Response::from_parts(parts, Body::new(download))
}

/// Copies bytes both ways between the client and the server after an upgrade, until either side closes.
async fn tunnel(client: OnUpgrade, server: OnUpgrade, slot: Slot) {
    let (client, server) = tokio::join!(client, server);
    match (client, server) {
        (Ok(client), Ok(server)) => {
            let (mut c, mut s) = (TokioIo::new(client), TokioIo::new(server));
            if let Err(e) = tokio::io::copy_bidirectional(&mut c, &mut s).await {
                tracing::debug!(server = %slot.server.addr, error = %e, "upgraded connection ended");
            }
        }
        (c, s) => tracing::debug!(
            client_ok = c.is_ok(),
            server_ok = s.is_ok(),
            "upgrade failed"
        ),
    }
    drop(slot);
}

/// The client's address for `ip_hash`, from the request.
pub fn client_ip(remote: Option<SocketAddr>) -> Option<std::net::IpAddr> {
    remote.map(|r| r.ip().to_canonical())
}
