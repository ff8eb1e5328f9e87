//! Requests handed to applications and FastCGI servers: external apps over HTTP, PHP and Python apps and the
//! `fastcgi` action over FastCGI, with PHP's script rules deciding what PHP runs and what rein serves itself.

use std::sync::Arc;

use http::{Response, StatusCode};

use super::{Ctx, error, return_response};
use crate::body::Body;
use crate::fastcgi::Script;
use crate::proxy;
use crate::scripts::{self, PhpTarget, Resolved};
use crate::share::{self, ShareOptions, ShareOutcome, Target};
use crate::snapshot::{AppTransport, FastCgi, FastCgiServer};
use crate::upstream::Upstream;

impl Ctx<'_> {
    /// An application: its instances over HTTP, or over FastCGI for PHP and the adapter-hosted types.
    pub(super) async fn application(&mut self, name: &str, target: Option<&str>) -> Response<Body> {
        let published = self.published;
        let (Some(upstream), Some(transport)) = (
            published.upstreams.apps.get(name),
            published.snapshot.transports.get(name),
        ) else {
            return self.unavailable(name).await;
        };
        match transport {
            AppTransport::Http => self.proxy(upstream).await,
            AppTransport::Php(targets) => match targets.get(target) {
                Some(rules) => self.php_app(upstream, rules).await,
                None => error(StatusCode::NOT_FOUND),
            },
            AppTransport::Adapter { mounts, cgi } => match mounts.get(target) {
                Some(prefix) => {
                    let mut script = scripts::mounted(prefix, &self.request.path);
                    script.cgi = *cgi;
                    if let Some(t) = target {
                        script.extra.push(("REIN_TARGET".to_owned(), t.to_owned()));
                    }
                    self.fastcgi(upstream, &script).await
                }
                None => error(StatusCode::NOT_FOUND),
            },
        }
    }

    /// The `fastcgi` action: PHP's script rules, towards its server or upstream.
    pub(super) async fn fastcgi_action(&mut self, fcgi: &FastCgi) -> Response<Body> {
        let upstreams = &self.published.upstreams;
        let found = match &fcgi.server {
            FastCgiServer::Address(_) => upstreams.proxies.get(&fcgi.server.key()),
            FastCgiServer::Upstream(name) => upstreams.named.get(name),
        };
        match found {
            Some(upstream) => self.php(upstream, &fcgi.target, &fcgi.params).await,
            None => error(StatusCode::BAD_GATEWAY),
        }
    }

    /// A PHP application's request, by Unit's rules: a script to run, a directory's slash (its `Location`
    /// absolute, as Unit writes it), or an error.
    async fn php_app(&mut self, upstream: &Arc<Upstream>, rules: &PhpTarget) -> Response<Body> {
        match rules.resolve_app(&self.request.path) {
            Resolved::Script(script) => self.fastcgi(upstream, &script).await,
            Resolved::Slash(path) => {
                let _ = self.drain().await;
                let req = &*self.request;
                let host = req
                    .headers
                    .get(http::header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .filter(|h| !h.is_empty())
                    .map(str::to_owned)
                    .or_else(|| req.local.map(|a| a.to_string()))
                    .unwrap_or_else(|| "localhost".to_owned());
                let mut location = format!("{}://{host}{path}", req.scheme);
                if !req.query.is_empty() {
                    location.push('?');
                    location.push_str(&req.query);
                }
                return_response(StatusCode::MOVED_PERMANENTLY, Some(location))
            }
            Resolved::Forbidden => {
                let _ = self.drain().await;
                error(StatusCode::FORBIDDEN)
            }
            Resolved::Static(_) | Resolved::NotFound => {
                let _ = self.drain().await;
                error(StatusCode::NOT_FOUND)
            }
        }
    }

    /// A PHP request: a script to run, a file rein serves itself, a directory's slash, or nothing.
    async fn php(
        &mut self,
        upstream: &Arc<Upstream>,
        rules: &PhpTarget,
        params: &[(String, String)],
    ) -> Response<Body> {
        match rules.resolve(&self.request.path) {
            Resolved::Script(mut script) => {
                script.extra.extend(params.iter().cloned());
                self.fastcgi(upstream, &script).await
            }
            Resolved::Static(file) => self.static_file(&rules.root, &file).await,
            Resolved::Slash(path) => {
                let _ = self.drain().await;
                let query = &self.request.query;
                let location = match query.is_empty() {
                    true => path,
                    false => format!("{path}?{query}"),
                };
                return_response(StatusCode::MOVED_PERMANENTLY, Some(location))
            }
            Resolved::NotFound => {
                let _ = self.drain().await;
                error(StatusCode::NOT_FOUND)
            }
            Resolved::Forbidden => {
                let _ = self.drain().await;
                error(StatusCode::FORBIDDEN)
            }
        }
    }

    /// A file under a PHP root, served as a `share` would, never outside the root.
    async fn static_file(
        &mut self,
        root: &std::path::Path,
        file: &std::path::Path,
    ) -> Response<Body> {
        if let Err(status) = self.drain().await {
            return error(status);
        }
        let opts = ShareOptions {
            index: String::new(),
            chroot: Some(root.to_owned()),
            follow_symlinks: true,
            traverse_mounts: true,
        };
        let req = &*self.request;
        let target = Target {
            method: &req.method,
            headers: &req.headers,
            uri_path: &req.path,
            query: &req.query,
        };
        let mime = &self.published.snapshot.settings.mime_types;
        match share::serve(&file.to_string_lossy(), &opts, None, mime, &target).await {
            ShareOutcome::Served(response) => response,
            ShareOutcome::NotFound => error(StatusCode::NOT_FOUND),
            ShareOutcome::Forbidden => error(StatusCode::FORBIDDEN),
        }
    }

    /// Runs `script` on a FastCGI server of `upstream`, the request body streamed to it.
    async fn fastcgi(&mut self, upstream: &Arc<Upstream>, script: &Script) -> Response<Body> {
        self.target = Some(upstream.stats.clone());
        let out = proxy::Outgoing {
            request: self.request,
            body: self.body.take(),
            upgrade: None,
            max_body_size: self.published.snapshot.settings.max_body_size,
            state: self.state,
        };
        proxy::fastcgi::forward(upstream, out, script).await
    }
}
