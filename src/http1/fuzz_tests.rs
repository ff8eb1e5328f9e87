//! A fuzz loop over what reads a server's answer: response heads and chunked bodies, valid ones and mutated
//! ones (bytes flipped, cut short, inserted), fed in random pieces through [`parse_response`] and the
//! chunked [`Decoder`]. Nothing may panic or loop; unmutated answers must decode exactly. A fixed-seed
//! xorshift keeps every run identical (and a failure reproducible from its case number).

use bytes::BytesMut;
use http::{HeaderMap, Method};

use super::chunked::{Decoded, Decoder};
use super::head::{Framing, RequestHead, parse_response};
use crate::fuzz_rng::Rng;

const CASES: usize = 20_000;

/// A valid chunked answer carrying `body`, cut into chunks of random sizes (with the odd extension and
/// trailer).
fn chunked_answer(rng: &mut Rng, body: &[u8]) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n".to_vec();
    let mut rest = body;
    while !rest.is_empty() {
        let n = (1 + rng.below(40)).min(rest.len());
        let ext = if rng.below(5) == 0 { ";e=1" } else { "" };
        out.extend_from_slice(format!("{n:x}{ext}\r\n").as_bytes());
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
    }
    out.extend_from_slice(b"0\r\n");
    if rng.below(3) == 0 {
        out.extend_from_slice(b"T: 2\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn mutate(rng: &mut Rng, wire: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(3) {
        if wire.is_empty() {
            return;
        }
        let at = rng.below(wire.len());
        match rng.below(4) {
            0 => wire[at] ^= 1 << rng.below(8),
            1 => wire.truncate(at),
            2 => wire.insert(at, rng.next() as u8),
            _ => wire[at] = b"\r\n:;0 f"[rng.below(7)],
        }
    }
}

/// Feeds `wire` in random pieces: the head, then the chunked body. The body if it all decoded; `None` on an
/// error or an answer cut short.
fn decode(rng: &mut Rng, wire: &[u8]) -> Option<Vec<u8>> {
    let request = RequestHead::new(&Method::GET, "/", &HeaderMap::new(), false, false);
    let mut buf = BytesMut::new();
    let mut fed = 0;
    let mut feed = |buf: &mut BytesMut, rng: &mut Rng| -> bool {
        if fed == wire.len() {
            return false;
        }
        let n = (1 + rng.below(64)).min(wire.len() - fed);
        buf.extend_from_slice(&wire[fed..fed + n]);
        fed += n;
        true
    };
    let head = loop {
        match parse_response(&mut buf, &request) {
            Ok(Some(head)) => break head,
            Ok(None) if feed(&mut buf, rng) => {}
            _ => return None,
        }
    };
    if head.framing != Framing::Chunked {
        return None; // a mutation changed the framing: nothing to compare
    }
    let mut decoder = Decoder::default();
    let mut body = Vec::new();
    loop {
        match decoder.decode(&mut buf) {
            Ok(Decoded::Data(data)) => body.extend_from_slice(&data),
            Ok(Decoded::Done) => return Some(body),
            Ok(Decoded::NeedMore) if feed(&mut buf, rng) => {}
            _ => return None,
        }
    }
}

#[test]
fn mutated_answers_never_panic_and_valid_ones_decode_exactly() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for case in 0..CASES {
        let len = rng.below(300);
        let body: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let mut wire = chunked_answer(&mut rng, &body);
        if case % 4 == 0 {
            assert_eq!(
                decode(&mut rng, &wire).as_deref(),
                Some(&body[..]),
                "case {case}"
            );
        } else {
            mutate(&mut rng, &mut wire);
            let _ = decode(&mut rng, &wire);
        }
    }
}

#[test]
fn random_heads_never_panic() {
    const PIECES: &[&[u8]] = &[
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.0 101 Switching\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\n",
        b"Content-Length: 5\r\n",
        b"Content-Length: 5, 6\r\n",
        b"Transfer-Encoding: gzip, chunked\r\n",
        b"Connection: close\r\n",
        b"X: \xff\x00\r\n",
        b"\r\n",
        b"\n",
        b": ",
        b" ",
    ];
    let mut rng = Rng(0x5eed_1234_abcd_0002);
    let request = RequestHead::new(&Method::GET, "/", &HeaderMap::new(), false, true);
    for _ in 0..CASES {
        let mut wire = Vec::new();
        for _ in 0..rng.below(10) {
            wire.extend_from_slice(PIECES[rng.below(PIECES.len())]);
        }
        let mut buf = BytesMut::from(&wire[..]);
        let before = buf.len();
        if let Ok(Some(_)) = parse_response(&mut buf, &request) {
            assert!(buf.len() < before, "a parsed head consumes bytes");
        }
    }
}
