//! The `tls` option and `https://` targets as compiled, the client configuration they make, and the HTTP/1.1
//! client over TLS against an in-process rustls server with certificates made here (a private CA, a leaf for
//! `localhost` and 127.0.0.1): keep-alive across session tickets, a `close_notify` while idle, an upload
//! larger than TLS buffers, and refused handshakes.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, header};
use http_body_util::BodyExt;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::ServerConfig;
use rustls_pki_types::PrivateKeyDer;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::*;
use crate::http1::{self, RequestHead};
use crate::link::ServerAddr;
use crate::link::tls::TlsTarget;
use crate::upstream::conf::proxy_target;

const SECOND: Duration = Duration::from_secs(1);

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .expect("the test took too long")
}

/// A private CA and a leaf it signed for `localhost` and 127.0.0.1.
struct Pki {
    ca_pem: String,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

fn pki(ca_name: &str) -> Pki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, ca_name);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        chain: vec![leaf_cert.der().clone()],
        key: PrivateKeyDer::try_from(leaf_key.serialize_der()).unwrap(),
    }
}

/// The CA's PEM in a temporary file, and the `tls` settings trusting it.
fn trusting(pki: &Pki, server_name: Option<&str>) -> (tempfile::NamedTempFile, TlsConf) {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, pki.ca_pem.as_bytes()).unwrap();
    let conf = TlsConf {
        ca: Some(file.path().to_owned()),
        server_name: server_name.map(|n| ServerName::try_from(n.to_owned()).unwrap()),
    };
    (file, conf)
}

fn acceptor(pki: &Pki) -> TlsAcceptor {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(pki.chain.clone(), pki.key.clone_key())
        .unwrap();
    TlsAcceptor::from(Arc::new(config))
}

/// Reads one request head, and then `Content-Length` bytes of body; `None` at a clean end of the connection.
async fn read_request<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> Option<(String, usize)> {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .map_or(0, |n| n.trim().parse().unwrap());
    let mut body = vec![0u8; length];
    s.read_exact(&mut body).await.unwrap();
    Some((head, length))
}

/// A TLS server answering each request on a connection with the size of its body, and closing with a
/// `close_notify` after `requests` requests. Returns the address and the heads it received.
async fn serve(pki: &Pki, requests: usize) -> (ServerAddr, tokio::task::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = ServerAddr::Tcp(listener.local_addr().unwrap());
    let acceptor = acceptor(pki);
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let Ok(mut s) = acceptor.accept(tcp).await else {
            return Vec::new();
        };
        let mut heads = Vec::new();
        while heads.len() < requests {
            let Some((head, length)) = read_request(&mut s).await else {
                break;
            };
            heads.push(head);
            let answer = length.to_string();
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{answer}",
                answer.len()
            );
            s.write_all(reply.as_bytes()).await.unwrap();
        }
        let _ = s.shutdown().await;
        heads
    });
    (addr, task)
}

fn target(conf: &TlsConf, addr: &ServerAddr) -> TlsTarget {
    let config = client_config(conf, &mut SystemRoots::default()).unwrap();
    TlsTarget::new(config, conf.server_name.as_ref(), addr).unwrap()
}

fn post(host: &str, len: usize) -> RequestHead {
    let mut headers = HeaderMap::new();
    headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    RequestHead::new(&Method::POST, "/", &headers, len > 0, false)
}

async fn body_text(response: http::Response<http1::ResponseBody>) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test]
async fn a_tls_connection_is_kept_across_session_tickets_and_dropped_at_close_notify() {
    within(async {
        let pki = pki("Test CA");
        let (addr, server) = serve(&pki, 2).await;
        let (_ca, conf) = trusting(&pki, None);
        let tls = target(&conf, &addr);
        assert_eq!(tls.host(), format!("127.0.0.1:{}", addr.port().unwrap()));

        let conn = http1::connect(&addr, Some(&tls), SECOND).await.unwrap();
        let mut response = conn.send(&post(tls.host(), 0), None, SECOND).await.unwrap();
        let kept = std::sync::Arc::new(std::sync::Mutex::new(None));
        let put = kept.clone();
        response
            .body_mut()
            .on_reuse(move |c| *put.lock().unwrap() = Some(c));
        assert_eq!(body_text(response).await, "0");
        let mut conn = kept.lock().unwrap().take().expect("kept alive");
        // The first send found the session tickets that follow a TLS 1.3 handshake usable too (else it
        // would have failed as on a closed connection).
        assert!(!conn.is_closed(), "an idle TLS connection is usable");

        // An upload larger than what TLS and the socket buffer hold at once.
        let upload = Bytes::from(vec![b'x'; 3 << 20]);
        let head = post(tls.host(), upload.len());
        let response = conn
            .send(&head, Some(crate::body::full(upload)), SECOND)
            .await
            .unwrap();
        assert_eq!(body_text(response).await, (3 << 20).to_string());

        let heads = server.await.unwrap();
        assert_eq!(heads.len(), 2, "both requests on one connection");
    })
    .await;
}

