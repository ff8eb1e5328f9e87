//! The spelling of response header names on HTTP/1.
//!
//! `http` keeps every name in lower case, but HTTP/1 clients written against Unit compare names as the
//! application or upstream wrote them (`X-Foo` stays `X-Foo`, `x-bar` stays `x-bar`) and rein's own in their
//! canonical case (`Content-Type`, `ETag`). hyper writes names in title case (`title_case_headers`), which is
//! the canonical case of every name rein writes itself but `ETag`. So the parsers of upstream and application
//! heads (`http1::head`, `fastcgi::cgi`) and the actions' `response_headers` record in a [`FieldCase`],
//! carried in the response's extensions, only the spellings that title case would not reproduce; the handler
//! turns them into the case map hyper writes names from (`server::case_map`). A head whose names are all in
//! title case, the common case, costs the check of its names and nothing more. HTTP/2 names stay lower case
//! (RFC 9113).

use bytes::Bytes;
use http::HeaderName;

/// The names of one response that title case would not spell as they were written; the first spelling of a
/// name wins for all its fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldCase(Vec<(HeaderName, Bytes)>);

impl FieldCase {
    /// Records how `name` was written (see [`needs_record`]), unless a spelling is recorded already.
    pub(crate) fn record(&mut self, name: HeaderName, spelling: Bytes) {
        if self.get(&name).is_none() {
            self.0.push((name, spelling));
        }
    }

    /// Makes `spelling` the spelling of `name`'s fields from now on.
    pub(crate) fn set(&mut self, name: &HeaderName, spelling: &str) {
        self.forget(name);
        if needs_record(spelling.as_bytes()) {
            self.0
                .push((name.clone(), Bytes::copy_from_slice(spelling.as_bytes())));
        }
    }

    /// Drops the spelling of `name`: rein writes the field itself, in canonical case.
    pub(crate) fn forget(&mut self, name: &HeaderName) {
        self.0.retain(|(n, _)| n != name);
    }

    /// The recorded spelling of `name`, same length as `name`.
    pub(crate) fn get(&self, name: &HeaderName) -> Option<&[u8]> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, s)| &s[..])
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The names and their spellings, in the order recorded.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&HeaderName, &[u8])> {
        self.0.iter().map(|(n, s)| (n, &s[..]))
    }
}

/// Whether a name written as `spelling` must be recorded to be sent so: hyper's title case (each
/// `-`-separated word's first letter in upper case, the others in lower case) would write it otherwise, or it
/// is `Etag`, which rein would write as `ETag`, its canonical spelling. One pass over the bytes, no more:
/// this runs for every field of every upstream's answer.
pub(crate) fn needs_record(spelling: &[u8]) -> bool {
    let mut word_start = true;
    for &b in spelling {
        let wrong = if word_start {
            b.is_ascii_lowercase()
        } else {
            b.is_ascii_uppercase()
        };
        if wrong {
            return true;
        }
        word_start = b == b'-';
    }
    spelling == b"Etag"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn title_case_spellings_are_not_recorded() {
        for name in [
            "Content-Type",
            "X-1a",
            "Date",
            "X_foo",
            "X--Y-",
            "Www-Authenticate",
        ] {
            assert!(!needs_record(name.as_bytes()), "{name}");
        }
        for name in [
            "content-type",
            "Etag",
            "ETag",
            "X-foo",
            "X-FOO",
            "x_foo",
            "WWW-Authenticate",
        ] {
            assert!(needs_record(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn first_spelling_wins_and_set_overrides() {
        let foo = HeaderName::from_static("x-foo");
        let mut case = FieldCase::default();
        case.record(foo.clone(), Bytes::from_static(b"x-foo"));
        case.record(foo.clone(), Bytes::from_static(b"X-FOO"));
        assert_eq!(case.get(&foo), Some(&b"x-foo"[..]));
        case.set(&foo, "X-Foo");
        assert_eq!(case.get(&foo), None);
        case.set(&foo, "x-FOO");
        assert_eq!(case.get(&foo), Some(&b"x-FOO"[..]));
        case.forget(&foo);
        assert!(case.is_empty());
    }
}
