use std::convert::Infallible;

use http::{HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// The head a title-casing hyper server writes for `response`, its map applied from `case`.
async fn written(headers: &[(&str, &str)], case: Option<FieldCase>) -> String {
    let mut response = Response::new(crate::body::full(""));
    for (name, value) in headers {
        response.headers_mut().append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    apply(&mut response, case);
    let response = std::sync::Mutex::new(Some(response));
    let (client, server) = tokio::io::duplex(4096);
    let serve = hyper::server::conn::http1::Builder::new()
        .title_case_headers(true)
        .serve_connection(
            TokioIo::new(server),
            service_fn(move |_| {
                let r = response.lock().unwrap().take().unwrap();
                async move { Ok::<_, Infallible>(r) }
            }),
        );
    let task = tokio::spawn(serve);
    let mut client = client;
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    client.read_to_string(&mut out).await.unwrap();
    task.await.unwrap().unwrap();
    // The fields only, Date's value aside.
    out.split("\r\n")
        .skip(1)
        .filter(|l| !l.is_empty() && !l.starts_with("Date:"))
        .collect::<Vec<_>>()
        .join("|")
}

fn recorded(spellings: &[&'static str]) -> FieldCase {
    let mut case = FieldCase::default();
    for s in spellings {
        let name = HeaderName::from_bytes(s.as_bytes()).unwrap();
        case.record(name, Bytes::from_static(s.as_bytes()));
    }
    case
}

#[tokio::test]
async fn title_case_needs_no_map() {
    let head = written(&[("content-type", "a"), ("x-backend", "b")], None).await;
    assert_eq!(
        head,
        "Content-Type: a|X-Backend: b|Connection: close|Content-Length: 0"
    );
}

#[tokio::test]
async fn rein_writes_etag_canonical() {
    let head = written(&[("etag", "\"1\""), ("last-modified", "x")], None).await;
    assert_eq!(
        head,
        "ETag: \"1\"|Last-Modified: x|Connection: close|Content-Length: 0"
    );
}

#[tokio::test]
async fn recorded_spellings_are_kept_for_every_field() {
    let fields = [
        ("x-bar", "1"),
        ("x-bar", "2"),
        ("content-type", "t"),
        ("etag", "e"),
        ("server", "rein"),
        ("x-ok", "3"),
    ];
    for _ in 0..2 {
        let case = recorded(&["x-bar", "Content-type", "server"]);
        assert_eq!(
            written(&fields, Some(case)).await,
            "x-bar: 1|x-bar: 2|Content-type: t|ETag: e|Server: rein|X-Ok: 3|Connection: close|\
             Content-Length: 0"
        );
    }
    let case = recorded(&["Etag", "x-gone"]);
    assert_eq!(
        written(&[("etag", "e")], Some(case)).await,
        "Etag: e|Connection: close|Content-Length: 0"
    );
}
