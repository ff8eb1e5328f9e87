//! FastCGI name-value pairs: the content of PARAMS streams and of GET_VALUES records.
//!
//! Each length is one byte when under 128, else four bytes with the high bit set (31 bits of length). Names
//! and values are bytes: CGI variables carry header values and paths, which need not be UTF-8.

use std::fmt;

use bytes::{BufMut, BytesMut};

/// The largest length the four-byte form holds.
const MAX_LEN: usize = 0x7fff_ffff;

/// Name-value pairs in order, kept encoded as they go on the wire: a request's two dozen pairs cost one
/// growing buffer, not two allocations each, and sending them is one copy. Duplicates are kept: PHP-FPM lets
/// the last one win, which is how user-configured params override the computed ones.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Params {
    /// The pairs, encoded (each length in its shortest form, so equal pairs mean equal bytes).
    wire: Vec<u8>,
    count: usize,
}

/// Why PARAMS content cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    #[error("name-value pair cut short")]
    Truncated,
}

impl Params {
    pub fn new() -> Self {
        Params::default()
    }

    /// Room for about a request's worth of pairs.
    pub fn with_capacity(bytes: usize) -> Self {
        Params {
            wire: Vec::with_capacity(bytes),
            count: 0,
        }
    }

    /// Appends a pair. A name or value over 2^31-1 bytes cannot be encoded: such a pair is left out, with a
    /// warning.
    pub fn push(&mut self, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        let (name, value) = (name.as_ref(), value.as_ref());
        if name.len() > MAX_LEN || value.len() > MAX_LEN {
            tracing::warn!(
                name = %String::from_utf8_lossy(&name[..name.len().min(64)]),
                "FastCGI param too long to encode, left out"
            );
            return;
        }
        self.push_with(name.len(), value.len(), |wire| {
            wire.extend_from_slice(name);
            wire.extend_from_slice(value);
        });
    }

    /// Appends a pair that `write` puts together in place: it must append exactly `name_len` bytes of name
    /// then `value_len` bytes of value (both at most 2^31-1). For a name or value made of pieces, which would
    /// otherwise be built first and copied.
    pub fn push_with(
        &mut self,
        name_len: usize,
        value_len: usize,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        assert!(
            name_len <= MAX_LEN && value_len <= MAX_LEN,
            "FastCGI param too long"
        );
        self.wire.reserve(8 + name_len + value_len);
        put_len(&mut self.wire, name_len);
        put_len(&mut self.wire, value_len);
        let start = self.wire.len();
        write(&mut self.wire);
        assert_eq!(
            self.wire.len() - start,
            name_len + value_len,
            "pair written at its declared length"
        );
        self.count += 1;
    }

    #[cfg(test)]
    /// The value of the last pair called `name`: the one the application sees.
    pub fn get(&self, name: impl AsRef<[u8]>) -> Option<&[u8]> {
        let name = name.as_ref();
        self.iter()
            .filter(|(n, _)| *n == name)
            .last()
            .map(|(_, v)| v)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.count
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut rest = self.wire.as_slice();
        // The pairs were encoded here, so they read back whole: the iteration ends where the bytes do.
        std::iter::from_fn(move || match rest.is_empty() {
            true => None,
            false => take_pair(&mut rest).ok(),
        })
    }

    /// Appends the pairs, encoded, to `buf` (the content of a PARAMS stream, before cutting into records).
    pub fn encode(&self, buf: &mut BytesMut) {
        buf.extend_from_slice(&self.wire);
    }

    /// The pairs as they are encoded: the content of a PARAMS stream, before cutting into records.
    pub fn encoded(&self) -> &[u8] {
        &self.wire
    }

    /// Reads encoded pairs: the whole content of a PARAMS stream, or of a GET_VALUES(_RESULT) record.
    pub fn decode(mut data: &[u8]) -> Result<Params, ParamsError> {
        let mut params = Params::new();
        while !data.is_empty() {
            let (name, value) = take_pair(&mut data)?;
            params.push(name, value);
        }
        Ok(params)
    }
}

impl fmt::Debug for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(
                self.iter()
                    .map(|(n, v)| (String::from_utf8_lossy(n), String::from_utf8_lossy(v))),
            )
            .finish()
    }
}

impl<N: AsRef<[u8]>, V: AsRef<[u8]>> FromIterator<(N, V)> for Params {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(iter: I) -> Self {
        let mut params = Params::new();
        params.extend(iter);
        params
    }
}

impl<N: AsRef<[u8]>, V: AsRef<[u8]>> Extend<(N, V)> for Params {
    fn extend<I: IntoIterator<Item = (N, V)>>(&mut self, iter: I) {
        for (n, v) in iter {
            self.push(n, v);
        }
    }
}

