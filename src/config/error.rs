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

/// The most errors a refused document lists; more are counted, not kept.
pub const MAX_ERRORS: usize = 50;

/// Every error found in a refused document, in the order found: at least one, at most [`MAX_ERRORS`].
///
/// Its text is the errors one after another; [`ConfigErrors::first`] is the one the control API's `detail`
/// names, as Unit's does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    first: ConfigError,
    rest: Vec<ConfigError>,
    omitted: usize,
}

impl ConfigErrors {
    pub fn first(&self) -> &ConfigError {
        &self.first
    }

    /// The errors kept, the first first.
    pub fn iter(&self) -> impl Iterator<Item = &ConfigError> {
        std::iter::once(&self.first).chain(&self.rest)
    }

    /// How many errors were found beyond those kept.
    pub fn omitted(&self) -> usize {
        self.omitted
    }

    pub fn into_first(self) -> ConfigError {
        self.first
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(first: ConfigError) -> Self {
        ConfigErrors {
            first,
            rest: Vec::new(),
            omitted: 0,
        }
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.first)?;
        for e in &self.rest {
            write!(f, "; {e}")?;
        }
        if self.omitted > 0 {
            write!(f, "; and {} more", self.omitted)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Collects the errors of the independent parts of a document while compiling it, so that one refusal lists
/// them all rather than the first.
#[derive(Debug, Default)]
pub struct Errors {
    found: Option<ConfigErrors>,
}

impl Errors {
    pub fn push(&mut self, e: ConfigError) {
        match &mut self.found {
            None => self.found = Some(e.into()),
            Some(all) if all.rest.len() + 1 < MAX_ERRORS => all.rest.push(e),
            Some(all) => all.omitted += 1,
        }
    }

    /// The value of `r`, or `None` with its error kept.
    pub fn ok<T>(&mut self, r: Result<T>) -> Option<T> {
        r.map_err(|e| self.push(e)).ok()
    }

    pub fn is_empty(&self) -> bool {
        self.found.is_none()
    }

    /// `Err` with every error kept so far, if there was one.
    pub fn check(&mut self) -> std::result::Result<(), ConfigErrors> {
        self.found.take().map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_kept_in_order_up_to_the_bound() {
        let mut errors = Errors::default();
        assert!(errors.is_empty());
        for i in 0..MAX_ERRORS + 3 {
            errors.push(JsonPath::root().index(i).error("bad"));
        }
        let all = errors.check().unwrap_err();
        assert_eq!(all.first().path.as_str(), "0");
        assert_eq!(all.iter().count(), MAX_ERRORS);
        assert_eq!(all.omitted(), 3);
        assert!(all.to_string().starts_with("0: bad; 1: bad;"));
        assert!(all.to_string().ends_with("; and 3 more"));
    }
}
