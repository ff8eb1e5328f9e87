//! Response bodies read from an open file: the whole file, one range, or the parts of a
//! `multipart/byteranges` body, streamed in [`CHUNK`]-sized reads and never held in memory whole.
//!
//! A body is a list of [`Segment`]s: literal bytes (multipart headers) and file extents. Extents are read with
//! positional reads (`pread`) on a blocking thread, so any number of ranges share one descriptor without
//! seeking. If the file shrinks while it is being sent, the body ends with an error instead of silently
//! sending fewer bytes than its `Content-Length` promised; hyper then closes the connection.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};

use crate::body::Body;

/// The size of one read, and so of one body frame.
pub const CHUNK: u64 = 64 * 1024;

/// A piece of a response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Bytes(Bytes),
    /// `len` bytes of the file from `offset`.
    File {
        offset: u64,
        len: u64,
    },
}

impl Segment {
    pub fn len(&self) -> u64 {
        match self {
            Segment::Bytes(b) => b.len() as u64,
            Segment::File { len, .. } => *len,
        }
    }
}

struct State {
    file: Arc<File>,
    todo: VecDeque<Segment>,
}

/// Bodies up to this size are read at once, on the calling thread: for a small file one `pread` from the page
/// cache costs less than a hop to a blocking thread and back.
pub const INLINE: u64 = 64 * 1024;

/// Where a file's bytes come from: its open descriptor, or the content already in memory.
#[derive(Debug)]
pub enum Source {
    File(File),
    Memory(Bytes),
}

/// A body made of `segments`, reading file extents from `source`: read at once when small, else streamed.
pub fn body(source: Source, segments: Vec<Segment>) -> Body {
    let file = match source {
        Source::File(file) => file,
        Source::Memory(bytes) => return from_memory(&bytes, &segments),
    };
    let total: u64 = segments.iter().map(Segment::len).sum();
    if total <= INLINE
        && let Ok(bytes) = gather(&segments, total, |buf, offset| {
            file.read_exact_at(buf, offset)
        })
    {
        return crate::body::full(bytes);
    }
    streamed(file, segments)
}

/// A body cut from a file's content in memory; the whole file is shared, not copied.
fn from_memory(bytes: &Bytes, segments: &[Segment]) -> Body {
    if let [Segment::File { offset: 0, len }] = segments
        && *len == bytes.len() as u64
    {
        return crate::body::full(bytes.clone());
    }
    let total: u64 = segments.iter().map(Segment::len).sum();
    let copied = gather(segments, total, |buf, offset| {
        usize::try_from(offset)
            .ok()
            .and_then(|start| bytes.get(start..start.checked_add(buf.len())?))
            .map(|src| buf.copy_from_slice(src))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))
    });
    match copied {
        Ok(all) => crate::body::full(all),
        // Unreachable while ranges are checked against the size the bytes were read at; an error body makes
        // hyper close the connection rather than send fewer bytes than promised.
        Err(e) => StreamBody::new(stream::once(async move { Err::<Frame<Bytes>, _>(e) })).boxed(),
    }
}

/// All of `segments` in one buffer, file extents filled by `read(buf, offset)`; any failure (a file that
/// shrank) is returned.
fn gather(
    segments: &[Segment],
    total: u64,
    mut read: impl FnMut(&mut [u8], u64) -> io::Result<()>,
) -> io::Result<Bytes> {
    let mut out = Vec::with_capacity(usize::try_from(total).map_err(io::Error::other)?);
    for segment in segments {
        match segment {
            Segment::Bytes(b) => out.extend_from_slice(b),
            Segment::File { offset, len } => {
                let start = out.len();
                out.resize(start + usize::try_from(*len).map_err(io::Error::other)?, 0);
                read(&mut out[start..], *offset)?;
            }
        }
    }
    Ok(Bytes::from(out))
}

