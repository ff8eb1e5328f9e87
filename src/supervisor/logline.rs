//! The line format of app logs: every line rein writes to an app's log starts with when it was read, which
//! instance wrote it and on which stream, so that a reader of one file shared by several instances (and by
//! rein's own notices about them) can tell the lines apart:
//!
//! ```text
//! 2026-11-26T09:30:01.123Z [3] listening on fd 3           the app's standard output
//! 2026-11-26T09:30:01.125Z [3 err] DeprecationWarning: …   its standard error
//! 2026-11-26T09:30:01.200Z [3 rein] ready: taking requests   rein, about instance 3
//! 2026-11-26T09:30:02.000Z [3 err+] <16 KiB of a longer line> a piece the next line of instance 3 continues
//! ```
//!
//! The time is UTC (RFC 3339, milliseconds) at the moment rein wrote the line (taken under the file's lock,
//! so the times in one file never go backwards, whichever instance wrote the lines). The app's bytes
//! follow the prefix unchanged (a CRLF line keeps its `\r`), so [`parse`] gives back exactly what it wrote.
//! [`Lines`] splits a stream into lines with bounded memory: a line longer than [`Lines::MAX`] bytes, or one
//! left incomplete while the stream is quiet, is written in pieces marked `+`.

use std::io::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

/// Who wrote a line of an app log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The instance's standard output.
    Out,
    /// The instance's standard error.
    Err,
    /// rein, about the instance (started, ready, stopping, exited).
    Rein,
}

impl Source {
    /// The mark after the instance id; none for standard output, the common case.
    fn mark(self) -> &'static str {
        match self {
            Source::Out => "",
            Source::Err => " err",
            Source::Rein => " rein",
        }
    }
}

/// `2026-11-26T09:30:01.123Z`: UTC, RFC 3339 with milliseconds.
pub(crate) fn timestamp(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, day) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = crate::vars::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        day / 3600,
        day / 60 % 60,
        day % 60,
        since.subsec_millis()
    )
}

/// The length of a [`timestamp`].
const TIME_LEN: usize = 24;

/// Appends one line: the prefix, `text` (without its newline), and a newline.
pub(crate) fn write_line(
    out: &mut Vec<u8>,
    time: &str,
    instance: u64,
    source: Source,
    continues: bool,
    text: &[&[u8]],
) {
    let plus = if continues { "+" } else { "" };
    // Writing into a Vec cannot fail.
    let _ = write!(out, "{time} [{instance}{}{plus}] ", source.mark());
    for part in text {
        out.extend_from_slice(part);
    }
    out.push(b'\n');
}

/// Splits one stream of one instance into prefixed lines. Holds at most [`Lines::MAX`] bytes of an
/// incomplete line.
#[derive(Debug)]
pub(crate) struct Lines {
    instance: u64,
    source: Source,
    partial: Vec<u8>,
}

impl Lines {
    /// The longest line written whole (without its newline); a longer one is written in pieces this long.
    pub(crate) const MAX: usize = 16 * 1024;

    pub(crate) fn new(instance: u64, source: Source) -> Lines {
        Lines {
            instance,
            source,
            partial: Vec::new(),
        }
    }

    /// Whether an incomplete line is waiting for the rest.
    pub(crate) fn has_partial(&self) -> bool {
        !self.partial.is_empty()
    }

    /// Appends to `out` every line `data` completes (prefixed with `time`), and every full [`Lines::MAX`]
    /// piece of a longer one; keeps the rest for the next call.
    pub(crate) fn push(&mut self, mut data: &[u8], time: &str, out: &mut Vec<u8>) {
        while !data.is_empty() {
            if self.partial.len() == Self::MAX {
                // Held full until the next byte: a line of exactly MAX bytes is still whole when its
                // newline comes next, even in the next read.
                let whole = data[0] == b'\n';
                self.emit(out, time, !whole, &[]);
                data = &data[usize::from(whole)..];
                continue;
            }
            let room = Self::MAX - self.partial.len();
            let window = &data[..data.len().min(room)];
            match window.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.emit(out, time, false, &window[..i]);
                    data = &data[i + 1..];
                }
                None => {
                    self.partial.extend_from_slice(window);
                    data = &data[window.len()..];
                }
            }
        }
    }

    /// Writes the incomplete line as a piece that more may continue (the stream has gone quiet mid-line:
    /// a prompt, a progress bar), so that a reader sees it now.
    pub(crate) fn flush(&mut self, time: &str, out: &mut Vec<u8>) {
        if self.has_partial() {
            self.emit(out, time, true, &[]);
        }
    }

    /// The stream ended: its last line, if it had no newline, is written as a whole line.
    pub(crate) fn finish(&mut self, time: &str, out: &mut Vec<u8>) {
        if self.has_partial() {
            self.emit(out, time, false, &[]);
        }
    }

    /// Writes the held bytes followed by `tail` as one line, and empties the hold.
    fn emit(&mut self, out: &mut Vec<u8>, time: &str, continues: bool, tail: &[u8]) {
        let text: [&[u8]; 2] = [&self.partial, tail];
        write_line(out, time, self.instance, self.source, continues, &text);
        self.partial.clear();
    }
}

