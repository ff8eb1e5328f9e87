//! Small files kept in memory, per worker thread, so a hot asset costs one `statx` instead of an open, an
//! `fstat`, a read and a close (on the 1 KB benchmark those four were a fifth of rein's CPU).
//!
//! An entry is used only while the path still names the same file, unchanged: every hit `statx`es the path
//! and compares device, inode, size, mtime and ctime with what the descriptor showed when the bytes were
//! read. Anything else (a new file, an edit, a `chmod`, a deletion, a rename over it) is a miss, and the
//! request takes the full path with the share's rules. A match means the very bytes already served under
//! those rules, so the `statx` need not apply `chroot` or `follow_symlinks` again; entries remember the rules
//! they were read under and serve only requests under the same ones.
//!
//! Timestamps are coarse (a few milliseconds on most filesystems), so a file changed twice within one tick,
//! keeping its size, would look unchanged. A file is therefore cached only once its ctime is [`SETTLE`]
//! old, as git treats "racily clean" files.
//!
//! Each worker has its own cache (no lock on the request path), of at most [`BUDGET`] bytes in files of at
//! most [`MAX_FILE`] bytes; the least recently used entries go first.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::conditional::Validators;
use super::resolve::Resolver;

/// The largest file kept.
pub const MAX_FILE: u64 = 32 * 1024;
/// The bytes of file content one worker keeps, at most.
pub const BUDGET: usize = 1024 * 1024;
/// How old a file's last change must be before it is kept.
pub const SETTLE: Duration = Duration::from_secs(2);

/// The rules a file was opened under.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rules {
    chroot: Option<PathBuf>,
    follow_symlinks: bool,
    traverse_mounts: bool,
}

impl Rules {
    fn of(resolver: &Resolver) -> Self {
        Rules {
            chroot: resolver.chroot.clone(),
            follow_symlinks: resolver.follow_symlinks,
            traverse_mounts: resolver.traverse_mounts,
        }
    }

    fn are(&self, resolver: &Resolver) -> bool {
        self.chroot == resolver.chroot
            && self.follow_symlinks == resolver.follow_symlinks
            && self.traverse_mounts == resolver.traverse_mounts
    }
}

