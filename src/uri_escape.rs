//! Percent-encoding of the URIs rein writes from templates: a `rewrite` result, which becomes the request
//! target sent upstream (and FastCGI's `REQUEST_URI`), and a `return` action's `location` (by Unit's rule,
//! see [`location`]).
//!
//! A template can expand to bytes a URI may not hold: `$uri` is decoded, so `/a%20b` gives `/a b`, and
//! `%0d%0a` gives CR LF. The bytes that would split a request line or a header, or that a field cannot carry
//! as text, are encoded: control bytes, space, DEL and bytes above 0x7F (UTF-8 names); in a request target,
//! `#` too, which would end it. Nothing else is touched, so a backend sees the path it would have seen had
//! the client sent it: a `%` already there is taken as an encoding (the values are URIs, as in Unit), `/`,
//! `?`, `&`, `=` keep their meaning, and the printable characters some clients send unencoded (`| { } [ ]`)
//! stay as they are.

use std::borrow::Cow;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

/// What never appears as is in a URI rein writes (`CONTROLS` is 0x00–0x1F and DEL; every byte above 0x7F
/// is encoded as well).
const UNSAFE: &AsciiSet = &CONTROLS.add(b' ');

/// A request target has no fragment: a `#` would cut it short at the next server.
const UNSAFE_IN_TARGET: &AsciiSet = &UNSAFE.add(b'#');

/// `target` (origin form: path and optional query) with every byte a request line cannot carry encoded.
pub fn request_target(target: &str) -> Cow<'_, str> {
    utf8_percent_encode(target, UNSAFE_IN_TARGET).into()
}

/// What Unit always encodes in a `Location`: control bytes, space, DEL, every byte above 0x7F, and the
/// characters RFC 3986 excludes from URIs (`"`, `%`, `<`, `>`, `\\`, `^`, `` ` ``, `{`, `|`, `}`).
fn unsafe_in_location(b: u8) -> bool {
    b <= b' ' || b >= 0x7f || b"\"%<>\\^`{|}".contains(&b)
}

/// A `Location` value, encoded by Unit's rule (its `return` action): a value that is already a valid URI
/// reference is sent as it is (so a `%20` in it stays an encoding); any other is encoded whole: the unsafe
/// bytes of [`unsafe_in_location`] (a `%` too), a `?` after the first (which starts the query), and a `?` or
/// `#` after the first `#` (which starts the fragment). The field is then always valid and never splits the
/// response head.
pub fn location(value: &str) -> Cow<'_, str> {
    if is_encoded_location(value.as_bytes()) {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 16);
    let mut part = Part::Path;
    for &b in value.as_bytes() {
        let keep = match b {
            b'?' if part == Part::Path => {
                part = Part::Query;
                true
            }
            b'#' if part != Part::Fragment => {
                part = Part::Fragment;
                true
            }
            b'?' | b'#' => false,
            _ => !unsafe_in_location(b),
        };
        if keep {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Cow::Owned(out)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Path,
    Query,
    Fragment,
}

/// Whether `bytes` needs no encoding: every `%` starts an escape, no unsafe byte, no second `?` or `#`.
fn is_encoded_location(bytes: &[u8]) -> bool {
    let mut part = Part::Path;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3);
                if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                    return false;
                }
                i += 2;
            }
            b'?' if part == Part::Path => part = Part::Query,
            b'#' if part != Part::Fragment => part = Part::Fragment,
            b'?' | b'#' => return false,
            b if unsafe_in_location(b) => return false,
            _ => {}
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_safe_target_is_borrowed_unchanged() {
        for t in [
            "/",
            "/a/b?x=1&y=%2F",
            "/~u/!$&'()*+,;=:@[]",
            "/100%",
            "/a|b{c}\"<>^`\\",
        ] {
            assert!(
                matches!(request_target(t), Cow::Borrowed(s) if s == t),
                "{t}"
            );
        }
    }

    #[test]
    fn unsafe_bytes_are_encoded_and_nothing_else() {
        assert_eq!(request_target("/a b\r\nc"), "/a%20b%0D%0Ac");
        assert_eq!(request_target("/x?q=a b#frag"), "/x?q=a%20b%23frag");
        assert_eq!(request_target("/é"), "/%C3%A9");
        assert_eq!(request_target("/\x7f\0\t|"), "/%7F%00%09|");
        assert_eq!(request_target("/a%20b"), "/a%20b", "an encoding is kept");
    }

    #[test]
    fn a_location_keeps_its_fragment() {
        assert_eq!(location("https://h/a b#top"), "https://h/a%20b#top");
        assert_eq!(
            location("/x\r\nSet-Cookie: a=b"),
            "/x%0D%0ASet-Cookie:%20a=b"
        );
        assert!(matches!(location("/plain?x#y"), Cow::Borrowed(_)));
    }

    /// Unit's test_return_location, case by case.
    #[test]
    fn a_location_is_encoded_as_unit_encodes_it() {
        let reserved = ":/?#[]@!&'()*+,;=";
        let unreserved = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~";
        let cases = [
            (reserved.to_owned(), reserved.to_owned()),
            (format!("/?{reserved}"), "/?:/%3F#[]@!&'()*+,;=".to_owned()),
            ("???".into(), "?%3F%3F".into()),
            (format!("/#{reserved}"), "/#:/%3F%23[]@!&'()*+,;=".into()),
            ("##?#?".into(), "#%23%3F%23%3F".into()),
            (format!("/?#{reserved}"), "/?#:/%3F%23[]@!&'()*+,;=".into()),
            ("??##".into(), "?%3F#%23".into()),
            ("/?##?".into(), "/?#%23%3F".into()),
            (unreserved.into(), unreserved.into()),
            (
                " \"%<>\\^`{|}".into(),
                "%20%22%25%3C%3E%5C%5E%60%7B%7C%7D".into(),
            ),
            ("#{|}".into(), "#%7B%7C%7D".into()),
            ("\u{0}\u{18}\u{1F} !".into(), "%00%18%1F%20!".into()),
            (
                "\u{7F}\u{80}н\u{20BD}".into(),
                "%7F%C2%80%D0%BD%E2%82%BD".into(),
            ),
            ("%20".into(), "%20".into()),
            ("/%20?%20#%20".into(), "/%20?%20#%20".into()),
            (" %20".into(), "%20%2520".into()),
            ("/%20?%20#%20 ".into(), "/%2520?%2520#%2520%20".into()),
        ];
        for (value, expect) in cases {
            assert_eq!(location(&value), expect, "{value:?}");
        }
    }
}
