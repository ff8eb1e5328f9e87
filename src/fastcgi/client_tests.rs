//! The client against small FastCGI servers written with the codec, on a Unix socket in a temporary
//! directory: one per behaviour (well-formed, split, chatty on STDERR, echoing, slow, broken, hostile).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::StatusCode;
use http_body::Frame;
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

use super::*;
use crate::fastcgi::record::{Decoder, ProtocolStatus, Record};

pub(in crate::fastcgi) const SECOND: Duration = Duration::from_secs(1);
/// Bounds every test: a deadlock fails the test instead of hanging it.
const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn shared_types_are_send_and_sync() {
    // `crate::body::Body` is a `BoxBody`, which needs `Sync`; pools move connections across threads.
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Conn>();
    send_sync::<ResponseBody>();
    send_sync::<Error>();
}

/// A temporary directory with a listening socket; the test keeps the directory and the address, the
/// server task takes the listener.
pub(in crate::fastcgi) fn rig() -> (tempfile::TempDir, ServerAddr, UnixListener) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fcgi.sock");
    let listener = UnixListener::bind(&path).unwrap();
    (dir, ServerAddr::Unix(path), listener)
}

/// The server's end of one connection.
pub(in crate::fastcgi) struct Peer {
    stream: UnixStream,
    decoder: Decoder,
}

impl Peer {
    pub(in crate::fastcgi) async fn accept(listener: &UnixListener) -> Peer {
        let (stream, _) = listener.accept().await.unwrap();
        Peer {
            stream,
            decoder: Decoder::new(),
        }
    }

    /// The next record, `None` at end of file.
    pub(in crate::fastcgi) async fn record(&mut self) -> Option<Record> {
        loop {
            if let Some(r) = self.decoder.decode().unwrap() {
                return Some(r);
            }
            let mut buf = [0u8; 8192];
            let n = self.stream.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            self.decoder.push(&buf[..n]);
        }
    }

    /// BEGIN_REQUEST (responder, keep-conn, id 1) and the whole PARAMS stream.
    pub(in crate::fastcgi) async fn begin(&mut self) -> Params {
        let begin = self.record().await;
        let Some(Record::BeginRequest {
            id: 1,
            role: 1,
            flags: 1,
        }) = begin
        else {
            panic!("expected BEGIN_REQUEST, got {begin:?}");
        };
        let mut raw = Vec::new();
        loop {
            match self.record().await {
                Some(Record::Params { data, .. }) if data.is_empty() => break,
                Some(Record::Params { data, .. }) => raw.extend_from_slice(&data),
                other => panic!("expected PARAMS, got {other:?}"),
            }
        }
        Params::decode(&raw).unwrap()
    }

    /// The whole STDIN stream.
    pub(in crate::fastcgi) async fn stdin(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            match self.record().await {
                Some(Record::Stdin { data, .. }) if data.is_empty() => return body,
                Some(Record::Stdin { data, .. }) => body.extend_from_slice(&data),
                other => panic!("expected STDIN, got {other:?}"),
            }
        }
    }

    async fn send(&mut self, records: &[Record]) {
        let mut buf = BytesMut::new();
        for r in records {
            r.encode(&mut buf);
        }
        self.write(&buf).await;
    }

    async fn write(&mut self, raw: &[u8]) {
        self.stream.write_all(raw).await.unwrap();
    }

    /// STDOUT `content`, the end of STDOUT, END_REQUEST.
    pub(in crate::fastcgi) async fn respond(&mut self, content: &[u8]) {
        self.send(&[
            stdout(content),
            stdout(b""),
            end(ProtocolStatus::RequestComplete),
        ])
        .await;
    }
}

fn stdout(data: &[u8]) -> Record {
    Record::Stdout {
        id: 1,
        data: Bytes::copy_from_slice(data),
    }
}

fn end(protocol_status: ProtocolStatus) -> Record {
    Record::EndRequest {
        id: 1,
        app_status: 0,
        protocol_status,
    }
}

