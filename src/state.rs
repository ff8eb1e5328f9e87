//! The state directory: the last good configuration, saved atomically and read back at start.
//!
//! A save is two steps: [`StateDir::prepare`] writes a temporary file and fsyncs it, [`PendingSave::commit`]
//! renames it over `conf.json` and fsyncs the directory. A crash or a full disk leaves either the old file or the
//! new one, never half of one; and since the step that can fail for lack of space comes first, the engine runs it
//! before it changes anything. A file that cannot be read or parsed stops start-up with its path and the reason;
//! it is never silently replaced.
//!
//! `conf.json` is private to the user running rein (0600): the document may hold applications' environment
//! values. The directory, when rein creates it, is 0711: others may not list it, but may pass through it to
//! the files applications read by name (`run/node/`, `run/python/`: an app with `user` runs as another user);
//! everything else in it is closed by its own mode (the control socket 0600, `run/apps/` and `logs/` 0700).

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::Value;

const CONF: &str = "conf.json";
/// The fleet and revision `conf.json` is, in a fleet.
const FLEET: &str = "fleet.json";

/// The mode of a state directory rein creates, whatever the umask.
pub const STATE_DIR_MODE: u32 = 0o711;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot read the saved configuration {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error(
        "the saved configuration {path} is not valid JSON ({source}); fix or remove it to start"
    )]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot save the configuration to {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    /// Uses the directory `dir`, creating it 0711 if it does not exist: not listable by others, but traversable,
    /// since applications running as another user read rein's support files under it. An existing directory
    /// keeps its mode: the user chose it.
    pub fn open(dir: &Path) -> io::Result<StateDir> {
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent)?;
        }
        match DirBuilder::new().mode(STATE_DIR_MODE).create(dir) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {}
            // Set again: a umask such as 077 would have closed it to those apps.
            Ok(()) => fs::set_permissions(dir, fs::Permissions::from_mode(STATE_DIR_MODE))?,
            Err(e) => return Err(e),
        }
        Ok(StateDir {
            dir: dir.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn conf(&self) -> PathBuf {
        self.dir.join(CONF)
    }

    /// The saved configuration, or `None` when nothing was ever saved.
    pub fn load(&self) -> Result<Option<Value>, StateError> {
        let path = self.conf();
        let text = match fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(StateError::Read { path, source }),
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|source| StateError::Corrupt { path, source })
    }

    fn tmp(&self) -> PathBuf {
        self.dir.join(format!(".{CONF}.tmp"))
    }

    /// Replaces the saved configuration atomically.
    #[cfg(test)]
    pub fn save(&self, doc: &Value) -> Result<(), StateError> {
        self.prepare(doc)?.commit()
    }

    /// Writes `doc` to the temporary file and fsyncs it: the step that fails when the disk is full or the
    /// directory unwritable. Nothing is replaced until [`PendingSave::commit`]; dropping the result removes the
    /// temporary file.
    pub fn prepare(&self, doc: &Value) -> Result<PendingSave<'_>, StateError> {
        let pending = PendingSave {
            state: self,
            committed: false,
        };
        let write = || -> io::Result<()> {
            let mut text = serde_json::to_vec_pretty(doc).map_err(io::Error::other)?;
            text.push(b'\n');
            // Private (the mode survives the rename): the document may hold secrets.
            write_private(&self.tmp(), &text)
        };
        write().map_err(|source| StateError::Write {
            path: self.conf(),
            source,
        })?;
        Ok(pending)
    }
}

/// In a fleet: which revision of the fleet's document the saved configuration is.
impl StateDir {
    /// The fleet revision `conf.json` holds, if it was saved in the fleet `fleet`.
    pub fn load_revision(&self, fleet: &str) -> Option<i64> {
        let text = fs::read(self.dir.join(FLEET)).ok()?;
        let v: Value = serde_json::from_slice(&text).ok()?;
        (v.get("fleet")?.as_str()? == fleet)
            .then(|| v.get("revision")?.as_i64())
            .flatten()
    }

