//! Watching an application's files, so that a change to them becomes a rolling reload.
//!
//! The `watch` object of an application names files and directories (directories are watched recursively),
//! glob patterns to ignore, and a debounce: a burst of changes — an editor's save-by-rename, a `git checkout`
//! — becomes one call of `on_change`, made once `debounce` has passed without a further change.
//!
//! inotify watches one directory per watch and the number of watches is limited per user
//! (`fs.inotify.max_user_watches`), so the recursion is done here rather than by `notify`: an ignored
//! directory such as `node_modules` is never descended into and costs no watch. A watched *file* is watched
//! through its parent directory (one watch, events filtered to that name), because a save-by-rename replaces
//! the file's inode and a watch on the file itself would die with the old one. Symbolic links to directories
//! inside a watched tree are not followed; a watched path that is itself a link is.
//!
//! Failing to add a watch is an error, never a silent fallback: at [`start`] it is returned, naming the path
//! and, for the watch limit, the setting to raise; for a directory created later it is logged.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use notify::event::{ModifyKind, RenameMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use serde_json::Value;

use crate::config::walk::{known_keys, object, seconds, strings};
use crate::config::{ConfigError, JsonPath};

/// The debounce when the configuration gives none.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(500);

/// The compiled `watch` object of an application.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchConf {
    /// Absolute paths of the watched files and directories.
    pub paths: Vec<PathBuf>,
    /// Glob patterns; a path is ignored when one matches a component of it, or its path (or the path of one
    /// of its ancestors) relative to the watched root.
    pub ignore: Vec<String>,
    /// How long the files must stay quiet before a burst of changes is reported.
    pub debounce: Duration,
}

/// Compiles the `watch` object at `path`; a relative path in `paths` is resolved against
/// `working_directory`.
pub fn compile(
    v: &Value,
    path: &JsonPath,
    working_directory: Option<&Path>,
) -> Result<WatchConf, ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["paths", "ignore", "debounce"], path)?;

    let paths_at = path.key("paths");
    let raw = map
        .get("paths")
        .ok_or_else(|| paths_at.error("is required: the files or directories to watch"))?;
    let mut paths = Vec::new();
    for (i, p) in strings(raw, &paths_at)?.into_iter().enumerate() {
        let at = if raw.is_array() {
            paths_at.index(i)
        } else {
            paths_at.clone()
        };
        if p.is_empty() {
            return Err(at.error("must not be empty"));
        }
        let p = Path::new(p);
        let resolved = if p.is_absolute() {
            p.to_path_buf()
        } else {
            match working_directory {
                Some(wd) if wd.is_absolute() => wd.join(p),
                Some(wd) => {
                    return Err(at.error(format!(
                        "is relative, and so is the working_directory {:?} it would be resolved against; \
                         use an absolute path",
                        wd.display().to_string()
                    )));
                }
                None => {
                    return Err(at.error(
                        "is relative, and the application has no working_directory to resolve it against; \
                         use an absolute path",
                    ));
                }
            }
        };
        // Lexically tidied (`./src` → `src`), so that reported paths read as the user expects.
        paths.push(resolved.components().collect());
    }

    let mut ignore = Vec::new();
    if let Some(raw) = map.get("ignore") {
        let at = path.key("ignore");
        let patterns = match raw {
            Value::Array(items) if items.is_empty() => Vec::new(),
            _ => strings(raw, &at)?,
        };
        for (i, pattern) in patterns.into_iter().enumerate() {
            let at = if raw.is_array() {
                at.index(i)
            } else {
                at.clone()
            };
            if pattern.is_empty() {
                return Err(at.error("must not be empty"));
            }
            glob(pattern).map_err(|e| at.error(format!("is not a valid glob pattern: {e}")))?;
            ignore.push(pattern.to_owned());
        }
    }

    let debounce = match map.get("debounce") {
        Some(v) => seconds(v, &path.key("debounce"))?,
        None => DEFAULT_DEBOUNCE,
    };

    Ok(WatchConf {
        paths,
        ignore,
        debounce,
    })
}

fn glob(pattern: &str) -> Result<globset::Glob, globset::Error> {
    GlobBuilder::new(pattern).literal_separator(true).build()
}

