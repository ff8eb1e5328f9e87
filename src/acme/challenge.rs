//! The HTTP-01 challenges being validated: token → key authorization, shared between the ACME task (which
//! adds a token before telling the CA to look, and removes it once the order is settled) and the plain-HTTP
//! listeners, which answer `GET /.well-known/acme-challenge/TOKEN` from it before routing.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use http::{HeaderValue, Method, Response, header};

use crate::body::{self, Body};
use crate::request::RequestInfo;

const PREFIX: &str = "/.well-known/acme-challenge/";

/// The pending challenges; cheap to clone, every clone sees the same map.
#[derive(Debug, Clone, Default)]
pub struct Challenges {
    tokens: Arc<RwLock<HashMap<String, String>>>,
}

impl Challenges {
    /// Publishes `key_authorization` under `token` until the returned guard is dropped.
    pub(super) fn publish(&self, token: &str, key_authorization: &str) -> Published {
        self.write()
            .insert(token.to_owned(), key_authorization.to_owned());
        Published {
            challenges: self.clone(),
            token: token.to_owned(),
        }
    }

    /// Adds or removes a token published elsewhere (by another node of the fleet), with no guard: its owner
    /// withdraws it.
    pub(super) fn mirror(&self, token: &str, key_authorization: Option<&str>) {
        match key_authorization {
            Some(ka) => self.write().insert(token.to_owned(), ka.to_owned()),
            None => self.write().remove(token),
        };
    }

    /// The answer to a request for a pending token; `None` for any other request, which is routed as usual.
    pub fn answer(&self, request: &RequestInfo) -> Option<Response<Body>> {
        if request.method != Method::GET && request.method != Method::HEAD {
            return None;
        }
        let token = request.path.strip_prefix(PREFIX)?;
        let key_authorization = self.read().get(token)?.clone();
        let mut response = Response::new(body::full(key_authorization));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        Some(response)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, String>> {
        // The map holds plain strings: one left by a panicking writer is still whole.
        self.tokens.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, String>> {
        self.tokens.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// A token being answered; dropping it withdraws the token, whatever became of the order.
#[derive(Debug)]
pub(super) struct Published {
    challenges: Challenges,
    token: String,
}

impl Drop for Published {
    fn drop(&mut self) {
        self.challenges.write().remove(&self.token);
    }
}

#[cfg(test)]
mod tests {
    use super::Challenges;
    use crate::request::RequestInfo;

    fn get(path: &str) -> RequestInfo {
        let req = http::Request::get(path).body(()).expect("request");
        let (mut parts, ()) = req.into_parts();
        RequestInfo::from_parts(&mut parts, "http", None, None).0
    }

    #[test]
    fn answers_pending_tokens_only() {
        let challenges = Challenges::default();
        let published = challenges.publish("tok-1", "tok-1.thumb");
        let answer = challenges
            .answer(&get("/.well-known/acme-challenge/tok-1"))
            .expect("answered");
        assert_eq!(answer.status(), 200);
        assert!(
            challenges
                .answer(&get("/.well-known/acme-challenge/other"))
                .is_none()
        );
        assert!(challenges.answer(&get("/tok-1")).is_none());
        drop(published);
        assert!(
            challenges
                .answer(&get("/.well-known/acme-challenge/tok-1"))
                .is_none()
        );
    }
}
