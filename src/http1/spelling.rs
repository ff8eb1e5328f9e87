//! Field names as a peer wrote them. `http`'s header map keeps names in lower case; rein writes the fields of
//! its HTTP/1 answers in their canonical title case (`Content-Type`, `ETag`), as Unit and nginx do, except
//! those an upstream, an application or the configuration spelled otherwise, which are written as they were
//! spelled: clients and test suites written against Unit compare names as written. Only names that title
//! case would not reproduce are kept, so the usual answer carries none.

use bytes::{BufMut, BytesMut};
use http::HeaderName;

/// The spellings of a response's field names that differ from their title case; a response extension.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spelling(Vec<Box<[u8]>>);

impl Spelling {
    /// Notes how a field's name was written: as last written, when a name is spelled more than one way.
    pub fn note(&mut self, raw: &[u8]) {
        // Every field of every parsed head comes here: the usual case (nothing noted, a canonical name) is
        // settled by one pass over the name.
        if self.0.is_empty() {
            if !canonical_matches(raw) {
                self.0.push(raw.into());
            }
            return;
        }
        if self.0.iter().any(|s| **s == *raw) {
            return;
        }
        self.0.retain(|s| !s.eq_ignore_ascii_case(raw));
        if !canonical_matches(raw) {
            self.0.push(raw.into());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The spelling noted for `name`.
    fn get(&self, name: &HeaderName) -> Option<&[u8]> {
        let name = name.as_str().as_bytes();
        self.0
            .iter()
            .find(|s| s.eq_ignore_ascii_case(name))
            .map(|s| &**s)
    }
}

/// Writes `name` as it goes on the wire: as spelled in `spelling`, else in canonical case.
pub fn put_name(out: &mut BytesMut, name: &HeaderName, spelling: Option<&Spelling>) {
    if let Some(raw) = spelling.and_then(|s| s.get(name)) {
        out.put_slice(raw);
        return;
    }
    let lower = name.as_str().as_bytes();
    if let Some(special) = irregular(lower) {
        out.put_slice(special.as_bytes());
        return;
    }
    let start = out.len();
    out.put_slice(lower);
    title_case(&mut out[start..]);
}

/// Names whose canonical spelling is not plain title case.
const IRREGULAR: [&str; 6] = [
    "ETag",
    "TE",
    "WWW-Authenticate",
    "Content-MD5",
    "X-XSS-Protection",
    "DNT",
];

/// The canonical spelling of `name` (in any case) when it is not plain title case.
fn irregular(name: &[u8]) -> Option<&'static str> {
    IRREGULAR
        .into_iter()
        .find(|s| s.as_bytes().eq_ignore_ascii_case(name))
}

/// Upper-cases the first letter and every letter after a `-`.
fn title_case(name: &mut [u8]) {
    let mut up = true;
    for b in name {
        if up {
            b.make_ascii_uppercase();
        }
        up = *b == b'-';
    }
}

/// Whether `raw` is what [`put_name`] would write for it without a spelling.
fn canonical_matches(raw: &[u8]) -> bool {
    // Only names of these lengths can be irregular ones.
    if matches!(raw.len(), 2 | 3 | 4 | 11 | 16)
        && let Some(special) = irregular(raw)
    {
        return special.as_bytes() == raw;
    }
    let mut up = true;
    raw.iter().all(|&b| {
        let ok = if up {
            !b.is_ascii_lowercase()
        } else {
            !b.is_ascii_uppercase()
        };
        up = b == b'-';
        ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(name: &str, spelling: Option<&Spelling>) -> String {
        let mut out = BytesMut::new();
        put_name(
            &mut out,
            &HeaderName::from_bytes(name.as_bytes()).unwrap(),
            spelling,
        );
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn canonical_case_without_a_spelling() {
        assert_eq!(written("content-type", None), "Content-Type");
        assert_eq!(written("etag", None), "ETag");
        assert_eq!(written("x-powered-by", None), "X-Powered-By");
        assert_eq!(written("www-authenticate", None), "WWW-Authenticate");
    }

    #[test]
    fn the_length_filter_lets_every_irregular_name_through() {
        for name in IRREGULAR {
            assert!(canonical_matches(name.as_bytes()), "{name}");
            assert!(!canonical_matches(name.to_lowercase().as_bytes()), "{name}");
        }
        assert!(!canonical_matches(b"Etag") && !canonical_matches(b"Content-Md5"));
    }

    #[test]
    fn spellings_that_differ_are_kept() {
        let mut s = Spelling::default();
        for raw in [
            "Content-Type",
            "X-Foo",
            "ETag",
            "x-bar",
            "Cache-control",
            "x-bar",
        ] {
            s.note(raw.as_bytes());
        }
        assert_eq!(s.0.len(), 2, "{s:?}");
        assert_eq!(written("x-bar", Some(&s)), "x-bar");
        assert_eq!(written("cache-control", Some(&s)), "Cache-control");
        assert_eq!(written("x-foo", Some(&s)), "X-Foo");
        s.note(b"X-BAR");
        assert_eq!(written("x-bar", Some(&s)), "X-BAR");
    }
}
