//! The control API's route table: a path's first segment and the methods it answers, to a handler.
//!
//! A request whose first segment is in the table but whose method is not gets Unit's 405 "Invalid method.";
//! a first segment nobody claims gets Unit's 404 "Invalid path.". A route with no method list answers every
//! method and gives its own 405s (`/config` and `/certificates` take writes).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};

use super::api;
use super::conn::RequestBody as Incoming;
use crate::body::Body;
use crate::engine::Engine;

/// What a handler is given: the request, the path after its first segment (no leading `/`), and the engine.
pub(super) struct Call {
    pub req: Request<Incoming>,
    pub rest: String,
    pub engine: Arc<Engine>,
}

pub(super) type Answer = Pin<Box<dyn Future<Output = Response<Body>> + Send>>;
type Handler = fn(Call) -> Answer;

struct Route {
    /// The path's first segment; empty for `/` itself.
    section: &'static str,
    /// The methods answered; `None` for every method.
    methods: Option<&'static [Method]>,
    handler: Handler,
}

const GET: Option<&[Method]> = Some(&[Method::GET]);
const ANY: Option<&[Method]> = None;

/// Every route of the control API. One line per section.
const ROUTES: &[Route] = &[
    route("", GET, |c| Box::pin(api::root(c))),
    route("config", ANY, |c| Box::pin(api::config(c))),
    route("certificates", ANY, |c| {
        Box::pin(super::certificates::handle(c))
    }),
    route("control", GET, |c| Box::pin(api::control(c))),
    route("status", GET, |c| Box::pin(api::status(c))),
    route("metrics", GET, |c| Box::pin(super::metrics::handle(c))),
    route("history", ANY, |c| Box::pin(super::history::handle(c))),
    route("fleet", GET, |c| Box::pin(super::fleet::handle(c))),
];

const fn route(
    section: &'static str,
    methods: Option<&'static [Method]>,
    handler: Handler,
) -> Route {
    Route {
        section,
        methods,
        handler,
    }
}

/// Answers one control API request through the table.
pub(super) async fn dispatch(req: Request<Incoming>, engine: Arc<Engine>) -> Response<Body> {
    let path = req.uri().path().trim_start_matches('/');
    let (section, rest) = path.split_once('/').unwrap_or((path, ""));
    let Some(route) = ROUTES.iter().find(|r| r.section == section) else {
        return api::fail(StatusCode::NOT_FOUND, "Invalid path.", None);
    };
    if route.methods.is_some_and(|m| !m.contains(req.method())) {
        return api::fail(StatusCode::METHOD_NOT_ALLOWED, "Invalid method.", None);
    }
    let rest = rest.to_owned();
    (route.handler)(Call { req, rest, engine }).await
}

#[cfg(test)]
mod tests {
    use super::ROUTES;

    #[test]
    fn each_section_has_one_route() {
        let mut sections: Vec<&str> = ROUTES.iter().map(|r| r.section).collect();
        sections.sort_unstable();
        sections.dedup();
        assert_eq!(sections.len(), ROUTES.len());
    }
}
