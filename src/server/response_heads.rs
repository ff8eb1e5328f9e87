//! The response heads going out on an HTTP/1 connection, spelled as Unit spells them.
//!
//! hyper writes every header name in lower case. [`ResponseHeads`] sits in the socket's write path
//! (`timeouts::TimedIo`), follows the bytes hyper writes, and writes each response head again with its names
//! spelled as the response's [`FieldCase`] says (the application's or upstream's spelling), else in canonical
//! case (`crate::field_case`). hyper encodes a head whole into one buffer and hands that buffer to each write
//! from its start, so a head always arrives whole at the start of a write. To know where the next head starts,
//! it follows each body's framing (`Content-Length`, chunked); a body delimited by the connection's close, a
//! `101` tunnel, or bytes that are not an HTTP/1 head (HTTP/2 on an `h2c` listener) end the following.
//!
//! The request handler leaves a [`Note`] per response, in order (`ConnState`). A final head with no note is
//! hyper's own answer to a request it could not parse (400, 431): it gets the HTML body rein's errors have.
//!
//! A rewritten head is reported to hyper as written once its first byte is; what is left of it is owed and
//! written before anything else (the next write, a flush, the shutdown).

use std::io::{self, IoSlice};
use std::ops::Range;
use std::task::{Poll, ready};

use http::StatusCode;

use crate::field_case::{FieldCase, canonicalise};

/// At most this many slices per write (hyper's own limit).
const MAX_SLICES: usize = 64;

/// What the handler knows of a response that the head does not say.
#[derive(Debug, Default)]
pub(crate) struct Note {
    /// Spellings of the response's names.
    pub(crate) case: FieldCase,
    /// An answer to `HEAD`: hyper writes the head alone, whatever it says of a body.
    pub(crate) bodiless: bool,
}

/// Where the outgoing bytes stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The next byte starts a response head.
    Head,
    /// Inside a body with this many bytes left.
    Length(u64),
    Chunked(Chunk),
    /// No more heads to find.
    Raw,
}

/// Writes hyper's HTTP/1 output with response heads spelled as Unit spells them.
#[derive(Debug)]
pub(crate) struct ResponseHeads {
    state: State,
    /// The head as it goes out; `out[sent..]` is owed.
    out: Vec<u8>,
    sent: usize,
    /// The note of the final head being written, taken from the handler's and kept until the head is out.
    note: Option<Note>,
}

/// A rewritten head and what follows it.
struct Rewritten {
    /// How many of hyper's bytes it stands for.
    taken: usize,
    then: State,
    /// The head was a final one (its note is used up once written).
    last: bool,
}

impl ResponseHeads {
    pub(crate) fn new() -> Self {
        ResponseHeads {
            state: State::Head,
            out: Vec::new(),
            sent: 0,
            note: None,
        }
    }