/// A running watch; dropping it stops the watching, and no call of `on_change` begins after the drop.
pub struct Watcher {
    stop: mpsc::Sender<Msg>,
    thread: Option<thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").finish_non_exhaustive()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.stop.send(Msg::Stop);
        if let Some(thread) = self.thread.take() {
            // Dropped from inside `on_change`: the thread ends by itself after the callback returns.
            if thread.thread().id() != thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

enum Msg {
    Fs(notify::Result<Event>),
    Stop,
}

/// Starts watching `conf.paths`; `on_change` is called, from a thread of the watcher's own, with the first
/// changed path of each debounced burst.
pub fn start(
    conf: &WatchConf,
    on_change: impl Fn(PathBuf) + Send + 'static,
) -> io::Result<Watcher> {
    let ignore = Ignore::new(&conf.ignore)?;
    let mut roots = Vec::new();
    for path in &conf.paths {
        let meta = std::fs::metadata(path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("watch path {} does not exist", path.display()),
                )
            } else {
                io::Error::new(e.kind(), format!("watch path {}: {e}", path.display()))
            }
        })?;
        if meta.is_dir() {
            roots.push(Root::Dir(path.clone()));
        } else {
            roots.push(Root::File(path.clone()));
        }
    }

    let (tx, rx) = mpsc::channel();
    let events = tx.clone();
    let watcher = notify::recommended_watcher(move |res| {
        let _ = events.send(Msg::Fs(res));
    })
    .map_err(|e| {
        io::Error::other(format!(
            "cannot start a file watcher: {e} (is fs.inotify.max_user_instances reached?)"
        ))
    })?;

    let mut state = State {
        watcher,
        roots,
        ignore,
        watched: BTreeSet::new(),
        pinned: BTreeSet::new(),
    };
    for root in state.roots.clone() {
        match root {
            Root::Dir(dir) => state.add_tree(&dir)?,
            Root::File(file) => {
                let parent = match file.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                    _ => PathBuf::from("/"),
                };
                state.add_dir(&parent)?;
                state.pinned.insert(parent);
            }
        }
    }
    for root in &state.roots {
        if let Root::Dir(dir) = root {
            state.pinned.insert(dir.clone());
        }
    }

    let debounce = conf.debounce;
    let thread = thread::Builder::new()
        .name("rein-watch".into())
        .spawn(move || run(state, rx, debounce, on_change))?;
    Ok(Watcher {
        stop: tx,
        thread: Some(thread),
    })
}

fn run(mut state: State, rx: mpsc::Receiver<Msg>, debounce: Duration, on_change: impl Fn(PathBuf)) {
    // The first changed path of the burst, and when its latest change was seen.
    let mut pending: Option<(PathBuf, Instant)> = None;
    loop {
        let msg = match &pending {
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some((_, last)) => {
                rx.recv_timeout((*last + debounce).saturating_duration_since(Instant::now()))
            }
        };
        match msg {
            Ok(Msg::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
            Ok(Msg::Fs(Ok(event))) => {
                if let Some(changed) = state.handle(event) {
                    let now = Instant::now();
                    match &mut pending {
                        Some((_, last)) => *last = now,
                        None => pending = Some((changed, now)),
                    }
                }
            }
            Ok(Msg::Fs(Err(e))) => {
                tracing::error!(error = %e, paths = ?e.paths, "file watch error; changes may be missed");
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Some((changed, _)) = pending.take() {
                    let call = std::panic::AssertUnwindSafe(|| on_change(changed));
                    if std::panic::catch_unwind(call).is_err() {
                        tracing::error!("the file watch callback panicked");
                    }
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Root {
    Dir(PathBuf),
    File(PathBuf),
}

impl Root {
    fn path(&self) -> &Path {
        match self {
            Root::Dir(p) | Root::File(p) => p,
        }
    }
}

struct Ignore(GlobSet);

impl Ignore {
    fn new(patterns: &[String]) -> io::Result<Self> {
        let mut set = GlobSetBuilder::new();
        for p in patterns {
            set.add(glob(p).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("ignore pattern {p:?}: {e}"),
                )
            })?);
        }
        let set = set.build().map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("ignore patterns: {e}"))
        })?;
        Ok(Ignore(set))
    }

    /// Whether `rel`, a path relative to a watched root, is ignored: a pattern matches one of its
    /// components, or it or one of its ancestors as a whole.
    fn matches(&self, rel: &Path) -> bool {
        if self.0.is_empty() {
            return false;
        }
        rel.ancestors()
            .filter(|a| !a.as_os_str().is_empty())
            .any(|a| self.0.is_match(a) || a.file_name().is_some_and(|name| self.0.is_match(name)))
    }
}