pub(in crate::fastcgi) fn params(method: &str) -> Params {
    Params::from_iter([("REQUEST_METHOD", method), ("SCRIPT_NAME", "/t.php")])
}

pub(in crate::fastcgi) async fn dial(addr: &ServerAddr) -> Conn {
    connect(addr, SECOND).await.unwrap()
}

/// A request body in `size`-byte frames, as hyper streams an upload.
fn chunked(data: &[u8], size: usize) -> Body {
    let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = data
        .chunks(size)
        .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    http_body_util::StreamBody::new(futures_util::stream::iter(frames)).boxed()
}

pub(in crate::fastcgi) async fn collect(body: ResponseBody) -> Result<Vec<u8>, Error> {
    Ok(body.collect().await?.to_bytes().to_vec())
}

/// Where `on_reuse` puts the connection.
pub(in crate::fastcgi) type Slot = Arc<Mutex<Option<Conn>>>;

pub(in crate::fastcgi) fn keep(body: &mut ResponseBody) -> Slot {
    let slot = Slot::default();
    let s = slot.clone();
    body.on_reuse(move |conn| *s.lock().unwrap() = Some(conn));
    slot
}

pub(in crate::fastcgi) fn taken(slot: &Slot) -> Option<Conn> {
    slot.lock().unwrap().take()
}

pub(in crate::fastcgi) async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("test took too long")
}

#[tokio::test]
async fn simple_get() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            let params = peer.begin().await;
            assert_eq!(params.get("REQUEST_METHOD"), Some(&b"GET"[..]));
            assert_eq!(peer.stdin().await, b"");
            peer.respond(b"Status: 201 Created\r\nX-Test: 1\r\nContent-Length: 5\r\n\r\nhello")
                .await;
        });
        let response = dial(&addr)
            .await
            .send(&params("GET"), None, SECOND)
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        assert_eq!(response.headers()["x-test"], "1");
        assert_eq!(response.headers()["content-length"], "5");
        assert_eq!(http_body::Body::size_hint(response.body()).exact(), Some(5));
        assert_eq!(collect(response.into_body()).await.unwrap(), b"hello");
        server.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn head_split_across_many_records() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            peer.stdin().await;
            let head = b"Content-Type: text/plain\r\nX-Long: 0123456789\r\n\r\nfirst ";
            let mut records: Vec<Record> = head.iter().map(|b| stdout(&[*b])).collect();
            records.push(stdout(b"second"));
            peer.send(&records).await;
            peer.respond(b" third").await;
        });
        let response = dial(&addr)
            .await
            .send(&params("GET"), None, SECOND)
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["x-long"], "0123456789");
        assert_eq!(
            collect(response.into_body()).await.unwrap(),
            b"first second third"
        );
        server.await.unwrap();
    })
    .await;
}

/// Log output, captured.
#[derive(Clone, Default)]
pub(in crate::fastcgi) struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    /// Captures the events of this thread until the guard drops.
    pub(in crate::fastcgi) fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    pub(in crate::fastcgi) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn stderr_is_logged_line_by_line_not_returned() {
    let logs = Logs::default();
    // The test runtime runs on this thread only: every event of the exchange lands here.
    let _guard = logs.capture();
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            peer.stdin().await;
            let err = |s: &str| Record::Stderr {
                id: 1,
                data: Bytes::copy_from_slice(s.as_bytes()),
            };
            peer.send(&[
                err("PHP Warning:  first\nPHP Notice:  sec"),
                stdout(b"Content-Type: text/plain\r\n\r\nvisible"),
                err("ond\r\nunterminated"),
            ])
            .await;
            peer.respond(b" body").await;
        });
        let response = dial(&addr)
            .await
            .send(&params("GET"), None, SECOND)
            .await
            .unwrap();
        assert_eq!(
            collect(response.into_body()).await.unwrap(),
            b"visible body"
        );
        server.await.unwrap();
    })
    .await;
    let text = logs.text();
    let warnings: Vec<&str> = text.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 3, "{text}");
    assert!(warnings[0].contains("PHP Warning:  first"), "{text}");
    assert!(warnings[1].contains("PHP Notice:  second"), "{text}");
    assert!(warnings[2].contains("unterminated"), "{text}");
    assert!(warnings.iter().all(|w| w.contains("fcgi.sock")), "{text}");
}

