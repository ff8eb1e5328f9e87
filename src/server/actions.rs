//! Routing a request through its routes and carrying out the chosen action: `pass`, `return`, `share`,
//! `proxy`, and (in [`apps`]) applications and `fastcgi`.
//!
//! Actions that answer by themselves read (and discard) the request body first, as Unit does, so the
//! connection stays in step for the next request and body limits and timeouts apply to every request.

use std::borrow::Cow;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use http::{HeaderValue, Method, Response, StatusCode, header};
use http_body::Body as _;
use http_body_util::BodyExt;

use std::sync::Arc;

use super::Published;
use super::timeouts::ConnState;
use crate::body::{self, Body};
use crate::compile::parse_pass;
use crate::http1::spelling::Spelling;
use crate::proxy;
use crate::request::RequestInfo;
use crate::share::{self, ShareOptions, ShareOutcome, Target};
use crate::snapshot::{Action, ActionKind, Pass, PassTarget, ResponseHeader, Share};
use crate::stats::counters::TargetStats;
use crate::upstream::Upstream;
use crate::uri_escape;
use crate::vars::VarContext;

mod apps;

/// Passes followed before a request is declared looping (a 500): passes with variables, and a `rewrite` that
/// passes back to routes it came through, can loop.
const MAX_HOPS: usize = 32;

/// What an action leads to: a response, or another destination.
enum Next<'a> {
    Respond(Response<Body>),
    Pass(Cow<'a, PassTarget>),
}

/// Who answered: the action itself (its `response_headers` apply), or another it handed over to.
enum Answer<'a> {
    Own(Response<Body>),
    Delegated(Next<'a>),
}

/// One request on its way through the routes.
pub struct Ctx<'a> {
    pub published: &'a Published,
    pub request: &'a mut RequestInfo,
    pub body: Option<super::RequestBody>,
    /// The client side of a protocol upgrade, for a proxied WebSocket.
    pub upgrade: Option<super::ClientUpgrade>,
    pub state: &'a Arc<ConnState>,
    pub shared: &'a super::Shared,
    /// The counters of the upstream or application the request was handed to, if any.
    pub target: Option<Arc<TargetStats>>,
}

impl<'a> Ctx<'a> {
    /// Follows `pass` until an action answers.
    pub async fn run(&mut self, pass: &'a Pass) -> Response<Body> {
        let Some(mut target) = self.resolve(pass) else {
            return error(StatusCode::NOT_FOUND);
        };
        for _ in 0..MAX_HOPS {
            let next = match &*target {
                PassTarget::Route(name) => self.route(name).await,
                // Boxed: the request's whole future is copied into a box of its own when it starts
                // (`server::conn`), so it is kept small; a route's actions are boxed already (`act`).
                other => Next::Respond(Box::pin(self.deliver(other)).await),
            };
            match next {
                Next::Pass(t) => target = t,
                Next::Respond(response) => return response,
            }
        }
        tracing::warn!(uri = %self.request.request_uri, "request passed more than {MAX_HOPS} times");
        error(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// Hands the request to an upstream or an application (a route is entered by [`Ctx::route`]).
    async fn deliver(&mut self, target: &PassTarget) -> Response<Body> {
        match target {
            PassTarget::Route(_) => error(StatusCode::INTERNAL_SERVER_ERROR),
            PassTarget::Upstream(name) => match self.published.upstreams.named.get(name) {
                Some(upstream) => Box::pin(self.proxy(upstream)).await,
                None => error(StatusCode::NOT_FOUND),
            },
            PassTarget::Application(name, target) => {
                Box::pin(self.application(name, target.as_deref())).await
            }
        }
    }

    /// Where `pass` leads: a fixed destination is borrowed from the configuration, not copied per request.
    fn resolve(&self, pass: &'a Pass) -> Option<Cow<'a, PassTarget>> {
        match pass {
            Pass::Fixed(t) => Some(Cow::Borrowed(t)),
            Pass::Dynamic(template) => parse_pass(&template.render(&self.vars())).map(Cow::Owned),
        }
    }

    fn vars(&self) -> VarContext<'_> {
        VarContext {
            req: self.request,
            response: None,
        }
    }

    async fn route(&mut self, name: &str) -> Next<'a> {
        let snapshot = &self.published.snapshot;
        let Some(route) = snapshot.routes.get(name) else {
            return Next::Respond(error(StatusCode::NOT_FOUND));
        };
        let found = route.steps.iter().enumerate().find(|(_, step)| {
            step.matcher
                .as_ref()
                .is_none_or(|m| m.matches(self.request))
        });
        let Some((index, step)) = found else {
            if snapshot.settings.log_route {
                tracing::info!(route = name, uri = %self.request.path, "no step matched");
            }
            return Next::Respond(error(StatusCode::NOT_FOUND));
        };
        if snapshot.settings.log_route {
            tracing::info!(route = name, step = index, uri = %self.request.path, "step matched");
        }
        self.act(&step.action).await
    }

    /// Carries out one action; boxed because a share's `fallback` is an action too.
    ///
    /// As in Unit, `response_headers` come from the action that answers: a `pass` to routes hands the request
    /// on with nothing of its own, a `pass` to an application or upstream answers with what they send, and a
    /// share that falls back gives way to its fallback's headers.
    fn act<'b>(
        &'b mut self,
        action: &'a Action,
    ) -> Pin<Box<dyn Future<Output = Next<'a>> + Send + 'b>> {
        Box::pin(async move {
            match self.act_kind(action).await {
                Answer::Own(mut response) => {
                    self.apply_headers(action, &mut response);
                    Next::Respond(response)
                }
                Answer::Delegated(next) => next,
            }
        })
    }

