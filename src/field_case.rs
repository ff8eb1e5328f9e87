//! The spelling of response header names on HTTP/1.
//!
//! `http` keeps every name in lower case, but HTTP/1 clients written against Unit compare names as the
//! application or upstream wrote them (`X-Foo` stays `X-Foo`, `x-bar` stays `x-bar`) and rein's own in their
//! canonical case (`Content-Type`, `ETag`). The parsers of upstream and application heads (`http1::head`,
//! `fastcgi::cgi`) and the actions' `response_headers` record in a [`FieldCase`], carried in the response's
//! extensions, the spellings that differ from the canonical one; the connection's writer
//! (`server::response_heads`) spells the head hyper writes accordingly. HTTP/2 names stay lower case (RFC 9113).

use bytes::Bytes;

/// Words whose canonical spelling is not plain title case.
const WORDS: [&[u8]; 6] = [b"ETag", b"WWW", b"WebSocket", b"MD5", b"XSS", b"TE"];

/// The names of one response whose spelling is not canonical, as they were written; the first spelling of a
/// name wins for all its fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldCase(Vec<Bytes>);

impl FieldCase {
    /// Records how `name` was written (a spelling that is not canonical), unless one is recorded already.
    pub(crate) fn record(&mut self, name: Bytes) {
        if self.get(&name).is_none() {
            self.0.push(name);
        }
    }

    /// Makes `name` the spelling of its fields from now on (canonical or not).
    pub(crate) fn set(&mut self, name: &str) {
        self.forget(name.as_bytes());
        if !is_canonical(name.as_bytes()) {
            self.0.push(Bytes::copy_from_slice(name.as_bytes()));
        }
    }

    /// Drops the spelling of `name`: rein writes the field itself, in canonical case.
    pub(crate) fn forget(&mut self, name: &[u8]) {
        self.0.retain(|n| !n.eq_ignore_ascii_case(name));
    }

    /// The recorded spelling of `name` (any case), same length as `name`.
    pub(crate) fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|n| n.eq_ignore_ascii_case(name))
            .map(|n| &n[..])
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Spells `name` in canonical case, in place: each `-`-separated word capitalised (`Content-Type`), except a
/// few words spelled as the RFCs do (`ETag`, `WWW-Authenticate`, `Sec-WebSocket-Accept`, `Content-MD5`).
pub(crate) fn canonicalise(name: &mut [u8]) {
    for word in name.split_mut(|&b| b == b'-') {
        match special(word) {
            Some(spelling) => word.copy_from_slice(spelling),
            None => {
                word.make_ascii_lowercase();
                if let Some(first) = word.first_mut() {
                    first.make_ascii_uppercase();
                }
            }
        }
    }
}

/// Whether `name` is spelled as [`canonicalise`] would.
pub(crate) fn is_canonical(name: &[u8]) -> bool {
    name.split(|&b| b == b'-').all(|word| match special(word) {
        Some(spelling) => word == spelling,
        None => match word.split_first() {
            Some((first, rest)) => {
                !first.is_ascii_lowercase() && !rest.iter().any(u8::is_ascii_uppercase)
            }
            None => true,
        },
    })
}

fn special(word: &[u8]) -> Option<&'static [u8]> {
    WORDS.into_iter().find(|w| w.eq_ignore_ascii_case(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(name: &str) -> String {
        let mut bytes = name.as_bytes().to_vec();
        canonicalise(&mut bytes);
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn canonical_case() {
        assert_eq!(canonical("content-type"), "Content-Type");
        assert_eq!(canonical("ETAG"), "ETag");
        assert_eq!(canonical("www-authenticate"), "WWW-Authenticate");
        assert_eq!(canonical("sec-websocket-accept"), "Sec-WebSocket-Accept");
        assert_eq!(canonical("content-md5"), "Content-MD5");
        assert_eq!(canonical("te"), "TE");
        assert_eq!(canonical("x--y-"), "X--Y-");
        assert_eq!(canonical("x_foo"), "X_foo");
    }

    #[test]
    fn canonical_spellings_are_recognised() {
        for name in [
            "Content-Type",
            "ETag",
            "Sec-WebSocket-Key",
            "X-1a",
            "Date",
            "X_foo",
        ] {
            assert!(is_canonical(name.as_bytes()), "{name}");
        }
        for name in ["content-type", "Etag", "X-foo", "X-FOO", "x_foo"] {
            assert!(!is_canonical(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn first_spelling_wins_and_set_overrides() {
        let mut case = FieldCase::default();
        case.record(Bytes::from_static(b"x-foo"));
        case.record(Bytes::from_static(b"X-FOO"));
        assert_eq!(case.get(b"X-Foo"), Some(&b"x-foo"[..]));
        case.set("X-Foo");
        assert_eq!(case.get(b"x-foo"), None);
        case.set("x-FOO");
        assert_eq!(case.get(b"x-foo"), Some(&b"x-FOO"[..]));
        case.forget(b"X-Foo");
        assert!(case.is_empty());
    }
}
