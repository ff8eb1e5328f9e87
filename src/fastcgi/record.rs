//! FastCGI 1.0 records without I/O: encoding into a `BytesMut`, and a [`Decoder`] bytes are pushed into and
//! complete records pulled out of.
//!
//! A record is an 8-byte header (version, type, request id, content length, padding length), its content
//! and its padding. Streams (PARAMS, STDIN, STDOUT, STDERR, DATA) are cut into records of at most 65535
//! bytes and end with an empty record. The decoder checks everything the header lets it check before the
//! content arrives, so a peer speaking something else is caught at its first eight bytes; it never panics, and
//! the room it makes in its buffer is at most the rest of the record in progress (64 KiB and a bit).

use bytes::{Buf, BufMut, Bytes, BytesMut};

pub const VERSION_1: u8 = 1;
pub const HEADER_LEN: usize = 8;
/// The largest content one record carries.
pub const MAX_CONTENT: usize = u16::MAX as usize;
/// The request id of management records (GET_VALUES and its answers).
pub const MANAGEMENT_ID: u16 = 0;
/// BEGIN_REQUEST flag: keep the connection open after the request, for the next one.
pub const KEEP_CONN: u8 = 1;
/// The length of BEGIN_REQUEST, END_REQUEST and UNKNOWN_TYPE bodies.
const FIXED_BODY: u16 = 8;

/// The record types of FastCGI 1.0, with their wire codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordType {
    BeginRequest = 1,
    AbortRequest = 2,
    EndRequest = 3,
    Params = 4,
    Stdin = 5,
    Stdout = 6,
    Stderr = 7,
    Data = 8,
    GetValues = 9,
    GetValuesResult = 10,
    UnknownType = 11,
}

impl RecordType {
    pub fn from_u8(code: u8) -> Option<RecordType> {
        use RecordType::*;
        Some(match code {
            1 => BeginRequest,
            2 => AbortRequest,
            3 => EndRequest,
            4 => Params,
            5 => Stdin,
            6 => Stdout,
            7 => Stderr,
            8 => Data,
            9 => GetValues,
            10 => GetValuesResult,
            11 => UnknownType,
            _ => return None,
        })
    }

    /// Management records concern the connection, not a request: their request id is 0.
    pub fn is_management(self) -> bool {
        matches!(
            self,
            RecordType::GetValues | RecordType::GetValuesResult | RecordType::UnknownType
        )
    }
}

/// The roles of BEGIN_REQUEST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Role {
    /// The only role rein asks for (Authorizer and Filter are never used).
    Responder = 1,
}

/// How the application ended a request (END_REQUEST's `protocolStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ProtocolStatus {
    RequestComplete = 0,
    CantMpxConn = 1,
    Overloaded = 2,
    UnknownRole = 3,
}

impl ProtocolStatus {
    pub fn from_u8(code: u8) -> Option<ProtocolStatus> {
        use ProtocolStatus::*;
        Some(match code {
            0 => RequestComplete,
            1 => CantMpxConn,
            2 => Overloaded,
            3 => UnknownRole,
            _ => return None,
        })
    }
}

/// One record, its content decoded where it has a fixed layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    BeginRequest {
        id: u16,
        role: u16,
        flags: u8,
    },
    AbortRequest {
        id: u16,
    },
    EndRequest {
        id: u16,
        app_status: u32,
        protocol_status: ProtocolStatus,
    },
    /// Stream records: empty `data` ends the stream.
    Params {
        id: u16,
        data: Bytes,
    },
    Stdin {
        id: u16,
        data: Bytes,
    },
    Stdout {
        id: u16,
        data: Bytes,
    },
    Stderr {
        id: u16,
        data: Bytes,
    },
    Data {
        id: u16,
        data: Bytes,
    },
    /// Name-value pairs (see `params`), on request id 0.
    GetValues {
        data: Bytes,
    },
    GetValuesResult {
        data: Bytes,
    },
    /// The answer to a management record of a type the peer does not know.
    UnknownType {
        kind: u8,
    },
}

impl Record {
    pub fn record_type(&self) -> RecordType {
        match self {
            Record::BeginRequest { .. } => RecordType::BeginRequest,
            Record::AbortRequest { .. } => RecordType::AbortRequest,
            Record::EndRequest { .. } => RecordType::EndRequest,
            Record::Params { .. } => RecordType::Params,
            Record::Stdin { .. } => RecordType::Stdin,
            Record::Stdout { .. } => RecordType::Stdout,
            Record::Stderr { .. } => RecordType::Stderr,
            Record::Data { .. } => RecordType::Data,
            Record::GetValues { .. } => RecordType::GetValues,
            Record::GetValuesResult { .. } => RecordType::GetValuesResult,
            Record::UnknownType { .. } => RecordType::UnknownType,
        }
    }

