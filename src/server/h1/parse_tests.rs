use bytes::BytesMut;
use http::{Method, StatusCode, Version};

use super::*;

fn parse_all(s: &str) -> Result<Option<Head>, HeadError> {
    let mut buf = BytesMut::from(s.as_bytes());
    parse(&mut buf, 8192)
}

fn head(s: &str) -> Head {
    parse_all(s).expect("parses").expect("whole")
}

#[test]
fn a_head_is_taken_out_of_the_buffer_and_the_next_one_stays() {
    let mut buf = BytesMut::from(&b"GET /a?b HTTP/1.1\r\nHost: x\r\nX-Foo: 1\r\n\r\nGET /next"[..]);
    let h = parse(&mut buf, 8192).unwrap().unwrap();
    assert_eq!(h.parts.method, Method::GET);
    assert_eq!(h.parts.uri, "/a?b");
    assert_eq!(h.parts.version, Version::HTTP_11);
    assert_eq!(h.parts.headers["host"], "x");
    assert_eq!(h.parts.headers["x-foo"], "1");
    assert_eq!(h.framing, Framing::Empty);
    assert!(h.keep_alive && !h.expect_continue && !h.upgrade);
    assert_eq!(&buf[..], b"GET /next");
    assert!(parse(&mut buf, 8192).unwrap().is_none());
}

#[test]
fn a_head_split_anywhere_waits_for_the_rest() {
    let whole = "POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n";
    for at in 0..whole.len() {
        let mut buf = BytesMut::from(&whole.as_bytes()[..at]);
        assert!(parse(&mut buf, 8192).unwrap().is_none(), "at {at}");
        buf.extend_from_slice(&whole.as_bytes()[at..]);
        let h = parse(&mut buf, 8192).unwrap().unwrap();
        assert_eq!(h.framing, Framing::Length(3));
    }
}

#[test]
fn connection_options() {
    assert!(!head("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive);
    assert!(!head("GET / HTTP/1.0\r\n\r\n").keep_alive);
    assert!(head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
    let h = head("GET / HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n");
    assert!(h.upgrade);
    assert!(!head("GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n").upgrade);
    let h = head("PUT / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n");
    assert!(h.expect_continue);
    assert!(!head("PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").expect_continue);
}

#[test]
fn body_framing() {
    let chunked = head("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n");
    assert_eq!(chunked.framing, Framing::Chunked);
    let both = head("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(both.framing, Framing::Chunked);
    assert!(!both.parts.headers.contains_key("content-length"));
    assert!(
        !both.keep_alive,
        "the connection of an ambiguous request closes after it"
    );
    let repeated = "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n";
    assert_eq!(head(repeated).framing, Framing::Length(5));
    assert_eq!(
        head("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").framing,
        Framing::Empty
    );
    for bad in [
        "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n",
        "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
    ] {
        let e = parse_all(bad).expect_err(bad);
        assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{bad}");
    }
    for unknown in ["gzip, chunked", "chunked, chunked"] {
        let e = parse_all(&format!(
            "POST / HTTP/1.1\r\nTransfer-Encoding: {unknown}\r\n\r\n"
        ));
        assert_eq!(
            e.unwrap_err().status(),
            StatusCode::NOT_IMPLEMENTED,
            "{unknown}"
        );
    }
}

#[test]
fn heads_too_large_are_431() {
    let mut buf = BytesMut::from(format!("GET /{} HTTP/1.1\r\n", "a".repeat(200)).as_bytes());
    assert_eq!(parse(&mut buf, 100).unwrap_err(), HeadError::TooLarge);
    let mut buf =
        BytesMut::from(format!("GET / HTTP/1.1\r\nX: {}\r\n", "a".repeat(200)).as_bytes());
    assert_eq!(parse(&mut buf, 100).unwrap_err(), HeadError::TooLarge);
    let many: String = (0..MAX_HEADERS + 1)
        .map(|i| format!("X-{i}: v\r\n"))
        .collect();
    let e = parse_all(&format!("GET / HTTP/1.1\r\n{many}\r\n")).unwrap_err();
    assert_eq!(e.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
}

#[test]
fn malformed_heads_are_400() {
    for bad in [
        "GET / HTTP/1.1\r\nX Y: 1\r\n\r\n",
        "GET / HTTP/1.1\r\n: 1\r\n\r\n",
        "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
        "GET / HTTP/3.0\r\n\r\n",
        "G\x01T / HTTP/1.1\r\n\r\n",
    ] {
        let e = parse_all(bad).expect_err(bad);
        assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{bad:?}");
    }
}

#[test]
fn an_http2_preface_is_told_from_a_malformed_head() {
    let e = parse_all("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap_err();
    assert_eq!(e, HeadError::Http2);
}