/// The server echoes STDIN as STDOUT as it reads it: more than the socket buffers hold in both directions,
/// so a client that wrote the whole body before reading would deadlock.
async fn echo(body: Body, expected: &[u8]) {
    let (_dir, addr, listener) = rig();
    let server = tokio::spawn(async move {
        let mut peer = Peer::accept(&listener).await;
        peer.begin().await;
        peer.send(&[stdout(b"Content-Type: application/octet-stream\r\n\r\n")])
            .await;
        loop {
            match peer.record().await {
                Some(Record::Stdin { data, .. }) if data.is_empty() => break,
                Some(Record::Stdin { data, .. }) => {
                    peer.send(&[Record::Stdout { id: 1, data }]).await
                }
                other => panic!("{other:?}"),
            }
        }
        peer.respond(b"").await;
    });
    let mut response = dial(&addr)
        .await
        .send(&params("POST"), Some(body), SECOND)
        .await
        .unwrap();
    let slot = keep(response.body_mut());
    let echoed = collect(response.into_body()).await.unwrap();
    assert!(echoed == expected, "echoed {} bytes", echoed.len());
    assert!(taken(&slot).is_some(), "clean end: reusable");
    server.await.unwrap();
}

#[tokio::test]
async fn megabyte_body_streams_while_the_answer_is_read() {
    let data: Vec<u8> = (0..1_048_576u32).map(|i| (i % 251) as u8).collect();
    within(echo(chunked(&data, 16 * 1024), &data)).await;
    // One frame of it all: the writer still yields to the reader.
    within(echo(crate::body::full(data.clone()), &data)).await;
}

#[tokio::test]
async fn connection_is_reused_after_a_clean_end() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            for i in 0..3 {
                let params = peer.begin().await;
                let method = params.get("REQUEST_METHOD").unwrap().to_vec();
                let input = peer.stdin().await;
                let answer = format!(
                    "\r\n{i} {} {}",
                    String::from_utf8_lossy(&method),
                    String::from_utf8_lossy(&input)
                );
                peer.respond(answer.as_bytes()).await;
            }
            // One connection carried all three.
            assert!(peer.record().await.is_none());
        });
        let conn = dial(&addr).await;
        let body = chunked(b"a=1&b=2", 3);
        let mut response = conn
            .send(&params("POST"), Some(body), SECOND)
            .await
            .unwrap();
        let slot = keep(response.body_mut());
        assert_eq!(
            collect(response.into_body()).await.unwrap(),
            b"0 POST a=1&b=2"
        );
        let conn = taken(&slot).expect("reused");
        assert!(!conn.is_closed());

        let response = conn.send(&params("GET"), None, SECOND).await.unwrap();
        let mut body = response.into_body();
        while body.frame().await.is_some() {}
        // Registered after the end: handed over at once.
        let slot = keep(&mut body);
        let conn = taken(&slot).expect("reused");

        let response = conn.send(&params("GET"), None, SECOND).await.unwrap();
        assert_eq!(collect(response.into_body()).await.unwrap(), b"2 GET ");
        server.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn unclean_ends_are_not_reused() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            // Overloaded after a response; then content shorter and longer than Content-Length.
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            peer.stdin().await;
            peer.send(&[stdout(b"\r\nok"), end(ProtocolStatus::Overloaded)])
                .await;
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            peer.stdin().await;
            peer.respond(b"Content-Length: 10\r\n\r\nshort").await;
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            peer.stdin().await;
            peer.respond(b"Content-Length: 3\r\n\r\nlonger").await;
            peer
        });
        let mut response = dial(&addr)
            .await
            .send(&params("GET"), None, SECOND)
            .await
            .unwrap();
        let slot = keep(response.body_mut());
        assert_eq!(collect(response.into_body()).await.unwrap(), b"ok");
        assert!(taken(&slot).is_none(), "not after OVERLOADED");

        let mut response = dial(&addr)
            .await
            .send(&params("GET"), None, SECOND)
            .await
            .unwrap();
        let slot = keep(response.body_mut());
        let e = collect(response.into_body()).await.unwrap_err();
        assert!(matches!(e, Error::Truncated { missing: 5 }), "{e}");
        assert!(taken(&slot).is_none());

        let mut response = dial(&addr)
            .await
            .send(&params("GET"), None, SECOND)
            .await
            .unwrap();
        let slot = keep(response.body_mut());
        assert_eq!(collect(response.into_body()).await.unwrap(), b"lon");
        assert!(taken(&slot).is_some(), "excess dropped, framing intact");
        server.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn server_closing_mid_body_is_a_body_error() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            peer.stdin().await;
            peer.send(&[stdout(b"\r\npartial")]).await;
        });
        let response = dial(&addr)
            .await
            .send(&params("GET"), None, SECOND)
            .await
            .unwrap();
        let mut body = response.into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, "partial");
        server.await.unwrap();
        let e = body.frame().await.unwrap().unwrap_err();
        assert!(matches!(e, Error::Closed), "{e}");
        assert!(body.frame().await.is_none(), "fused after the error");
        let io: std::io::Error = e.into();
        assert_eq!(io.kind(), std::io::ErrorKind::UnexpectedEof);
    })
    .await;
}

