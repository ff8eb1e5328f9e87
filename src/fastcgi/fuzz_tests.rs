//! A fuzz loop over the parsers that read what a server sends: valid record streams, mutated (bytes
//! flipped, cut short, bytes inserted), fed in random pieces through the [`Decoder`], the CGI head parser
//! and the name-value pair decoder. Nothing may panic or loop; unmutated streams must decode exactly.
//! A fixed-seed xorshift keeps every run identical (and a failure reproducible from its case number).

use bytes::{Bytes, BytesMut};

use super::cgi::{HeadParser, parse_head};
use super::params::Params;
use super::record::{Decoder, ProtocolStatus, Record};
use crate::fuzz_rng::Rng;

const CASES: usize = 25_000;

/// Content a CGI head parser finds interesting: header lines, line ends, colons, and noise.
fn stdout_content(rng: &mut Rng) -> Bytes {
    const PIECES: &[&[u8]] = &[
        b"Status: 404 Not Found\r\n",
        b"Status: 9999\n",
        b"Content-Type: text/html\r\n",
        b"Location: /x\n",
        b"Content-Length: 12\r\n",
        b"Content-Length: 1x\r\n",
        b"X-A: \xff\x00\r\n",
        b"\r\n",
        b"\n",
        b":",
        b"body",
        b"\r",
    ];
    let mut out = Vec::new();
    for _ in 0..rng.below(8) {
        if rng.below(4) == 0 {
            let n = rng.below(20);
            out.extend(rng.bytes(n));
        } else {
            out.extend_from_slice(PIECES[rng.below(PIECES.len())]);
        }
    }
    out.into()
}

fn random_record(rng: &mut Rng) -> Record {
    let id = 1 + rng.below(3) as u16;
    let data = |rng: &mut Rng| -> Bytes {
        match rng.below(40) {
            0..=3 => Bytes::new(),
            // Longer than a record: split on encoding. Its bytes matter less than its length.
            4 => vec![rng.next() as u8; 65_535 + rng.below(3000)].into(),
            _ => {
                let n = rng.below(300);
                rng.bytes(n).into()
            }
        }
    };
    match rng.below(11) {
        0 => Record::BeginRequest {
            id,
            role: rng.next() as u16,
            flags: rng.next() as u8,
        },
        1 => Record::AbortRequest { id },
        2 => Record::EndRequest {
            id,
            app_status: rng.next() as u32,
            protocol_status: ProtocolStatus::from_u8(rng.below(4) as u8).unwrap(),
        },
        3 => Record::Params {
            id,
            data: data(rng),
        },
        4 => Record::Stdin {
            id,
            data: data(rng),
        },
        5 | 6 => Record::Stdout {
            id,
            data: stdout_content(rng),
        },
        7 => Record::Stderr {
            id,
            data: data(rng),
        },
        8 => Record::Data {
            id,
            data: data(rng),
        },
        9 => {
            let n = rng.below(40);
            Record::GetValuesResult {
                data: rng.bytes(n).into(),
            }
        }
        _ => Record::UnknownType {
            kind: rng.next() as u8,
        },
    }
}

fn mutate(rng: &mut Rng, stream: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        match rng.below(5) {
            0 if !stream.is_empty() => {
                let at = rng.below(stream.len());
                stream[at] ^= 1 << rng.below(8);
            }
            1 => {
                let keep = rng.below(stream.len() + 1);
                stream.truncate(keep);
            }
            2 => {
                let at = rng.below(stream.len() + 1);
                let n = 1 + rng.below(16);
                let junk = rng.bytes(n);
                stream.splice(at..at, junk);
            }
            3 if !stream.is_empty() => {
                // A header-shaped hit: a random byte in place of one, anywhere.
                let at = rng.below(stream.len());
                stream[at] = rng.next() as u8;
            }
            _ => {
                let at = rng.below(stream.len() + 1);
                let dup = stream[at..].to_vec();
                stream.extend_from_slice(&dup[..dup.len().min(64)]);
            }
        }
    }
}