    pub fn request_id(&self) -> u16 {
        match self {
            Record::BeginRequest { id, .. }
            | Record::AbortRequest { id }
            | Record::EndRequest { id, .. }
            | Record::Params { id, .. }
            | Record::Stdin { id, .. }
            | Record::Stdout { id, .. }
            | Record::Stderr { id, .. }
            | Record::Data { id, .. } => *id,
            Record::GetValues { .. }
            | Record::GetValuesResult { .. }
            | Record::UnknownType { .. } => MANAGEMENT_ID,
        }
    }

    /// Appends the record to `buf`. Stream content longer than 65535 bytes becomes several records, and empty
    /// stream content the one empty record that ends the stream. GET_VALUES content is one record by the spec:
    /// longer content is split the same way, which no peer reads back as one, so keep it short.
    pub fn encode(&self, buf: &mut BytesMut) {
        let kind = self.record_type();
        let id = self.request_id();
        match self {
            Record::BeginRequest { role, flags, .. } => {
                let mut body = [0u8; 8];
                body[..2].copy_from_slice(&role.to_be_bytes());
                body[2] = *flags;
                encode_one(buf, kind, id, &body);
            }
            Record::AbortRequest { .. } => encode_one(buf, kind, id, &[]),
            Record::EndRequest {
                app_status,
                protocol_status,
                ..
            } => {
                let mut body = [0u8; 8];
                body[..4].copy_from_slice(&app_status.to_be_bytes());
                body[4] = *protocol_status as u8;
                encode_one(buf, kind, id, &body);
            }
            Record::UnknownType { kind: unknown, .. } => {
                encode_one(buf, kind, id, &[*unknown, 0, 0, 0, 0, 0, 0, 0])
            }
            Record::Params { data, .. }
            | Record::Stdin { data, .. }
            | Record::Stdout { data, .. }
            | Record::Stderr { data, .. }
            | Record::Data { data, .. }
            | Record::GetValues { data }
            | Record::GetValuesResult { data } => {
                if data.is_empty() {
                    encode_stream_end(buf, kind, id);
                } else {
                    encode_stream_data(buf, kind, id, data);
                }
            }
        }
    }
}

/// Appends `data` as records of `kind`, 65535 bytes at most each; nothing when `data` is empty (an empty
/// record would end the stream: that is [`encode_stream_end`]).
pub fn encode_stream_data(buf: &mut BytesMut, kind: RecordType, id: u16, data: &[u8]) {
    buf.reserve(data.len() + data.len().div_ceil(MAX_CONTENT) * (HEADER_LEN + 7));
    for chunk in data.chunks(MAX_CONTENT) {
        encode_one(buf, kind, id, chunk);
    }
}

/// Appends the empty record that ends a stream.
pub fn encode_stream_end(buf: &mut BytesMut, kind: RecordType, id: u16) {
    encode_one(buf, kind, id, &[]);
}

/// One record; content is padded to a multiple of 8 bytes, as the spec recommends for the peer's sake.
fn encode_one(buf: &mut BytesMut, kind: RecordType, id: u16, content: &[u8]) {
    // Callers cut content to MAX_CONTENT; the conversion cannot fail, and saturating keeps it panic-free.
    let len = u16::try_from(content.len()).unwrap_or(u16::MAX);
    let content = &content[..usize::from(len)];
    let padding = (8 - content.len() % 8) % 8;
    buf.reserve(HEADER_LEN + content.len() + padding);
    buf.put_u8(VERSION_1);
    buf.put_u8(kind as u8);
    buf.put_u16(id);
    buf.put_u16(len);
    buf.put_u8(padding as u8);
    buf.put_u8(0);
    buf.put_slice(content);
    buf.put_bytes(0, padding);
}

/// Why a byte stream is not FastCGI.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("unsupported FastCGI version {0}")]
    Version(u8),
    #[error("unknown record type {0}")]
    UnknownType(u8),
    #[error("{kind:?} record with {len} bytes of content, {expected} expected")]
    Length {
        kind: RecordType,
        len: u16,
        expected: u16,
    },
    #[error("unknown protocol status {0} in END_REQUEST")]
    ProtocolStatus(u8),
    #[error("{kind:?} record with request id {id}")]
    RequestId { kind: RecordType, id: u16 },
}

/// A record header, checked.
#[derive(Debug, Clone, Copy)]
struct Header {
    kind: RecordType,
    id: u16,
    content: u16,
    padding: u8,
}