    /// Writes the owed rest of a head.
    pub(crate) fn poll_owed(
        &mut self,
        write: &mut dyn FnMut(&[IoSlice<'_>]) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<()>> {
        while self.sent < self.out.len() {
            let n = ready!(write(&[IoSlice::new(&self.out[self.sent..])]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        Poll::Ready(Ok(()))
    }

    /// The owed rest of a head, for a socket closing without another write.
    pub(crate) fn take_owed(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.out);
        out.drain(..self.sent.min(out.len()));
        self.sent = 0;
        out
    }

    /// Writes `bufs` (hyper's bytes) with `write`, a head among them spelled anew; `note` gives the handler's
    /// next note. Returns how many of hyper's bytes are written, as a socket's write does.
    pub(crate) fn poll_write(
        &mut self,
        bufs: &[IoSlice<'_>],
        note: &mut dyn FnMut() -> Option<Note>,
        write: &mut dyn FnMut(&[IoSlice<'_>]) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_owed(write))?;
        let head = match self.state {
            State::Raw => return write(bufs),
            State::Head => {
                let Some(first) = bufs.iter().find(|b| !b.is_empty()) else {
                    return write(bufs);
                };
                match self.rewrite(first, note) {
                    Some(r) => Some(r),
                    None => {
                        self.state = State::Raw;
                        return write(bufs);
                    }
                }
            }
            State::Length(_) | State::Chunked(_) => None,
        };
        let (taken, body) = match &head {
            Some(r) => (r.taken, r.then),
            None => (0, self.state),
        };
        let limit = limit(body, bufs, taken);
        let mut slices = [IoSlice::new(&[]); MAX_SLICES];
        let mut count = 0;
        if head.is_some() {
            slices[0] = IoSlice::new(&self.out);
            count = 1;
        }
        count += gather(bufs, taken, limit, &mut slices[count..]);
        let n = ready!(write(&slices[..count]))?;
        let head_len = self.out.len();
        let body_bytes = match head {
            Some(_) if n == 0 => return Poll::Ready(Ok(0)),
            Some(r) => {
                self.sent = n.min(head_len);
                self.state = r.then;
                if r.last {
                    self.note = None;
                }
                n.saturating_sub(head_len)
            }
            None => n,
        };
        self.advance(bufs, taken, body_bytes);
        Poll::Ready(Ok(taken + body_bytes))
    }

    /// Follows `n` body bytes of `bufs`, from `skip`.
    fn advance(&mut self, bufs: &[IoSlice<'_>], skip: usize, n: usize) {
        self.state = match self.state {
            State::Length(left) => State::Length(left - n as u64),
            State::Chunked(mut chunk) => {
                let mut ended = false;
                for piece in pieces(bufs, skip, Some(n)) {
                    ended = chunk.scan(piece).is_some();
                }
                if ended {
                    State::Head
                } else {
                    State::Chunked(chunk)
                }
            }
            other => other,
        };
        if self.state == State::Length(0) {
            self.state = State::Head;
        }
    }

    /// Spells the head at the start of `bytes` into `out`; `None` if `bytes` do not start with a whole
    /// HTTP/1 response head.
    fn rewrite(
        &mut self,
        bytes: &[u8],
        note: &mut dyn FnMut() -> Option<Note>,
    ) -> Option<Rewritten> {
        let code = status(bytes)?;
        let last = !(100..200).contains(&code);
        if last && self.note.is_none() {
            self.note = note();
        }
        self.out.clear();
        self.sent = 0;
        let case = self.note.as_ref().map(|n| &n.case);
        let (end, framing) = spell_into(&mut self.out, bytes, case)?;
        let head = &bytes[..end];
        if last && self.note.is_none() && code >= 400 && framing.length == Some(0) {
            self.out.clear();
            hyper_error(&mut self.out, head, code);
            return Some(Rewritten {
                taken: end,
                then: State::Head,
                last,
            });
        }
        let bodiless = self.note.as_ref().is_some_and(|n| n.bodiless);
        let then = match code {
            101 => State::Raw,
            100..=199 | 204 | 304 => State::Head,
            _ if bodiless => State::Head,
            _ if framing.chunked => State::Chunked(Chunk::default()),
            _ => match framing.length {
                Some(0) => State::Head,
                Some(n) => State::Length(n),
                None => State::Raw,
            },
        };
        Some(Rewritten {
            taken: end,
            then,
            last,
        })
    }
}

/// The status code of a head that starts `HTTP/1.x `.
fn status(bytes: &[u8]) -> Option<u16> {
    if !bytes.starts_with(b"HTTP/1.") {
        return None;
    }
    let digits = bytes.get(9..12)?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// What the fields say of the body.
#[derive(Default)]
struct Framing {
    length: Option<u64>,
    chunked: bool,
}

/// The end of the status line.
fn first_line(head: &[u8]) -> usize {
    head.windows(2)
        .position(|w| w == b"\r\n")
        .map_or(head.len(), |i| i + 2)
}

/// The field line starting at `at`: the ranges of its name and value, and where the next line starts.
fn field(head: &[u8], at: usize) -> Option<(Range<usize>, Range<usize>, usize)> {
    let line_end = at + head.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
    let colon = at + head[at..line_end].iter().position(|&b| b == b':')?;
    let mut value = colon + 1;
    while value < line_end && head[value] == b' ' {
        value += 1;
    }
    Some((at..colon, value..line_end, line_end + 2))
}

/// Copies the head at the start of `bytes` into `out` line by line, each name spelled in place (the
/// recorded spelling, else canonical), and reads the body's framing: one pass over the head. Returns the
/// head's length, its blank line included; `None` if it does not end within `bytes`.
fn spell_into(
    out: &mut Vec<u8>,
    bytes: &[u8],
    case: Option<&FieldCase>,
) -> Option<(usize, Framing)> {
    let mut framing = Framing::default();
    let mut at = 0;
    loop {
        let nl = at + memchr::memchr(b'\n', &bytes[at..])?;
        let line = &bytes[at..=nl];
        let start = out.len();
        out.extend_from_slice(line);
        let status_line = at == 0;
        at = nl + 1;
        if status_line {
            continue;
        }
        if line == b"\r\n" || line == b"\n" {
            return Some((at, framing));
        }
        let Some(colon) = memchr::memchr(b':', line) else {
            continue;
        };
        let name = &mut out[start..start + colon];
        match case.and_then(|c| c.get(name)) {
            Some(s) if s.len() == colon => name.copy_from_slice(s),
            _ => canonicalise(name),
        }
        // Only the framing fields' values are read: `Content-Length` (14) and `Transfer-Encoding` (17).
        if colon == 14 || colon == 17 {
            let value = line[colon + 1..].trim_ascii();
            if name.eq_ignore_ascii_case(b"content-length") {
                framing.length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                // Chunked is the last coding when there is one (RFC 9112 §6.1).
                framing.chunked =
                    value.len() >= 7 && value[value.len() - 7..].eq_ignore_ascii_case(b"chunked");
            }
        }
    }
}

/// hyper's own error answer, bodiless, as rein's errors are: with their HTML page.
fn hyper_error(out: &mut Vec<u8>, head: &[u8], code: u16) {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
    let page = super::actions::error_text(status);
    let mut at = first_line(head);
    out.extend_from_slice(&head[..at]);
    while let Some((name, value, next)) = field(head, at) {
        at = next;
        let name = &head[name];
        if name.eq_ignore_ascii_case(b"content-length")
            || name.eq_ignore_ascii_case(b"content-type")
        {
            continue;
        }
        let start = out.len();
        out.extend_from_slice(name);
        canonicalise(&mut out[start..]);
        out.extend_from_slice(b": ");
        out.extend_from_slice(&head[value]);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Content-Type: text/html\r\nContent-Length: ");
    out.extend_from_slice(page.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(page.as_bytes());
}

/// How many of hyper's bytes after `skip` may go out in this write: up to the end of the current message, so
/// the next head is spelled by the next write. `None`: no end in sight.
fn limit(state: State, bufs: &[IoSlice<'_>], skip: usize) -> Option<usize> {
    match state {
        State::Head => Some(0),
        State::Length(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        State::Chunked(mut chunk) => {
            let mut seen = 0;
            for piece in pieces(bufs, skip, None) {
                if let Some(end) = chunk.scan(piece) {
                    return Some(seen + end);
                }
                seen += piece.len();
            }
            None
        }
        State::Raw => None,
    }
}

/// The bytes of `bufs` after `skip`, at most `max` of them.
fn pieces<'a>(
    bufs: &'a [IoSlice<'a>],
    mut skip: usize,
    mut max: Option<usize>,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    bufs.iter().filter_map(move |buf| {
        let mut b: &[u8] = buf;
        if skip >= b.len() {
            skip -= b.len();
            return None;
        }
        b = &b[skip..];
        skip = 0;
        if let Some(m) = max.as_mut() {
            if *m == 0 {
                return None;
            }
            b = &b[..b.len().min(*m)];
            *m -= b.len();
        }
        Some(b)
    })
}

/// Fills `slices` with the bytes of `bufs` after `skip`, at most `max`; returns how many slices.
fn gather<'a>(
    bufs: &'a [IoSlice<'a>],
    skip: usize,
    max: Option<usize>,
    slices: &mut [IoSlice<'a>],
) -> usize {
    let mut count = 0;
    for piece in pieces(bufs, skip, max) {
        if count == slices.len() {
            break;
        }
        slices[count] = IoSlice::new(piece);
        count += 1;
    }
    count
}

/// Where a chunked body stands (RFC 9112 §7.1), followed byte by byte except for the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// In a chunk-size line: the size so far, and whether its extensions started.
    Size {
        size: u64,
        ext: bool,
    },
    Data(u64),
    /// The line end after a chunk's data.
    DataEnd,
    /// The trailer section after the last chunk; `blank`: at the start of a line.
    Trailers {
        blank: bool,
    },
}

impl Default for Chunk {
    fn default() -> Self {
        Chunk::Size {
            size: 0,
            ext: false,
        }
    }
}

impl Chunk {
    /// Follows `bytes`; `Some(n)`: the body ends after `n` of them.
    fn scan(&mut self, bytes: &[u8]) -> Option<usize> {
        let mut i = 0;
        while i < bytes.len() {
            if let Chunk::Data(left) = self {
                let take = usize::try_from(*left)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len() - i);
                i += take;
                *left -= take as u64;
                if *left == 0 {
                    *self = Chunk::DataEnd;
                }
                continue;
            }
            let b = bytes[i];
            i += 1;
            match self {
                Chunk::Size { size, ext } => match b {
                    b'\n' if *size == 0 => *self = Chunk::Trailers { blank: true },
                    b'\n' => *self = Chunk::Data(*size),
                    b'\r' => {}
                    _ if *ext => {}
                    _ => match char::from(b).to_digit(16) {
                        Some(d) => *size = size.saturating_mul(16).saturating_add(u64::from(d)),
                        None => *ext = true,
                    },
                },
                Chunk::DataEnd if b == b'\n' => *self = Chunk::default(),
                Chunk::DataEnd => {}
                Chunk::Trailers { blank } => match b {
                    b'\n' if *blank => {
                        *self = Chunk::default();
                        return Some(i);
                    }
                    b'\n' => *blank = true,
                    b'\r' => {}
                    _ => *blank = false,
                },
                Chunk::Data(_) => {}
            }
        }
        None
    }
}

#[cfg(test)]
#[path = "response_heads_tests.rs"]
mod tests;