struct State {
    watcher: RecommendedWatcher,
    roots: Vec<Root>,
    ignore: Ignore,
    /// Every directory with a watch.
    watched: BTreeSet<PathBuf>,
    /// The watched roots and the parents of watched files: never unwatched.
    pinned: BTreeSet<PathBuf>,
}

impl State {
    /// Whether a change at `path` counts, and the directory watch bookkeeping it implies.
    fn handle(&mut self, event: Event) -> Option<PathBuf> {
        if matches!(event.kind, EventKind::Access(_)) {
            return None;
        }
        if event.need_rescan() {
            // The kernel queue overflowed: something changed, what is unknown.
            return Some(self.roots[0].path().to_path_buf());
        }
        match event.kind {
            EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(RenameMode::From)) => {
                for p in &event.paths {
                    self.forget(p);
                }
            }
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
                if let [from, to] = &event.paths[..] {
                    self.forget(from);
                    self.discover(to);
                }
            }
            EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(_)) => {
                for p in &event.paths {
                    self.discover(p);
                }
            }
            _ => {}
        }
        event.paths.iter().find(|p| self.relevant(p)).cloned()
    }

    fn relevant(&self, path: &Path) -> bool {
        self.roots.iter().any(|root| match root {
            Root::File(file) => path == file,
            Root::Dir(dir) => path
                .strip_prefix(dir)
                .is_ok_and(|rel| !self.ignore.matches(rel)),
        })
    }

    /// Whether `dir` lies in a watched tree and is not ignored there.
    fn in_tree(&self, dir: &Path) -> bool {
        self.roots.iter().any(|root| match root {
            Root::Dir(root) => dir
                .strip_prefix(root)
                .is_ok_and(|rel| !self.ignore.matches(rel)),
            Root::File(_) => false,
        })
    }

    /// A directory appeared (created or moved in) inside a watched tree: watch it and what it holds.
    fn discover(&mut self, path: &Path) {
        let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
        if is_dir
            && self.in_tree(path)
            && let Err(e) = self.add_tree(path)
        {
            tracing::error!(error = %e, "file watch: a new directory is not watched; changes in it will be missed");
        }
    }

    /// A path went away (removed or moved out): drop the watches of it and below it.
    fn forget(&mut self, path: &Path) {
        let gone: Vec<PathBuf> = self
            .watched
            .range(path.to_path_buf()..)
            .take_while(|p| p.starts_with(path))
            .filter(|p| !self.pinned.contains(*p))
            .cloned()
            .collect();
        for p in gone {
            // A removed directory's watch is already gone from the kernel; nothing to report.
            let _ = self.watcher.unwatch(&p);
            self.watched.remove(&p);
        }
    }

    /// Watches `top` and every directory below it that is not ignored.
    fn add_tree(&mut self, top: &Path) -> io::Result<()> {
        let mut stack = vec![top.to_path_buf()];
        while let Some(dir) = stack.pop() {
            if !self.in_tree(&dir) {
                continue;
            }
            self.add_dir(&dir)?;
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                // Removed meanwhile: its removal is an event of its own.
                Err(e) if e.kind() == io::ErrorKind::NotFound && dir != top => continue,
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot watch {}: {e}", dir.display()),
                    ));
                }
            };
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(entry.path());
                }
            }
        }
        Ok(())
    }

    fn add_dir(&mut self, dir: &Path) -> io::Result<()> {
        if self.watched.contains(dir) {
            return Ok(());
        }
        self.watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|e| watch_error(dir, e))?;
        self.watched.insert(dir.to_path_buf());
        Ok(())
    }
}

fn watch_error(path: &Path, e: notify::Error) -> io::Error {
    let path = path.display();
    match e.kind {
        notify::ErrorKind::MaxFilesWatch => io::Error::other(format!(
            "cannot watch {path}: the inotify watch limit is reached; raise fs.inotify.max_user_watches \
             (sysctl) or ignore more directories"
        )),
        notify::ErrorKind::PathNotFound => io::Error::new(
            io::ErrorKind::NotFound,
            format!("watch path {path} does not exist"),
        ),
        notify::ErrorKind::Io(io) => {
            io::Error::new(io.kind(), format!("cannot watch {path}: {io}"))
        }
        _ => io::Error::other(format!("cannot watch {path}: {e}")),
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
