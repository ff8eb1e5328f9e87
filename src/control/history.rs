//! `/history`: the applied documents the engine keeps, a diff of two, and a rollback to one.
//!
//! `GET /history` lists the entries newest first (without their documents), `GET /history/ID` answers one
//! with its document, `GET /history/ID/diff[/ID2]` the paths added, removed and changed from ID to ID2 (or to
//! the running document), and `POST|PUT /history/ID/rollback` makes ID's document the running one through the
//! engine's ordinary change: validated whole, refused with nothing changed, `If-Match` and `?dry_run`
//! honoured, and recorded as a new entry whose source is `rollback`.

use http::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::api::{answer, change_answer, fail, preconditions};
use super::conn::RequestBody as Incoming;
use super::routes::Call;
use crate::body::Body;
use crate::engine::{ChangeOptions, Engine};
use crate::history::{Source, diff};

pub(super) async fn handle(call: Call) -> Response<Body> {
    let Call { req, rest, engine } = call;
    let engine = engine.as_ref();
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let method = req.method().clone();
    let is_get = method == Method::GET;
    let is_write = method == Method::POST || method == Method::PUT;
    match segs.as_slice() {
        [] if is_get => list(engine).await,
        [id] if is_get => one(engine, id).await,
        [from, "diff"] if is_get => diff_to_current(engine, from).await,
        [from, "diff", to] if is_get => diff_between(engine, from, to).await,
        [id, "rollback"] if is_write => rollback(req, engine, id).await,
        [] | [_] | [_, "diff"] | [_, "diff", _] | [_, "rollback"] => {
            fail(StatusCode::METHOD_NOT_ALLOWED, "Invalid method.", None)
        }
        _ => fail(StatusCode::NOT_FOUND, "Invalid path.", None),
    }
}

fn missing(id: &str) -> Response<Body> {
    fail(
        StatusCode::NOT_FOUND,
        &format!("History entry {id} doesn't exist."),
        None,
    )
}

async fn list(engine: &Engine) -> Response<Body> {
    let (_, etag) = engine.read(|_| ()).await;
    // Only the newest entry can be the running document: an older one with the same ETag was rolled back to.
    let entries: Vec<Value> = engine
        .history()
        .await
        .iter()
        .rev()
        .enumerate()
        .map(|(i, e)| {
            let mut v = e.summary();
            v["current"] = json!(i == 0 && e.etag == etag);
            v
        })
        .collect();
    answer(StatusCode::OK, &Value::Array(entries))
}

async fn one(engine: &Engine, id: &str) -> Response<Body> {
    match entry_doc(engine, id).await {
        Some((entry, _)) => answer(StatusCode::OK, &entry),
        None => missing(id),
    }
}

/// The entry `id` as the API shows it, and its document.
async fn entry_doc(engine: &Engine, id: &str) -> Option<(Value, std::sync::Arc<Value>)> {
    let entry = engine.history_entry(id.parse().ok()?).await?;
    Some((entry.to_json(), entry.doc.clone()))
}

async fn diff_to_current(engine: &Engine, from: &str) -> Response<Body> {
    let Some((_, a)) = entry_doc(engine, from).await else {
        return missing(from);
    };
    let (b, _) = engine.read(Value::clone).await;
    let ends = (json!(from.parse::<u64>().ok()), json!("current"));
    answer(StatusCode::OK, &diff_json(ends, &a, &b))
}

async fn diff_between(engine: &Engine, from: &str, to: &str) -> Response<Body> {
    let Some((_, a)) = entry_doc(engine, from).await else {
        return missing(from);
    };
    let Some((_, b)) = entry_doc(engine, to).await else {
        return missing(to);
    };
    let ends = (
        json!(from.parse::<u64>().ok()),
        json!(to.parse::<u64>().ok()),
    );
    answer(StatusCode::OK, &diff_json(ends, &a, &b))
}

/// `{"from": A, "to": B, "added": [...], "removed": [...], "changed": [...]}`.
fn diff_json((from, to): (Value, Value), a: &Value, b: &Value) -> Value {
    let mut doc = json!({"from": from, "to": to});
    if let (Value::Object(doc), Value::Object(changes)) =
        (&mut doc, diff::to_json(&diff::diff(a, b)))
    {
        doc.extend(changes);
    }
    doc
}

async fn rollback(req: Request<Incoming>, engine: &Engine, id: &str) -> Response<Body> {
    let Ok(n) = id.parse::<u64>() else {
        return missing(id);
    };
    let Some(entry) = engine.history_entry(n).await else {
        return missing(id);
    };
    let (if_match, dry_run) = preconditions(&req);
    let opts = ChangeOptions::asked(if_match.as_deref(), dry_run);
    let doc = (*entry.doc).clone();
    let result = engine.replace(Source::Rollback(entry.id), doc, opts).await;
    change_answer(result, engine).await
}
