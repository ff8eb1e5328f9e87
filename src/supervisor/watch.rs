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
mod tests {
    use super::*;
    use serde_json::json;
    use std::fs;
    use std::sync::mpsc::{Receiver, RecvTimeoutError};

    const DEBOUNCE: Duration = Duration::from_millis(200);
    /// Generous: a loaded CI machine may be slow to deliver the first event.
    const DEADLINE: Duration = Duration::from_secs(5);

    fn conf(paths: &[&Path], ignore: &[&str]) -> WatchConf {
        WatchConf {
            paths: paths.iter().map(|p| p.to_path_buf()).collect(),
            ignore: ignore.iter().map(|s| s.to_string()).collect(),
            debounce: DEBOUNCE,
        }
    }

    fn watch(conf: &WatchConf) -> (Watcher, Receiver<PathBuf>) {
        let (tx, rx) = mpsc::channel();
        let w = start(conf, move |p| {
            let _ = tx.send(p);
        })
        .unwrap();
        (w, rx)
    }

    /// Nothing arrives within three debounces.
    fn assert_quiet(rx: &Receiver<PathBuf>) {
        match rx.recv_timeout(DEBOUNCE * 3) {
            Err(RecvTimeoutError::Timeout) => {}
            other => panic!("expected no change, got {other:?}"),
        }
    }

    fn expect_one(rx: &Receiver<PathBuf>) -> PathBuf {
        let p = rx.recv_timeout(DEADLINE).expect("a change was reported");
        assert_quiet(rx);
        p
    }

    fn app(rel: &str) -> JsonPath {
        let mut p = JsonPath::root().key("applications").key("a").key("watch");
        for seg in rel.split('/').filter(|s| !s.is_empty()) {
            p = p.key(seg);
        }
        p
    }