impl Header {
    fn parse(b: &[u8]) -> Result<Header, DecodeError> {
        if b[0] != VERSION_1 {
            return Err(DecodeError::Version(b[0]));
        }
        let kind = RecordType::from_u8(b[1]).ok_or(DecodeError::UnknownType(b[1]))?;
        let header = Header {
            kind,
            id: u16::from_be_bytes([b[2], b[3]]),
            content: u16::from_be_bytes([b[4], b[5]]),
            padding: b[6],
        };
        // Management records are on id 0 and request records never are: anything else is a confused peer.
        if kind.is_management() != (header.id == MANAGEMENT_ID) {
            return Err(DecodeError::RequestId {
                kind,
                id: header.id,
            });
        }
        let fixed = matches!(
            kind,
            RecordType::BeginRequest | RecordType::EndRequest | RecordType::UnknownType
        );
        if fixed && header.content != FIXED_BODY {
            return Err(DecodeError::Length {
                kind,
                len: header.content,
                expected: FIXED_BODY,
            });
        }
        Ok(header)
    }

    fn total(&self) -> usize {
        HEADER_LEN + usize::from(self.content) + usize::from(self.padding)
    }
}

/// Reassembles records from bytes as they arrive. After an error it keeps returning that error: a stream
/// that lost its framing cannot be trusted again.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: BytesMut,
    failed: Option<DecodeError>,
}

impl Decoder {
    pub fn new() -> Self {
        Decoder::default()
    }

    #[cfg(any(test, feature = "fuzzing"))]
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The buffer itself, for reading from a socket straight into it.
    pub fn buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Bytes received and not yet returned as a record.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next complete record, `None` until its last byte has arrived.
    pub fn decode(&mut self) -> Result<Option<Record>, DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let header = match Header::parse(&self.buf[..HEADER_LEN]) {
            Ok(h) => h,
            Err(e) => {
                self.failed = Some(e.clone());
                return Err(e);
            }
        };
        if self.buf.len() < header.total() {
            // Room for the rest of the record, so the next read can complete it.
            self.buf.reserve(header.total() - self.buf.len());
            return Ok(None);
        }
        let mut raw = self.buf.split_to(header.total()).freeze();
        raw.advance(HEADER_LEN);
        raw.truncate(usize::from(header.content));
        let record = content(header, raw);
        if let Err(e) = &record {
            self.failed = Some(e.clone());
        }
        record.map(Some)
    }
}

