//! hyper's own answers to request heads it cannot parse (400 for a malformed head, 431 for one too large),
//! with the HTML page rein's other error answers have.
//!
//! hyper writes these itself, with no body and no way for rein to give one: status line, `connection: close`
//! (when it knows it closes), `content-length: 0`, `date`, nothing else (rein's own answers always carry `Server`). The socket wrapper
//! (`timeouts::TimedIo`) looks at a write only while no request is in progress on the connection, when such an
//! answer is the only head hyper can write, and only at a write starting `HTTP/1.1 4` or `5`: a few
//! instructions per write otherwise.

use http::StatusCode;

/// The answer to write instead of `head`, when `head` is hyper's own bodiless error answer. Inlined up to
/// the status's first digit, which settles nearly every write.
#[inline]
pub(crate) fn replacement(head: &[u8]) -> Option<Vec<u8>> {
    match head.get(..10) {
        Some(
            [
                b'H',
                b'T',
                b'T',
                b'P',
                b'/',
                b'1',
                b'.',
                b'1',
                b' ',
                b'4' | b'5',
            ],
        ) => with_page(head),
        _ => None,
    }
}

#[cold]
fn with_page(head: &[u8]) -> Option<Vec<u8>> {
    let rest = &head[b"HTTP/1.1 ".len()..];
    let status = StatusCode::from_bytes(rest.get(..3)?).ok()?;
    let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
    let status_line = &head[..b"HTTP/1.1 ".len() + line_end];
    let fields = &rest[line_end + 2..];
    let fields = strip_field(fields, b"connection: close\r\n").unwrap_or(fields);
    let fields = strip_field(fields, b"content-length: 0\r\n")?;
    let date = strip_field(fields, b"date: ")?.strip_suffix(b"\r\n\r\n")?;
    // An IMF-fixdate: one line of 29 bytes.
    if date.len() != 29 || date.contains(&b'\n') {
        return None;
    }
    let page = super::actions::error_text(status);
    let mut out = Vec::with_capacity(head.len() + 96 + page.len());
    out.extend_from_slice(status_line);
    out.extend_from_slice(b"\r\ncontent-type: text/html\r\ncontent-length: ");
    out.extend_from_slice(page.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\nconnection: close\r\ndate: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(page.as_bytes());
    Some(out)
}

/// `fields` past `field` (its name in any case), if they start with it.
fn strip_field<'a>(fields: &'a [u8], field: &[u8]) -> Option<&'a [u8]> {
    let (start, rest) = fields.split_at_checked(field.len())?;
    start.eq_ignore_ascii_case(field).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &str = "Thu, 26 Nov 2026 05:15:38 GMT";

    #[test]
    fn hypers_errors_get_a_page() {
        let head = format!(
            "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\
             Date: {DATE}\r\n\r\n"
        );
        let out = String::from_utf8(replacement(head.as_bytes()).unwrap()).unwrap();
        let page = "<!DOCTYPE html><title>Error 431</title><p>Error 431: Request Header Fields Too Large.\n";
        assert_eq!(
            out,
            format!(
                "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/html\r\n\
                 content-length: {}\r\nconnection: close\r\ndate: {DATE}\r\n\r\n{page}",
                page.len()
            )
        );
    }

    #[test]
    fn without_connection_close_too() {
        let head = format!("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: {DATE}\r\n\r\n");
        let out = replacement(head.as_bytes()).unwrap();
        assert!(out.ends_with(b"<p>Error 400: Bad Request.\n"));
    }

    #[test]
    fn other_writes_pass() {
        for head in [
            format!("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nDate: {DATE}\r\n\r\n"),
            format!(
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nServer: rein\r\nDate: {DATE}\r\n\r\n"
            ),
            format!("HTTP/1.1 400 Bad Request\r\nContent-Length: 5\r\nDate: {DATE}\r\n\r\n"),
            format!("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nDate: {DATE}\r\n\r\nmore"),
            "HTTP/1.1 400".to_owned(),
            "HTTP/1.1 4".to_owned(),
            String::new(),
        ] {
            assert!(replacement(head.as_bytes()).is_none(), "{head}");
        }
    }
}