#[tokio::test]
async fn garbage_is_an_error_not_a_panic() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            // An HTTP server where a FastCGI one was expected.
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            peer.write(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
            // Garbage after a good head.
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            peer.send(&[stdout(b"\r\nbody")]).await;
            peer.write(&[1, 6, 0, 1, 0, 4, 0, 0, 0xff, 0xfe]).await; // cut short...
            peer.write(&[0xff; 64]).await; // ...and followed by noise
            // A record for another request.
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            peer.send(&[Record::Stdout {
                id: 2,
                data: Bytes::from_static(b"\r\n"),
            }])
            .await;
            (peer, listener)
        });
        let e = dial(&addr)
            .await
            .send(&params("GET"), None, SECOND)
            .await
            .unwrap_err();
        assert!(matches!(e.error, Error::Decode(_)), "{e}");
        assert!(!e.stale, "it answered, if badly");

        let response = dial(&addr)
            .await
            .send(&params("GET"), None, SECOND)
            .await
            .unwrap();
        let e = collect(response.into_body()).await.unwrap_err();
        assert!(matches!(e, Error::Decode(_)), "{e}");

        let e = dial(&addr)
            .await
            .send(&params("GET"), None, SECOND)
            .await
            .unwrap_err();
        assert!(matches!(e.error, Error::Unexpected { id: 2, .. }), "{e}");
        server.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn silent_server_times_out() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            peer.stdin().await;
            // Say nothing; see what the client does when it gives up.
            peer.record().await
        });
        let started = std::time::Instant::now();
        let timeout = Duration::from_millis(200);
        let e = dial(&addr)
            .await
            .send(&params("GET"), None, timeout)
            .await
            .unwrap_err();
        assert!(e.error.is_timeout(), "{e}");
        assert!(started.elapsed() >= timeout);
        assert!(!e.stale);
        let last = server.await.unwrap();
        assert!(
            matches!(last, Some(Record::AbortRequest { id: 1 }) | None),
            "{last:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn body_stall_times_out() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            peer.stdin().await;
            peer.send(&[stdout(b"\r\nstart")]).await;
            peer.record().await
        });
        let response = dial(&addr)
            .await
            .send(&params("GET"), None, Duration::from_millis(200))
            .await
            .unwrap();
        let e = collect(response.into_body()).await.unwrap_err();
        assert!(e.is_timeout(), "{e}");
        server.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn stale_connections_are_reported_with_the_body() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            // Closes at once, as a server does with an idle connection; then closes after reading.
            drop(Peer::accept(&listener).await);
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            peer.stdin().await;
        });
        let conn = dial(&addr).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !conn.is_closed() {
            assert!(tokio::time::Instant::now() < deadline, "close not seen");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let e = conn
            .send(&params("POST"), Some(crate::body::full("x=1")), SECOND)
            .await
            .unwrap_err();
        assert!(e.stale && matches!(e.error, Error::Closed), "{e:?}");
        let body = e.unsent.expect("the body comes back");
        assert_eq!(body.collect().await.unwrap().to_bytes(), "x=1");

        let e = dial(&addr)
            .await
            .send(&params("GET"), None, SECOND)
            .await
            .unwrap_err();
        assert!(e.stale, "closed without a byte of answer: {e:?}");
        server.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn failing_request_body_aborts() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            let mut seen = Vec::new();
            while let Some(r) = peer.record().await {
                seen.push(r);
            }
            seen
        });
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![
            Ok(Frame::data(Bytes::from_static(b"abc"))),
            Err(std::io::Error::other("client went away")),
        ];
        let body = http_body_util::StreamBody::new(futures_util::stream::iter(frames)).boxed();
        let e = dial(&addr)
            .await
            .send(&params("POST"), Some(body), SECOND)
            .await
            .unwrap_err();
        assert!(matches!(e.error, Error::RequestBody(_)), "{e}");
        assert!(e.unsent.is_none() && !e.stale);
        let seen = server.await.unwrap();
        assert_eq!(
            seen,
            vec![
                Record::Stdin {
                    id: 1,
                    data: Bytes::from_static(b"abc")
                },
                Record::AbortRequest { id: 1 }
            ]
        );
    })
    .await;
}