    #[test]
    fn write_to_watched_file_triggers_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("package.json");
        fs::write(&file, "{}").unwrap();
        let (_w, rx) = watch(&conf(&[&file], &[]));
        fs::write(&file, "{\"a\": 1}").unwrap();
        assert_eq!(expect_one(&rx), file);
    }

    #[test]
    fn write_in_watched_dir_triggers_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("app.js");
        fs::write(&file, "1").unwrap();
        let (_w, rx) = watch(&conf(&[dir.path()], &[]));
        fs::write(&file, "2").unwrap();
        assert_eq!(expect_one(&rx), file);
    }

    #[test]
    fn sibling_of_watched_file_is_not_watched() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("package.json");
        fs::write(&file, "{}").unwrap();
        let (_w, rx) = watch(&conf(&[&file], &[]));
        fs::write(dir.path().join("other.txt"), "x").unwrap();
        assert_quiet(&rx);
    }

    #[test]
    fn burst_of_writes_gives_one_callback() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("app.js");
        fs::write(&file, "0").unwrap();
        let (_w, rx) = watch(&conf(&[dir.path()], &[]));
        for i in 0..20 {
            fs::write(&file, i.to_string()).unwrap();
            thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(expect_one(&rx), file);
    }

    #[test]
    fn ignored_dir_and_pattern_give_nothing() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("node_modules/pkg")).unwrap();
        fs::create_dir_all(dir.path().join("src")).unwrap();
        let (_w, rx) = watch(&conf(&[dir.path()], &["node_modules", "*.log", ".git"]));
        fs::write(dir.path().join("node_modules/x.js"), "x").unwrap();
        fs::write(dir.path().join("node_modules/pkg/y.js"), "y").unwrap();
        fs::write(dir.path().join("app.log"), "log").unwrap();
        fs::write(dir.path().join("src/deep.log"), "log").unwrap();
        fs::create_dir(dir.path().join(".git")).unwrap();
        fs::write(dir.path().join(".git/HEAD"), "ref").unwrap();
        assert_quiet(&rx);
        // And the watch still works for what is not ignored.
        fs::write(dir.path().join("src/a.js"), "a").unwrap();
        assert_eq!(expect_one(&rx), dir.path().join("src/a.js"));
    }

    #[test]
    fn ignored_dirs_cost_no_watch() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("node_modules/a/b")).unwrap();
        fs::create_dir_all(dir.path().join("src/lib")).unwrap();
        let c = conf(&[dir.path()], &["node_modules"]);
        let (tx, _rx) = mpsc::channel::<Msg>();
        let mut state = State {
            watcher: notify::recommended_watcher(move |res| {
                let _ = tx.send(Msg::Fs(res));
            })
            .unwrap(),
            roots: vec![Root::Dir(dir.path().to_path_buf())],
            ignore: Ignore::new(&c.ignore).unwrap(),
            watched: BTreeSet::new(),
            pinned: BTreeSet::new(),
        };
        state.add_tree(dir.path()).unwrap();
        let watched: Vec<_> = state.watched.iter().cloned().collect();
        let d = dir.path();
        assert_eq!(
            watched,
            vec![d.to_path_buf(), d.join("src"), d.join("src/lib")]
        );
    }

    #[test]
    fn ignore_matches_components_and_relative_paths() {
        let ig = Ignore::new(&[
            "node_modules".into(),
            "*.log".into(),
            "build/*.js".into(),
            "**/tmp".into(),
            "?.bak".into(),
        ])
        .unwrap();
        assert!(ig.matches(Path::new("node_modules")));
        assert!(ig.matches(Path::new("a/node_modules/b/c.js")));
        assert!(ig.matches(Path::new("x.log")));
        assert!(ig.matches(Path::new("deep/er/x.log")));
        assert!(ig.matches(Path::new("build/out.js")));
        assert!(!ig.matches(Path::new("build/sub/out.js")));
        assert!(!ig.matches(Path::new("src/build/out.js")));
        assert!(ig.matches(Path::new("a/b/tmp/file")));
        assert!(ig.matches(Path::new("a.bak")));
        assert!(!ig.matches(Path::new("ab.bak")));
        assert!(!ig.matches(Path::new("src/app.js")));
        assert!(!Ignore::new(&[]).unwrap().matches(Path::new("anything")));
    }

    #[test]
    fn new_file_in_watched_dir_triggers() {
        let dir = tempfile::tempdir().unwrap();
        let (_w, rx) = watch(&conf(&[dir.path()], &[]));
        let file = dir.path().join("new.js");
        fs::write(&file, "new").unwrap();
        assert_eq!(expect_one(&rx), file);
    }

    #[test]
    fn new_subdirectory_is_watched() {
        let dir = tempfile::tempdir().unwrap();
        let (_w, rx) = watch(&conf(&[dir.path()], &[]));
        let sub = dir.path().join("lib");
        fs::create_dir(&sub).unwrap();
        assert_eq!(expect_one(&rx), sub);
        fs::write(sub.join("mod.js"), "x").unwrap();
        assert_eq!(expect_one(&rx), sub.join("mod.js"));
    }

    #[test]
    fn save_by_rename_triggers_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("package.json");
        fs::write(&file, "{}").unwrap();
        // Watching the file alone: the rename replaces its inode, and the watch must survive it.
        let (_w, rx) = watch(&conf(&[&file], &[]));
        for round in 0..2 {
            let tmp = dir.path().join(".package.json.swp");
            fs::write(&tmp, format!("{{\"round\": {round}}}")).unwrap();
            fs::rename(&tmp, &file).unwrap();
            assert_eq!(expect_one(&rx), file);
        }
    }

    #[test]
    fn save_by_rename_in_watched_dir_triggers_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("app.js");
        fs::write(&file, "1").unwrap();
        let (_w, rx) = watch(&conf(&[dir.path()], &[]));
        let tmp = dir.path().join("app.js~");
        fs::write(&tmp, "2").unwrap();
        fs::rename(&tmp, &file).unwrap();
        assert_eq!(expect_one(&rx), tmp);
    }

    #[test]
    fn dropping_the_watcher_stops_callbacks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("app.js");
        fs::write(&file, "1").unwrap();
        let (w, rx) = watch(&conf(&[dir.path()], &[]));
        fs::write(&file, "2").unwrap();
        expect_one(&rx);
        // A change pending at the drop is not reported either.
        fs::write(&file, "3").unwrap();
        drop(w);
        fs::write(&file, "4").unwrap();
        assert!(matches!(
            rx.recv_timeout(DEBOUNCE * 3),
            Err(RecvTimeoutError::Disconnected)
        ));
    }

    #[test]
    fn reading_files_triggers_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("app.js");
        fs::write(&file, "1").unwrap();
        let (_w, rx) = watch(&conf(&[dir.path()], &[]));
        for _ in 0..3 {
            fs::read(&file).unwrap();
            fs::read_dir(dir.path()).unwrap().for_each(drop);
        }
        assert_quiet(&rx);
    }

    #[test]
    fn directory_moved_out_is_no_longer_watched() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("lib/sub")).unwrap();
        let (_w, rx) = watch(&conf(&[dir.path()], &[]));
        let moved = outside.path().join("lib");
        fs::rename(dir.path().join("lib"), &moved).unwrap();
        assert_eq!(expect_one(&rx), dir.path().join("lib"));
        fs::write(moved.join("sub/x.js"), "x").unwrap();
        fs::write(moved.join("y.js"), "y").unwrap();
        assert_quiet(&rx);
    }

    #[test]
    fn watch_limit_error_is_clear() {
        let err = watch_error(
            Path::new("/srv/app/src"),
            notify::Error::new(notify::ErrorKind::MaxFilesWatch),
        );
        let msg = err.to_string();
        assert!(msg.contains("/srv/app/src"), "{msg}");
        assert!(msg.contains("fs.inotify.max_user_watches"), "{msg}");
    }

    #[test]
    fn missing_path_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = start(&conf(&[dir.path(), &missing], &[]), |_| {}).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(
            err.to_string().contains(&missing.display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn compile_full_object() {
        let v = json!({"paths": ["/srv/app/src", "/srv/app/package.json"], "ignore": ["node_modules", "*.log", ".git"], "debounce": 0.25});
        let c = compile(&v, &app(""), None).unwrap();
        assert_eq!(
            c,
            WatchConf {
                paths: vec!["/srv/app/src".into(), "/srv/app/package.json".into()],
                ignore: vec!["node_modules".into(), "*.log".into(), ".git".into()],
                debounce: Duration::from_millis(250),
            }
        );
    }

    #[test]
    fn compile_defaults_and_single_string() {
        let c = compile(&json!({"paths": "/srv/app"}), &app(""), None).unwrap();
        assert_eq!(c.paths, vec![PathBuf::from("/srv/app")]);
        assert!(c.ignore.is_empty());
        assert_eq!(c.debounce, DEFAULT_DEBOUNCE);
        let c = compile(&json!({"paths": "/a", "ignore": "*.log"}), &app(""), None).unwrap();
        assert_eq!(c.ignore, vec!["*.log".to_string()]);
        let c = compile(&json!({"paths": "/a", "ignore": []}), &app(""), None).unwrap();
        assert!(c.ignore.is_empty());
    }

    #[test]
    fn relative_paths_resolve_against_working_directory() {
        let v = json!({"paths": ["src", "./package.json", "/abs"]});
        let c = compile(&v, &app(""), Some(Path::new("/srv/app"))).unwrap();
        assert_eq!(
            c.paths,
            vec![
                PathBuf::from("/srv/app/src"),
                PathBuf::from("/srv/app/package.json"),
                PathBuf::from("/abs")
            ]
        );
        let err = compile(&v, &app(""), None).unwrap_err();
        assert_eq!(err.path, app("paths/0"));
        assert!(err.message.contains("working_directory"), "{err}");
    }

    #[test]
    fn compile_errors_name_the_path() {
        let cases = [
            (
                json!({"paths": "/a", "debounce": "fast"}),
                "applications/a/watch/debounce",
            ),
            (
                json!({"paths": "/a", "debounce": -1}),
                "applications/a/watch/debounce",
            ),
            (json!({"debounce": 1}), "applications/a/watch/paths"),
            (json!({"paths": []}), "applications/a/watch/paths"),
            (json!({"paths": ["/a", 3]}), "applications/a/watch/paths/1"),
            (json!({"paths": ""}), "applications/a/watch/paths"),
            (
                json!({"paths": "/a", "ignore": ["ok", "[bad"]}),
                "applications/a/watch/ignore/1",
            ),
            (
                json!({"paths": "/a", "ignore": 5}),
                "applications/a/watch/ignore",
            ),
            (
                json!({"paths": "/a", "debounse": 1}),
                "applications/a/watch/debounse",
            ),
            (json!(["/a"]), "applications/a/watch"),
        ];
        for (v, want) in cases {
            let err = compile(&v, &app(""), None).unwrap_err();
            assert_eq!(err.path.as_str(), want, "{v}: {err}");
            assert!(err.to_string().starts_with(want), "{err}");
        }
    }

    #[test]
    fn relative_path_within_relative_root() {
        // The path of a change is reported as seen under the configured root.
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("src")).unwrap();
        let c = compile(
            &json!({"paths": "src", "debounce": 0.2}),
            &app(""),
            Some(dir.path()),
        )
        .unwrap();
        let (_w, rx) = watch(&c);
        fs::write(dir.path().join("src/x.js"), "x").unwrap();
        assert_eq!(expect_one(&rx), dir.path().join("src/x.js"));
    }
}
