//! The FastCGI transport: a request handed to a FastCGI server (PHP-FPM, rein's Python adapter) as CGI
//! parameters and a STDIN stream, and its answer streamed back. Balancing, health, the wait for a server and
//! the retries are the HTTP proxy's ([`super::retry`]); idle connections wait in the server's FastCGI pool.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_util::{FutureExt, StreamExt};
use http::Response;
use http_body::Frame;
use http_body_util::{BodyExt, BodyStream, StreamBody};

use super::conns::ServerConns;
use super::pool::Pooled;
use super::retry::{self, Failed};
use super::{
    Gathered, Held, Outgoing, ProxyError, broken, client_ip, is_idempotent, send_failed, upload,
};
use crate::body::{self as rbody, Body};
use crate::fastcgi::{self, Conn, Params, ResponseBody, Script};
use crate::upstream::{ServerState, Slot, Upstream};

impl Pooled for Conn {
    fn is_closed(&mut self) -> bool {
        !self.check_open()
    }

    /// Put back right after its END_REQUEST: checking it now (a `recv` that finds nothing) would only repeat
    /// the check made when it is next taken.
    fn worth_keeping(&mut self) -> bool {
        true
    }

    fn home(&self) -> Option<usize> {
        Some(self.worker())
    }
}

/// Runs `script` for the request on a server of `upstream`, and returns its answer (or the mapped error).
pub async fn forward(
    upstream: &Arc<Upstream>,
    out: Outgoing<'_>,
    script: &Script,
) -> Response<Body> {
    let result = try_forward(upstream, out, script).await;
    upstream.count(result.is_ok());
    match result {
        Ok(response) => response,
        Err(e) => e.into_response(&upstream.name),
    }
}

async fn try_forward(
    upstream: &Arc<Upstream>,
    out: Outgoing<'_>,
    script: &Script,
) -> Result<Response<Body>, ProxyError> {
    let req = out.request;
    let length = req
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let params = fastcgi::request_params(req, script, length);
    let (body, watch) = upload(out.body, out.max_body_size, out.state);
    let plan = retry::Plan {
        client: client_ip(req.remote),
        replayable: body.is_none() && is_idempotent(&req.method),
        body,
        upload: watch.as_deref(),
    };
    let (params, replayable) = (&params, plan.replayable);
    retry::run(upstream, plan, |slot, body| async move {
        let (response, slot) = attempt(upstream, slot, params, body, replayable).await?;
        if !replayable {
            return Ok(response.map(|answer| Body::new(Held::new(answer, slot))));
        }
        buffer_start(response, slot).await
    })
    .await
}

/// Small answers to requests that could be sent again are read whole before the client sees anything (up
/// to this many bytes), so a script whose worker dies in the middle of one costs a retry rather than a
/// truncated response; a longer answer streams on after its first part.
const BUFFERED: usize = 64 * 1024;

/// An answer whose next part is this long in coming is streaming (server-sent events, a page flushed in
/// parts): what came so far goes to the client at once, and the rest as it comes. Holding it back would
/// keep a stream of small events from the client until 64 KiB of them had gathered.
const PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

async fn buffer_start(
    response: Response<ResponseBody>,
    slot: Slot,
) -> Result<Response<Body>, Failed> {
    let (parts, mut answer) = response.into_parts();
    let mut start = Gathered::default();
    while start.len() <= BUFFERED {
        // The timer is armed only when the next part is not there yet: most answers come in one read.
        let next = match answer.frame().now_or_never() {
            Some(next) => next,
            None => match tokio::time::timeout(PAUSE, answer.frame()).await {
                Ok(next) => next,
                Err(_) => break,
            },
        };
        match next {
            None => {
                slot.record(true);
                return Ok(Response::from_parts(parts, rbody::full(start.into_bytes())));
            }
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    start.push(data);
                }
            }
            Some(Err(e)) => return Err(Failed::sent(broken(&slot, e))),
        }
    }
    let start = start.into_bytes();
    let rest = Held::new(answer, slot);
    let body = StreamBody::new(
        futures_util::stream::once(async move { Ok(Frame::data(start)) })
            .chain(BodyStream::new(rest)),
    );
    Ok(Response::from_parts(parts, Body::new(body)))
}