/// Feeds `stream` to a decoder in random pieces; every record's content goes through the other parsers.
/// Returns the records decoded before the end or the first error.
fn feed(rng: &mut Rng, stream: &[u8]) -> (Vec<Record>, bool) {
    let mut decoder = Decoder::new();
    let mut head = HeadParser::new();
    let mut records = Vec::new();
    let mut rest = stream;
    // Each turn either consumes input or stops: this bound is generous and proves termination.
    for _ in 0..=2 * stream.len() + 16 {
        match decoder.decode() {
            Ok(Some(r)) => {
                match &r {
                    Record::Stdout { data, .. } => {
                        let _ = head.push(data.clone());
                        let _ = parse_head(data);
                    }
                    Record::Params { data, .. } | Record::GetValuesResult { data } => {
                        let _ = Params::decode(data);
                    }
                    _ => {}
                }
                records.push(r);
            }
            Ok(None) if rest.is_empty() => return (records, true),
            Ok(None) => {
                let n = 1 + rng.below(rest.len().min(70_000));
                decoder.push(&rest[..n]);
                rest = &rest[n..];
            }
            Err(_) => {
                assert!(decoder.decode().is_err(), "errors are sticky");
                return (records, false);
            }
        }
    }
    panic!("the decoder did not terminate");
}

#[test]
fn decoder_and_head_parser_survive_mutations() {
    let mut rng = Rng(0x5eed_f00d_cafe_d00d);
    let (mut clean, mut failed) = (0, 0);
    for case in 0..CASES {
        let records: Vec<Record> = (0..1 + rng.below(6))
            .map(|_| random_record(&mut rng))
            .collect();
        let mut buf = BytesMut::new();
        for r in &records {
            r.encode(&mut buf);
        }
        let mut stream = buf.to_vec();
        if case % 10 == 0 {
            // Unmutated: must come back exactly, whatever the pieces (long contents come back split).
            let (decoded, ok) = feed(&mut rng, &stream);
            assert!(ok, "case {case}");
            let mut again = BytesMut::new();
            for r in &decoded {
                r.encode(&mut again);
            }
            assert_eq!(again.to_vec(), stream, "case {case}");
            continue;
        }
        mutate(&mut rng, &mut stream);
        match feed(&mut rng, &stream) {
            (_, true) => clean += 1,
            (_, false) => failed += 1,
        }
        // Raw bytes as a head, in one piece and in small ones.
        let _ = parse_head(&stream);
        let mut head = HeadParser::new();
        for piece in stream.chunks(1 + rng.below(64)) {
            if head.push(Bytes::copy_from_slice(piece)).is_err() {
                break;
            }
        }
        let _ = Params::decode(&stream);
    }
    // Both outcomes must be exercised, or the mutations are too timid or too brutal.
    assert!(
        clean > 1000 && failed > 1000,
        "clean {clean}, failed {failed}"
    );
}

#[test]
fn head_parser_on_random_text() {
    let mut rng = Rng(42);
    for _ in 0..CASES {
        let mut text = Vec::new();
        for _ in 0..rng.below(6) {
            text.extend_from_slice(&stdout_content(&mut rng));
        }
        let whole = parse_head(&text);
        let mut parser = HeadParser::new();
        let mut pieces = None;
        let mut at = 0;
        while at < text.len() {
            let n = (1 + rng.below(16)).min(text.len() - at);
            match parser.push(Bytes::copy_from_slice(&text[at..at + n])) {
                Ok(Some((head, _))) => {
                    pieces = Some(Ok(head));
                    break;
                }
                Ok(None) => {}
                Err(e) => {
                    pieces = Some(Err(e));
                    break;
                }
            }
            at += n;
        }
        // Cut anywhere, the parser agrees with the one-shot parse.
        match (whole, pieces) {
            (Ok(Some((h, _))), Some(Ok(p))) => assert_eq!(h, p),
            (Err(e), Some(Err(p))) => assert_eq!(e, p),
            (Ok(None), None) => {}
            (w, p) => panic!("one-shot {w:?}, in pieces {p:?}, on {text:?}"),
        }
    }
}
