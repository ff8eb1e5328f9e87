//! The `Range` header (RFC 9110 §14.1.2): parsing `bytes=` range sets and resolving them against the size
//! of the representation being served.
//!
//! Deliberate leniencies and limits: a header that is not a well-formed `bytes` range set is ignored (a 200),
//! as the RFC allows; so is one with more than [`MAX_RANGES`] elements, or whose ranges together ask for more
//! bytes than the file holds (overlapping ranges used to amplify a response). Numbers too large for `u64`
//! saturate, so `0-99999999999999999999` means "to the end". Unsatisfiable ranges inside a set with
//! satisfiable ones are dropped; a set with none satisfiable is a 416.

/// More elements than this and the header is ignored.
pub const MAX_RANGES: usize = 64;

/// An inclusive byte range inside the representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    pub first: u64,
    pub last: u64,
}

impl ByteRange {
    pub fn len(&self) -> u64 {
        self.last - self.first + 1
    }

    /// `bytes 0-99/1234` for a `Content-Range` header.
    pub fn content_range(&self, size: u64) -> String {
        format!("bytes {}-{}/{}", self.first, self.last, size)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeOutcome {
    /// Serve the whole representation (no usable Range header).
    Full,
    /// Serve these ranges, in the order asked (at least one).
    Partial(Vec<ByteRange>),
    /// 416.
    Unsatisfiable,
}

/// One element as written: `a-b`, `a-` or `-n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spec {
    FromTo(u64, Option<u64>),
    Suffix(u64),
}

/// Resolves the `Range` header value `header` for a representation of `size` bytes.
pub fn resolve(header: &[u8], size: u64) -> RangeOutcome {
    let Some(specs) = parse(header) else {
        return RangeOutcome::Full;
    };
    let ranges: Vec<ByteRange> = specs.iter().filter_map(|s| satisfy(*s, size)).collect();
    if ranges.is_empty() {
        return RangeOutcome::Unsatisfiable;
    }
    let asked: u64 = ranges
        .iter()
        .map(ByteRange::len)
        .fold(0, u64::saturating_add);
    if ranges.len() > 1 && asked > size {
        return RangeOutcome::Full;
    }
    RangeOutcome::Partial(ranges)
}

/// `None` when the header is not a `bytes` range set we accept.
fn parse(header: &[u8]) -> Option<Vec<Spec>> {
    let text = std::str::from_utf8(header).ok()?;
    let (unit, set) = text.split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return None;
    }
    let mut specs = Vec::new();
    // Empty list elements (`bytes=0-1,,2-3`) are allowed by the list syntax.
    for element in set.split(',').map(|e| e.trim_matches([' ', '\t'])) {
        if element.is_empty() {
            continue;
        }
        if specs.len() == MAX_RANGES {
            return None;
        }
        specs.push(parse_spec(element)?);
    }
    (!specs.is_empty()).then_some(specs)
}

fn parse_spec(s: &str) -> Option<Spec> {
    let (first, last) = s.split_once('-')?;
    if first.is_empty() {
        return Some(Spec::Suffix(number(last)?));
    }
    let first = number(first)?;
    if last.is_empty() {
        return Some(Spec::FromTo(first, None));
    }
    let last = number(last)?;
    (last >= first).then_some(Spec::FromTo(first, Some(last)))
}

/// Digits only (no sign, no spaces), saturating at `u64::MAX`.
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.bytes().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

fn satisfy(spec: Spec, size: u64) -> Option<ByteRange> {
    match spec {
        Spec::FromTo(first, _) if first >= size => None,
        Spec::FromTo(first, last) => Some(ByteRange {
            first,
            last: last.map_or(size - 1, |l| l.min(size - 1)),
        }),
        Spec::Suffix(0) => None,
        Spec::Suffix(_) if size == 0 => None,
        Spec::Suffix(n) => Some(ByteRange {
            first: size.saturating_sub(n),
            last: size - 1,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(first: u64, last: u64) -> ByteRange {
        ByteRange { first, last }
    }

    fn partial(h: &str, size: u64) -> Vec<ByteRange> {
        match resolve(h.as_bytes(), size) {
            RangeOutcome::Partial(v) => v,
            other => panic!("{h:?}: expected partial, got {other:?}"),
        }
    }

    #[test]
    fn single_ranges() {
        assert_eq!(partial("bytes=0-99", 1000), vec![r(0, 99)]);
        assert_eq!(partial("bytes=500-", 1000), vec![r(500, 999)]);
        assert_eq!(partial("bytes=-300", 1000), vec![r(700, 999)]);
        assert_eq!(partial("bytes=-5000", 1000), vec![r(0, 999)]);
        assert_eq!(partial("bytes=900-5000", 1000), vec![r(900, 999)]);
        assert_eq!(partial("Bytes = 1-1", 1000), vec![r(1, 1)]);
        assert_eq!(
            partial("bytes=0-99999999999999999999999", 10),
            vec![r(0, 9)]
        );
        assert_eq!(r(0, 99).content_range(1000), "bytes 0-99/1000");
    }

    #[test]
    fn multiple_ranges() {
        assert_eq!(
            partial("bytes=0-1, 5-6,,-1", 10),
            vec![r(0, 1), r(5, 6), r(9, 9)]
        );
        // Unsatisfiable elements are dropped when others remain.
        assert_eq!(partial("bytes=0-1,50-60", 10), vec![r(0, 1)]);
    }

    #[test]
    fn unsatisfiable() {
        for h in [
            "bytes=1000-",
            "bytes=1000-2000",
            "bytes=-0",
            "bytes=2000-,3000-3001",
        ] {
            assert_eq!(
                resolve(h.as_bytes(), 1000),
                RangeOutcome::Unsatisfiable,
                "{h}"
            );
        }
        assert_eq!(resolve(b"bytes=0-", 0), RangeOutcome::Unsatisfiable);
        assert_eq!(resolve(b"bytes=-1", 0), RangeOutcome::Unsatisfiable);
    }

    #[test]
    fn invalid_is_ignored() {
        for h in [
            "",
            "bytes",
            "bytes=",
            "bytes=,",
            "items=0-1",
            "bytes=a-b",
            "bytes=5-1",
            "bytes=-",
            "bytes=1",
            "bytes=+1-2",
            "bytes=1-2-3",
            "bytes=0x1-2",
            "bytes=- 1",
        ] {
            assert_eq!(resolve(h.as_bytes(), 1000), RangeOutcome::Full, "{h:?}");
        }
        assert_eq!(resolve(b"bytes=\xff0-1", 1000), RangeOutcome::Full);
    }

    #[test]
    fn abuse_is_served_whole() {
        let many = format!("bytes={}", vec!["0-0"; MAX_RANGES + 1].join(","));
        assert_eq!(resolve(many.as_bytes(), 1000), RangeOutcome::Full);
        let ok = format!("bytes={}", vec!["0-0"; MAX_RANGES].join(","));
        assert_eq!(partial(&ok, 1000).len(), MAX_RANGES);
        // Overlapping ranges asking for more than the file.
        assert_eq!(resolve(b"bytes=0-,0-", 1000), RangeOutcome::Full);
    }
}
