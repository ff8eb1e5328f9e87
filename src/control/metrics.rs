//! `GET /metrics`: every counter and reading in the Prometheus text format.

use http::{HeaderValue, Response, header};

use super::routes::Call;
use crate::body::{self, Body};
use crate::stats::prometheus;

pub(super) async fn handle(call: Call) -> Response<Body> {
    let metrics = crate::stats::metrics(&call.engine).await;
    exposition(prometheus::render(&metrics))
}

/// A 200 answer holding `text` as the exposition format.
pub(crate) fn exposition(text: String) -> Response<Body> {
    let mut r = Response::new(body::full(text));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(prometheus::CONTENT_TYPE),
    );
    r
}