fn streamed(file: File, segments: Vec<Segment>) -> Body {
    let state = State {
        file: Arc::new(file),
        todo: segments.into_iter().filter(|s| s.len() > 0).collect(),
    };
    let frames = stream::unfold(Some(state), |state| async move {
        let mut state = state?;
        match next_chunk(&mut state).await {
            Ok(Some(bytes)) => Some((Ok(Frame::data(bytes)), Some(state))),
            Ok(None) => None,
            // After an error the stream ends: `None` state.
            Err(e) => Some((Err(e), None)),
        }
    });
    StreamBody::new(frames).boxed()
}

async fn next_chunk(state: &mut State) -> io::Result<Option<Bytes>> {
    let Some(segment) = state.todo.pop_front() else {
        return Ok(None);
    };
    let (offset, len) = match segment {
        Segment::Bytes(b) => return Ok(Some(b)),
        Segment::File { offset, len } => (offset, len),
    };
    let n = len.min(CHUNK);
    if len > n {
        state.todo.push_front(Segment::File {
            offset: offset + n,
            len: len - n,
        });
    }
    let file = Arc::clone(&state.file);
    let read = tokio::task::spawn_blocking(move || read_at(&file, offset, n)).await;
    match read {
        Ok(result) => result.map(Some),
        Err(join) => Err(io::Error::other(join)),
    }
}

fn read_at(file: &File, offset: u64, n: u64) -> io::Result<Bytes> {
    // `n` is at most CHUNK, so it fits in usize.
    let mut buf = vec![0u8; usize::try_from(n).map_err(io::Error::other)?];
    // read_exact_at reports a file that shrank as UnexpectedEof.
    file.read_exact_at(&mut buf, offset)?;
    Ok(Bytes::from(buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(data: &[u8]) -> File {
        let mut f = tempfile::tempfile().expect("tempfile");
        f.write_all(data).expect("write");
        f
    }

    #[tokio::test]
    async fn segments_in_order_across_chunks() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let segments = vec![
            Segment::Bytes(Bytes::from_static(b"<")),
            Segment::File {
                offset: 10,
                len: 150_000,
            },
            Segment::Bytes(Bytes::new()),
            Segment::File { offset: 0, len: 3 },
            Segment::Bytes(Bytes::from_static(b">")),
        ];
        let got = body(Source::File(file_with(&data)), segments)
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let mut want = b"<".to_vec();
        want.extend_from_slice(&data[10..150_010]);
        want.extend_from_slice(&data[..3]);
        want.push(b'>');
        assert_eq!(got.len(), want.len());
        assert!(got == want);
    }

    #[tokio::test]
    async fn a_range_outside_bytes_in_memory_is_an_error() {
        let bytes = Bytes::from_static(b"abc");
        let got = body(
            Source::Memory(bytes),
            vec![Segment::File { offset: 1, len: 5 }],
        )
        .collect()
        .await;
        assert!(got.is_err());
    }

    #[tokio::test]
    async fn small_bodies_are_read_at_once() {
        let segments = vec![
            Segment::Bytes(Bytes::from_static(b"[")),
            Segment::File { offset: 1, len: 3 },
            Segment::Bytes(Bytes::from_static(b"]")),
        ];
        let got = body(Source::File(file_with(b"abcdef")), segments)
            .collect()
            .await
            .expect("body")
            .to_bytes();
        assert_eq!(&got[..], b"[bcd]");
    }

    #[tokio::test]
    async fn shrunk_file_is_an_error() {
        let segments = vec![Segment::File {
            offset: 0,
            len: 100,
        }];
        let got = body(Source::File(file_with(b"short")), segments.clone())
            .collect()
            .await;
        assert!(got.is_err());
        let big = vec![Segment::File {
            offset: 0,
            len: 2 * INLINE,
        }];
        let got = body(Source::File(file_with(&vec![1u8; INLINE as usize])), big)
            .collect()
            .await;
        assert!(got.is_err());
    }
}
