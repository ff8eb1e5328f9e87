//! The reverse proxy: a request forwarded to a server of an upstream, with retries ([`retry`]), and its answer
//! streamed back. HTTP is the transport here; [`fastcgi`] is the other one, sharing the retry loop, the
//! upstreams and their health.

mod body;
pub(crate) mod conns;
mod error;
pub mod fastcgi;
pub mod headers;
mod pool;
pub(crate) mod retry;
#[cfg(test)]
mod retry_tests;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::FutureExt;
use http::{Method, Response, StatusCode};

use crate::body::{self as rbody, Body};
use crate::http1::{self, Fields, HeadWriter, RequestHead, ResponseBody, Upgraded};
use crate::link::{ExchangeError, SendError};
use crate::request::RequestInfo;
use crate::server::{ClientUpgrade, ConnState};
use crate::upstream::{ServerState, Slot, Upstream};
pub(crate) use body::{Gathered, Held};
use body::{Upload, UploadWatch};
use conns::ServerConns;
pub use error::ProxyError;
use retry::Failed;

/// What the proxy needs from the request and its connection.
pub struct Outgoing<'a> {
    pub request: &'a RequestInfo,
    pub body: Option<crate::server::RequestBody>,
    pub upgrade: Option<ClientUpgrade>,
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
    let (body, upload) = upload(out.body, out.max_body_size, out.state);
    let uploading = body.is_some();
    let mut heads = Heads::new(req, upgrading, uploading);
    let replayable = body.is_none() && is_idempotent(&req.method);
    let plan = retry::Plan {
        client: client_ip(req.remote),
        body,
        replayable,
        upload: upload.as_deref(),
    };
    let buffer = replayable && !upgrading;
    // Taken by the attempt that gets the answer.
    let client_upgrade = std::sync::Mutex::new(out.upgrade);
    let client_upgrade = &client_upgrade;
    retry::run(upstream, plan, |slot, body| {
        let head = heads.for_server(&slot.server);
        async move {
            let (response, slot) = attempt_one(upstream, slot, &head, body).await?;
            if buffer && is_small(&response) {
                return buffered(response, slot).await.map_err(Failed::sent);
            }
            let client = client_upgrade.lock().ok().and_then(|mut u| u.take());
            respond(response, slot, upgrading, client, uploading).map_err(Failed::sent)
        }
    })
    .await
}

/// The request head as it goes upstream, encoded once for every attempt, and again only for a server that
/// needs another `Host` than the last one (a TLS server is sent its own name).
struct Heads<'r> {
    req: &'r RequestInfo,
    upgrading: bool,
    body: bool,
    /// The last head encoded, and the `Host` it was encoded with (`None`: the client's).
    last: Option<(Option<String>, RequestHead)>,
}

impl<'r> Heads<'r> {
    fn new(req: &'r RequestInfo, upgrading: bool, body: bool) -> Self {
        Heads {
            req,
            upgrading,
            body,
            last: None,
        }
    }

    fn for_server(&mut self, server: &ServerState) -> RequestHead {
        let host = server.host();
        match &self.last {
            Some((encoded, head)) if encoded.as_deref() == host => head.clone(),
            _ => {
                let head = upstream_head(self.req, self.upgrading, self.body, host);
                self.last = Some((host.map(str::to_owned), head.clone()));
                head
            }
        }
    }
}

