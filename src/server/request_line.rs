//! Request targets holding bytes the HTTP/1 parsers refuse but Unit serves: a raw space, `<`, `>` and `` ` ``.
//!
//! `httparse` (under rein's HTTP/1 connection and hyper's alike) ends the target at a space, and `http`'s URI
//! type takes no `<`, `>` or `` ` ``: such a request would be a 400. Unit (and nginx, for all but the space)
//! serves it as if the byte were percent-encoded. So the socket wrapper (`timeouts::TimedIo`) hands the parser
//! the request line with those bytes percent-encoded, looking only at the first read of each request head on
//! HTTP/1 (where the request line starts the bytes read) and at nothing past the line's end: one pass over the
//! line, and nothing else, for a line with none.

/// `data` with its request line's target escaped, when `data` starts with a whole request line
/// (`METHOD SP target SP HTTP/1.x CRLF`) whose target holds a byte the parser refuses; `None` otherwise.
pub(crate) fn escaped(data: &[u8]) -> Option<Vec<u8>> {
    let end = line_needing_escape(data)?;
    let line = data[..end].strip_suffix(b"\r").unwrap_or(&data[..end]);
    let method_end = line.iter().position(|&b| b == b' ')?;
    let version_at = line.iter().rposition(|&b| b == b' ')? + 1;
    let (method, target, version) = (
        &line[..method_end],
        &line[method_end + 1..version_at - 1],
        &line[version_at..],
    );
    let is_token = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    if method.is_empty()
        || !method.iter().all(is_token)
        || target.is_empty()
        || !matches!(version, b"HTTP/1.0" | b"HTTP/1.1")
    {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() + 2 * target.len());
    out.extend_from_slice(method);
    out.push(b' ');
    for &b in target {
        match b {
            b' ' | b'<' | b'>' | b'`' => {
                out.push(b'%');
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
            _ => out.push(b),
        }
    }
    out.push(b' ');
    out.extend_from_slice(&data[version_at..]);
    Some(out)
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Where the first line of `data` ends (its `\n`), if it holds `<`, `>`, `` ` `` or more than two spaces.
/// The common line (`GET /path HTTP/1.1`) is told apart with a few vector searches: its two spaces, the
/// version right after the second, and none of the three bytes in between. This runs for every request.
fn line_needing_escape(data: &[u8]) -> Option<usize> {
    if let Some(first) = memchr::memchr(b' ', data) {
        let rest = &data[first + 1..];
        if let Some(second) = memchr::memchr(b' ', rest) {
            let after = &rest[second + 1..];
            let plain = after.len() >= 9
                && after.starts_with(b"HTTP/1.")
                && matches!(after[8], b'\r' | b'\n')
                && memchr::memchr3(b'<', b'>', b'`', &rest[..second]).is_none();
            if plain {
                return None;
            }
        }
    }
    let end = memchr::memchr(b'\n', data)?;
    let line = &data[..end];
    let spaces = memchr::memchr_iter(b' ', line).count();
    let refused = memchr::memchr3(b'<', b'>', b'`', line).is_some();
    (refused || spaces > 2).then_some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esc(s: &str) -> Option<String> {
        escaped(s.as_bytes()).map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn refused_bytes_are_escaped_in_the_target_only() {
        assert_eq!(
            esc("GET /a b<c>`d HTTP/1.1\r\nHost: a <b>\r\n\r\n").as_deref(),
            Some("GET /a%20b%3Cc%3E%60d HTTP/1.1\r\nHost: a <b>\r\n\r\n")
        );
        assert_eq!(
            esc("GET /a  b HTTP/1.0\n\n").as_deref(),
            Some("GET /a%20%20b HTTP/1.0\n\n")
        );
    }

    #[test]
    fn other_lines_pass() {
        for s in [
            "GET /a HTTP/1.1\r\nHost: <x>\r\n\r\n",
            "GET /a<b HTTP/1.1",
            "GET /a b HTTP/2.0\r\n",
            "G(T /a b HTTP/1.1\r\n",
            "GET  HTTP/1.1\r\n",
            "hello world, this is a body\n",
            "GET /a HTTP/1.1\r\n",
            "GET /a HTTP/1.",
            "GET /a\r\n",
        ] {
            assert_eq!(esc(s), None, "{s:?}");
        }
    }
}
