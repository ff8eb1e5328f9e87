//! The one error type of configuration: where in the JSON document the problem is, and what it is.
//!
//! Every check made while compiling a document produces a [`ConfigError`], so the control API can answer
//! `{"error": "Invalid configuration.", "detail": "routes/0/match/uri: ..."}` and the user knows exactly which
//! value to fix.

use std::fmt;

/// A location inside the configuration document, written the way the control API addresses it
/// (`listeners/*:8080/pass`, `routes/0/action`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonPath(String);

impl JsonPath {
    /// The document root.
    pub fn root() -> Self {
        JsonPath(String::new())
    }

    /// The member `key` of the object at this path.
    pub fn key(&self, key: &str) -> Self {
        self.join(key)
    }

    /// The element `index` of the array at this path.
    pub fn index(&self, index: usize) -> Self {
        self.join(&index.to_string())
    }

    fn join(&self, segment: &str) -> Self {
        if self.0.is_empty() {
            JsonPath(segment.to_owned())
        } else {
            JsonPath(format!("{}/{}", self.0, segment))
        }
    }

    /// An error at this path.
    pub fn error(&self, message: impl Into<String>) -> ConfigError {
        ConfigError {
            path: self.clone(),
            message: message.into(),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("(root)")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// A configuration value that cannot be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    pub path: JsonPath,
    pub message: String,
}

pub type Result<T, E = ConfigError> = std::result::Result<T, E>;
