//! The life of one request: checks, routing to an action, and the finishing touches on the response.
//!
//! The snapshot is loaded once at the start and held to the end, so a configuration change never alters a
//! request in flight.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::{HeaderValue, Request, Response, StatusCode, header};

use super::ClientUpgrade;
use super::conn::ConnInfo;
use super::request_body::{BodyClock, ClientBody, RequestBody};
use super::tracked::{Books, Meter, Tracked};
use super::validate;
use super::{Published, Shared, actions};
use crate::body::Body;
use crate::request::RequestInfo;
use crate::stats::counters::TargetStats;

pub async fn handle(
    req: Request<ClientBody>,
    info: Arc<ConnInfo>,
    shared: Arc<Shared>,
) -> Response<Body> {
    // `$request_time` counts from the head's first byte, as Unit's does: a client slow to send its head
    // is part of it.
    let started = info.state.take_head_started().unwrap_or_else(Instant::now);
    let wall = SystemTime::now();
    let books = Books::open(&info.state, &shared);
    let published = info.published(&shared);
    let (mut parts, body) = req.into_parts();
    let checked = validate::check(&parts).and_then(|()| {
        let limit = published.snapshot.settings.large_header_buffer_size;
        match validate::oversized_field(&parts.headers, limit) {
            true => Err((
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "a header field longer than large_header_buffer_size",
            )),
            false => Ok(()),
        }
    });
    let (mut request, target_error) =
        RequestInfo::from_parts(&mut parts, info.scheme, info.remote, info.local);
    let (response, target) = match (checked, target_error) {
        (Err((status, why)), _) => {
            tracing::debug!(%status, why, "rejected request");
            (closing(actions::error(status)), None)
        }
        (Ok(()), Some(e)) => {
            tracing::debug!(error = %e, "rejected request target");
            (closing(actions::error(StatusCode::BAD_REQUEST)), None)
        }
        (Ok(()), None) => {
            let upgrade = ClientUpgrade::take(&mut parts.extensions);
            route(&published, &mut request, body, upgrade, &info, &shared).await
        }
    };
    let meter = Meter {
        conn: info,
        target,
        status: response.status().as_u16(),
        started,
    };
    finish(response, request, &published, (books, meter), wall)
}

async fn route(
    published: &Published,
    request: &mut RequestInfo,
    body: ClientBody,
    upgrade: Option<ClientUpgrade>,
    info: &Arc<ConnInfo>,
    shared: &Shared,
) -> (Response<Body>, Option<Arc<TargetStats>>) {
    // The CA validating an ACME certificate asks over plain HTTP, whatever the routes say.
    if request.scheme == "http"
        && let Some(answer) = shared.acme.answer(request)
    {
        return (answer, None);
    }
    let settings = &published.snapshot.settings;
    if settings.discard_unsafe_fields {
        validate::discard_unsafe_fields(&mut request.headers);
    }
    if declared_length(request).is_some_and(|n| n > settings.max_body_size) {
        return (closing(actions::error(StatusCode::PAYLOAD_TOO_LARGE)), None);
    }
    let Some(listener) = published.snapshot.listeners.get(&info.listener) else {
        // The listener was removed while this connection was open: it is draining.
        return (
            closing(actions::error(StatusCode::SERVICE_UNAVAILABLE)),
            None,
        );
    };
    if let Some(forwarded) = &listener.forwarded {
        forwarded.apply(request);
    }
    let clock = BodyClock {
        between_reads: info.multiplexed.then_some(settings.body_read_timeout),
        min_rate: settings.body_min_rate,
        grace: settings.body_read_timeout,
    };
    let mut ctx = actions::Ctx {
        published,
        request,
        body: Some(RequestBody::new(body, clock, info.clone())),
        upgrade,
        state: &info.state,
        shared,
        target: None,
    };
    let response = ctx.run(&listener.pass).await;
    (response, ctx.target)
}

fn declared_length(request: &RequestInfo) -> Option<u64> {
    request
        .headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// Asks the connection to close after this response.
fn closing(mut response: Response<Body>) -> Response<Body> {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

const SERVER: &str = concat!("rein/", env!("CARGO_PKG_VERSION"));

/// The `Server` field of rein's answers: with the version unless `settings.http.server_version` is off.
pub(super) fn server_field(published: &Published) -> HeaderValue {
    HeaderValue::from_static(if published.snapshot.settings.server_version {
        SERVER
    } else {
        "rein"
    })
}

fn finish(
    mut response: Response<Body>,
    request: RequestInfo,
    published: &Arc<Published>,
    (books, meter): (Books, Meter),
    wall: SystemTime,
) -> Response<Body> {
    response
        .headers_mut()
        .insert(header::SERVER, server_field(published));
    let has_connection = {
        let fields = super::passed::View::of(response.headers(), response.extensions());
        fields.contains(&header::CONNECTION)
    };
    if closes_after(&request) && !has_connection {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    let log = published
        .access_log
        .clone()
        .map(|sink| super::tracked::LogEntry {
            headers: logged_headers(&response, &request),
            sink,
            published: published.clone(),
            request,
            status: response.status().as_u16(),
            started: meter.started,
            wall,
        });
    let (parts, body) = response.into_parts();
    let body = Tracked::new(body, books, meter, log);
    Response::from_parts(parts, Body::new(body))
}

/// An HTTP/1.1 request that says `Connection: close`: its answer says `close` too, as Unit's does (RFC 9112
/// §9.6). Unit sends no `Connection` to HTTP/1.0 clients, which close unless they asked otherwise.
fn closes_after(request: &RequestInfo) -> bool {
    request.version == http::Version::HTTP_11
        && request
            .headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("close"))
}

/// The response's fields as they go on the wire, those the connection adds included, for `$response_header_*`.
fn logged_headers(response: &Response<Body>, request: &RequestInfo) -> http::HeaderMap {
    use http_body::Body as _;
    let mut headers = super::passed::merged(response);
    let framing = super::wire_headers::Framing {
        method: &request.method,
        version: request.version,
        status: response.status(),
        length: response.body().size_hint().exact(),
    };
    super::wire_headers::add(&mut headers, None, &framing);
    headers
}
