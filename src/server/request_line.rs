//! Request targets holding bytes hyper refuses but Unit serves: a raw space, `<`, `>` and `` ` ``.
//!
//! hyper's parser ends the target at a space and its URI type takes no `<`, `>` or `` ` ``: such a request
//! would be a 400. Unit (and nginx, for all but the space) serves it as if the byte were percent-encoded. So
//! the socket wrapper (`timeouts::TimedIo`) hands hyper the request line with those bytes percent-encoded,
//! looking only at the first read of each request head on HTTP/1 (where the request line starts the bytes
//! read) and at nothing past the line's end: one pass over the line, and nothing else, for a line with none.

/// `data` with its request line's target escaped, when `data` starts with a whole request line
/// (`METHOD SP target SP HTTP/1.x CRLF`) whose target holds a byte hyper refuses; `None` otherwise.
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
/// Branch-free over the line, which the compiler turns into vector instructions: this runs for every request.
fn line_needing_escape(data: &[u8]) -> Option<usize> {
    let end = memchr::memchr(b'\n', data)?;
    let (mut spaces, mut refused) = (0u32, 0u32);
    for &b in &data[..end] {
        spaces += u32::from(b == b' ');
        refused |= u32::from(b == b'<') | u32::from(b == b'>') | u32::from(b == b'`');
    }
    (refused != 0 || spaces > 2).then_some(end)
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
        ] {
            assert_eq!(esc(s), None, "{s:?}");
        }
    }
}
