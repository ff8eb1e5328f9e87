//! The dashboard's paths: the page and its assets, the live stream of readings, and the API calls the page
//! makes, each passed to the control API (or, for an application's log, read from the state directory).
//!
//! | path | what |
//! |---|---|
//! | `GET /?token=T` | spends the one-time link: a session cookie, then the page |
//! | `GET /`, `/dashboard.js`, `/dashboard.css` | the page (in the binary) |
//! | `GET /events` | server-sent events: one `/status` reading per interval |
//! | `GET /api/status`, `/api/config`, `/api/history[/…]` | the control API's answer |
//! | `GET /api/logs/NAME` | the end of application NAME's log |
//! | `POST /api/reload/NAME` | a rolling reload of NAME (`/control/applications/NAME/restart`) |
//! | `POST /api/restart/NAME/ID` | instance ID of NAME replaced (`/control/applications/NAME/instances/ID/restart`) |
//! | `POST /api/rollback/ID` | the configuration rolled back to history entry ID |

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{Value, json};

use super::Dashboard;
use super::session::Refusal;
use crate::body::{self, Body};
use crate::cli::client;

const PAGE: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/dashboard.js");
const STYLE: &str = include_str!("assets/dashboard.css");

pub(super) async fn answer(d: &Dashboard, req: Request<Incoming>) -> Response<Body> {
    let mut r = route(d, &req).await;
    secure(r.headers_mut());
    r
}

async fn route(d: &Dashboard, req: &Request<Incoming>) -> Response<Body> {
    let path = req.uri().path();
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok());
    if path == "/"
        && let Some(token) = query_token(req.uri().query())
    {
        return redeem(d, host, token);
    }
    if let Err(refusal) = authorize(d, req) {
        return refused(refusal);
    }
    match (req.method(), path) {
        (&Method::GET, "/") => asset(PAGE, "text/html; charset=utf-8"),
        (&Method::GET, "/dashboard.js") => asset(SCRIPT, "text/javascript; charset=utf-8"),
        (&Method::GET, "/dashboard.css") => asset(STYLE, "text/css; charset=utf-8"),
        (&Method::GET, "/events") => events(d),
        (&Method::GET, p) if p.starts_with("/api/logs/") => logs(d, &p["/api/logs/".len()..]),
        (&Method::GET, "/api/status" | "/api/config") => forward(d, Method::GET, &path[4..]).await,
        (&Method::GET, p) if p == "/api/history" || p.starts_with("/api/history/") => {
            forward(d, Method::GET, &p[4..]).await
        }
        (&Method::POST, p) if p.starts_with("/api/reload/") => {
            let name = &p["/api/reload/".len()..];
            let api = format!("/control/applications/{name}/restart");
            forward(d, Method::GET, &api).await
        }
        (&Method::POST, p) if p.starts_with("/api/restart/") => {
            // `/api/restart/NAME/ID`: one instance replaced.
            match p["/api/restart/".len()..].split_once('/') {
                Some((name, id)) => {
                    let api = format!("/control/applications/{name}/instances/{id}/restart");
                    forward(d, Method::GET, &api).await
                }
                None => json_answer(StatusCode::NOT_FOUND, &json!({"error": "Invalid path."})),
            }
        }
        (&Method::POST, p) if p.starts_with("/api/rollback/") => {
            let id = &p["/api/rollback/".len()..];
            forward(d, Method::POST, &format!("/history/{id}/rollback")).await
        }
        _ => json_answer(StatusCode::NOT_FOUND, &json!({"error": "Invalid path."})),
    }
}

fn query_token(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|p| p.strip_prefix("token="))
}

/// The one-time link: a session for the first browser to open it, then the page without the token in its URL.
fn redeem(d: &Dashboard, host: Option<&str>, token: &str) -> Response<Body> {
    if !d.session.host_matches(host) {
        return refused(Refusal::Host);
    }
    let Some(cookie) = d.session.redeem(token) else {
        return refused(Refusal::Forbidden);
    };
    let mut r = Response::new(body::empty());
    *r.status_mut() = StatusCode::SEE_OTHER;
    let h = r.headers_mut();
    h.insert(header::LOCATION, HeaderValue::from_static("/"));
    if let Ok(v) = HeaderValue::try_from(cookie) {
        h.insert(header::SET_COOKIE, v);
    }
    r
}

