//! What the user wrote: the configuration document, its paths, and the errors found in it.
//!
//! The document is kept as a `serde_json::Value` (key order preserved) exactly as the control API received
//! it; [`crate::compile`] turns it into the runtime [`crate::snapshot::Snapshot`].

pub mod error;
pub mod pointer;
pub mod text;
pub mod walk;

pub use error::{ConfigError, ConfigErrors, Errors, JsonPath};

use std::path::Path;

/// The document rein starts with when neither `--config` nor a saved state exists: a welcome page on
/// 127.0.0.1:8080, served from `<state>/welcome`.
const DEFAULT_CONFIG: &str = include_str!("default.json");
const WELCOME_PAGE: &str = include_str!("welcome.html");

/// Writes the welcome page into `state_dir` (keeping one the user edited) and returns the default document.
pub fn default_document(state_dir: &Path) -> std::io::Result<serde_json::Value> {
    let www = state_dir.join("welcome");
    std::fs::create_dir_all(&www)?;
    let page = www.join("index.html");
    if !page.exists() {
        std::fs::write(&page, WELCOME_PAGE)?;
    }
    let text = DEFAULT_CONFIG.replace("@WELCOME@", &www.display().to_string());
    serde_json::from_str(&text).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_document_compiles() {
        let dir = tempfile::tempdir().unwrap();
        let doc = super::default_document(dir.path()).unwrap();
        crate::compile::compile(&doc).unwrap();
        assert!(dir.path().join("welcome/index.html").exists());
    }
}
