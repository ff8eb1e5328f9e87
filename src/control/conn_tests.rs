//! The connection's bounds on a paused clock: no real waiting, no timing assertions beyond the clock's own.

use std::sync::Arc;

use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::time::Instant;

use super::*;
use crate::server::Server;

async fn engine() -> Arc<Engine> {
    let initial = crate::engine::Initial {
        doc: json!({}),
        source: crate::history::Source::Startup,
        history_size: 0,
        revision: None,
    };
    let engine = Engine::start(Server::new(), crate::engine::Store::none(), initial).await;
    Arc::new(engine.expect("the empty configuration starts"))
}

/// A connection served in the background; the client's end.
async fn connect(peer: Peer) -> DuplexStream {
    let (client, server) = tokio::io::duplex(64 * 1024);
    tokio::spawn(serve(TokioIo::new(server), engine().await, peer));
    client
}

/// Everything the server sends until it closes the connection.
async fn read_to_close(client: &mut DuplexStream) -> String {
    let mut out = Vec::new();
    client.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(start_paused = true)]
async fn a_silent_connection_is_closed_after_the_head_timeout() {
    let started = Instant::now();
    let mut client = connect(Peer::Local).await;
    assert_eq!(read_to_close(&mut client).await, "");
    assert!(started.elapsed() >= HEAD_TIMEOUT);
}

#[tokio::test(start_paused = true)]
async fn a_half_sent_head_is_closed() {
    let mut client = connect(Peer::Local).await;
    let started = Instant::now();
    client
        .write_all(b"GET /status HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut client).await;
    assert!(!answer.contains("200 OK"), "{answer}");
    assert!(started.elapsed() >= HEAD_TIMEOUT);
}

#[tokio::test(start_paused = true)]
async fn an_idle_keep_alive_connection_is_closed() {
    let mut client = connect(Peer::Local).await;
    client
        .write_all(b"GET /config HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let answer = read_to_close(&mut client).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(started.elapsed() >= HEAD_TIMEOUT);
}

#[tokio::test(start_paused = true)]
async fn a_body_that_stops_coming_is_refused_then_closed() {
    let mut client = connect(Peer::Local).await;
    let started = Instant::now();
    client
        .write_all(b"PUT /config HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"list")
        .await
        .unwrap();
    let answer = read_to_close(&mut client).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(started.elapsed() >= BODY_TIMEOUT);
}

#[tokio::test(start_paused = true)]
async fn a_tcp_client_without_the_token_is_refused() {
    let local: SocketAddr = "127.0.0.1:8443".parse().unwrap();
    let guard = Arc::new(Guard::new("t0ken".into()));
    let mut client = connect(Peer::Tcp { guard, local }).await;
    client
        .write_all(b"GET /config HTTP/1.1\r\nHost: 127.0.0.1:8443\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut client).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{answer}"
    );
    assert!(answer.contains("\"error\": \"Unauthorized.\""), "{answer}");
}