#[tokio::test]
async fn an_idle_tls_connection_the_server_closed_is_seen_closed() {
    within(async {
        let pki = pki("Test CA");
        let (addr, server) = serve(&pki, 1).await;
        let (_ca, conf) = trusting(&pki, None);
        let tls = target(&conf, &addr);
        let conn = http1::connect(&addr, Some(&tls), SECOND).await.unwrap();
        let mut response = conn.send(&post("x", 0), None, SECOND).await.unwrap();
        let kept = std::sync::Arc::new(std::sync::Mutex::new(None));
        let put = kept.clone();
        response
            .body_mut()
            .on_reuse(move |c| *put.lock().unwrap() = Some(c));
        assert_eq!(body_text(response).await, "0");
        server.await.unwrap();
        let mut conn = kept.lock().unwrap().take().expect("kept alive");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !conn.is_closed() {
            assert!(tokio::time::Instant::now() < deadline, "never seen closed");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

/// The handshake's error, as the proxy logs it.
async fn refused(pki: &Pki, conf: &TlsConf) -> String {
    let (addr, _server) = serve(pki, 1).await;
    let tls = target(conf, &addr);
    match http1::connect(&addr, Some(&tls), SECOND).await {
        Ok(_) => panic!("the handshake should fail"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn a_certificate_for_another_name_or_from_another_authority_is_refused() {
    within(async {
        let pki = pki("Test CA");
        let (_ca, wrong_name) = trusting(&pki, Some("wrong.example"));
        let error = refused(&pki, &wrong_name).await;
        assert!(
            error.starts_with("TLS handshake with wrong.example failed: invalid peer certificate"),
            "{error}"
        );

        let other = self::pki("Other CA");
        let (_other_ca, other_authority) = trusting(&other, None);
        let error = refused(&pki, &other_authority).await;
        assert!(
            error.starts_with("TLS handshake with 127.0.0.1 failed: invalid peer certificate"),
            "{error}"
        );
        assert!(error.contains("UnknownIssuer"), "{error}");
    })
    .await;
}

#[test]
fn a_ca_file_that_cannot_be_used_is_an_error_at_its_path() {
    let tls_path = JsonPath::root().key("upstreams").key("u").key("tls");
    let error = |conf: &TlsConf| {
        client_config(conf, &mut SystemRoots::default())
            .expect_err("refused")
            .at(&tls_path)
            .to_string()
    };
    let missing = TlsConf {
        ca: Some("/nonexistent/ca.pem".into()),
        server_name: None,
    };
    let text = error(&missing);
    assert!(
        text.starts_with("upstreams/u/tls/ca: cannot read /nonexistent/ca.pem: "),
        "{text}"
    );

    let mut empty = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut empty, b"not a certificate\n").unwrap();
    let no_pem = TlsConf {
        ca: Some(empty.path().to_owned()),
        server_name: None,
    };
    assert!(error(&no_pem).ends_with("holds no PEM certificate"));
}

#[test]
fn tls_settings_are_checked_key_by_key() {
    let path = JsonPath::root().key("upstreams").key("u").key("tls");
    let fails = |v: serde_json::Value| compile(&v, &path).unwrap_err().to_string();
    assert!(fails(json!({"verify": false})).contains("verify"));
    assert!(fails(json!({"ca": "ca.pem"})).starts_with("upstreams/u/tls/ca: must be an absolute"));
    assert!(fails(json!({"server_name": "not a name"})).starts_with("upstreams/u/tls/server_name"));
    assert!(fails(json!(true)).starts_with("upstreams/u/tls"));
    let conf = compile(
        &json!({"ca": "/etc/ca.pem", "server_name": "api.internal"}),
        &path,
    )
    .unwrap();
    assert_eq!(
        conf.ca.as_deref(),
        Some(std::path::Path::new("/etc/ca.pem"))
    );
    assert_eq!(conf.server_name.unwrap().to_str(), "api.internal");
    assert_eq!(compile(&json!({}), &path).unwrap(), TlsConf::default());
}

#[test]
fn https_targets_name_their_server_and_default_to_port_443() {
    let server = |url: &str| {
        let conf = proxy_target(url)?;
        Some((conf.servers[0].addr.to_string(), conf.tls.is_some()))
    };
    let named = |s: &str| Some((s.to_owned(), true));
    assert_eq!(
        server("https://api.example.com"),
        named("api.example.com:443")
    );
    assert_eq!(
        server("https://API.example.com:8443"),
        named("api.example.com:8443")
    );
    assert_eq!(server("https://127.0.0.1"), named("127.0.0.1:443"));
    assert_eq!(server("https://[::1]:8443"), named("[::1]:8443"));
    assert_eq!(
        server("http://backend:8080"),
        Some(("backend:8080".to_owned(), false))
    );
    assert_eq!(
        server("http://10.0.0.1"),
        Some(("10.0.0.1:80".to_owned(), false))
    );
    assert_eq!(
        server("http://unix:/run/app.sock"),
        Some(("unix:/run/app.sock".to_owned(), false))
    );
    for bad in [
        "https://unix:/run/app.sock",
        "https://host/",
        "https://host:0",
        "https://host:99999",
        "https://::1",
        "https://",
        "https://bad_name!:443",
        "ftp://host",
    ] {
        assert_eq!(server(bad), None, "{bad}");
    }
}

#[test]
fn the_host_of_a_tls_server_is_its_name_and_port_unless_443() {
    let config = client_config(
        &TlsConf::default(),
        &mut SystemRoots(Some(Arc::new(RootCertStore::empty()))),
    )
    .unwrap();
    let host = |conf: &TlsConf, addr: &str| {
        let addr = ServerAddr::parse_with_names(addr, None).unwrap();
        TlsTarget::new(config.clone(), conf.server_name.as_ref(), &addr)
            .unwrap()
            .host()
            .to_owned()
    };
    let plain = TlsConf::default();
    assert_eq!(host(&plain, "api.internal:443"), "api.internal");
    assert_eq!(host(&plain, "api.internal:8443"), "api.internal:8443");
    assert_eq!(host(&plain, "[::1]:8443"), "[::1]:8443");
    assert_eq!(host(&plain, "10.0.0.1:443"), "10.0.0.1");
    let renamed = TlsConf {
        ca: None,
        server_name: Some(ServerName::try_from("api.example").unwrap()),
    };
    assert_eq!(host(&renamed, "10.0.0.1:8443"), "api.example:8443");
}
