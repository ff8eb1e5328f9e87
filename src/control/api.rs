//! Control API requests: Unit's paths and answers, plus ETag/If-Match and dry runs.
//!
//! `GET|PUT|POST|DELETE /config[/path]` read and change the document, `GET /status[/path]` reads counters,
//! `GET /` both. Writes accept `If-Match` (412 when stale) and `?dry_run` (validate, apply nothing).

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use serde_json::{Value, json};

use super::conn::RequestBody as Incoming;
use super::routes::Call;
use crate::body::{self, Body};
use crate::config::pointer::{self, EditError};
use crate::engine::{ChangeError, ChangeOptions, Changed, Engine};
use crate::supervisor::Replaced;

/// The largest document the API takes in one request.
const MAX_DOCUMENT: usize = 16 * 1024 * 1024;

/// `GET /`: the document and the status together.
pub(super) async fn root(call: Call) -> Response<Body> {
    let engine = &call.engine;
    let (doc, etag) = engine.read(Value::clone).await;
    let status = status_json(engine).await;
    with_etag(
        answer(StatusCode::OK, &json!({"config": doc, "status": status})),
        &etag,
    )
}

/// What a write asks of the change: its `If-Match` list and whether it is a `?dry_run`.
pub(super) fn preconditions<B>(req: &Request<B>) -> (Option<String>, bool) {
    let dry_run = has_param(req, &["dry_run", "dry_run=1", "dry_run=true"]);
    (if_match(req.headers()), dry_run)
}

/// Whether the query has one of `params` (each `name` or `name=value`).
fn has_param<B>(req: &Request<B>, params: &[&str]) -> bool {
    req.uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| params.contains(&p)))
}

/// Every `If-Match` field line as one list: RFC 9110 §5.3 lets a client split a list over several lines, so
/// reading only the first would refuse a write whose current tag came in another. A value that is not text
/// stays in the list as something no tag matches, rather than dropping the precondition.
fn if_match(headers: &http::HeaderMap) -> Option<String> {
    let mut lines = headers.get_all(header::IF_MATCH).iter().peekable();
    lines.peek()?;
    let values: Vec<&str> = lines.map(|v| v.to_str().unwrap_or("\0")).collect();
    Some(values.join(", "))
}

pub(super) async fn config(call: Call) -> Response<Body> {
    let Call { req, rest, engine } = call;
    let engine = &*engine;
    let segs = match pointer::segments(&rest) {
        Ok(s) => s,
        Err(e) => return edit_error(e),
    };
    let method = req.method().clone();
    if method == Method::GET {
        let (found, etag) = engine.read(|doc| pointer::get(doc, &segs).cloned()).await;
        return match found {
            Some(v) => with_etag(answer(StatusCode::OK, &v), &etag),
            None => edit_error(EditError::NotFound),
        };
    }
    let (if_match, dry_run) = preconditions(&req);
    let wait_fleet = has_param(&req, &["wait=fleet"]);
    let opts = ChangeOptions::asked(if_match.as_deref(), dry_run);
    let result = match method {
        Method::PUT | Method::POST => {
            let value = match read_json(req).await {
                Ok(v) => v,
                Err(r) => return r,
            };
            if method == Method::PUT {
                engine
                    .change(|doc| pointer::put(doc, &segs, value.clone()), opts)
                    .await
            } else {
                engine
                    .change(|doc| pointer::post(doc, &segs, value.clone()), opts)
                    .await
            }
        }
        Method::DELETE => engine.change(|doc| pointer::delete(doc, &segs), opts).await,
        _ => return fail(StatusCode::METHOD_NOT_ALLOWED, "Invalid method.", None),
    };
    let spread = match (&result, engine.fleet()) {
        (
            Ok(Changed::Applied {
                revision: Some(r), ..
            }),
            Some(fleet),
        ) if wait_fleet => Some(fleet.spread(*r, FLEET_WAIT).await.to_json(*r)),
        _ => None,
    };
    answer_change(result, engine, spread).await
}

/// How long `?wait=fleet` waits for the other nodes.
const FLEET_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Unit's answer to a change of the document (through `/config` or a rollback), with the new `ETag`.
pub(super) async fn change_answer(
    result: Result<Changed, ChangeError>,
    engine: &Engine,
) -> Response<Body> {
    answer_change(result, engine, None).await
}

/// [`change_answer`], with what became of the change across the fleet when it was asked.
async fn answer_change(
    result: Result<Changed, ChangeError>,
    engine: &Engine,
    fleet: Option<Value>,
) -> Response<Body> {
    let (_, etag) = engine.read(|_| ()).await;
    let mut done = json!({"success": "Reconfiguration done."});
    match result {
        Ok(Changed::Valid) => answer(
            StatusCode::OK,
            &json!({"success": "Configuration is valid."}),
        ),
        Ok(Changed::Applied { not_ready, .. }) => {
            if !not_ready.is_empty() {
                done["applications"] = json!(not_ready);
            }
            if let Some(fleet) = fleet {
                done["fleet"] = fleet;
            }
            with_etag(answer(StatusCode::OK, &done), &etag)
        }
        Ok(Changed::Unchanged) => with_etag(answer(StatusCode::OK, &done), &etag),
        Err(e) => change_error(e),
    }
}

