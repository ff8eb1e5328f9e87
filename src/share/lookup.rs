//! The filesystem half of a share request: open the file under the action's rules,
//! `fstat` the descriptor, and pick a precompressed sibling (`.br`, `.gz`) when the client accepts one.
//!
//! Small files come from, and go to, the per-worker [`cache`]: a hit costs one `statx`.
//!
//! Only regular files are served. A directory is reported as such (the caller redirects or answers 404);
//! anything else (FIFO, socket, device) is [`Located::NotFound`], as Unit answers. Siblings are opened with the
//! same rules as the file itself and must be regular files too; any failure to open one just means "no
//! sibling".

use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use bytes::Bytes;

use super::cache;
use super::conditional::Validators;
use super::encoding::Coding;
use super::resolve::{OpenError, Resolver};
use super::stream::Source;

/// One servable representation: the file itself or a precompressed sibling.
#[derive(Debug)]
pub struct Representation {
    pub source: Source,
    pub size: u64,
    /// `Some` for a precompressed sibling.
    pub coding: Option<Coding>,
    pub validators: Validators,
}

#[derive(Debug)]
pub enum Located {
    File {
        rep: Representation,
        /// A sibling exists, so the response depends on `Accept-Encoding`.
        vary: bool,
    },
    Directory,
    NotFound,
    Forbidden,
    Failed(io::Error),
}

/// Opens `path` and, for a regular file, the best sibling among the `accepted` codings.
pub fn find(resolver: &Resolver, path: &str, accepted: &[Coding]) -> Located {
    if let Some(rep) = from_cache(resolver, path, None) {
        let (sibling, vary) = sibling(resolver, path, accepted);
        let rep = sibling.unwrap_or(rep);
        return Located::File { rep, vary };
    }
    let file = match resolver.open(Path::new(path)) {
        Ok(file) => file,
        Err(OpenError::NotFound) => return Located::NotFound,
        Err(OpenError::Forbidden) => return Located::Forbidden,
        Err(OpenError::Io(e)) => return Located::Failed(e),
    };
    let meta = match file.metadata() {
        Ok(meta) => meta,
        Err(e) => return Located::Failed(e),
    };
    if meta.is_dir() {
        return Located::Directory;
    }
    if !meta.is_file() {
        return Located::NotFound;
    }
    let (sibling, vary) = sibling(resolver, path, accepted);
    let rep = sibling.unwrap_or_else(|| represent(resolver, path, file, &meta, None));
    Located::File { rep, vary }
}

/// `path`'s representation from the cache, if it holds the file as it is now.
fn from_cache(resolver: &Resolver, path: &str, coding: Option<Coding>) -> Option<Representation> {
    let cached = cache::get(path, resolver)?;
    Some(Representation {
        size: cached.bytes.len() as u64,
        source: Source::Memory(cached.bytes),
        coding,
        validators: cached.validators,
    })
}

/// A regular file's representation from its open descriptor; a small, settled file is read now and cached.
fn represent(
    resolver: &Resolver,
    path: &str,
    file: File,
    meta: &Metadata,
    coding: Option<Coding>,
) -> Representation {
    let validators = Validators::new(meta.mtime(), meta.len(), coding.map(Coding::token));
    let read = cache::wants(meta)
        .then(|| read_whole(&file, meta.size()))
        .and_then(Result::ok);
    let source = match read {
        Some(bytes) => {
            let cached = cache::Cached {
                bytes: bytes.clone(),
                validators: validators.clone(),
            };
            cache::put(path, resolver, meta, cached);
            Source::Memory(bytes)
        }
        None => Source::File(file),
    };
    Representation {
        source,
        size: meta.len(),
        coding,
        validators,
    }
}

fn read_whole(file: &File, size: u64) -> io::Result<Bytes> {
    let mut buf = vec![0; usize::try_from(size).map_err(io::Error::other)?];
    file.read_exact_at(&mut buf, 0)?;
    Ok(Bytes::from(buf))
}

/// The first accepted sibling that exists, and whether the response varies with `Accept-Encoding`.
///
/// Only the codings the client accepts are looked for, as nginx's `gzip_static` does: a client that accepts
/// none costs no extra `open`, and its identity response, cached without `Vary`, is fit for every client.
/// Every encoded response carries `Vary`.
fn sibling(resolver: &Resolver, path: &str, accepted: &[Coding]) -> (Option<Representation>, bool) {
    for &coding in accepted {
        if let Some(rep) = open_sibling(resolver, path, coding) {
            return (Some(rep), true);
        }
    }
    (None, false)
}

fn open_sibling(resolver: &Resolver, path: &str, coding: Coding) -> Option<Representation> {
    let name = format!("{path}{}", coding.suffix());
    if let Some(rep) = from_cache(resolver, &name, Some(coding)) {
        return Some(rep);
    }
    let file = resolver.open(Path::new(&name)).ok()?;
    let meta = file.metadata().ok().filter(Metadata::is_file)?;
    Some(represent(resolver, &name, file, &meta, Some(coding)))
}
