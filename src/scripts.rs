//! Which script answers a request that goes to a FastCGI server: PHP's `root`/`script`/`index` rules with
//! the front-controller fallback, and the Python app's `prefix`.
//!
//! A PHP application follows Unit's rules ([`PhpTarget::resolve_app`]): with a `script` every request runs it;
//! otherwise a path with a `.php` segment runs that script, a directory path (`/blog/`) runs its `index`, a
//! directory named without its slash is redirected to it, and anything else is a 404: no file under `root`
//! is ever sent as it is (its PHP source would leak), and no front controller is guessed (Unit's needs
//! `script`). A directory the app's users cannot enter is a 403.
//!
//! The `fastcgi` action ([`PhpTarget::resolve`]), for a request path P under `root`:
//! - with a `script`, every request runs it, P as its `PATH_INFO`;
//! - a path with a `.php` segment (`/a.php`, `/a.php/more`) runs that script, the rest as `PATH_INFO`, or is a
//!   404 when the script is not a file (never handed to PHP to guess: the `cgi.fix_pathinfo` hole);
//! - a directory path (`/blog/`) runs its `index` when there is one;
//! - any other file is served by rein itself, never by PHP;
//! - a directory named without its slash is redirected to it, as web servers do;
//! - anything else runs the root's `index` when there is one (the front controller that WordPress and Laravel
//!   need), else it is a 404.

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::fastcgi::{Cgi, Script};

/// How long a script found to be a file is trusted without looking again. Only finding one is remembered: a
/// script created is seen at once, and one deleted goes to PHP-FPM for at most this long, which answers 404
/// itself (and a name ending in `.php` leaves `cgi.fix_pathinfo` no shorter file to fall back on). A `stat`
/// per request was 4 % of rein's CPU on a PHP hello.
const FOUND_FOR: Duration = Duration::from_secs(1);
/// Scripts remembered per worker thread, at most.
const FOUND_MAX: usize = 1024;

thread_local! {
    // Keyed by the path's bytes: hashing a `Path` walks its components, twice the cost.
    static FOUND: RefCell<HashMap<Box<[u8]>, Instant>> = RefCell::new(HashMap::new());
}

/// Where a PHP request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhpTarget {
    pub root: PathBuf,
    pub index: String,
    pub script: Option<String>,
}

#[derive(Debug, PartialEq)]
pub enum Resolved {
    Script(Script),
    /// A file under `root` that rein serves itself.
    Static(PathBuf),
    /// A directory named without its trailing slash: the path to redirect to.
    Slash(String),
    /// A directory that cannot be entered (no permission to search it).
    Forbidden,
    NotFound,
}

impl PhpTarget {
    /// What answers the decoded, normalised request `path` for a PHP application, by Unit's rules (the
    /// module's header).
    pub fn resolve_app(&self, path: &str) -> Resolved {
        if self.script.is_some() || php_split(path).is_some() {
            return self.resolve(path);
        }
        if path.ends_with('/') {
            let name = [path, &self.index].concat();
            if let Some(file) = self.found(&name) {
                return Resolved::Script(self.script(file, &name, ""));
            }
            return match closed_dir(&self.file(path)) {
                true => Resolved::Forbidden,
                false => Resolved::NotFound,
            };
        }
        if self.file(path).is_dir() {
            return Resolved::Slash(format!("{path}/"));
        }
        Resolved::NotFound
    }

