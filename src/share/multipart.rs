//! The layout of a `multipart/byteranges` body (RFC 9110 §14.6): a boundary, per-part headers and file
//! extents, with the exact total length known before a byte is read.
//!
//! ```text
//! --B\r\nContent-Type: T\r\nContent-Range: bytes 0-9/100\r\n\r\n<10 bytes>\r\n
//! --B\r\n...\r\n\r\n<bytes>\r\n
//! --B--\r\n
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::range::ByteRange;
use super::stream::Segment;

/// A multipart body ready to stream.
#[derive(Debug)]
pub struct Multipart {
    pub boundary: String,
    /// Headers and extents in order; their lengths add up to the exact `Content-Length`.
    pub segments: Vec<Segment>,
}

impl Multipart {
    /// `content_type` is the file's; a file without one gets parts without `Content-Type`.
    pub fn new(ranges: &[ByteRange], size: u64, content_type: Option<&str>) -> Self {
        Self::with_boundary(new_boundary(), ranges, size, content_type)
    }

    fn with_boundary(
        boundary: String,
        ranges: &[ByteRange],
        size: u64,
        content_type: Option<&str>,
    ) -> Self {
        let mut segments = Vec::with_capacity(ranges.len() * 2 + 1);
        for r in ranges {
            let type_line = content_type
                .map(|t| format!("Content-Type: {t}\r\n"))
                .unwrap_or_default();
            let head = format!(
                "--{boundary}\r\n{type_line}Content-Range: {}\r\n\r\n",
                r.content_range(size)
            );
            segments.push(Segment::Bytes(Bytes::from(head)));
            segments.push(Segment::File {
                offset: r.first,
                len: r.len(),
            });
            segments.push(Segment::Bytes(Bytes::from_static(b"\r\n")));
        }
        segments.push(Segment::Bytes(Bytes::from(format!("--{boundary}--\r\n"))));
        Multipart { boundary, segments }
    }

    pub fn content_type(&self) -> String {
        format!("multipart/byteranges; boundary={}", self.boundary)
    }
}

/// A boundary unlikely to occur in any file: 20 hex digits from the clock and a process-wide counter,
/// mixed so consecutive boundaries share no long prefix.
fn new_boundary() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let clock = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| {
        d.as_secs() ^ u64::from(d.subsec_nanos()).rotate_left(40)
    });
    format!("{:016x}{:04x}", mix(clock ^ n.rotate_left(32)), n & 0xffff)
}

/// splitmix64's finaliser: spreads every input bit over the output.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_length() {
        let ranges = [
            ByteRange { first: 0, last: 1 },
            ByteRange { first: 8, last: 9 },
        ];
        let m = Multipart::with_boundary("XYZ".into(), &ranges, 10, Some("text/plain"));
        assert_eq!(m.content_type(), "multipart/byteranges; boundary=XYZ");
        let head = "--XYZ\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/10\r\n\r\n";
        assert_eq!(m.segments[0], Segment::Bytes(Bytes::from(head)));
        assert_eq!(m.segments[1], Segment::File { offset: 0, len: 2 });
        assert_eq!(m.segments[4], Segment::File { offset: 8, len: 2 });
        assert_eq!(
            m.segments[6],
            Segment::Bytes(Bytes::from_static(b"--XYZ--\r\n"))
        );
        let length: u64 = m.segments.iter().map(Segment::len).sum();
        assert_eq!(length, (head.len() as u64 + 2 + 2) * 2 + 9);
    }

    #[test]
    fn boundaries_differ() {
        let a = new_boundary();
        let b = new_boundary();
        assert_eq!(a.len(), 20);
        assert_ne!(a, b);
    }
}