/// The record for a checked header and its content (padding removed).
fn content(h: Header, data: Bytes) -> Result<Record, DecodeError> {
    let id = h.id;
    Ok(match h.kind {
        RecordType::BeginRequest => Record::BeginRequest {
            id,
            role: u16::from_be_bytes([data[0], data[1]]),
            flags: data[2],
        },
        RecordType::AbortRequest => Record::AbortRequest { id },
        RecordType::EndRequest => Record::EndRequest {
            id,
            app_status: u32::from_be_bytes([data[0], data[1], data[2], data[3]]),
            protocol_status: ProtocolStatus::from_u8(data[4])
                .ok_or(DecodeError::ProtocolStatus(data[4]))?,
        },
        RecordType::Params => Record::Params { id, data },
        RecordType::Stdin => Record::Stdin { id, data },
        RecordType::Stdout => Record::Stdout { id, data },
        RecordType::Stderr => Record::Stderr { id, data },
        RecordType::Data => Record::Data { id, data },
        RecordType::GetValues => Record::GetValues { data },
        RecordType::GetValuesResult => Record::GetValuesResult { data },
        RecordType::UnknownType => Record::UnknownType { kind: data[0] },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(records: &[Record]) -> BytesMut {
        let mut buf = BytesMut::new();
        for r in records {
            r.encode(&mut buf);
        }
        buf
    }

    fn decode_all(d: &mut Decoder) -> Vec<Record> {
        let mut out = Vec::new();
        while let Some(r) = d.decode().unwrap() {
            out.push(r);
        }
        out
    }

    fn samples() -> Vec<Record> {
        vec![
            Record::BeginRequest {
                id: 1,
                role: Role::Responder as u16,
                flags: KEEP_CONN,
            },
            Record::Params {
                id: 1,
                data: Bytes::from_static(b"\x0b\x02SERVER_PORT80"),
            },
            Record::Params {
                id: 1,
                data: Bytes::new(),
            },
            Record::Stdin {
                id: 1,
                data: Bytes::from_static(b"a=1"),
            },
            Record::Stdout {
                id: 7,
                data: Bytes::from_static(b"Status: 200\r\n\r\n"),
            },
            Record::Stderr {
                id: 1,
                data: Bytes::from_static(b"oops\n"),
            },
            Record::Data {
                id: 1,
                data: Bytes::from_static(b"12345678"),
            },
            Record::AbortRequest { id: 1 },
            Record::EndRequest {
                id: 1,
                app_status: 0xdead_beef,
                protocol_status: ProtocolStatus::Overloaded,
            },
            Record::GetValues {
                data: Bytes::from_static(b"\x0e\x00FCGI_MAX_CONNS"),
            },
            Record::GetValuesResult {
                data: Bytes::from_static(b"\x0e\x01FCGI_MAX_CONNS9"),
            },
            Record::UnknownType { kind: 42 },
        ]
    }

    #[test]
    fn round_trips_every_type() {
        let records = samples();
        let buf = encoded(&records);
        assert_eq!(buf.len() % 8, 0, "content is padded to 8");
        let mut d = Decoder::new();
        d.push(&buf);
        assert_eq!(decode_all(&mut d), records);
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn one_byte_at_a_time() {
        let records = samples();
        let buf = encoded(&records);
        let mut d = Decoder::new();
        let mut out = Vec::new();
        for b in buf.iter() {
            d.push(&[*b]);
            while let Some(r) = d.decode().unwrap() {
                out.push(r);
            }
        }
        assert_eq!(out, records);
    }

    #[test]
    fn long_payloads_are_split() {
        let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let mut buf = BytesMut::new();
        encode_stream_data(&mut buf, RecordType::Stdin, 3, &data);
        encode_stream_end(&mut buf, RecordType::Stdin, 3);
        let mut d = Decoder::new();
        d.push(&buf);
        let records = decode_all(&mut d);
        assert_eq!(records.len(), 5, "4 data records (3 full) and the end");
        let mut joined = Vec::new();
        for r in &records {
            let Record::Stdin { id: 3, data } = r else {
                panic!("{r:?}")
            };
            assert!(data.len() <= MAX_CONTENT);
            joined.extend_from_slice(data);
        }
        assert_eq!(joined, data);
        assert!(matches!(&records[4], Record::Stdin { data, .. } if data.is_empty()));
    }

    #[test]
    fn padding_is_skipped_whatever_it_holds() {
        // A record from a peer that pads with 7 junk bytes, then an empty record without padding.
        let mut raw = vec![1, 6, 0, 1, 0, 3, 7, 0];
        raw.extend_from_slice(b"abc");
        raw.extend_from_slice(b"JJJJJJJ");
        raw.extend_from_slice(&[1, 6, 0, 1, 0, 0, 0, 0]);
        let mut d = Decoder::new();
        d.push(&raw);
        assert_eq!(
            decode_all(&mut d),
            vec![
                Record::Stdout {
                    id: 1,
                    data: Bytes::from_static(b"abc")
                },
                Record::Stdout {
                    id: 1,
                    data: Bytes::new()
                },
            ]
        );
    }

    #[test]
    fn malformed_headers_are_errors_and_stay_errors() {
        let cases: &[(&[u8], DecodeError)] = &[
            (b"HTTP/1.1 200 OK", DecodeError::Version(b'H')),
            (&[1, 0, 0, 1, 0, 0, 0, 0], DecodeError::UnknownType(0)),
            (&[1, 12, 0, 1, 0, 0, 0, 0], DecodeError::UnknownType(12)),
            (
                &[1, 3, 0, 1, 0, 4, 0, 0],
                DecodeError::Length {
                    kind: RecordType::EndRequest,
                    len: 4,
                    expected: 8,
                },
            ),
            (
                &[1, 6, 0, 0, 0, 0, 0, 0],
                DecodeError::RequestId {
                    kind: RecordType::Stdout,
                    id: 0,
                },
            ),
            (
                &[1, 10, 0, 1, 0, 0, 0, 0],
                DecodeError::RequestId {
                    kind: RecordType::GetValuesResult,
                    id: 1,
                },
            ),
            (
                &[1, 3, 0, 1, 0, 8, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0],
                DecodeError::ProtocolStatus(9),
            ),
        ];
        for (raw, expected) in cases {
            let mut d = Decoder::new();
            d.push(raw);
            assert_eq!(d.decode().as_ref(), Err(expected), "{raw:?}");
            d.push(&encoded(&samples()));
            assert_eq!(d.decode().as_ref(), Err(expected), "sticky");
        }
    }

    #[test]
    fn waits_for_the_whole_record() {
        let buf = encoded(&[Record::Stdout {
            id: 1,
            data: Bytes::from(vec![b'x'; 1000]),
        }]);
        let mut d = Decoder::new();
        d.push(&buf[..buf.len() - 1]);
        assert_eq!(d.decode(), Ok(None));
        assert!(d.buffer_mut().capacity() >= buf.len(), "room reserved");
        d.push(&buf[buf.len() - 1..]);
        assert!(matches!(d.decode(), Ok(Some(Record::Stdout { data, .. })) if data.len() == 1000));
    }
}
