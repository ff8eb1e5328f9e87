//! The certificate store: named bundles beside the configuration, as Unit keeps them.
//!
//! [`Certificates`] is a value: a change makes a new one, which the engine compiles the configuration against
//! before it replaces the old, so a listener never names a bundle that is not there. On disk each bundle is
//! `STATE/certs/NAME.pem`, written 0600 in a 0700 directory through a temporary file and a rename, and read
//! back at start.

use std::collections::BTreeMap;
use std::fs::{self, DirBuilder, File};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::bundle::Bundle;

const DIR: &str = "certs";
const SUFFIX: &str = ".pem";

/// The bundles by name.
#[derive(Debug, Clone, Default)]
pub struct Certificates {
    bundles: BTreeMap<String, Arc<Bundle>>,
}

impl Certificates {
    pub fn get(&self, name: &str) -> Option<&Arc<Bundle>> {
        self.bundles.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.bundles.contains_key(name)
    }

    /// This store with `bundle` under `name`, replacing any bundle of that name.
    pub fn with(&self, name: &str, bundle: Arc<Bundle>) -> Certificates {
        let mut next = self.clone();
        next.bundles.insert(name.to_owned(), bundle);
        next
    }

    /// This store without `name`.
    pub fn without(&self, name: &str) -> Certificates {
        let mut next = self.clone();
        next.bundles.remove(name);
        next
    }

    /// Each bundle's name and PEM (chain and key).
    pub(crate) fn pems(&self) -> Vec<(String, Vec<u8>)> {
        self.bundles
            .iter()
            .map(|(name, b)| (name.clone(), b.pem().to_vec()))
            .collect()
    }

    /// Each bundle's leaf expiry, in seconds since the epoch.
    pub(crate) fn expiry(&self) -> Vec<(String, i64)> {
        self.bundles
            .iter()
            .map(|(name, b)| (name.clone(), b.not_after()))
            .collect()
    }

    /// Unit's `/certificates` object: each bundle's description by name.
    pub fn describe(&self) -> Value {
        Value::Object(
            self.bundles
                .iter()
                .map(|(name, b)| (name.clone(), b.description().clone()))
                .collect(),
        )
    }
}

/// A name a bundle can be stored under: it becomes a file name, so it is kept to a safe alphabet.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-@+~".contains(&b))
}

/// Where bundles are saved: `STATE/certs`.
#[derive(Debug, Clone)]
pub struct CertDir {
    dir: PathBuf,
}

impl CertDir {
    pub fn new(state: &Path) -> CertDir {
        CertDir {
            dir: state.join(DIR),
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}{SUFFIX}"))
    }

    /// Reads every saved bundle. A bundle that no longer parses is skipped with an error in the log, and one
    /// that has expired since it was saved is kept (a listener serving it is better than none) with a warning.
    pub fn load(&self) -> io::Result<Certificates> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Certificates::default()),
            Err(e) => return Err(e),
        };
        let mut store = Certificates::default();
        for entry in entries {
            let entry = entry?;
            let file = entry.file_name();
            let Some(name) = file.to_str().and_then(|f| f.strip_suffix(SUFFIX)) else {
                continue;
            };
            if !valid_name(name) {
                continue;
            }
            let pem = fs::read(entry.path())?;
            match Bundle::parse(&pem, None) {
                Ok(bundle) => {
                    if bundle.not_after() < super::now() {
                        tracing::warn!(certificate = name, "the saved certificate has expired");
                    }
                    store.bundles.insert(name.to_owned(), Arc::new(bundle));
                }
                Err(e) => {
                    tracing::error!(certificate = name, error = %e, "cannot load a saved certificate")
                }
            }
        }
        Ok(store)
    }

    /// Writes `pem` as the bundle `name`, whole or not at all.
    pub fn save(&self, name: &str, pem: &[u8]) -> io::Result<()> {
        match DirBuilder::new().mode(0o700).create(&self.dir) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            other => other?,
        }
        let tmp = self.dir.join(format!(".{name}{SUFFIX}.tmp"));
        let written = (|| {
            crate::state::write_private(&tmp, pem)?;
            fs::rename(&tmp, self.file(name))
        })();
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written?;
        let _ = File::open(&self.dir).and_then(|d| d.sync_all());
        Ok(())
    }

    pub fn remove(&self, name: &str) -> io::Result<()> {
        match fs::remove_file(self.file(name)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::valid_name;

    #[test]
    fn names_stay_file_names() {
        assert!(valid_name("bundle"));
        assert!(valid_name("www.example.com_2024"));
        for bad in ["", ".", "..", ".hidden", "a/b", "a\0b", "a b", "a\\b"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