#[tokio::test]
async fn early_answer_without_reading_the_body() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            // Answers, then closes with the upload mostly unread: the answer still gets through.
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            peer.respond(b"Status: 413\r\n\r\ntoo big").await;
        });
        let data = vec![b'x'; 4 * 1024 * 1024];
        let mut response = dial(&addr)
            .await
            .send(&params("POST"), Some(chunked(&data, 64 * 1024)), SECOND)
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let slot = keep(response.body_mut());
        assert_eq!(collect(response.into_body()).await.unwrap(), b"too big");
        assert!(taken(&slot).is_none(), "input unread: not reusable");
        server.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn end_without_response() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            peer.begin().await;
            peer.stdin().await;
            peer.send(&[end(ProtocolStatus::Overloaded)]).await;
        });
        let e = dial(&addr)
            .await
            .send(&params("GET"), None, SECOND)
            .await
            .unwrap_err();
        assert!(
            matches!(
                e.error,
                Error::NoResponse {
                    protocol_status: ProtocolStatus::Overloaded,
                    ..
                }
            ),
            "{e}"
        );
        server.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn probe_asks_for_values() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            let Some(Record::GetValues { data }) = peer.record().await else {
                panic!("expected GET_VALUES");
            };
            let names: Vec<Vec<u8>> = Params::decode(&data)
                .unwrap()
                .iter()
                .map(|(n, _)| n.to_vec())
                .collect();
            assert_eq!(
                names,
                [&b"FCGI_MAX_CONNS"[..], b"FCGI_MAX_REQS", b"FCGI_MPXS_CONNS"]
            );
            let mut values = BytesMut::new();
            Params::from_iter([("FCGI_MAX_CONNS", "2"), ("FCGI_MPXS_CONNS", "0")])
                .encode(&mut values);
            peer.send(&[Record::GetValuesResult {
                data: values.freeze(),
            }])
            .await;
            // Not an answer: a request record.
            let mut peer = Peer::accept(&listener).await;
            peer.record().await;
            peer.send(&[stdout(b"x")]).await;
            // No answer at all.
            let mut peer = Peer::accept(&listener).await;
            peer.record().await;
            peer.record().await
        });
        let mut conn = dial(&addr).await;
        let values = conn.get_values(SECOND).await.unwrap();
        assert_eq!(values.get("FCGI_MAX_CONNS"), Some(&b"2"[..]));

        let e = dial(&addr).await.probe(SECOND).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{e}");
        let e = dial(&addr)
            .await
            .probe(Duration::from_millis(100))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
        server.await.unwrap();
    })
    .await;
}
