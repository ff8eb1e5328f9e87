//! Percent-encoding of the URIs rein writes from templates: a `rewrite` result, which becomes the request
//! target sent upstream (and FastCGI's `REQUEST_URI`), and a `return` action's `location`.
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

/// A `Location` value (a URI reference: a fragment is kept) with every unsafe byte encoded, so that the field
/// is always valid and never splits the response head.
pub fn location(value: &str) -> Cow<'_, str> {
    utf8_percent_encode(value, UNSAFE).into()
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
        assert!(matches!(location("/plain|x"), Cow::Borrowed(_)));
    }
}
