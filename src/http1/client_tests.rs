//! The client against scripted servers on loopback: what goes on the wire, how answers are framed, and when a
//! connection is kept.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::http1::RequestHead;

const SECOND: Duration = Duration::from_secs(1);

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .expect("the test took too long")
}

async fn rig() -> (ServerAddr, TcpListener) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    (ServerAddr::Tcp(listener.local_addr().unwrap()), listener)
}

/// Reads one request: its head, and then `body_len` more bytes.
async fn read_request(stream: &mut TcpStream, body_len: usize) -> String {
    let mut seen = Vec::new();
    let mut byte = [0u8];
    while !seen.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).await.unwrap(),
            1,
            "request cut short"
        );
        seen.push(byte[0]);
    }
    let mut body = vec![0u8; body_len];
    stream.read_exact(&mut body).await.unwrap();
    seen.extend_from_slice(&body);
    String::from_utf8(seen).unwrap()
}

fn get(target: &str) -> RequestHead {
    let mut headers = HeaderMap::new();
    headers.insert(header::HOST, HeaderValue::from_static("test"));
    RequestHead::new(&Method::GET, target, &headers, false, false)
}

/// Where `on_reuse` puts the connection.
type Slot = Arc<Mutex<Option<Conn>>>;

fn keep(body: &mut ResponseBody) -> Slot {
    let slot: Slot = Arc::default();
    let put = slot.clone();
    body.on_reuse(move |conn| *put.lock().unwrap() = Some(conn));
    slot
}

fn taken(slot: &Slot) -> Option<Conn> {
    slot.lock().unwrap().take()
}

async fn collect(body: ResponseBody) -> Result<Bytes, Error> {
    Ok(body.collect().await?.to_bytes())
}

#[tokio::test]
async fn a_kept_alive_connection_carries_the_next_request() {
    within(async {
        let (addr, listener) = rig().await;
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let first = read_request(&mut s, 0).await;
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello").await.unwrap();
            let second = read_request(&mut s, 0).await;
            // Chunked, with an extension and a trailer.
            s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n0\r\nT: 1\r\n\r\n")
                .await
                .unwrap();
            (first, second)
        });
        let conn = connect(&addr, None, SECOND).await.unwrap();
        let mut response = conn.send(&get("/one?a=1"), None, SECOND).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let slot = keep(response.body_mut());
        assert_eq!(collect(response.into_body()).await.unwrap(), "hello");
        let mut conn = taken(&slot).expect("kept");
        assert!(!conn.is_closed());
        let mut response = conn.send(&get("/two"), None, SECOND).await.unwrap();
        let slot = keep(response.body_mut());
        assert_eq!(collect(response.into_body()).await.unwrap(), "abc");
        assert!(taken(&slot).is_some(), "kept after a chunked body");
        let (first, second) = server.await.unwrap();
        assert_eq!(first, "GET /one?a=1 HTTP/1.1\r\nhost: test\r\n\r\n");
        assert!(second.starts_with("GET /two HTTP/1.1\r\n"));
    })
    .await;
}

#[tokio::test]
async fn a_body_delimited_by_the_close_ends_there_and_the_connection_with_it() {
    within(async {
        let (addr, listener) = rig().await;
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            read_request(&mut s, 0).await;
            s.write_all(b"HTTP/1.1 200 OK\r\n\r\nuntil ").await.unwrap();
            s.write_all(b"the end").await.unwrap();
        });
        let conn = connect(&addr, None, SECOND).await.unwrap();
        let mut response = conn.send(&get("/"), None, SECOND).await.unwrap();
        let slot = keep(response.body_mut());
        assert_eq!(
            collect(response.into_body()).await.unwrap(),
            "until the end"
        );
        assert!(taken(&slot).is_none());
    })
    .await;
}

#[tokio::test]
async fn a_body_of_unknown_length_goes_chunked_and_one_of_known_length_as_is() {
    within(async {
        let (addr, listener) = rig().await;
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let chunked = read_request(&mut s, "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n".len()).await;
            s.write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
                .await
                .unwrap();
            let sized = read_request(&mut s, 5).await;
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .await
                .unwrap();
            (chunked, sized)
        });
        let stream = futures_util::stream::iter(
            ["abc", "de"].map(|s| Ok(http_body::Frame::data(Bytes::from(s)))),
        );
        let body = crate::body::Body::new(http_body_util::StreamBody::new(stream));
        let head = RequestHead::new(&Method::POST, "/up", &HeaderMap::new(), true, false);
        let conn = connect(&addr, None, SECOND).await.unwrap();
        let mut response = conn.send(&head, Some(body), SECOND).await.unwrap();
        assert_eq!(response.status(), StatusCode::NO_CONTENT);
        let slot = keep(response.body_mut());
        let conn = taken(&slot).expect("a 204 ends at its head");
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("5"));
        let head = RequestHead::new(&Method::PUT, "/up", &headers, true, false);
        let response = conn
            .send(&head, Some(crate::body::full("12345")), SECOND)
            .await
            .unwrap();
        assert_eq!(collect(response.into_body()).await.unwrap(), "");
        let (chunked, sized) = server.await.unwrap();
        assert!(
            chunked.ends_with("transfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"),
            "{chunked:?}"
        );
        assert!(
            sized.ends_with("content-length: 5\r\n\r\n12345"),
            "{sized:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn an_answer_before_the_whole_body_is_read_still_comes_through() {
    within(async {
        let (addr, listener) = rig().await;
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            read_request(&mut s, 0).await;
            s.write_all(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbig!")
                .await
                .unwrap();
            // Closes with the body unread: the kernel resets, and writes fail.
        });
        // A body that never ends: only the server's answer can end the exchange.
        let stream = futures_util::stream::repeat_with(|| Ok(http_body::Frame::data(Bytes::from(vec![b'x'; 64 * 1024]))));
        let body = crate::body::Body::new(http_body_util::StreamBody::new(stream));
        let head = RequestHead::new(&Method::POST, "/", &HeaderMap::new(), true, false);
        let conn = connect(&addr, None, SECOND).await.unwrap();
        let mut response = conn.send(&head, Some(body), SECOND).await.unwrap();
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let slot = keep(response.body_mut());
        assert_eq!(collect(response.into_body()).await.unwrap(), "big!");
        assert!(taken(&slot).is_none(), "the request was not all sent");
    })
    .await;
}

