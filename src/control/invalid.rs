//! The answer to a refused document: Unit's `{"error": "Invalid configuration.", "detail": ...}` naming the
//! first error, and `errors`, every error found (at most [`crate::config::error::MAX_ERRORS`]), each
//! `{"path": ..., "error": ...}`; `errors_omitted` counts those beyond the bound.

use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::api;
use crate::body::Body;
use crate::config::ConfigErrors;

pub(super) fn answer(errors: &ConfigErrors) -> Response<Body> {
    let list: Vec<Value> = errors
        .iter()
        .map(|e| json!({"path": e.path.as_str(), "error": e.message}))
        .collect();
    let mut doc = json!({
        "error": "Invalid configuration.",
        "detail": errors.first().to_string(),
        "errors": list,
    });
    if errors.omitted() > 0 {
        doc["errors_omitted"] = json!(errors.omitted());
    }
    api::answer(StatusCode::BAD_REQUEST, &doc)
}
