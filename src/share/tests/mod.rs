//! End-to-end tests of [`super::serve`] against real files in a temporary directory: status, headers and body
//! bytes of every kind of answer. This file holds the fixtures; [`paths`] covers resolution (index, redirects,
//! symlinks, chroot, mounts, types), [`http`] the HTTP semantics (conditionals, ranges, encodings) and
//! [`cached`] the same answers from the small-file cache.

mod cached;
mod http;
mod paths;

use std::path::PathBuf;

use ::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use bytes::Bytes;
use http_body_util::BodyExt;

use super::{MimeTypes, ShareOptions, ShareOutcome, Target, serve};

struct Site {
    dir: tempfile::TempDir,
    opts: ShareOptions,
    mime: MimeTypes,
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Answer {
    fn header(&self, name: header::HeaderName) -> &str {
        self.headers
            .get(&name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("<absent>")
    }
}

fn site() -> Site {
    Site {
        dir: tempfile::tempdir().expect("tempdir"),
        opts: ShareOptions::default(),
        mime: MimeTypes::default(),
    }
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, HeaderValue::from_str(v).expect("test header"));
    }
    h
}

impl Site {
    fn root(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    fn path(&self, rel: &str) -> String {
        format!("{}/{rel}", self.dir.path().display())
    }

    fn write(&self, rel: &str, data: &[u8]) {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, data).expect("write");
    }

    async fn run(&self, method: Method, rel: &str, h: &[(&'static str, &str)]) -> ShareOutcome {
        self.run_path(&self.path(rel), method, h).await
    }

    async fn run_path(
        &self,
        path: &str,
        method: Method,
        h: &[(&'static str, &str)],
    ) -> ShareOutcome {
        let uri = format!("/{}", path.rsplit('/').next().unwrap_or(""));
        serve(
            path,
            &self.opts,
            None,
            &self.mime,
            &Target {
                method: &method,
                headers: &headers(h),
                uri_path: &uri,
                query: "",
            },
        )
        .await
    }

    /// A GET of the share path `rel` for the request `uri_path?query`, allowed only the types `types` passes.
    async fn get_as(
        &self,
        rel: &str,
        uri_path: &str,
        query: &str,
        types: Option<&(dyn Fn(&str) -> bool + Sync)>,
    ) -> ShareOutcome {
        let target = Target {
            method: &Method::GET,
            headers: &HeaderMap::new(),
            uri_path,
            query,
        };
        serve(&self.path(rel), &self.opts, types, &self.mime, &target).await
    }

    async fn get(&self, rel: &str, h: &[(&'static str, &str)]) -> Answer {
        answer(self.run(Method::GET, rel, h).await).await
    }
}

async fn answer(outcome: ShareOutcome) -> Answer {
    let ShareOutcome::Served(resp) = outcome else {
        panic!("expected a response, got {outcome:?}");
    };
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

fn is_not_found(o: &ShareOutcome) -> bool {
    matches!(o, ShareOutcome::NotFound)
}

fn is_forbidden(o: &ShareOutcome) -> bool {
    matches!(o, ShareOutcome::Forbidden)
}

/// The caller spawns request handling on a multi-threaded runtime: the future must be `Send`.
#[test]
fn serve_future_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let (opts, mime, h) = (
        ShareOptions::default(),
        MimeTypes::default(),
        HeaderMap::new(),
    );
    let target = Target {
        method: &Method::GET,
        headers: &h,
        uri_path: "/",
        query: "",
    };
    let future = serve("/", &opts, None, &mime, &target);
    assert_send(&future);
}