/// One try on one server: a pooled connection if one is idle, else a new one. The answer's head, and the
/// slot still held on its server.
async fn attempt(
    upstream: &Upstream,
    slot: Slot,
    params: &Params,
    body: Option<Body>,
    replayable: bool,
) -> Result<(Response<ResponseBody>, Slot), Failed> {
    if slot.pipelining > 0 {
        let req = pipelined::Request {
            params,
            body,
            replayable,
        };
        return pipelined::attempt(upstream, slot, req).await;
    }
    let server = slot.server.clone();
    let timeouts = upstream.conf.timeouts;
    // A server given `max_connections` is taken at its word: it serves that many connections at once (set to
    // PHP-FPM's `pm.max_children`), and rein never has more open, so every connection may be kept.
    let conns = ServerConns::of(&server);
    let serves_all = conns.fcgi_serves_all || slot.limit.is_some();
    let pooled = conns
        .fcgi
        .take(timeouts.idle)
        .and_then(|c| c.into_this_worker().ok());
    let (conn, waiting) = match pooled {
        Some(conn) => (conn, None),
        None => {
            // Counted from before the dial, so that no connection finishing meanwhile goes idle in the pool.
            let waiting = Waiting::new(&server);
            match fastcgi::connect(&server.addr, timeouts.connect).await {
                Ok(conn) => {
                    server.opened();
                    // Idle connections hold workers that this new one may be queued behind: let them go.
                    if !serves_all {
                        conns.fcgi.clear();
                    }
                    (conn, Some(waiting))
                }
                Err(source) => {
                    return Err(Failed::connect(
                        &server.addr,
                        timeouts.connect,
                        source,
                        body,
                    ));
                }
            }
        }
    };
    let reused = waiting.is_none();
    let sent = conn
        .send_within(params, body, timeouts.read, timeouts.send)
        .await;
    drop(waiting);
    match sent {
        Ok(response) => Ok((pool_after(response, &server, serves_all), slot)),
        Err(e) => Err(send_failed(&slot, e, reused)),
    }
}

/// The answer, its connection put back in the server's pool when the exchange ends cleanly.
fn pool_after(
    mut response: Response<ResponseBody>,
    server: &Arc<ServerState>,
    serves_all: bool,
) -> Response<ResponseBody> {
    super::headers::strip_hop_by_hop(response.headers_mut(), false);
    let pool = server.clone();
    response.body_mut().on_reuse(move |conn: Conn| {
        // A request waiting on a new connection may be queued behind this one's worker (PHP-FPM
        // workers stay with a kept-alive connection until it closes): closing frees the worker.
        let conns = ServerConns::of(&pool);
        if serves_all || conns.fcgi_waiting.load(Ordering::Relaxed) == 0 {
            let worker = conn.worker();
            conns.fcgi.put(conn);
            conns.seats_of(worker).freed();
        }
    });
    response
}

mod pipelined;

/// Counts a request waiting for its answer on a connection it is opening or just opened, which the server
/// may not have accepted yet: PHP-FPM's workers stay with a kept-alive connection until it closes, so while
/// one waits, finished connections are closed rather than pooled, and the idle ones are let go (unless the
/// server serves all its connections at once: `ServerConns::fcgi_serves_all`).
struct Waiting(Arc<ServerState>);

impl Waiting {
    fn new(server: &Arc<ServerState>) -> Self {
        ServerConns::of(server)
            .fcgi_waiting
            .fetch_add(1, Ordering::Relaxed);
        Waiting(server.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        ServerConns::of(&self.0)
            .fcgi_waiting
            .fetch_sub(1, Ordering::Relaxed);
    }
}
