//! Unit's `/certificates` section: `PUT /certificates/NAME` stores a PEM bundle (chain and key in one body),
//! `GET /certificates[/NAME[/...]]` describes them (never the key), `DELETE /certificates/NAME` removes one no
//! listener names. Answers and error texts are Unit's.

use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use serde_json::json;

use super::api::{answer, edit_error, fail};
use super::routes::Call;
use crate::body::Body;
use crate::config::pointer;
use crate::engine::CertError;
use crate::tls::MAX_BUNDLE;

pub(super) async fn handle(call: Call) -> Response<Body> {
    let Call { req, rest, engine } = call;
    let segs = match pointer::segments(&rest) {
        Ok(s) => s,
        Err(e) => return edit_error(e),
    };
    match (req.method().clone(), segs.as_slice()) {
        (Method::GET, _) => {
            let all = engine.certificates().await;
            match pointer::get(&all, &segs) {
                Some(v) => answer(StatusCode::OK, v),
                None if segs.len() == 1 => cert_error(&CertError::NotFound),
                None => fail(StatusCode::NOT_FOUND, "Invalid path.", None),
            }
        }
        (Method::PUT, [name]) => {
            let pem = match Limited::new(req.into_body(), MAX_BUNDLE).collect().await {
                Ok(b) => b.to_bytes(),
                Err(_) => return cert_error(&CertError::TooLarge),
            };
            match engine.add_certificate(name, &pem).await {
                Ok(()) => answer(
                    StatusCode::OK,
                    &json!({"success": "Certificate chain uploaded."}),
                ),
                Err(e) => cert_error(&e),
            }
        }
        (Method::DELETE, [name]) => match engine.delete_certificate(name).await {
            Ok(()) => answer(StatusCode::OK, &json!({"success": "Certificate deleted."})),
            Err(e) => cert_error(&e),
        },
        (Method::PUT | Method::DELETE, _) => fail(StatusCode::NOT_FOUND, "Invalid path.", None),
        _ => fail(StatusCode::METHOD_NOT_ALLOWED, "Invalid method.", None),
    }
}

fn cert_error(e: &CertError) -> Response<Body> {
    let status = match e {
        CertError::InvalidName | CertError::Invalid(_) | CertError::Exists | CertError::InUse => {
            StatusCode::BAD_REQUEST
        }
        CertError::NotFound => StatusCode::NOT_FOUND,
        CertError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        CertError::Save(_) | CertError::Apply(_) => StatusCode::INTERNAL_SERVER_ERROR,
        CertError::Unreachable(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    let detail = match e {
        CertError::Unreachable(why) => Some(why.clone()),
        e => std::error::Error::source(e).map(ToString::to_string),
    };
    fail(status, &e.to_string(), detail)
}
