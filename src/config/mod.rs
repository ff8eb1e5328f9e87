//! What the user wrote: the configuration document, its paths, and the errors found in it.
//!
//! The document is kept as a `serde_json::Value` (key order preserved) exactly as the control API received
//! it; [`crate::compile`] turns it into the runtime [`crate::snapshot::Snapshot`].

pub mod error;
pub mod pointer;
pub mod walk;

pub use error::{ConfigError, JsonPath};

/// The document rein starts with when neither `--config` nor a saved state exists: a welcome page on
/// 127.0.0.1:8080.
pub const DEFAULT_CONFIG: &str = include_str!("default.json");
