//! The state directory: the last good configuration, saved atomically and read back at start.
//!
//! A save writes a temporary file, fsyncs it, renames it over `conf.json` and fsyncs the directory, so a crash
//! or a full disk leaves either the old file or the new one, never half of one. A file that cannot be read or
//! parsed stops start-up with its path and the reason; it is never silently replaced.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

const CONF: &str = "conf.json";

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
    /// Uses (creating, private to the user) the directory `dir`.
    pub fn open(dir: &Path) -> io::Result<StateDir> {
        fs::create_dir_all(dir)?;
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

    /// Replaces the saved configuration atomically.
    pub fn save(&self, doc: &Value) -> Result<(), StateError> {
        let path = self.conf();
        self.write_atomically(doc)
            .map_err(|source| StateError::Write { path, source })
    }

    fn write_atomically(&self, doc: &Value) -> io::Result<()> {
        let tmp = self.dir.join(format!(".{CONF}.tmp"));
        let text = serde_json::to_vec_pretty(doc).map_err(io::Error::other)?;
        let result = (|| {
            let mut file = File::create(&tmp)?;
            file.write_all(&text)?;
            file.write_all(b"\n")?;
            file.sync_all()?;
            fs::rename(&tmp, self.conf())?;
            File::open(&self.dir)?.sync_all()
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }
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
