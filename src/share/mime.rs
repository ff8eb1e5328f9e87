//! The MIME type of a shared file, as Unit decides it: the user's `settings/http/static/mime_types` first,
//! then Unit's built-in table; a file neither knows is sent without `Content-Type`, as Unit does.
//!
//! Unit's table maps a MIME type to extensions (`".log"`) and whole file names (`"README"`), and matches both
//! case-insensitively. The "extension" of a file is what follows its last dot, dot included, or, when its name
//! has no dot, the whole name: so `README` and `readme` both match the entry `"README"`, and `.profile` the
//! entry `".profile"`. The compiled form is one map keyed by that lowercased string. Types are kept plain
//! (`text/html`, no `charset`), as Unit sends them.

use std::collections::HashMap;

use http::HeaderValue;
use serde_json::Value;

use crate::config::walk;
use crate::config::{ConfigError, JsonPath};

/// Unit's built-in table (`nxt_http_static_mtypes_init`), which the user's entries override.
const BUILT_IN: &[(&str, &str)] = &[
    (".html", "text/html"),
    (".htm", "text/html"),
    (".css", "text/css"),
    (".svg", "image/svg+xml"),
    (".webp", "image/webp"),
    (".png", "image/png"),
    (".apng", "image/apng"),
    (".jpeg", "image/jpeg"),
    (".jpg", "image/jpeg"),
    (".gif", "image/gif"),
    (".ico", "image/x-icon"),
    (".avif", "image/avif"),
    (".avifs", "image/avif-sequence"),
    (".woff", "font/woff"),
    (".woff2", "font/woff2"),
    (".otf", "font/otf"),
    (".ttf", "font/ttf"),
    (".txt", "text/plain"),
    (".md", "text/markdown"),
    (".rst", "text/x-rst"),
    (".js", "application/javascript"),
    (".json", "application/json"),
    (".xml", "application/xml"),
    (".rss", "application/rss+xml"),
    (".atom", "application/atom+xml"),
    (".pdf", "application/pdf"),
    (".zip", "application/zip"),
    (".mp3", "audio/mpeg"),
    (".ogg", "audio/ogg"),
    (".midi", "audio/midi"),
    (".mid", "audio/midi"),
    (".flac", "audio/flac"),
    (".aac", "audio/aac"),
    (".wav", "audio/wav"),
    (".mpeg", "video/mpeg"),
    (".mpg", "video/mpeg"),
    (".mp4", "video/mp4"),
    (".webm", "video/webm"),
    (".avi", "video/x-msvideo"),
    (".exe", "application/octet-stream"),
    (".bin", "application/octet-stream"),
    (".dll", "application/octet-stream"),
    (".iso", "application/octet-stream"),
    (".img", "application/octet-stream"),
    (".msi", "application/octet-stream"),
    (".deb", "application/octet-stream"),
    (".rpm", "application/octet-stream"),
    (".php", "application/x-httpd-php"),
];

/// The user's MIME overrides, compiled for lookup by file name.
#[derive(Debug, Clone, Default)]
pub struct MimeTypes {
    /// Lowercased `.ext` or bare file name => MIME type, with its `Content-Type` value made once here
    /// rather than per response.
    by_key: HashMap<String, (String, HeaderValue)>,
}

