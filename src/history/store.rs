//! `STATE/history/`: one file per history entry (`0000000042.json`), written atomically.
//!
//! Each entry is written to a temporary file, fsynced and renamed into place, so a crash leaves an entry whole
//! or absent. The folder is private (0700) and each file 0600: a document may hold applications' environment
//! values, as `conf.json` does.

use std::fs::{self, DirBuilder, File};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::Entry;

const DIR: &str = "history";

#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error("cannot use the history folder {}: {source}", .path.display())]
    Dir { path: PathBuf, source: io::Error },
    #[error("cannot write the history entry {}: {source}", .path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot remove the history entry {}: {source}", .path.display())]
    Remove { path: PathBuf, source: io::Error },
}

pub(super) struct Store {
    dir: PathBuf,
}

impl Store {
    /// Uses `STATE/history`, creating it 0700.
    pub(super) fn open(state_dir: &Path) -> Result<Store, StoreError> {
        let dir = state_dir.join(DIR);
        match DirBuilder::new().mode(0o700).create(&dir) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {}
            Ok(()) => {}
            Err(source) => return Err(StoreError::Dir { path: dir, source }),
        }
        Ok(Store { dir })
    }

    fn file(&self, id: u64) -> PathBuf {
        self.dir.join(format!("{id:010}.json"))
    }

    /// Every readable entry, in no particular order. A file that is not an entry is logged and skipped.
    pub(super) fn load(&self) -> Result<Vec<Entry>, StoreError> {
        let dir_error = |source| StoreError::Dir {
            path: self.dir.clone(),
            source,
        };
        let mut entries = Vec::new();
        for item in fs::read_dir(&self.dir).map_err(dir_error)? {
            let path = item.map_err(dir_error)?.path();
            let is_entry = path.extension().is_some_and(|e| e == "json")
                && path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit()));
            if !is_entry {
                continue;
            }
            match read(&path) {
                Some(entry) => entries.push(entry),
                None => {
                    tracing::warn!(path = %path.display(), "skipping a damaged configuration history entry")
                }
            }
        }
        Ok(entries)
    }

    pub(super) fn save(&self, entry: &Entry) -> Result<(), StoreError> {
        let path = self.file(entry.id);
        let tmp = self.dir.join(format!(".{:010}.json.tmp", entry.id));
        let write = || -> io::Result<()> {
            let mut text = serde_json::to_vec_pretty(&entry.to_json()).map_err(io::Error::other)?;
            text.push(b'\n');
            crate::state::write_private(&tmp, &text)?;
            fs::rename(&tmp, &path)?;
            File::open(&self.dir)?.sync_all()
        };
        write().map_err(|source| {
            let _ = fs::remove_file(&tmp);
            StoreError::Write {
                path: path.clone(),
                source,
            }
        })
    }

    pub(super) fn remove(&self, id: u64) -> Result<(), StoreError> {
        let path = self.file(id);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(StoreError::Remove { path, source: e })
            }
            _ => Ok(()),
        }
    }
}

fn read(path: &Path) -> Option<Entry> {
    let text = fs::read(path).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&text).ok()?;
    Entry::from_json(&value)
}