/// What identifies one version of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Identity {
    fn of(meta: &Metadata) -> Self {
        Identity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// A file's content as cached, with its validators' header values.
#[derive(Debug, Clone)]
pub struct Cached {
    pub bytes: Bytes,
    pub validators: Validators,
}

struct Entry {
    rules: Rules,
    identity: Identity,
    cached: Cached,
    used: u64,
}

#[derive(Default)]
struct Cache {
    /// Hashed with foldhash: every hit hashes its path, and SipHash's resistance to chosen keys buys
    /// nothing here, where only files that exist get in.
    entries: HashMap<Box<str>, Entry, foldhash::fast::RandomState>,
    bytes: usize,
    clock: u64,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

#[cfg(test)]
thread_local! {
    static SETTLE_IN_TESTS: std::cell::Cell<Option<Duration>> = const { std::cell::Cell::new(None) };
}

/// Lets this thread cache files however fresh, so unit tests see the cache without waiting.
#[cfg(test)]
pub fn cache_fresh_files_on_this_thread() {
    SETTLE_IN_TESTS.set(Some(Duration::ZERO));
}

/// How old a change must be before caching: [`SETTLE`], or `REIN_SHARE_CACHE_SETTLE_MS` (integration tests
/// set 0 to exercise the cache without waiting).
fn settle() -> Duration {
    #[cfg(test)]
    if let Some(settle) = SETTLE_IN_TESTS.get() {
        return settle;
    }
    static SETTLE_AFTER: OnceLock<Duration> = OnceLock::new();
    *SETTLE_AFTER.get_or_init(|| {
        std::env::var("REIN_SHARE_CACHE_SETTLE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(SETTLE, Duration::from_millis)
    })
}

/// The cached content of `path`, if it was read under the same rules and the path still names that file,
/// unchanged. A stale entry is dropped.
pub fn get(path: &str, resolver: &Resolver) -> Option<Cached> {
    CACHE.with_borrow_mut(|cache| {
        let Cache { entries, clock, .. } = cache;
        let entry = entries.get_mut(path)?;
        if !entry.rules.are(resolver) {
            return None;
        }
        let now = std::fs::metadata(Path::new(path))
            .ok()
            .filter(Metadata::is_file)
            .map(|m| Identity::of(&m));
        if now != Some(entry.identity) {
            cache.remove(path);
            return None;
        }
        *clock += 1;
        entry.used = *clock;
        Some(entry.cached.clone())
    })
}

/// Whether a file with `meta` may be cached: small, and settled.
pub fn wants(meta: &Metadata) -> bool {
    meta.is_file() && meta.size() <= MAX_FILE && settled(meta, SystemTime::now(), settle())
}

fn settled(meta: &Metadata, now: SystemTime, settle: Duration) -> bool {
    let changed = SystemTime::UNIX_EPOCH
        + Duration::new(
            u64::try_from(meta.ctime()).unwrap_or(0),
            u32::try_from(meta.ctime_nsec()).unwrap_or(0),
        );
    now.duration_since(changed).is_ok_and(|age| age >= settle)
}

/// Keeps `cached`, read from a descriptor whose `fstat` gave `meta` (taken before the read: a change during
/// the read moves the ctime past what is recorded, so the entry is never used).
pub fn put(path: &str, resolver: &Resolver, meta: &Metadata, cached: Cached) {
    if cached.bytes.len() as u64 != meta.size() {
        return;
    }
    CACHE.with_borrow_mut(|cache| {
        cache.remove(path);
        cache.make_room(cached.bytes.len());
        cache.clock += 1;
        cache.bytes += cached.bytes.len();
        let entry = Entry {
            rules: Rules::of(resolver),
            identity: Identity::of(meta),
            cached,
            used: cache.clock,
        };
        cache.entries.insert(path.into(), entry);
    });
}

impl Cache {
    fn remove(&mut self, path: &str) {
        if let Some(old) = self.entries.remove(path) {
            self.bytes -= old.cached.bytes.len();
        }
    }

    /// Drops the least recently used entries until `len` more bytes fit in the budget.
    fn make_room(&mut self, len: usize) {
        while self.bytes + len > BUDGET {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
            else {
                return;
            };
            self.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::share::ShareOptions;

    fn resolver() -> Resolver {
        Resolver::new(&ShareOptions::default())
    }

    fn cached(bytes: Bytes) -> Cached {
        let validators = Validators::new(0, bytes.len() as u64, None);
        Cached { bytes, validators }
    }

    fn file(dir: &Path, name: &str, data: &[u8]) -> (String, Metadata) {
        let path = dir.join(name);
        std::fs::write(&path, data).expect("write");
        let meta = std::fs::metadata(&path).expect("stat");
        (path.to_str().expect("utf-8").to_owned(), meta)
    }

    #[test]
    fn a_hit_needs_the_same_file_unchanged_and_the_same_rules() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, meta) = file(dir.path(), "a.txt", b"one");
        put(
            &path,
            &resolver(),
            &meta,
            cached(Bytes::from_static(b"one")),
        );
        assert_eq!(&get(&path, &resolver()).expect("hit").bytes[..], b"one");

        let strict = Resolver {
            follow_symlinks: false,
            ..resolver()
        };
        assert!(get(&path, &strict).is_none(), "other rules");

        std::fs::write(&path, b"two!").expect("rewrite");
        assert!(get(&path, &resolver()).is_none(), "changed file");
        assert!(get(&path, &resolver()).is_none(), "dropped");

        let (path, meta) = file(dir.path(), "b.txt", b"bee");
        put(
            &path,
            &resolver(),
            &meta,
            cached(Bytes::from_static(b"bee")),
        );
        std::fs::remove_file(&path).expect("remove");
        assert!(get(&path, &resolver()).is_none(), "deleted file");
    }

    #[test]
    fn a_file_replaced_by_rename_is_a_miss() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, meta) = file(dir.path(), "c.txt", b"old");
        put(
            &path,
            &resolver(),
            &meta,
            cached(Bytes::from_static(b"old")),
        );
        let (other, _) = file(dir.path(), "d.txt", b"new");
        std::fs::rename(&other, &path).expect("rename");
        assert!(get(&path, &resolver()).is_none());
    }

    #[test]
    fn bytes_that_do_not_match_the_size_are_not_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, meta) = file(dir.path(), "e.txt", b"12345");
        put(
            &path,
            &resolver(),
            &meta,
            cached(Bytes::from_static(b"1234")),
        );
        assert!(get(&path, &resolver()).is_none());
    }

    #[test]
    fn the_least_recently_used_go_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = vec![7u8; usize::try_from(MAX_FILE).expect("fits")];
        let per = BUDGET / big.len();
        let mut paths = Vec::new();
        for i in 0..=per {
            let (path, meta) = file(dir.path(), &format!("{i}"), &big);
            put(&path, &resolver(), &meta, cached(Bytes::from(big.clone())));
            paths.push(path);
            if i == 1 {
                // The first is used again: the second is now the oldest.
                assert!(get(&paths[0], &resolver()).is_some());
            }
        }
        assert!(get(&paths[0], &resolver()).is_some());
        assert!(get(&paths[1], &resolver()).is_none());
        assert!(get(&paths[per], &resolver()).is_some());
        CACHE.with_borrow(|c| assert!(c.bytes <= BUDGET));
    }

    #[test]
    fn a_fresh_change_is_not_settled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_, meta) = file(dir.path(), "f.txt", b"x");
        let now = SystemTime::now();
        assert!(!settled(&meta, now, Duration::from_secs(2)));
        assert!(settled(
            &meta,
            now + Duration::from_secs(3),
            Duration::from_secs(2)
        ));
    }
}