#[tokio::test]
async fn a_short_body_is_an_error_and_a_silent_server_a_timeout() {
    within(async {
        let (addr, listener) = rig().await;
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            read_request(&mut s, 0).await;
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort")
                .await
                .unwrap();
            drop(s);
            let (mut s, _) = listener.accept().await.unwrap();
            read_request(&mut s, 0).await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        });
        let conn = connect(&addr, None, SECOND).await.unwrap();
        let response = conn.send(&get("/"), None, SECOND).await.unwrap();
        let e = collect(response.into_body()).await.unwrap_err();
        assert!(matches!(e, Error::Truncated { missing: 5 }), "{e:?}");
        let conn = connect(&addr, None, SECOND).await.unwrap();
        let e = conn
            .send(&get("/"), None, Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(e.error.is_timeout() && !e.stale, "{e:?}");
    })
    .await;
}

#[tokio::test]
async fn a_connection_the_server_closed_is_seen_closed_and_its_body_comes_back() {
    within(async {
        let (addr, listener) = rig().await;
        tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            drop(s);
        });
        let mut conn = connect(&addr, None, SECOND).await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !conn.is_closed() {
            assert!(tokio::time::Instant::now() < deadline, "close not seen");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let head = RequestHead::new(&Method::POST, "/", &HeaderMap::new(), true, false);
        let e = conn
            .send(&head, Some(crate::body::full("x=1")), SECOND)
            .await
            .unwrap_err();
        assert!(e.stale, "{e:?}");
        let body = e.unsent.expect("the body comes back");
        assert_eq!(body.collect().await.unwrap().to_bytes(), "x=1");
    })
    .await;
}

#[tokio::test]
async fn malformed_answers_are_errors_and_leftovers_end_reuse() {
    within(async {
        let (addr, listener) = rig().await;
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            read_request(&mut s, 0).await;
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n")
                .await
                .unwrap();
            let (mut s, _) = listener.accept().await.unwrap();
            read_request(&mut s, 0).await;
            s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
                .await
                .unwrap();
            let (mut s, _) = listener.accept().await.unwrap();
            read_request(&mut s, 0).await;
            // One byte more than the length: an answer to no question.
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok!")
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_secs(5)).await;
        });
        let conn = connect(&addr, None, SECOND).await.unwrap();
        let e = conn.send(&get("/"), None, SECOND).await.unwrap_err();
        assert!(matches!(e.error, Error::Head(_)) && !e.stale, "{e:?}");
        let conn = connect(&addr, None, SECOND).await.unwrap();
        let response = conn.send(&get("/"), None, SECOND).await.unwrap();
        let e = collect(response.into_body()).await.unwrap_err();
        assert!(matches!(e, Error::Chunked(_)), "{e:?}");
        let conn = connect(&addr, None, SECOND).await.unwrap();
        let mut response = conn.send(&get("/"), None, SECOND).await.unwrap();
        let slot = keep(response.body_mut());
        assert_eq!(collect(response.into_body()).await.unwrap(), "ok");
        assert!(taken(&slot).is_none(), "leftover bytes: not reused");
    })
    .await;
}

#[tokio::test]
async fn a_switch_hands_over_the_connection_with_what_followed_the_head() {
    within(async {
        let (addr, listener) = rig().await;
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            read_request(&mut s, 0).await;
            s.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: upgrade\r\n\r\nhi ")
                .await
                .unwrap();
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
        });
        let head = RequestHead::new(&Method::GET, "/ws", &HeaderMap::new(), false, true);
        let conn = connect(&addr, None, SECOND).await.unwrap();
        let response = conn.send(&head, None, SECOND).await.unwrap();
        assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
        let mut upgraded = response.into_body().take_upgraded().expect("switched");
        upgraded.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 7];
        upgraded.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"hi ping");
    })
    .await;
}

#[tokio::test]
async fn an_answer_to_head_has_no_body_whatever_its_length_says() {
    within(async {
        let (addr, listener) = rig().await;
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            read_request(&mut s, 0).await;
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_secs(5)).await;
        });
        let head = RequestHead::new(&Method::HEAD, "/", &HeaderMap::new(), false, false);
        let conn = connect(&addr, None, SECOND).await.unwrap();
        let mut response = conn.send(&head, None, SECOND).await.unwrap();
        let fields = response.extensions().get::<crate::http1::Fields>().unwrap();
        assert_eq!(fields.get("content-length"), Some(&b"1000"[..]));
        assert!(http_body::Body::is_end_stream(response.body()));
        let slot = keep(response.body_mut());
        assert!(taken(&slot).is_some());
    })
    .await;
}
