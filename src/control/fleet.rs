//! `GET /fleet`: the fleet view, from any node of a fleet; `GET /fleet/applications/NAME/restart`: a rolling
//! reload of an application across the fleet, answered when it is done.

use http::{Response, StatusCode};
use serde_json::{Map, Value, json};

use super::api::{answer, fail};
use super::routes::Call;
use crate::body::Body;
use crate::fleet::{Fleet, NodeReload};

pub(super) async fn handle(call: Call) -> Response<Body> {
    let Some(fleet) = call.engine.fleet() else {
        return fail(
            StatusCode::NOT_FOUND,
            "Not in a fleet.",
            Some("rein runs in a fleet when started with --etcd and --fleet.".to_owned()),
        );
    };
    let segs: Vec<&str> = call.rest.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        [] => answer(StatusCode::OK, &fleet.view().await),
        ["applications", name, "restart"] => {
            let batch = batch(call.req.uri().query());
            let name = percent_encoding::percent_decode_str(name).decode_utf8_lossy();
            roll(fleet, &name, batch).await
        }
        _ => fail(StatusCode::NOT_FOUND, "Invalid path.", None),
    }
}

/// `?batch=N`: how many nodes reload at once (1 when absent or not a positive number).
fn batch(query: Option<&str>) -> usize {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|p| p.strip_prefix("batch=")?.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(1)
}

async fn roll(fleet: &Fleet, app: &str, batch: usize) -> Response<Body> {
    let done = match fleet.rolling_reload(app, batch).await {
        Ok(done) => done,
        Err(e) => {
            return fail(
                StatusCode::SERVICE_UNAVAILABLE,
                "The fleet's etcd is unreachable; nothing was reloaded.",
                Some(e.to_string()),
            );
        }
    };
    let nodes: Map<String, Value> = done
        .iter()
        .map(|(node, result)| {
            let text = match result {
                NodeReload::Reloaded => "reloaded".to_owned(),
                NodeReload::Failed(why) => format!("failed: {why}"),
                NodeReload::Skipped => "skipped".to_owned(),
            };
            (node.clone(), Value::String(text))
        })
        .collect();
    let failed = done
        .iter()
        .find(|(_, r)| matches!(r, NodeReload::Failed(_)));
    match failed {
        None => answer(StatusCode::OK, &json!({"success": "Ok", "nodes": nodes})),
        Some((node, _)) => answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({
                "error": format!("Reload failed on node {node}; the nodes after it were not reloaded."),
                "nodes": nodes,
            }),
        ),
    }
}