    /// Records that `conf.json` is the fleet `fleet`'s document at `revision`. Not fsynced: after a crash, an
    /// older revision (or none) only makes the node read or replay more of the fleet's history at start.
    pub fn save_revision(&self, fleet: &str, revision: i64) -> Result<(), StateError> {
        let path = self.dir.join(FLEET);
        let tmp = self.dir.join(format!(".{FLEET}.tmp"));
        let text = serde_json::json!({"fleet": fleet, "revision": revision}).to_string();
        let write = || -> io::Result<()> {
            let mut file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(text.as_bytes())?;
            fs::rename(&tmp, &path)
        };
        write().map_err(|source| StateError::Write { path, source })
    }
}

/// A configuration written and fsynced beside `conf.json`, not yet in its place.
pub struct PendingSave<'a> {
    state: &'a StateDir,
    committed: bool,
}

impl<'a> PendingSave<'a> {
    /// The state directory it is saved in.
    pub fn state(&self) -> &'a StateDir {
        self.state
    }

    /// Renames the temporary file over `conf.json` and fsyncs the directory. Only a failed rename is an error
    /// (the temporary file is then removed and `conf.json` is the old one): after it, the new document is the
    /// saved one, and a failed fsync of the directory only leaves the rename less durable, so it is logged.
    pub fn commit(mut self) -> Result<(), StateError> {
        let state = self.state;
        fs::rename(state.tmp(), state.conf()).map_err(|source| StateError::Write {
            path: state.conf(),
            source,
        })?;
        self.committed = true;
        if let Err(e) = File::open(&state.dir).and_then(|d| d.sync_all()) {
            tracing::warn!(dir = %state.dir.display(), error = %e, "cannot fsync the state directory");
        }
        Ok(())
    }
}

impl Drop for PendingSave<'_> {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(self.state.tmp());
        }
    }
}

/// Writes `bytes` to `path` as a file only its owner reads (0600, narrowed if it existed wider, as one left
/// by an older rein may be), and fsyncs it: the first half of an atomic replace, whose rename is the caller's.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_and_loads() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        assert!(state.load().unwrap().is_none());
        let doc = serde_json::json!({"listeners": {}, "routes": []});
        state.save(&doc).unwrap();
        assert_eq!(state.load().unwrap(), Some(doc));
        assert!(!dir.path().join(".conf.json.tmp").exists());
    }

    #[test]
    fn a_prepared_save_replaces_nothing_until_committed() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let old = serde_json::json!({"routes": []});
        state.save(&old).unwrap();
        let pending = state
            .prepare(&serde_json::json!({"listeners": {}}))
            .unwrap();
        assert_eq!(state.load().unwrap(), Some(old.clone()));
        drop(pending);
        assert_eq!(state.load().unwrap(), Some(old));
        assert!(!dir.path().join(".conf.json.tmp").exists());
    }

    #[test]
    fn the_file_is_private_and_the_directory_only_traversable() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("a/state");
        let state = StateDir::open(&dir).unwrap();
        state.save(&serde_json::json!({})).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o711);
        assert_eq!(mode(&dir.join(CONF)), 0o600);
    }

    #[test]
    fn the_fleet_revision_is_the_named_fleets() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        assert_eq!(state.load_revision("web"), None);
        state.save_revision("web", 42).unwrap();
        assert_eq!(state.load_revision("web"), Some(42));
        assert_eq!(state.load_revision("api"), None);
    }

    #[test]
    fn corrupt_file_is_an_error_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(CONF), b"{\"listeners\": ").unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let err = state.load().unwrap_err();
        assert!(matches!(err, StateError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("conf.json"));
        assert_eq!(
            fs::read(dir.path().join(CONF)).unwrap(),
            b"{\"listeners\": "
        );
    }
}