/// A type found in one of the tables.
enum Found<'a> {
    User(&'a (String, HeaderValue)),
    BuiltIn(&'static str),
}

/// The user's keys up to this long are lowercased on the stack: every request for a file looks its type up.
const SHORT_KEY: usize = 32;

impl MimeTypes {
    /// Compiles Unit's `mime_types` object: `{"text/plain": [".log", "README"], "text/x-code": ".c"}`.
    ///
    /// An extension or name declared twice (case aside) is an error, as in Unit, for one type or two: which
    /// one wins would otherwise depend on key order.
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
        if name.is_empty() {
            return Err(at.error("must not be an empty string"));
        }
        if name == "." {
            return Err(at.error("an extension must have at least one character after the dot"));
        }
        if name.contains('/') {
            return Err(at.error("a file name or extension must not contain '/'"));
        }
        let key = name.to_ascii_lowercase();
        if let Some((other, _)) = self.by_key.get(&key) {
            return Err(at.error(format!(
                "{name:?} is already declared for the MIME type {other:?}"
            )));
        }
        let value = HeaderValue::from_str(mime)
            .map_err(|_| at.error(format!("{mime:?} is not a valid header value")))?;
        self.by_key.insert(key, (mime.to_owned(), value));
        Ok(())
    }

    /// The MIME type of `file_name` when the user's table or Unit's has it (anything before the last `/` is
    /// ignored). `None` means no `Content-Type` is sent; as in Unit, `types` sees that as `""` (so `"types":
    /// ["!"]` refuses files of unknown type).
    pub fn known(&self, file_name: &str) -> Option<&str> {
        match self.find(file_name)? {
            Found::User((mime, _)) => Some(mime),
            Found::BuiltIn(mime) => Some(mime),
        }
    }

    /// The `Content-Type` value for `file_name`, as [`MimeTypes::known`] names it.
    pub fn content_type(&self, file_name: &str) -> Option<HeaderValue> {
        match self.find(file_name)? {
            Found::User((_, value)) => Some(value.clone()),
            Found::BuiltIn(mime) => Some(HeaderValue::from_static(mime)),
        }
    }

    fn find(&self, file_name: &str) -> Option<Found<'_>> {
        let ext = extension(file_name);
        if !self.by_key.is_empty()
            && let Some(entry) = self.user(ext)
        {
            return Some(Found::User(entry));
        }
        let packed = packed_key(ext.as_bytes())?;
        BUILT_IN
            .iter()
            .zip(PACKED_BUILT_IN)
            .find(|(_, built_in)| *built_in == packed)
            .map(|((_, mime), _)| Found::BuiltIn(mime))
    }

    fn user(&self, ext: &str) -> Option<&(String, HeaderValue)> {
        match lowercase_on_stack(ext, &mut [0; SHORT_KEY]) {
            Some(key) => self.by_key.get(key),
            None => self.by_key.get(&ext.to_ascii_lowercase()),
        }
    }
}

/// Unit's built-in keys, lowercased and packed by [`pack`], in [`BUILT_IN`]'s order: a lookup compares
/// integers instead of strings.
const PACKED_BUILT_IN: [u64; BUILT_IN.len()] = {
    let mut packed = [0; BUILT_IN.len()];
    let mut i = 0;
    while i < BUILT_IN.len() {
        let key = BUILT_IN[i].0.as_bytes();
        assert!(key.len() <= 8, "a built-in key longer than 8 bytes");
        packed[i] = pack(key);
        i += 1;
    }
    packed
};

/// Up to 8 bytes, lowercased, as one integer (zero-padded).
const fn pack(key: &[u8]) -> u64 {
    let mut packed = 0;
    let mut i = 0;
    while i < key.len() {
        packed |= (key[i].to_ascii_lowercase() as u64) << (8 * i);
        i += 1;
    }
    packed
}

/// `key` packed for comparison with [`PACKED_BUILT_IN`], or `None` when it cannot be a built-in key: longer
/// than 8 bytes, or holding a NUL (which the zero padding would hide).
fn packed_key(key: &[u8]) -> Option<u64> {
    (key.len() <= 8 && !key.contains(&0)).then(|| pack(key))
}

/// `s` lowercased into `buf`, or `None` when it does not fit.
fn lowercase_on_stack<'b>(s: &str, buf: &'b mut [u8; SHORT_KEY]) -> Option<&'b str> {
    let buf = buf.get_mut(..s.len())?;
    buf.copy_from_slice(s.as_bytes());
    buf.make_ascii_lowercase();
    // ASCII lowercasing keeps UTF-8 valid.
    std::str::from_utf8(buf).ok()
}