    async fn act_kind(&mut self, action: &'a Action) -> Answer<'a> {
        if let Some(rewrite) = &action.rewrite {
            let target = rewrite.render(&self.vars());
            if self.request.rewrite(&target).is_err() {
                return Answer::Own(error(StatusCode::BAD_REQUEST));
            }
        }
        match &action.kind {
            ActionKind::Pass(pass) => match self.resolve(pass) {
                Some(t) if matches!(*t, PassTarget::Route(_)) => Answer::Delegated(Next::Pass(t)),
                // Unit binds a pass to an application or upstream into the action itself: that action
                // answers, so its `response_headers` apply to what the application or upstream sends.
                Some(t) => Answer::Own(self.deliver(&t).await),
                None => Answer::Own(error(StatusCode::NOT_FOUND)),
            },
            ActionKind::Return { status, location } => {
                if let Err(status) = self.drain().await {
                    return Answer::Own(error(status));
                }
                let location = location.as_ref().map(|l| l.render(&self.vars()));
                Answer::Own(return_response(*status, location))
            }
            ActionKind::Share(share) => self.share(share).await,
            ActionKind::Proxy(url) => match self.published.upstreams.proxies.get(url) {
                Some(upstream) => Answer::Own(Box::pin(self.proxy(upstream)).await),
                None => Answer::Own(error(StatusCode::BAD_GATEWAY)),
            },
            ActionKind::FastCgi(fcgi) => Answer::Own(Box::pin(self.fastcgi_action(fcgi)).await),
            ActionKind::Metrics => Answer::Own(Box::pin(self.metrics()).await),
        }
    }

    async fn share(&mut self, share: &'a Share) -> Answer<'a> {
        let method = &self.request.method;
        if *method != Method::GET && *method != Method::HEAD {
            // Unit hands other methods to the fallback ("static files, else the app"); without one, 405.
            if let Some(fallback) = &share.fallback {
                return Answer::Delegated(self.act(fallback).await);
            }
        }
        if let Err(status) = self.drain().await {
            return Answer::Own(error(status));
        }
        let last = match self.chroot(share) {
            Ok(chroot) => match self.share_paths(share, chroot).await {
                Ok(response) => return Answer::Own(response),
                Err(last) => last,
            },
            Err(refused) => refused,
        };
        match &share.fallback {
            Some(fallback) => Answer::Delegated(self.act(fallback).await),
            None => Answer::Own(error(last)),
        }
    }

    /// The rendered `chroot`, or 403 when the request's variables made it climb out of its fixed part.
    fn chroot(&self, share: &Share) -> Result<Option<PathBuf>, StatusCode> {
        let Some(template) = &share.chroot else {
            return Ok(None);
        };
        let chroot = template.render(&self.vars());
        if !share::within_fixed_part(&chroot, template.fixed_prefix().len()) {
            tracing::debug!(
                chroot = ?chroot,
                "share: the chroot climbs out of its template's fixed part"
            );
            return Err(StatusCode::FORBIDDEN);
        }
        Ok(Some(chroot.into()))
    }

    /// Tries the share's paths in order: the first file served, or the status of the last failure.
    async fn share_paths(
        &self,
        share: &Share,
        chroot: Option<PathBuf>,
    ) -> Result<Response<Body>, StatusCode> {
        let opts = ShareOptions {
            index: share.index.clone(),
            chroot,
            follow_symlinks: share.follow_symlinks,
            traverse_mounts: share.traverse_mounts,
        };
        let types = share
            .types
            .as_ref()
            .map(|t| move |mime: &str| t.matches(mime));
        let types: Option<&(dyn Fn(&str) -> bool + Sync)> = types.as_ref().map(|f| f as _);
        let mut last = StatusCode::NOT_FOUND;
        for path in &share.paths {
            let file = path.render(&self.vars());
            if !share::within_fixed_part(&file, path.fixed_prefix().len()) {
                tracing::debug!(
                    file = ?file,
                    "share: the path climbs out of its template's fixed part"
                );
                last = StatusCode::FORBIDDEN;
                continue;
            }
            let req = &*self.request;
            let mime = &self.published.snapshot.settings.mime_types;
            let target = Target {
                method: &req.method,
                headers: &req.headers,
                uri_path: &req.path,
                query: &req.query,
            };
            match share::serve(&file, &opts, types, mime, &target).await {
                ShareOutcome::Served(response) => return Ok(response),
                ShareOutcome::NotFound => last = StatusCode::NOT_FOUND,
                ShareOutcome::Forbidden => last = StatusCode::FORBIDDEN,
            }
        }
        Err(last)
    }

    /// Forwards the request, body and all, to `upstream`.
    async fn proxy(&mut self, upstream: &Arc<Upstream>) -> Response<Body> {
        self.target = Some(upstream.stats.clone());
        let out = proxy::Outgoing {
            request: self.request,
            body: self.body.take(),
            upgrade: self.upgrade.take(),
            max_body_size: self.published.snapshot.settings.max_body_size,
            state: self.state,
        };
        proxy::forward(upstream, out).await
    }

    /// The `metrics` action: what the control API's `GET /metrics` shows, to `GET` and `HEAD`.
    async fn metrics(&mut self) -> Response<Body> {
        if let Err(status) = self.drain().await {
            return error(status);
        }
        let method = &self.request.method;
        if *method != Method::GET && *method != Method::HEAD {
            let mut r = error(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        let Some(engine) = self.shared.engine.get().and_then(std::sync::Weak::upgrade) else {
            return error(StatusCode::SERVICE_UNAVAILABLE);
        };
        let metrics = crate::stats::metrics(&engine).await;
        crate::control::exposition(crate::stats::prometheus::render(&metrics))
    }

    /// An application this server does not run (no supervisor).
    async fn unavailable(&mut self, name: &str) -> Response<Body> {
        let _ = self.drain().await;
        tracing::warn!(
            destination = name,
            "no handler for this destination in this build"
        );
        error(StatusCode::BAD_GATEWAY)
    }

    /// Reads and discards the request body, enforcing `max_body_size` and `body_read_timeout`.
    async fn drain(&mut self) -> Result<(), StatusCode> {
        let Some(mut body) = self.body.take() else {
            return Ok(());
        };
        if body.is_end_stream() {
            return Ok(());
        }
        let limit = self.published.snapshot.settings.max_body_size;
        self.state.reading_body(true);
        let mut total = 0u64;
        let result = loop {
            match body.frame().await {
                None => break Ok(()),
                Some(Ok(frame)) => {
                    total += frame.data_ref().map_or(0, |d| d.len() as u64);
                    if total > limit {
                        break Err(StatusCode::PAYLOAD_TOO_LARGE);
                    }
                }
                Some(Err(e)) if e.is_timeout() => break Err(StatusCode::REQUEST_TIMEOUT),
                Some(Err(_)) => break Err(StatusCode::BAD_REQUEST),
            }
        };
        self.state.reading_body(false);
        result
    }

    /// Sets an action's `response_headers`; as in Unit, only on successful and redirect answers (200–399).
    fn apply_headers(&self, action: &Action, response: &mut Response<Body>) {
        if !(200..400).contains(&response.status().as_u16()) {
            return;
        }
        for ResponseHeader {
            name,
            spelled,
            value,
        } in &action.response_headers
        {
            match value {
                None => super::passed::remove(response, name),
                Some(template) => match HeaderValue::try_from(template.render(&self.vars())) {
                    Ok(v) => {
                        response.headers_mut().insert(name.clone(), v);
                        let spelling = response.extensions_mut();
                        spelling.get_or_insert_default::<Spelling>().note(spelled);
                    }
                    Err(_) => {
                        tracing::debug!(header = %name, "response header value is not valid; skipped")
                    }
                },
            }
        }
    }
}

fn return_response(status: StatusCode, location: Option<String>) -> Response<Body> {
    let mut response = if status.as_u16() >= 400 {
        error(status)
    } else {
        let mut r = Response::new(body::empty());
        *r.status_mut() = status;
        r
    };
    // A decoded `$uri` can put CR LF or a space in the value: encoded, the field is always there and whole.
    if let Some(loc) = location.and_then(|l| HeaderValue::try_from(&*uri_escape::location(&l)).ok())
    {
        response.headers_mut().insert(header::LOCATION, loc);
    }
    response
}

/// The HTML page of an error answer (also given to hyper's own, `server::error_answer`).
pub(crate) fn error_text(status: StatusCode) -> String {
    format!(
        "<!DOCTYPE html><title>Error {code}</title><p>Error {code}: {reason}.\n",
        code = status.as_u16(),
        reason = status.canonical_reason().unwrap_or("unknown")
    )
}

/// A short HTML error page, as Unit answers errors.
pub fn error(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(body::full(error_text(status)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
    r
}