/// One line of an app log, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parsed<'a> {
    pub(crate) time: &'a str,
    pub(crate) instance: u64,
    pub(crate) source: Source,
    /// The line goes on in the next piece of the same instance and stream.
    pub(crate) continues: bool,
    /// What the app (or rein) wrote, as it wrote it.
    pub(crate) text: &'a [u8],
}

/// Takes a line (without its newline) apart; `None` when it does not start with a prefix (a file written
/// before rein prefixed its lines, or by something else).
pub(crate) fn parse(line: &[u8]) -> Option<Parsed<'_>> {
    let time = std::str::from_utf8(line.get(..TIME_LEN)?).ok()?;
    let shape = time.bytes().enumerate().all(|(i, b)| match i {
        4 | 7 => b == b'-',
        10 => b == b'T',
        13 | 16 => b == b':',
        19 => b == b'.',
        23 => b == b'Z',
        _ => b.is_ascii_digit(),
    });
    let rest = line[TIME_LEN..].strip_prefix(b" [")?;
    if !shape {
        return None;
    }
    let close = rest.iter().position(|&b| b == b']')?;
    let tag = std::str::from_utf8(&rest[..close]).ok()?;
    let text = rest[close + 1..].strip_prefix(b" ")?;
    let (tag, continues) = match tag.strip_suffix('+') {
        Some(tag) => (tag, true),
        None => (tag, false),
    };
    let (id, source) = match tag.split_once(' ') {
        None => (tag, Source::Out),
        Some((id, "err")) => (id, Source::Err),
        Some((id, "rein")) => (id, Source::Rein),
        Some(_) => return None,
    };
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Parsed {
        time,
        instance: id.parse().ok()?,
        source,
        continues,
        text,
    })
}

/// A writer that turns prefixed log lines back into the apps' own output (`rein logs --raw`): prefixes
/// taken off, the pieces of a long line joined, rein's notices left out; a line without a prefix passes
/// as it is. Holds an incomplete line (bounded: past [`Raw::HOLD`] bytes it passes as it is) until its
/// newline arrives or [`Raw::finish`].
pub(crate) struct Raw<W: Write> {
    out: W,
    partial: Vec<u8>,
}

impl<W: Write> Raw<W> {
    /// More than a prefix and a [`Lines::MAX`] piece: no line rein wrote is longer.
    const HOLD: usize = 2 * Lines::MAX;

    pub(crate) fn new(out: W) -> Raw<W> {
        Raw {
            out,
            partial: Vec::new(),
        }
    }

    /// The writer, once done.
    #[cfg(test)]
    pub(crate) fn into_inner(self) -> W {
        self.out
    }

    /// Writes what is held (the file ended mid-line) and flushes.
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        let held = std::mem::take(&mut self.partial);
        if !held.is_empty() {
            self.line(&held, false)?;
        }
        self.out.flush()
    }

    fn line(&mut self, line: &[u8], newline: bool) -> io::Result<()> {
        match parse(line) {
            Some(p) if p.source == Source::Rein => Ok(()),
            Some(p) => {
                self.out.write_all(p.text)?;
                match newline && !p.continues {
                    true => self.out.write_all(b"\n"),
                    false => Ok(()),
                }
            }
            None => {
                self.out.write_all(line)?;
                match newline {
                    true => self.out.write_all(b"\n"),
                    false => Ok(()),
                }
            }
        }
    }
}

impl<W: Write> Write for Raw<W> {
    fn write(&mut self, mut data: &[u8]) -> io::Result<usize> {
        let len = data.len();
        while let Some(i) = data.iter().position(|&b| b == b'\n') {
            let mut held = std::mem::take(&mut self.partial);
            held.extend_from_slice(&data[..i]);
            self.line(&held, true)?;
            data = &data[i + 1..];
        }
        self.partial.extend_from_slice(data);
        if self.partial.len() > Self::HOLD {
            let held = std::mem::take(&mut self.partial);
            self.out.write_all(&held)?;
        }
        Ok(len)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
#[path = "logline_tests.rs"]
mod tests;
