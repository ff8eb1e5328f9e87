//! One try on a server whose FastCGI connections pipeline ([`crate::fastcgi::pipeline`]): at most
//! `max_connections` connections, each taking one request queued behind the one in progress.
//!
//! The upstream gives such a server twice as many slots as connections. A request holding one takes, in this
//! order, an idle connection, a new one while fewer than `max_connections` are open, or a seat behind a busy
//! one. A request that cannot ride (it has a body, or a method not to be sent twice) needs a connection of
//! its own: while one waits, no seat is offered, so that connections come back free.

use std::sync::Arc;

use bytes::BytesMut;
use http::Response;

use super::{Failed, pool_after};
use crate::body::Body;
use crate::fastcgi::pipeline::Ride;
use crate::fastcgi::{self, Conn, Params, ResponseBody};
use crate::proxy::conns::ServerConns;
use crate::proxy::{ProxyError, broken, send_failed};
use crate::upstream::{Slot, Upstream};

/// What the request needs to know to ride.
pub(super) struct Request<'a> {
    pub params: &'a Params,
    pub body: Option<Body>,
    /// It may be sent again (idempotent, no body): it may ride, since a connection that dies with it queued
    /// may or may not have started it.
    pub replayable: bool,
}

pub(super) async fn attempt(
    upstream: &Upstream,
    slot: Slot,
    req: Request<'_>,
) -> Result<(Response<ResponseBody>, Slot), Failed> {
    let Request {
        params,
        body,
        replayable,
    } = req;
    let server = slot.server.clone();
    let timeouts = upstream.conf.timeouts;
    let max = slot.limit.unwrap_or(1);
    let conns = ServerConns::of(&server);
    let seats = conns.seats();
    let mut deadline = None;
    let mut records: Option<BytesMut> = None;
    let mut waiting_alone = None;
    let mut waiting = None;
    loop {
        // Made before looking, so that a seat or connection coming free in between is not missed: `Seats`
        // tells with `notify_waiters`, which reaches a `Notified` from its creation (no `enable`, which would
        // take the notifier's lock for every request, most of which find a connection or a seat at once).
        let changed = seats.changed();
        tokio::pin!(changed);
        let idle = conns.fcgi.take(timeouts.idle);
        if let Some(conn) = idle.and_then(|c| c.into_this_worker().ok()) {
            return send(conn, true, slot, params, body, upstream).await;
        }
        if let Some(counted) = seats.reserve(max, slot.pipelining) {
            let conn = match fastcgi::connect(&server.addr, timeouts.connect).await {
                Ok(conn) => conn.counted(counted),
                Err(source) => {
                    return Err(Failed::connect(
                        &server.addr,
                        timeouts.connect,
                        source,
                        body,
                    ));
                }
            };
            server.opened();
            return send(conn, false, slot, params, body, upstream).await;
        }
        if replayable && body.is_none() {
            let request = records
                .take()
                .unwrap_or_else(|| fastcgi::encode_bodiless(params));
            match seats.ride(request) {
                Ok(ride) => return ride_on(ride, slot, upstream).await,
                Err(request) => records = Some(request),
            }
        } else if waiting_alone.is_none() {
            waiting_alone = Some(seats.waiting_alone());
        }
        if waiting.is_none() {
            // Counted now, then one more look: whatever frees up from here on wakes this request.
            waiting = Some(seats.waiting());
            continue;
        }
        let deadline = *deadline
            .get_or_insert_with(|| tokio::time::Instant::now() + upstream.conf.queue_timeout);
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            return Err(Failed {
                error: ProxyError::Timeout {
                    server: server.addr.to_string(),
                    reason: "no connection came free within queue_timeout".into(),
                },
                unsent: body,
                stale: false,
                reached: false,
            });
        }
    }
}

async fn send(
    conn: Conn,
    reused: bool,
    slot: Slot,
    params: &Params,
    body: Option<Body>,
    upstream: &Upstream,
) -> Result<(Response<ResponseBody>, Slot), Failed> {
    let timeouts = upstream.conf.timeouts;
    match conn
        .send_within(params, body, timeouts.read, timeouts.send)
        .await
    {
        Ok(response) => Ok((pool_after(response, &slot.server, true), slot)),
        Err(e) => Err(send_failed(&slot, e, reused)),
    }
}

/// Waits in a seat for the connection, then reads the answer. The wait is bounded by the read timeout:
/// the exchange ahead may be streaming a long answer to a slow client.
async fn ride_on(
    mut ride: Ride,
    slot: Slot,
    upstream: &Upstream,
) -> Result<(Response<ResponseBody>, Slot), Failed> {
    let timeouts = upstream.conf.timeouts;
    let server: Arc<_> = slot.server.clone();
    match tokio::time::timeout(timeouts.read, &mut ride.handover).await {
        Ok(Ok(handover)) => match Conn::resume(handover, timeouts.read, timeouts.send).await {
            Ok(response) => Ok((pool_after(response, &server, true), slot)),
            // Nothing came back: the worker went away between two requests (PHP-FPM's max_requests).
            Err(e) => Err(send_failed(&slot, e, true)),
        },
        // The exchange ahead failed, or its client left: not this server's fault, and the request, queued
        // behind, may or may not have been started.
        Ok(Err(_)) => Err(Failed {
            error: broken(&slot, fastcgi::Error::AheadFailed),
            unsent: None,
            stale: true,
            reached: true,
        }),
        // Not the server's failure (the request ahead is still going): tried again without counting.
        Err(_) => {
            let untouched = ride.cancel().is_some();
            Err(Failed {
                error: ProxyError::Timeout {
                    server: server.addr.to_string(),
                    reason: "the answer ahead of this request on its connection took too long"
                        .into(),
                },
                unsent: None,
                stale: true,
                reached: !untouched,
            })
        }
    }
}