/// The client's body on its way upstream, and what the proxy can see of it; `None` for an empty body.
pub(crate) fn upload(
    body: Option<crate::server::RequestBody>,
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

/// One try on one server: a pooled connection if one is idle, else a new one. The answer's head, its body
/// to come, and the slot still held on the server; the connection goes back to the pool when the body ends
/// cleanly.
async fn attempt_one(
    upstream: &Upstream,
    slot: Slot,
    head: &RequestHead,
    body: Option<Body>,
) -> Result<(Response<ResponseBody>, Slot), Failed> {
    let server = slot.server.clone();
    let timeouts = upstream.conf.timeouts;
    let (conn, reused) = match ServerConns::of(&server).http.take(timeouts.idle) {
        Some(conn) => (conn, true),
        None => match http1::connect(&server.addr, server.tls.as_ref(), timeouts.connect).await {
            Ok(conn) => {
                server.opened();
                (conn, false)
            }
            Err(source) => {
                return Err(Failed::connect(
                    &server.addr,
                    timeouts.connect,
                    source,
                    body,
                ));
            }
        },
    };
    match conn
        .send_within(head, body, timeouts.read, timeouts.send)
        .await
    {
        Ok(mut response) => {
            let pool = server.clone();
            response
                .body_mut()
                .on_reuse(move |conn| ServerConns::of(&pool).http.put(conn));
            Ok((response, slot))
        }
        Err(e) => Err(send_failed(&slot, e, reused)),
    }
}

/// A failed send, for either transport. On a reused keep-alive connection that the server had already closed
/// (`stale`), the request never reached the server.
pub(crate) fn send_failed<E: ExchangeError>(slot: &Slot, e: SendError<E>, reused: bool) -> Failed {
    let stale = reused && e.stale;
    Failed {
        error: broken(slot, e.error),
        stale,
        unsent: e.unsent,
        reached: !stale,
    }
}

/// A failed exchange as the proxy reports it, for either transport: a timeout (504) or a broken exchange
/// (502).
pub(crate) fn broken<E: ExchangeError>(slot: &Slot, error: E) -> ProxyError {
    let server = slot.server.addr.to_string();
    match error.is_timeout() {
        // The error says which timeout it was (read or send) and how long.
        true => ProxyError::Timeout {
            server,
            reason: error.to_string(),
        },
        false => ProxyError::Broken {
            server,
            source: Box::new(error),
        },
    }
}

/// The request head as it goes upstream: the target as received (after `rewrite`), the fields as
/// [`headers::write_upstream_fields`] writes them, with `host` for `Host` if given.
fn upstream_head(
    req: &RequestInfo,
    upgrading: bool,
    body: bool,
    host: Option<&str>,
) -> RequestHead {
    let fields: usize = req
        .headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum();
    let mut head = HeadWriter::new(&req.method, req.target(), fields + 96);
    headers::write_upstream_fields(
        &mut head,
        &req.headers,
        req.remote,
        req.scheme,
        upgrading,
        host,
    );
    head.finish(body, upgrading)
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

fn is_small(response: &Response<ResponseBody>) -> bool {
    http_body::Body::size_hint(response.body())
        .exact()
        .is_some_and(|n| n <= BUFFERED)
}

async fn buffered(
    response: Response<ResponseBody>,
    slot: Slot,
) -> Result<Response<Body>, ProxyError> {
    let (mut parts, answer) = response.into_parts();
    let bytes = match read_whole(answer).await {
        Ok(bytes) => bytes,
        Err(e) => return Err(broken(&slot, e)),
    };
    slot.record(true);
    drop(slot);
    strip_hop_by_hop(&mut parts, false);
    Ok(Response::from_parts(parts, rbody::full(bytes)))
}

/// All of a body (`collect` keeps a list of pieces, whose cost showed in every proxied request).
async fn read_whole<B: http_body::Body<Data = Bytes> + Unpin>(
    mut body: B,
) -> Result<Bytes, B::Error> {
    let mut whole = Gathered::default();
    while let Some(frame) = http_body_util::BodyExt::frame(&mut body).await {
        if let Ok(data) = frame?.into_data() {
            whole.push(data);
        }
    }
    Ok(whole.into_bytes())
}

/// The server's answer as it goes to the client: hop-by-hop fields removed, the body streamed back, or, for a
/// `101 Switching Protocols`, a tunnel between the two upgraded connections.
///
/// A body already known to be broken when the head arrives (an invalid first chunk in the same read) is a
/// 502, as in Unit, rather than a head whose body is cut at once. The body is only looked at, not waited
/// for: a server that streams (events, a long poll) has its head sent on at once. Not while the request's
/// body may still be going up (`uploading`): the same exchange drives both, and a look that cannot wait
/// must not be what polls the upload.
fn respond(
    response: Response<ResponseBody>,
    slot: Slot,
    upgrading: bool,
    client: Option<ClientUpgrade>,
    uploading: bool,
) -> Result<Response<Body>, ProxyError> {
    let (mut parts, mut answer) = response.into_parts();
    let switching = upgrading && parts.status == StatusCode::SWITCHING_PROTOCOLS;
    strip_hop_by_hop(&mut parts, switching);
    if switching && let (Some(client), Some(server)) = (client, answer.take_upgraded()) {
        slot.record(true);
        tokio::spawn(tunnel(client, server, slot));
        return Ok(Response::from_parts(parts, rbody::empty()));
    }
    let peek = (!uploading).then(|| http_body_util::BodyExt::frame(&mut answer).now_or_never());
    let first = match peek.flatten() {
        Some(Some(Err(e))) => return Err(broken(&slot, e)),
        Some(Some(Ok(frame))) => Some(frame),
        Some(None) | None => None,
    };
    let held = Held::new(body::Prefixed::new(first, answer), slot);
    Ok(Response::from_parts(parts, Body::new(held)))
}

/// Drops the answer's hop-by-hop fields, passed on as bytes; a switch of protocols keeps the upgrade pair,
/// in a header map (rare enough not to matter).
fn strip_hop_by_hop(parts: &mut http::response::Parts, switching: bool) {
    if switching && let Some(fields) = parts.extensions.remove::<Fields>() {
        parts.headers = fields.to_header_map();
        headers::strip_hop_by_hop(&mut parts.headers, true);
    } else if let Some(fields) = parts.extensions.get_mut::<Fields>() {
        headers::drop_hop_by_hop(fields);
    }
}

/// Copies bytes both ways between the client and the server after an upgrade, until either side closes.
async fn tunnel(client: ClientUpgrade, mut server: Upgraded, slot: Slot) {
    match client.connection().await {
        Ok(mut client) => {
            if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut server).await {
                tracing::debug!(server = %slot.server.addr, error = %e, "upgraded connection ended");
            }
        }
        Err(e) => tracing::debug!(error = %e, "client upgrade failed"),
    }
    drop(slot);
}

/// The client's address for `ip_hash`, from the request.
pub fn client_ip(remote: Option<SocketAddr>) -> Option<std::net::IpAddr> {
    remote.map(|r| r.ip().to_canonical())
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body::Frame;
    use http_body_util::StreamBody;

    use super::*;

    async fn whole(pieces: &[&'static str]) -> Bytes {
        let frames = pieces
            .iter()
            .map(|p| Ok::<_, Infallible>(Frame::data(Bytes::from_static(p.as_bytes()))));
        let body = StreamBody::new(futures_util::stream::iter(frames.collect::<Vec<_>>()));
        read_whole(body).await.unwrap()
    }

    #[tokio::test]
    async fn a_body_is_read_whole_in_one_piece_or_many() {
        assert_eq!(whole(&[]).await, "");
        assert_eq!(whole(&["hello"]).await, "hello");
        assert_eq!(whole(&["", "he", "", "llo", " world"]).await, "hello world");
    }
}
