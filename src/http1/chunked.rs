//! The chunked transfer coding (RFC 9112 §7.1): the framing written around a request body's chunks, and a
//! decoder that takes a response body's chunks out of the read buffer without copying them.

use bytes::{Buf, Bytes, BytesMut};

/// Ends a chunk's data.
pub const CHUNK_END: &[u8] = b"\r\n";
/// Ends the body: the last chunk, no trailer fields.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";
/// The most bytes of chunk extensions or trailer fields accepted (they are read, and dropped).
const MAX_META: usize = 16 * 1024;

/// The line that opens a chunk of `len` bytes.
pub fn chunk_header(len: usize) -> Bytes {
    Bytes::from(format!("{len:x}\r\n"))
}

/// Why a chunked body was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChunkError {
    #[error("invalid chunk size line")]
    Size,
    #[error("chunk data not followed by CRLF")]
    DataEnd,
    #[error("chunk extensions or trailer fields longer than {MAX_META} bytes")]
    TooLong,
}

/// What [`Decoder::decode`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    Data(Bytes),
    /// The buffer holds no more of the body yet.
    NeedMore,
    /// The last chunk and the trailer section are consumed.
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
    Done,
}

/// A chunked body being read.
#[derive(Debug)]
pub struct Decoder {
    state: State,
    trailer: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            state: State::Size,
            trailer: 0,
        }
    }
}

impl Decoder {
    /// The next piece of data from `buf`, consuming the framing around it.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Decoded, ChunkError> {
        self.skip_framing(buf)?;
        match self.state {
            State::Done => Ok(Decoded::Done),
            State::Data(left) if !buf.is_empty() => {
                let take = left.min(buf.len() as u64) as usize;
                let data = buf.split_to(take).freeze();
                self.state = match left - take as u64 {
                    0 => State::DataEnd,
                    rest => State::Data(rest),
                };
                Ok(Decoded::Data(data))
            }
            _ => Ok(Decoded::NeedMore),
        }
    }

    /// Consumes what framing `buf` holds up to the next data (or the end), so that a body whose last data
    /// just went out is known to be complete without another read.
    pub fn skip_framing(&mut self, buf: &mut BytesMut) -> Result<(), ChunkError> {
        loop {
            match self.state {
                State::Size => match httparse::parse_chunk_size(buf) {
                    Ok(httparse::Status::Complete((len, size))) => {
                        buf.advance(len);
                        self.state = if size == 0 {
                            State::Trailer
                        } else {
                            State::Data(size)
                        };
                    }
                    Ok(httparse::Status::Partial) if buf.len() > MAX_META => {
                        return Err(ChunkError::TooLong);
                    }
                    Ok(httparse::Status::Partial) => return Ok(()),
                    Err(_) => return Err(ChunkError::Size),
                },
                State::DataEnd => {
                    if buf.len() < CHUNK_END.len() {
                        return Ok(());
                    }
                    if !buf.starts_with(CHUNK_END) {
                        return Err(ChunkError::DataEnd);
                    }
                    buf.advance(CHUNK_END.len());
                    self.state = State::Size;
                }
                State::Trailer => match buf.windows(2).position(|w| w == b"\r\n") {
                    Some(0) => {
                        buf.advance(2);
                        self.state = State::Done;
                    }
                    Some(line) => {
                        self.trailer += line + 2;
                        if self.trailer > MAX_META {
                            return Err(ChunkError::TooLong);
                        }
                        buf.advance(line + 2);
                    }
                    None if self.trailer + buf.len() > MAX_META => return Err(ChunkError::TooLong),
                    None => return Ok(()),
                },
                State::Data(_) | State::Done => return Ok(()),
            }
        }
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `wire` fed `step` bytes at a time; the data, and whether the body ended.
    fn decode_in_steps(wire: &[u8], step: usize) -> Result<(Vec<u8>, bool), ChunkError> {
        let mut decoder = Decoder::default();
        let (mut buf, mut data) = (BytesMut::new(), Vec::new());
        for piece in wire.chunks(step) {
            buf.extend_from_slice(piece);
            loop {
                match decoder.decode(&mut buf)? {
                    Decoded::Data(d) => data.extend_from_slice(&d),
                    Decoded::NeedMore => break,
                    Decoded::Done => return Ok((data, buf.is_empty())),
                }
            }
        }
        Ok((data, false))
    }

    #[test]
    fn chunks_decode_whatever_the_reads_look_like() {
        let wire = b"5\r\nhello\r\n1;ext=1\r\n,\r\nA \r\n world!!!!\r\n0\r\nX-Trailer: 1\r\n\r\n";
        for step in 1..=wire.len() {
            let (data, clean) = decode_in_steps(wire, step).unwrap();
            assert_eq!(data, b"hello, world!!!!", "step {step}");
            assert!(clean, "step {step}");
        }
    }

    #[test]
    fn the_end_is_seen_right_after_the_last_data() {
        let mut buf = BytesMut::from(&b"3\r\nabc\r\n0\r\n\r\n"[..]);
        let mut decoder = Decoder::default();
        assert_eq!(
            decoder.decode(&mut buf).unwrap(),
            Decoded::Data(Bytes::from("abc"))
        );
        decoder.skip_framing(&mut buf).unwrap();
        assert!(decoder.is_done() && buf.is_empty());
    }

    #[test]
    fn bad_framing_is_refused() {
        assert_eq!(decode_in_steps(b"z\r\n", 3), Err(ChunkError::Size));
        assert_eq!(
            decode_in_steps(b"3\r\nabcX\r\n", 9),
            Err(ChunkError::DataEnd)
        );
        assert_eq!(
            decode_in_steps(b"ffffffffffffffffff\r\n", 20),
            Err(ChunkError::Size)
        );
        let long_ext = format!("1;{}\r\n", "e".repeat(2 * MAX_META));
        assert_eq!(
            decode_in_steps(long_ext.as_bytes(), 4096),
            Err(ChunkError::TooLong)
        );
        let long_trailer = format!("0\r\n{}", "t: 1\r\n".repeat(MAX_META / 4));
        assert_eq!(
            decode_in_steps(long_trailer.as_bytes(), 4096),
            Err(ChunkError::TooLong)
        );
    }

    #[test]
    fn chunk_headers_are_hex() {
        assert_eq!(chunk_header(255), "ff\r\n");
        assert_eq!(chunk_header(1), "1\r\n");
    }
}