fn put_len(buf: &mut Vec<u8>, len: usize) {
    match u8::try_from(len) {
        Ok(short) if short < 0x80 => buf.put_u8(short),
        _ => buf.put_u32(len as u32 | 0x8000_0000),
    }
}

fn take_len(data: &mut &[u8]) -> Result<usize, ParamsError> {
    let first = *data.first().ok_or(ParamsError::Truncated)?;
    if first < 0x80 {
        *data = &data[1..];
        return Ok(usize::from(first));
    }
    let raw = take(data, 4)?;
    let len = u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]) & 0x7fff_ffff;
    Ok(len as usize)
}

fn take_pair<'a>(data: &mut &'a [u8]) -> Result<(&'a [u8], &'a [u8]), ParamsError> {
    let name_len = take_len(data)?;
    let value_len = take_len(data)?;
    let name = take(data, name_len)?;
    let value = take(data, value_len)?;
    Ok((name, value))
}

fn take<'a>(data: &mut &'a [u8], n: usize) -> Result<&'a [u8], ParamsError> {
    if data.len() < n {
        return Err(ParamsError::Truncated);
    }
    let (head, rest) = data.split_at(n);
    *data = rest;
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(p: &Params) -> Params {
        let mut buf = BytesMut::new();
        p.encode(&mut buf);
        Params::decode(&buf).unwrap()
    }

    #[test]
    fn short_and_long_lengths() {
        let long_name = "N".repeat(128);
        let long_value = vec![b'v'; 100_000];
        let p: Params = [
            (b"SCRIPT_NAME".to_vec(), b"/index.php".to_vec()),
            (b"EMPTY".to_vec(), Vec::new()),
            (long_name.clone().into_bytes(), b"x".to_vec()),
            (b"BIG".to_vec(), long_value.clone()),
            (vec![b'a'; 127], vec![0xff, 0, b'\n']),
        ]
        .into_iter()
        .collect();
        let mut buf = BytesMut::new();
        p.encode(&mut buf);
        assert_eq!(&buf[..2], &[11, 10], "one-byte lengths");
        assert_eq!(round_trip(&p), p);
        assert_eq!(p.get(&long_name), Some(&b"x"[..]));
        assert_eq!(p.get("BIG").map(<[u8]>::len), Some(100_000));
    }

    #[test]
    fn exact_length_encodings() {
        let mut buf = BytesMut::new();
        Params::from_iter([(vec![b'a'; 127], vec![b'b'; 128])]).encode(&mut buf);
        assert_eq!(&buf[..5], &[127, 0x80, 0, 0, 128]);
        assert_eq!(buf.len(), 5 + 127 + 128);
    }

    #[test]
    fn pieced_values_encode_like_plain_ones() {
        let long = "x".repeat(100);
        let mut p = Params::new();
        p.push("PORT", "8080");
        p.push("ADDR", "2001:db8::1");
        p.push("LONG", long.repeat(2));
        p.push_with(4, 6, |w| w.extend_from_slice(b"NAMEval-ue"));
        let plain = Params::from_iter([
            ("PORT", "8080"),
            ("ADDR", "2001:db8::1"),
            ("LONG", &*long.repeat(2)),
            ("NAME", "val-ue"),
        ]);
        assert_eq!(p, plain);
        assert_eq!(p.len(), 4);
        assert_eq!(round_trip(&p), p);
        assert_eq!(
            format!("{p:?}"),
            format!(
                r#"{{"PORT": "8080", "ADDR": "2001:db8::1", "LONG": "{}", "NAME": "val-ue"}}"#,
                long.repeat(2)
            )
        );
    }

    #[test]
    #[should_panic(expected = "pair written at its declared length")]
    fn a_pair_written_short_of_its_length_is_a_bug() {
        Params::new().push_with(4, 2, |w| w.extend_from_slice(b"NAME"));
    }

    #[test]
    fn last_duplicate_wins() {
        let mut p = Params::new();
        p.push("A", "1");
        p.push("A", "2");
        assert_eq!(p.get("A"), Some(&b"2"[..]));
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn truncated_input_is_an_error() {
        let mut buf = BytesMut::new();
        Params::from_iter([("NAME", "value"), ("LONG", &*"v".repeat(300))]).encode(&mut buf);
        for cut in 1..buf.len() {
            let _ = Params::decode(&buf[..cut]); // never panics
        }
        assert_eq!(Params::decode(&buf[..3]), Err(ParamsError::Truncated));
        assert_eq!(Params::decode(&[0x80, 0, 0]), Err(ParamsError::Truncated));
        assert_eq!(
            Params::decode(&[0xff, 0xff, 0xff, 0xff, 0]),
            Err(ParamsError::Truncated)
        );
    }
}