    /// The script (or file) that answers the decoded, normalised request `path`.
    pub fn resolve(&self, path: &str) -> Resolved {
        if let Some(script) = &self.script {
            let name = ["/", script].concat();
            return Resolved::Script(self.script(self.file(&name), &name, path));
        }
        if let Some(end) = php_split(path) {
            let (name, info) = path.split_at(end);
            return match self.found(name) {
                Some(file) => Resolved::Script(self.script(file, name, info)),
                None => Resolved::NotFound,
            };
        }
        if path.ends_with('/') {
            let name = [path, &self.index].concat();
            if let Some(file) = self.found(&name) {
                return Resolved::Script(self.script(file, &name, ""));
            }
        } else {
            let file = self.file(path);
            if file.is_file() {
                return Resolved::Static(file);
            }
            if file.is_dir() {
                return Resolved::Slash(format!("{path}/"));
            }
        }
        let front = ["/", &self.index].concat();
        match self.found(&front) {
            Some(file) => Resolved::Script(self.script(file, &front, "")),
            None => Resolved::NotFound,
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.root.join(name.trim_start_matches('/'))
    }

    /// The script's file, if it is one.
    fn found(&self, name: &str) -> Option<PathBuf> {
        let file = self.file(name);
        script_exists(&file, Instant::now()).then_some(file)
    }

    fn script(&self, filename: PathBuf, name: &str, path_info: &str) -> Script {
        Script {
            filename,
            name: name.to_owned(),
            path_info: path_info.to_owned(),
            document_root: self.root.clone(),
            extra: Vec::new(),
            cgi: Cgi::Full,
        }
    }
}

/// Whether `dir` is a directory that cannot be entered: rein cannot, or no one but root can (no search
/// permission bit at all), as the applications never run as root by default.
fn closed_dir(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(dir) {
        Ok(meta) => meta.is_dir() && meta.permissions().mode() & 0o111 == 0,
        Err(e) => e.kind() == std::io::ErrorKind::PermissionDenied,
    }
}

/// Whether `path` is a file, as found within [`FOUND_FOR`] before `now` or looked up now.
fn script_exists(path: &Path, now: Instant) -> bool {
    let fresh = |at: &Instant| now.saturating_duration_since(*at) < FOUND_FOR;
    let key = path.as_os_str().as_bytes();
    if FOUND.with_borrow(|found| found.get(key).is_some_and(fresh)) {
        return true;
    }
    let file = path.is_file();
    FOUND.with_borrow_mut(|found| {
        if !file {
            found.remove(key);
            return;
        }
        if found.len() >= FOUND_MAX {
            found.retain(|_, at| fresh(at));
            if found.len() >= FOUND_MAX {
                found.clear();
            }
        }
        found.insert(key.into(), now);
    });
    file
}

/// Where the script name ends in a path with a `.php` segment: after the first `.php` followed by `/` or the
/// end of the path.
fn php_split(path: &str) -> Option<usize> {
    path.match_indices(".php")
        .map(|(i, _)| i + 4)
        .find(|&end| end == path.len() || path.as_bytes()[end] == b'/')
}

/// An adapter-hosted app's view of a path (Python, and any app mounted at a `prefix`): `SCRIPT_NAME` is the
/// `prefix` when the path is under it, `PATH_INFO` the rest.
pub fn mounted(prefix: &str, path: &str) -> Script {
    let under = !prefix.is_empty()
        && path.starts_with(prefix)
        && matches!(path.as_bytes().get(prefix.len()), None | Some(b'/'));
    let (name, info) = if under {
        path.split_at(prefix.len())
    } else {
        ("", path)
    };
    Script {
        name: name.to_owned(),
        path_info: info.to_owned(),
        cgi: Cgi::Lean,
        ..Script::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site() -> (tempfile::TempDir, PhpTarget) {
        let dir = tempfile::tempdir().unwrap();
        for (name, body) in [
            ("index.php", "<?php"),
            ("info.php", "<?php"),
            ("style.css", "body{}"),
            ("blog/index.php", "<?php"),
            ("docs/readme.txt", "hi"),
        ] {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        let target = PhpTarget {
            root: dir.path().to_owned(),
            index: "index.php".into(),
            script: None,
        };
        (dir, target)
    }

    fn script(r: Resolved) -> (String, String) {
        match r {
            Resolved::Script(s) => (s.name, s.path_info),
            other => panic!("not a script: {other:?}"),
        }
    }

    #[test]
    fn php_paths_split_at_the_script() {
        let (_d, t) = site();
        assert_eq!(
            script(t.resolve("/info.php")),
            ("/info.php".into(), "".into())
        );
        assert_eq!(
            script(t.resolve("/info.php/a/b")),
            ("/info.php".into(), "/a/b".into())
        );
        assert_eq!(t.resolve("/missing.php"), Resolved::NotFound);
        assert_eq!(t.resolve("/style.css.php/x"), Resolved::NotFound);
    }

    #[test]
    fn a_php_lookalike_is_not_a_script() {
        let (_d, t) = site();
        // ".phpx" is not ".php": no split, not a file, so the front controller takes it.
        assert_eq!(
            script(t.resolve("/a.phpx")),
            ("/index.php".into(), "".into())
        );
    }

    #[test]
    fn directories_run_their_index_or_get_their_slash() {
        let (_d, t) = site();
        assert_eq!(
            script(t.resolve("/blog/")),
            ("/blog/index.php".into(), "".into())
        );
        assert_eq!(script(t.resolve("/")), ("/index.php".into(), "".into()));
        assert_eq!(t.resolve("/blog"), Resolved::Slash("/blog/".into()));
        // A directory without an index falls to the front controller.
        assert_eq!(
            script(t.resolve("/docs/")),
            ("/index.php".into(), "".into())
        );
    }

    #[test]
    fn files_are_static_and_the_rest_goes_to_the_front_controller() {
        let (d, t) = site();
        assert_eq!(
            t.resolve("/style.css"),
            Resolved::Static(d.path().join("style.css"))
        );
        assert_eq!(
            script(t.resolve("/2024/hello-world")),
            ("/index.php".into(), "".into())
        );
        let (d, t) = site();
        std::fs::remove_file(d.path().join("index.php")).unwrap();
        assert_eq!(t.resolve("/2024/hello-world"), Resolved::NotFound);
    }

    #[test]
    fn a_fixed_script_takes_every_request() {
        let (_d, mut t) = site();
        t.script = Some("index.php".into());
        assert_eq!(
            script(t.resolve("/style.css")),
            ("/index.php".into(), "/style.css".into())
        );
    }

    #[test]
    fn a_script_found_is_trusted_for_a_moment_and_a_missing_one_looked_for_each_time() {
        let (dir, t) = site();
        assert_eq!(script(t.resolve("/info.php")).0, "/info.php");
        std::fs::remove_file(dir.path().join("info.php")).unwrap();
        assert_eq!(script(t.resolve("/info.php")).0, "/info.php", "trusted");
        assert_eq!(t.resolve("/new.php"), Resolved::NotFound);
        std::fs::write(dir.path().join("new.php"), "<?php").unwrap();
        assert_eq!(script(t.resolve("/new.php")).0, "/new.php", "seen at once");
        // Once the moment has passed, a deleted script is looked for again.
        let gone = dir.path().join("info.php");
        let later = Instant::now() + FOUND_FOR;
        assert!(!script_exists(&gone, later));
        assert!(!script_exists(&gone, Instant::now()), "forgotten");
    }

    #[test]
    fn an_application_runs_scripts_and_indexes_only() {
        let (d, t) = site();
        assert_eq!(script(t.resolve_app("/info.php")).0, "/info.php");
        assert_eq!(script(t.resolve_app("/blog/")).0, "/blog/index.php");
        assert_eq!(t.resolve_app("/blog"), Resolved::Slash("/blog/".into()));
        assert_eq!(
            t.resolve_app("/style.css"),
            Resolved::NotFound,
            "never sent"
        );
        assert_eq!(t.resolve_app("/2024/hello"), Resolved::NotFound, "no guess");
        assert_eq!(t.resolve_app("/docs/"), Resolved::NotFound);
        use std::os::unix::fs::PermissionsExt;
        let docs = d.path().join("docs");
        std::fs::set_permissions(&docs, std::fs::Permissions::from_mode(0o000)).unwrap();
        assert_eq!(t.resolve_app("/docs/"), Resolved::Forbidden);
        std::fs::set_permissions(&docs, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn python_prefix_splits_only_at_a_segment() {
        let s = mounted("/app", "/app/x");
        assert_eq!((s.name.as_str(), s.path_info.as_str()), ("/app", "/x"));
        let s = mounted("/app", "/app");
        assert_eq!((s.name.as_str(), s.path_info.as_str()), ("/app", ""));
        let s = mounted("/app", "/apple");
        assert_eq!((s.name.as_str(), s.path_info.as_str()), ("", "/apple"));
        let s = mounted("", "/x");
        assert_eq!((s.name.as_str(), s.path_info.as_str()), ("", "/x"));
    }
}