fn authorize(d: &Dashboard, req: &Request<Incoming>) -> Result<(), Refusal> {
    let text = |name| {
        req.headers()
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let cookies: Vec<&str> = req
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let change = req.method() != Method::GET;
    d.session
        .check(text(header::HOST), &cookies, change, text(header::ORIGIN))
}

fn refused(refusal: Refusal) -> Response<Body> {
    let (status, text) = match refusal {
        Refusal::Host => (
            StatusCode::MISDIRECTED_REQUEST,
            "This dashboard answers only at the address `rein dashboard` printed.\n",
        ),
        Refusal::Forbidden => (
            StatusCode::FORBIDDEN,
            "Open the link `rein dashboard` printed (it works once): run `rein dashboard` again for a new one.\n",
        ),
    };
    let mut r = asset(text, "text/plain; charset=utf-8");
    *r.status_mut() = status;
    r
}

/// The page's stream: a `/status` reading at once and then one per interval, each an event whose data is
/// `{"at": MILLISECONDS, "status": {...}}`; an `error` event while the API does not answer. It ends when the
/// browser goes away (the next write fails).
fn events(d: &Dashboard) -> Response<Body> {
    let target = d.target.clone();
    let interval = d.interval;
    let readings = futures_util::stream::unfold(true, move |first| {
        let target = target.clone();
        async move {
            if !first {
                tokio::time::sleep(interval).await;
            }
            Some((reading(&target).await, false))
        }
    });
    let frames = readings.map(|event| Ok::<_, std::io::Error>(Frame::data(event)));
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(frames)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    r
}

async fn reading(target: &client::Target) -> Bytes {
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis();
    let status = match client::get(target, "/status").await {
        Ok((code, text)) if code.is_success() => match serde_json::from_str::<Value>(&text) {
            Ok(v) => v,
            Err(e) => return error_event(&format!("unreadable /status: {e}")),
        },
        Ok((code, _)) => return error_event(&format!("/status answered {code}")),
        Err(e) => return error_event(&e.to_string()),
    };
    // The metrics give the charts their status classes and latencies.
    let metrics = match client::get(target, "/metrics").await {
        Ok((code, text)) if code.is_success() => Value::String(text),
        _ => Value::Null,
    };
    let event = json!({"at": at, "status": status, "metrics": metrics});
    Bytes::from(format!("data: {event}\n\n"))
}

fn error_event(message: &str) -> Bytes {
    Bytes::from(format!(
        "event: error\ndata: {}\n\n",
        json!({"error": message})
    ))
}

fn logs(d: &Dashboard, name: &str) -> Response<Body> {
    // An application's name is one path segment; anything else would read another file.
    let name = percent_encoding::percent_decode_str(name).decode_utf8_lossy();
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return json_answer(StatusCode::NOT_FOUND, &json!({"error": "Invalid path."}));
    }
    let lines = super::super::tail::app_lines(&d.state, &name);
    json_answer(StatusCode::OK, &json!({"lines": lines}))
}

/// The control API's answer to `method path`, passed on as it is.
async fn forward(d: &Dashboard, method: Method, path: &str) -> Response<Body> {
    match client::call(&d.target, method, path).await {
        Ok((status, text)) => {
            let mut r = asset_owned(text, "application/json");
            *r.status_mut() = status;
            r
        }
        Err(e) => json_answer(StatusCode::BAD_GATEWAY, &json!({"error": e.to_string()})),
    }
}

fn json_answer(status: StatusCode, doc: &serde_json::Value) -> Response<Body> {
    let mut r = asset_owned(doc.to_string(), "application/json");
    *r.status_mut() = status;
    r
}

fn asset(text: &'static str, content_type: &'static str) -> Response<Body> {
    with_type(
        Response::new(body::full(Bytes::from_static(text.as_bytes()))),
        content_type,
    )
}

fn asset_owned(text: String, content_type: &'static str) -> Response<Body> {
    with_type(Response::new(body::full(text)), content_type)
}

fn with_type(mut r: Response<Body>, content_type: &'static str) -> Response<Body> {
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// Every answer: nothing cached, no framing by another page (its buttons change the server), no script or
/// style from anywhere else, no referrer (the first page's URL held the link's token).
fn secure(h: &mut http::HeaderMap) {
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'self'; frame-ancestors 'none'"),
    );
}
