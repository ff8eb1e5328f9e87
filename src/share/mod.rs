//! The static file engine behind Unit's `share` action: given the filesystem path rendered from the share
//! template, answer the request from that file or say why not.
//!
//! [`serve`] runs in three steps. The method is checked (GET and HEAD only). The filesystem work (safe open
//! under `chroot` / `follow_symlinks` / `traverse_mounts`, `fstat`, precompressed siblings) runs on a blocking
//! thread ([`lookup`], [`resolve`], [`walk`]). The response is then decided from the open descriptor alone
//! ([`response`]: conditionals, ranges, multipart) and its body streamed from it ([`stream`]). Small files
//! are kept in memory per worker ([`cache`]), checked against the file on every use.
//!
//! Decisions left to this module, in Unit's spirit:
//! - A path ending in `/` gets [`ShareOptions::index`] appended, and a directory reached that way is
//!   [`ShareOutcome::NotFound`]. A path not ending in `/` that names a directory is a 301 to `<uri_path>/`
//!   whatever the request path, as in Unit (so a fixed `"share": "/srv/www"` answers `GET /` with
//!   `Location: //`).
//! - Non-regular files (FIFOs, sockets, devices) are [`ShareOutcome::NotFound`].
//! - The `types` filter is applied, as in Unit, to the MIME type of the share path itself before anything is
//!   opened (never to the `.br`/`.gz` sibling), and not at all to a path ending in `/`, whose index file is
//!   served whatever its type: a rejected type is [`ShareOutcome::Forbidden`], existing or not.
//! - An unexpected I/O error (EIO, EMFILE, ...) is a final 500, not a fallback.

mod cache;
pub(crate) mod conditional;
mod confine;
mod encoding;
mod lookup;
pub mod mime;
mod multipart;
pub(crate) mod range;
mod resolve;
mod response;
mod stream;
mod sys;
mod walk;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

use http::{HeaderMap, Method, Response};

use crate::body::Body;
use lookup::Located;
use resolve::Resolver;

pub use confine::within_fixed_part;
pub use mime::MimeTypes;

/// How one `share` action opens files.
#[derive(Debug, Clone)]
pub struct ShareOptions {
    /// Unit's `index`: the file served for a path ending in `/`.
    pub index: String,
    /// The already-rendered `chroot` directory: nothing outside it is served.
    pub chroot: Option<PathBuf>,
    /// Unit's `follow_symlinks`: when false, any symlink on the path (below the chroot, if any) is refused.
    pub follow_symlinks: bool,
    /// Unit's `traverse_mounts`: when false, crossing a mount point (below the chroot, if any) is refused.
    pub traverse_mounts: bool,
}

impl Default for ShareOptions {
    fn default() -> Self {
        ShareOptions {
            index: "index.html".to_owned(),
            chroot: None,
            follow_symlinks: true,
            traverse_mounts: true,
        }
    }
}

/// What became of a share request.
#[derive(Debug)]
pub enum ShareOutcome {
    /// A final answer: 200, 206, 301, 304, 405, 412, 416 or 500.
    Served(Response<Body>),
    /// No such file: the caller applies `fallback` or answers 404.
    NotFound,
    /// The file exists but may not be served: the caller applies `fallback` or answers 403.
    Forbidden,
}

/// What `serve` needs of the request.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub method: &'a Method,
    pub headers: &'a HeaderMap,
    /// The request's decoded path, for the directory redirect's `Location`.
    pub uri_path: &'a str,
    /// The raw query string (no `?`), kept by the directory redirect.
    pub query: &'a str,
}

/// Serves the file at `path` (see the module documentation for the rules).
pub async fn serve(
    path: &str,
    opts: &ShareOptions,
    types: Option<&(dyn Fn(&str) -> bool + Sync)>,
    mime: &MimeTypes,
    target: &Target<'_>,
) -> ShareOutcome {
    let Target {
        method,
        headers,
        uri_path,
        query,
    } = *target;
    let head = *method == Method::HEAD;
    if !head && *method != Method::GET {
        return ShareOutcome::Served(response::method_not_allowed());
    }
    let is_index = path.ends_with('/');
    if !is_index && types.is_some_and(|accept| !accept(mime.known(path).unwrap_or(""))) {
        return ShareOutcome::Forbidden;
    }
    let path = if is_index {
        format!("{path}{}", opts.index)
    } else {
        path.to_owned()
    };
    let resolver = Resolver::new(opts);
    let accepted = encoding::accepted(headers);
    // The open and fstat run right here, as in nginx: on a page-cached tree they take microseconds, less than
    // a hop to a blocking thread and back. Large bodies are read on blocking threads (see `stream`).
    let (rep, vary) = match lookup::find(&resolver, &path, &accepted) {
        Located::File { rep, vary } => (rep, vary),
        Located::Directory if is_index => return ShareOutcome::NotFound,
        Located::Directory => {
            return ShareOutcome::Served(response::directory_redirect(uri_path, query));
        }
        Located::NotFound => return ShareOutcome::NotFound,
        Located::Forbidden => return ShareOutcome::Forbidden,
        Located::Failed(e) => {
            tracing::error!("share: cannot open {path:?}: {e}");
            return ShareOutcome::Served(response::internal_error());
        }
    };
    let mime_type = mime.content_type(&path);
    ShareOutcome::Served(response::file(rep, vary, mime_type, head, headers))
}