/// Unit's `GET /control/applications/NAME/restart`: a rolling reload, answered when it is done.
pub(super) async fn control(call: Call) -> Response<Body> {
    let (rest, engine) = (&call.rest, &call.engine);
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let Some(supervisor) = engine.server().supervisor() else {
        return fail(StatusCode::NOT_FOUND, "Value doesn't exist.", None);
    };
    let name = match segs.as_slice() {
        ["applications", name, "restart"] => *name,
        ["applications", name, "instances", id, "restart"] => {
            return restart_instance(supervisor, name, id).await;
        }
        _ => return fail(StatusCode::NOT_FOUND, "Invalid path.", None),
    };
    match supervisor.restart(name).await {
        None => fail(
            StatusCode::NOT_FOUND,
            &format!("Application \"{name}\" doesn't exist."),
            None,
        ),
        Some(report) if report.ok => answer(StatusCode::OK, &json!({"success": "Ok"})),
        Some(report) => fail(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Reload failed; the previous instances keep serving.",
            report.reason,
        ),
    }
}

/// rein's `GET /control/applications/NAME/instances/ID/restart`: one instance replaced by a new one started
/// beside it, answered once the new one serves (capacity never drops, as for `limits`).
async fn restart_instance(
    supervisor: &crate::supervisor::Supervisor,
    name: &str,
    id: &str,
) -> Response<Body> {
    let no_instance = || {
        let text = format!("Application \"{name}\" has no running instance {id}.");
        fail(StatusCode::NOT_FOUND, &text, None)
    };
    let Ok(id) = id.parse::<u64>() else {
        return no_instance();
    };
    match supervisor.replace(name, id).await {
        None => fail(
            StatusCode::NOT_FOUND,
            &format!("Application \"{name}\" doesn't exist."),
            None,
        ),
        Some(Replaced::Done { by }) => answer(
            StatusCode::OK,
            &json!({"success": "Ok", "replaced_by": by}),
        ),
        Some(Replaced::NoInstance) => no_instance(),
        Some(Replaced::Busy) => fail(
            StatusCode::CONFLICT,
            "The instance cannot be replaced now.",
            Some("it is not ready, or a reload, another replacement or a failed replacement's back-off is under way; try again".into()),
        ),
        Some(Replaced::Failed(reason)) => fail(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Restart failed; the instance keeps serving.",
            Some(reason),
        ),
    }
}

async fn read_json(req: Request<Incoming>) -> Result<Value, Response<Body>> {
    let bytes = match Limited::new(req.into_body(), MAX_DOCUMENT).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return Err(fail(
                StatusCode::PAYLOAD_TOO_LARGE,
                "The document is too large or could not be read.",
                None,
            ));
        }
    };
    crate::config::text::parse(&bytes).map_err(|e| {
        let detail = format!("{e} (line {}, column {})", e.line(), e.column());
        fail(StatusCode::BAD_REQUEST, "Invalid JSON.", Some(detail))
    })
}

pub(super) async fn status(call: Call) -> Response<Body> {
    let doc = status_json(&call.engine).await;
    let segs = match pointer::segments(&call.rest) {
        Ok(s) => s,
        Err(e) => return edit_error(e),
    };
    match pointer::get(&doc, &segs) {
        Some(v) => answer(StatusCode::OK, v),
        None => edit_error(EditError::NotFound),
    }
}

async fn status_json(engine: &Engine) -> Value {
    crate::stats::status::to_json(&crate::stats::status(engine).await)
}

pub(super) fn edit_error(e: EditError) -> Response<Body> {
    match e {
        EditError::NotFound => fail(StatusCode::NOT_FOUND, "Value doesn't exist.", None),
        EditError::Invalid(detail) => {
            fail(StatusCode::BAD_REQUEST, "Invalid request.", Some(detail))
        }
    }
}

fn change_error(e: ChangeError) -> Response<Body> {
    match e {
        ChangeError::Edit(e) => edit_error(e),
        ChangeError::Invalid(e) => super::invalid::answer(&e),
        ChangeError::Apply(e) => fail(
            StatusCode::BAD_REQUEST,
            "Failed to apply new configuration.",
            Some(e.to_string()),
        ),
        ChangeError::Save(e) => fail(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Failed to save the configuration; nothing changed.",
            Some(e.to_string()),
        ),
        ChangeError::Unreachable(why) => fail(
            StatusCode::SERVICE_UNAVAILABLE,
            "The fleet's etcd is unreachable; nothing changed.",
            Some(why),
        ),
        e @ ChangeError::NotApplied { .. } => fail(
            StatusCode::INTERNAL_SERVER_ERROR,
            "The fleet took the new configuration, but this node could not apply it.",
            Some(e.to_string()),
        ),
        ChangeError::Stale { current } => {
            let r = fail(
                StatusCode::PRECONDITION_FAILED,
                "Precondition failed.",
                Some(e_stale(&current)),
            );
            with_etag(r, &current)
        }
    }
}

fn e_stale(current: &str) -> String {
    format!("The configuration changed since it was read; its ETag is now {current}.")
}

pub(super) fn fail(status: StatusCode, error: &str, detail: Option<String>) -> Response<Body> {
    let mut doc = json!({"error": error});
    if let Some(d) = detail {
        doc["detail"] = Value::String(d);
    }
    answer(status, &doc)
}

pub(super) fn answer(status: StatusCode, doc: &Value) -> Response<Body> {
    let mut text = serde_json::to_vec_pretty(doc).unwrap_or_default();
    text.push(b'\n');
    let mut r = Response::new(body::full(text));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn with_etag(mut r: Response<Body>, etag: &str) -> Response<Body> {
    if let Ok(v) = HeaderValue::try_from(etag) {
        r.headers_mut().insert(header::ETAG, v);
    }
    r
}
