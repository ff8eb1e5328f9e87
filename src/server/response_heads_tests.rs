use std::io::IoSlice;
use std::task::Poll;

use bytes::Bytes;

use super::{Note, ResponseHeads};
use crate::field_case::FieldCase;

/// A socket taking at most `max` bytes per write, and what it received.
struct Sink {
    max: usize,
    got: Vec<u8>,
}

impl Sink {
    fn write(&mut self, slices: &[IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        let mut n = 0;
        for s in slices {
            let take = s.len().min(self.max - n);
            self.got.extend_from_slice(&s[..take]);
            n += take;
        }
        Poll::Ready(Ok(n))
    }
}

/// Writes each of hyper's writes (a list of slices) until all of it is taken, as hyper's flush does.
fn run(writes: &[&[&[u8]]], notes: Vec<Note>, max: usize) -> String {
    let mut heads = ResponseHeads::new();
    let mut notes = notes.into_iter();
    let mut sink = Sink {
        max,
        got: Vec::new(),
    };
    for write in writes {
        let mut owned: Vec<Vec<u8>> = write.iter().map(|s| s.to_vec()).collect();
        while owned.iter().any(|b| !b.is_empty()) {
            let slices: Vec<IoSlice<'_>> = owned.iter().map(|b| IoSlice::new(b)).collect();
            let Poll::Ready(Ok(mut n)) =
                heads.poll_write(&slices, &mut || notes.next(), &mut |s| sink.write(s))
            else {
                panic!("write failed");
            };
            assert!(n > 0);
            for b in owned.iter_mut() {
                let take = n.min(b.len());
                b.drain(..take);
                n -= take;
            }
        }
    }
    let Poll::Ready(Ok(())) = heads.poll_owed(&mut |s| sink.write(s)) else {
        panic!("flush failed");
    };
    String::from_utf8(sink.got).unwrap()
}

fn note(names: &[&'static str]) -> Note {
    let mut case = FieldCase::default();
    for n in names {
        case.record(Bytes::from_static(n.as_bytes()));
    }
    Note {
        case,
        bodiless: false,
    }
}

const HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\nx-foo: a\r\ncontent-length: 5\r\netag: \"1\"\r\ndate: now\r\n\r\n";
const SPELLED: &str =
    "HTTP/1.1 200 OK\r\nX-FOO: a\r\nContent-Length: 5\r\nETag: \"1\"\r\nDate: now\r\n\r\n";

#[test]
fn names_take_the_recorded_spelling_else_canonical() {
    for max in [1, 3, 1000] {
        let got = run(&[&[HEAD, b"hello"]], vec![note(&["X-FOO"])], max);
        assert_eq!(got, format!("{SPELLED}hello"), "max {max}");
    }
}

#[test]
fn pipelined_heads_in_one_buffer_are_each_spelled() {
    let both = [HEAD, b"hello", HEAD, b"hello"].concat();
    let got = run(&[&[&both]], vec![note(&["X-FOO"]), note(&["x-Foo"])], 1000);
    let second = SPELLED.replace("X-FOO", "x-Foo");
    assert_eq!(got, format!("{SPELLED}hello{second}hello"));
}

#[test]
fn chunked_bodies_are_followed_to_the_next_head() {
    let head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
    let body: &[u8] = b"5\r\nHTTP/\r\n3;x=1\r\n\r\n\r\n0\r\nx-trailer: 1\r\n\r\n";
    let all = [&head[..], body, &head[..], b"0\r\n\r\n"].concat();
    for max in [1, 7, 1000] {
        let got = run(&[&[&all]], vec![note(&[]), note(&[])], max);
        let spelled = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        let body = std::str::from_utf8(body).unwrap();
        assert_eq!(
            got,
            format!("{spelled}{body}{spelled}0\r\n\r\n"),
            "max {max}"
        );
    }
}

#[test]
fn an_answer_to_head_has_no_body_whatever_its_length() {
    let head = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n";
    let mut bodiless = note(&[]);
    bodiless.bodiless = true;
    let got = run(
        &[&[head], &[head, b"hello"]],
        vec![bodiless, note(&[])],
        1000,
    );
    let spelled = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
    assert_eq!(got, format!("{spelled}{spelled}hello"));
}

#[test]
fn interim_heads_keep_the_final_heads_note() {
    let cont = b"HTTP/1.1 100 Continue\r\n\r\n";
    let got = run(&[&[cont], &[HEAD, b"hello"]], vec![note(&["X-FOO"])], 1000);
    assert_eq!(got, format!("HTTP/1.1 100 Continue\r\n\r\n{SPELLED}hello"));
}

#[test]
fn hypers_own_errors_get_a_body() {
    let head = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: now\r\n\r\n";
    for max in [1, 1000] {
        let got = run(&[&[head]], vec![], max);
        assert_eq!(
            got,
            "HTTP/1.1 400 Bad Request\r\nDate: now\r\nContent-Type: text/html\r\nContent-Length: 66\r\n\r\n\
             <!DOCTYPE html><title>Error 400</title><p>Error 400: Bad Request.\n"
        );
    }
}

#[test]
fn tunnels_bodies_to_the_close_and_other_protocols_pass_as_they_are() {
    let upgrade = b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n";
    let got = run(&[&[upgrade], &[HEAD]], vec![note(&[])], 1000);
    let raw = std::str::from_utf8(HEAD).unwrap();
    assert_eq!(
        got,
        format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n{raw}")
    );
    let close = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nHTTP/1.1 200 OK\r\nx: y\r\n\r\n";
    let got = run(&[&[close]], vec![note(&[])], 1000);
    assert_eq!(
        got,
        "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nHTTP/1.1 200 OK\r\nx: y\r\n\r\n"
    );
    let h2 = b"\0\0\x12\x04\0\0\0\0\0content-length: 1\r\n\r\n";
    assert_eq!(run(&[&[h2]], vec![], 1000).as_bytes(), h2);
}
