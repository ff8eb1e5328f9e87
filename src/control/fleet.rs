//! `GET /fleet`: the fleet view, from any node of a fleet.

use http::{Response, StatusCode};

use super::api::{answer, fail};
use super::routes::Call;
use crate::body::Body;

pub(super) async fn handle(call: Call) -> Response<Body> {
    let Some(fleet) = call.engine.fleet() else {
        return fail(
            StatusCode::NOT_FOUND,
            "Not in a fleet.",
            Some("rein runs in a fleet when started with --etcd and --fleet.".to_owned()),
        );
    };
    if !call.rest.is_empty() {
        return fail(StatusCode::NOT_FOUND, "Invalid path.", None);
    }
    answer(StatusCode::OK, &fleet.view().await)
}
