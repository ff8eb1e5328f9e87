//! The MIME type of a shared file: the user's `settings/http/static/mime_types` first, then `mime_guess`'s
//! built-in table, then `application/octet-stream`.
//!
//! Unit's table maps a MIME type to extensions (`".log"`, matched case-insensitively) and exact file names
//! (`"README"`). The compiled form is the reverse map, so a lookup is two hash probes. Types are kept plain
//! (`text/html`, no `charset`), as Unit sends them.

use std::collections::HashMap;

use http::HeaderValue;
use serde_json::Value;

use crate::config::walk;
use crate::config::{ConfigError, JsonPath};

/// The fallback for names nothing recognises.
pub const OCTET_STREAM: &str = "application/octet-stream";

/// The user's MIME overrides, compiled for lookup by file name.
#[derive(Debug, Clone, Default)]
pub struct MimeTypes {
    /// Lowercased extension without its dot => MIME type.
    by_extension: HashMap<String, String>,
    /// Exact file name => MIME type.
    by_name: HashMap<String, String>,
}

impl MimeTypes {
    /// Compiles Unit's `mime_types` object: `{"text/plain": [".log", "README"], "text/x-code": ".c"}`.
    ///
    /// An extension or name declared for two types is an error, as in Unit: which one wins would otherwise
    /// depend on key order.
    pub fn compile(v: &Value, path: &JsonPath) -> Result<MimeTypes, ConfigError> {
        let mut types = MimeTypes::default();
        for (mime, names) in walk::object(v, path)? {
            let at = path.key(mime);
            check_mime(mime, &at)?;
            let list = walk::strings(names, &at)?;
            for (i, name) in list.into_iter().enumerate() {
                let item = if names.is_array() {
                    at.index(i)
                } else {
                    at.clone()
                };
                types.add(mime, name, &item)?;
            }
        }
        Ok(types)
    }

    fn add(&mut self, mime: &str, name: &str, at: &JsonPath) -> Result<(), ConfigError> {
        let (map, key) = match name.strip_prefix('.') {
            Some("") => {
                return Err(at.error("an extension must have at least one character after the dot"));
            }
            Some(ext) => (&mut self.by_extension, ext.to_ascii_lowercase()),
            None if name.is_empty() => return Err(at.error("must not be an empty string")),
            None => (&mut self.by_name, name.to_owned()),
        };
        if name.contains('/') {
            return Err(at.error("a file name or extension must not contain '/'"));
        }
        match map.get(&key) {
            Some(other) if other != mime => Err(at.error(format!(
                "{name:?} is already declared for the MIME type {other:?}"
            ))),
            _ => {
                map.insert(key, mime.to_owned());
                Ok(())
            }
        }
    }

    /// The MIME type of `file_name` (a bare name; anything before the last `/` is ignored).
    #[cfg(test)]
    pub fn lookup(&self, file_name: &str) -> &str {
        self.known(file_name).unwrap_or(OCTET_STREAM)
    }

    /// The MIME type of `file_name` when the user's table or the built-in one has it. As in Unit, `types`
    /// sees an unknown type as `""` (so `"types": ["!"]` refuses files of unknown type).
    pub fn known(&self, file_name: &str) -> Option<&str> {
        let name = file_name.rsplit('/').next().unwrap_or(file_name);
        if let Some(mime) = self.by_name.get(name) {
            return Some(mime);
        }
        // "archive.tar.gz" is "gz"; ".profile" has no extension, like "Makefile".
        let ext = match name.rfind('.') {
            Some(dot) if dot > 0 => &name[dot + 1..],
            _ => return None,
        };
        if let Some(mime) = self.by_extension.get(&ext.to_ascii_lowercase()) {
            return Some(mime);
        }
        mime_guess::from_ext(ext).first_raw()
    }
}

/// A MIME type must look like `type/subtype` and be sendable as a header value.
fn check_mime(mime: &str, at: &JsonPath) -> Result<(), ConfigError> {
    let well_formed = match mime.split_once('/') {
        Some((kind, sub)) => !kind.is_empty() && !sub.is_empty(),
        None => false,
    };
    if !well_formed || mime.chars().any(char::is_whitespace) || HeaderValue::from_str(mime).is_err()
    {
        return Err(at.error(format!(
            "{mime:?} is not a MIME type (expected \"type/subtype\")"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile(v: Value) -> Result<MimeTypes, ConfigError> {
        MimeTypes::compile(&v, &JsonPath::root().key("mime_types"))
    }

    #[test]
    fn built_ins_and_fallback() {
        let m = MimeTypes::default();
        assert_eq!(m.lookup("index.html"), "text/html");
        assert_eq!(m.lookup("/var/www/STYLE.CSS"), "text/css");
        assert_eq!(m.lookup("a.png"), "image/png");
        assert_eq!(m.lookup("Makefile"), OCTET_STREAM);
        assert_eq!(m.lookup(".profile"), OCTET_STREAM);
        assert_eq!(m.lookup("x.unknownext"), OCTET_STREAM);
        assert_eq!(m.lookup("trailing."), OCTET_STREAM);
    }

    #[test]
    fn overrides_win_over_built_ins() {
        let m = compile(json!({
            "text/plain": [".log", "README", ".HTML"],
            "text/x-code": ".c"
        }))
        .expect("valid");
        assert_eq!(m.lookup("app.LOG"), "text/plain");
        assert_eq!(m.lookup("README"), "text/plain");
        assert_eq!(m.lookup("readme"), OCTET_STREAM, "names are exact");
        assert_eq!(m.lookup("page.html"), "text/plain");
        assert_eq!(m.lookup("/src/main.c"), "text/x-code");
        assert_eq!(m.lookup("a.png"), "image/png");
    }

    #[test]
    fn errors_carry_their_path() {
        let e = compile(json!({"text/plain": [".log", 5]})).expect_err("number");
        assert_eq!(e.path.as_str(), "mime_types/text/plain/1");
        let e = compile(json!({"nonsense": ".x"})).expect_err("not a type");
        assert_eq!(e.path.as_str(), "mime_types/nonsense");
        let e = compile(json!({"text/a": ".x", "text/b": [".X"]})).expect_err("duplicate");
        assert_eq!(e.path.as_str(), "mime_types/text/b/0");
        assert!(compile(json!({"text/a": "."})).is_err());
        assert!(compile(json!({"text/a": ""})).is_err());
        assert!(compile(json!({"text/a": []})).is_err());
        assert!(compile(json!({"text/a": "a/b"})).is_err());
        assert!(compile(json!(["text/plain"])).is_err());
        // Repeating the same pair is harmless.
        assert!(compile(json!({"text/a": [".x", ".X"]})).is_ok());
    }
}