/// Unit's "extension" of a path: from its last dot (included), or its whole last segment when that has no
/// dot. "archive.tar.gz" is ".gz", "Makefile" is "Makefile", "trailing." is ".".
fn extension(path: &str) -> &str {
    let bytes = path.as_bytes();
    let name_start = bytes.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
    match bytes[name_start..].iter().rposition(|&b| b == b'.') {
        Some(dot) => &path[name_start + dot..],
        None => &path[name_start..],
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
    fn unit_built_ins_and_no_type_for_the_rest() {
        let m = MimeTypes::default();
        assert_eq!(m.known("index.html"), Some("text/html"));
        assert_eq!(m.known("/var/www/STYLE.CSS"), Some("text/css"));
        assert_eq!(m.known("a.xml"), Some("application/xml"));
        assert_eq!(m.known("a.js"), Some("application/javascript"));
        assert_eq!(m.known("a.php"), Some("application/x-httpd-php"));
        assert_eq!(m.known("Makefile"), None);
        assert_eq!(m.known(".profile"), None);
        assert_eq!(m.known("x.unknownext"), None);
        assert_eq!(m.known("a.tar.gz"), None, "not in Unit's table");
        assert_eq!(m.known("trailing."), None);
    }

    #[test]
    fn overrides_win_over_built_ins_and_names_match_in_any_case() {
        let m = compile(json!({
            "text/plain": [".log", "README", ".HTML"],
            "text/x-code": ".c"
        }))
        .expect("valid");
        assert_eq!(m.known("app.LOG"), Some("text/plain"));
        assert_eq!(m.known("README"), Some("text/plain"));
        assert_eq!(m.known("/docs/readme"), Some("text/plain"));
        assert_eq!(m.known("README.md"), Some("text/markdown"));
        assert_eq!(m.known("page.html"), Some("text/plain"));
        assert_eq!(m.known("/src/main.c"), Some("text/x-code"));
        assert_eq!(m.known("a.png"), Some("image/png"));
    }

    #[test]
    fn content_types_are_the_known_types_as_header_values() {
        let long = format!(".{}", "x".repeat(SHORT_KEY * 2));
        let m = compile(json!({"text/plain": [".log", long.to_uppercase()]})).expect("valid");
        assert_eq!(
            m.content_type("/a/b.LOG"),
            Some(HeaderValue::from_static("text/plain"))
        );
        assert_eq!(
            m.content_type(&format!("/a/b{long}")),
            Some(HeaderValue::from_static("text/plain"))
        );
        assert_eq!(
            m.content_type("/a/b.Html"),
            Some(HeaderValue::from_static("text/html"))
        );
        assert_eq!(m.content_type("/a.d/Makefile"), None);
        assert_eq!(m.known("/a.d/file.JPG"), Some("image/jpeg"));
        assert_eq!(
            MimeTypes::default().content_type("x.txt"),
            Some(HeaderValue::from_static("text/plain"))
        );
        assert_eq!(m.known("/a/b.WOFF2"), Some("font/woff2"));
        assert_eq!(m.known("/a/b.txt\0"), None, "a NUL is no padding");
        assert_eq!(m.known("/a/b.txtxtxtx"), None);
        assert_eq!(m.known("/a/.TXT"), Some("text/plain"));
    }

    #[test]
    fn errors_carry_their_path() {
        let e = compile(json!({"text/plain": [".log", 5]})).expect_err("number");
        assert_eq!(e.path.as_str(), "mime_types/text/plain/1");
        let e = compile(json!({"nonsense": ".x"})).expect_err("not a type");
        assert_eq!(e.path.as_str(), "mime_types/nonsense");
        let e = compile(json!({"text/a": ".x", "text/b": [".X"]})).expect_err("duplicate");
        assert_eq!(e.path.as_str(), "mime_types/text/b/0");
        let e = compile(json!({"text/a": [".x", ".X"]})).expect_err("duplicate in one type");
        assert_eq!(e.path.as_str(), "mime_types/text/a/1");
        assert!(compile(json!({"text/a": ["README", "readme"]})).is_err());
        assert!(compile(json!({"text/a": "."})).is_err());
        assert!(compile(json!({"text/a": ""})).is_err());
        assert!(compile(json!({"text/a": []})).is_err());
        assert!(compile(json!({"text/a": "a/b"})).is_err());
        assert!(compile(json!(["text/plain"])).is_err());
    }
}
