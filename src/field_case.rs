//! The spelling of response header names on HTTP/1.
//!
//! `http` keeps every name in lower case, but HTTP/1 clients written against Unit compare names as the
//! application or upstream wrote them (`X-Foo` stays `X-Foo`, `x-bar` stays `x-bar`) and rein's own in their
//! canonical case (`Content-Type`, `ETag`). The parsers of upstream and application heads (`http1::head`,
//! `fastcgi::cgi`) and the actions' `response_headers` record in a [`FieldCase`], carried in the response's
//! extensions, the spellings that differ from the canonical one; the connection's writer
//! (`server::response_heads`) spells the head hyper writes accordingly. HTTP/2 names stay lower case (RFC 9113).

use bytes::Bytes;

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
    let mut start = 0;
    for i in 0..name.len() {
        let b = &mut name[i];
        if *b == b'-' {
            respell(&mut name[start..i]);
            start = i + 1;
        } else if i == start {
            b.make_ascii_uppercase();
        } else {
            b.make_ascii_lowercase();
        }
    }
    respell(&mut name[start..]);
}

/// A title-cased word that the RFCs spell otherwise.
fn respell(word: &mut [u8]) {
    if let Some(spelling) = special(word) {
        word.copy_from_slice(spelling);
    }
}

/// Whether `name` is spelled as [`canonicalise`] would.
pub(crate) fn is_canonical(name: &[u8]) -> bool {
    let mut start = 0;
    for (i, &b) in name.iter().enumerate() {
        if b == b'-' {
            if special(&name[start..i]).is_some_and(|s| s != &name[start..i]) {
                return false;
            }
            start = i + 1;
        } else if if i == start {
            b.is_ascii_lowercase()
        } else {
            b.is_ascii_uppercase()
        } {
            // A special word's capitals are checked as a whole below.
            if special(word_at(name, start)).is_none() {
                return false;
            }
        }
    }
    special(&name[start..]).is_none_or(|s| s == &name[start..])
}

/// The word of `name` starting at `start`.
fn word_at(name: &[u8], start: usize) -> &[u8] {
    let rest = &name[start..];
    &rest[..rest.iter().position(|&b| b == b'-').unwrap_or(rest.len())]
}

/// The spelling of a word that is not plain title case (dispatched on length first: this runs for every
/// word of every name written).
fn special(word: &[u8]) -> Option<&'static [u8]> {
    let words: &[&'static [u8]] = match word.len() {
        2 => &[b"TE"],
        3 => &[b"WWW", b"MD5", b"XSS"],
        4 => &[b"ETag"],
        9 => &[b"WebSocket"],
        _ => return None,
    };
    words.iter().copied().find(|w| w.eq_ignore_ascii_case(word))
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
        assert_eq!(canonical("X-XSS-PROTECTION"), "X-XSS-Protection");
        assert_eq!(canonical("wide-etags"), "Wide-Etags");
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
        for name in [
            "content-type",
            "Etag",
            "X-foo",
            "X-FOO",
            "x_foo",
            "Www-Authenticate",
            "Xss",
        ] {
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
