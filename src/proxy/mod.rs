//! The reverse proxy: a request forwarded to a server of an upstream, with retries ([`retry`]), and its answer
//! streamed back. HTTP is the transport here; [`fastcgi`] is the other one, sharing the retry loop, the
//! upstreams and their health.

mod body;
mod error;
pub mod fastcgi;
pub mod headers;
pub(crate) mod retry;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri, Version, header};
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use crate::body::{self as rbody, Body};
use crate::request::RequestInfo;
use crate::server::ConnState;
use crate::upstream::{Sender, Slot, Upstream, connect};
use body::{Download, Upload, UploadWatch};
pub use error::ProxyError;
use retry::Failed;

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
    let req = out.request;
    let upgrading = headers::wants_upgrade(&req.headers);
    let head = upstream_head(req, upgrading);
    let (body, upload) = upload(out.body, out.max_body_size, out.state);
    let replayable = body.is_none() && is_idempotent(&req.method);
    let plan = retry::Plan {
        client: client_ip(req.remote),
        body,
        replayable,
        upload: upload.as_deref(),
    };
    let buffer = replayable && !upgrading;
    let (head, watch) = (&head, upload.as_deref());
    let got = retry::run(upstream, plan, |slot, body| async move {
        let outgoing = build(head, body.unwrap_or_else(rbody::empty));
        let sent = attempt_one(upstream, slot, outgoing, watch).await?;
        if buffer && is_small(&sent.response) {
            return buffered(upstream, sent)
                .await
                .map(Got::Whole)
                .map_err(Failed::sent);
        }
        Ok(Got::Streaming(sent))
    })
    .await?;
    Ok(match got {
        Got::Whole(response) => response,
        Got::Streaming(sent) => respond(upstream, sent, upgrading, out.upgrade),
    })
}

/// The client's body on its way upstream, and what the proxy can see of it; `None` for an empty body.
pub(crate) fn upload(
    body: Option<Incoming>,
    max_body_size: u64,
    state: &Arc<ConnState>,
) -> (Option<Body>, Option<Arc<UploadWatch>>) {
    match body {
        Some(b) if !http_body::Body::is_end_stream(&b) => {
            let (upload, watch) = Upload::new(b, max_body_size, state.clone());
            (Some(Body::new(upload)), Some(watch))
        }
        _ => (None, None),
    }
}

/// An answer from one attempt: read whole already, or to be streamed.
enum Got {
    Whole(Response<Body>),
    Streaming(Sent),
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
            Ok(s) => {
                server.opened();
                (s, false)
            }
            Err(source) => {
                return Err(Failed {
                    error: ProxyError::connect(&server.addr, timeouts.connect, source),
                    unsent: Some(req.into_body()),
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
            let unsent = e.take_message().map(Request::into_body);
            let stale = reused && unsent.is_some();
            let error = ProxyError::Broken {
                server: server.addr.to_string(),
                source: e.into_error().into(),
            };
            Err(Failed {
                error,
                unsent,
                stale,
            })
        }
        Err(_) => Err(Failed::sent(ProxyError::Timeout {
            server: server.addr.to_string(),
            secs: timeouts.read.as_secs_f64(),
        })),
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
    pool: &crate::upstream::Pool<Sender>,
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

pub(crate) fn is_idempotent(method: &Method) -> bool {
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
        Ok(Err(source)) => {
            return Err(ProxyError::Broken {
                server,
                source: source.into(),
            });
        }
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
