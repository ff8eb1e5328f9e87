//! HTTPS upstreams: `"proxy": "https://…"` and upstreams with `"tls"`, against Node.js `https` backends and a
//! TLS WebSocket echo server, with certificates made here (a private CA, a leaf for `localhost` and
//! 127.0.0.1). Verification with a private CA, against the system's roots, with a wrong name; keep-alive
//! reuse; `Host`; retries past a server whose certificate fails; active checks over TLS; WebSocket; the
//! configuration errors.

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

use super::*;
use crate::harness::get;

/// A private CA and a leaf it signed for `localhost` and 127.0.0.1, as PEM files.
struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Pki {
    fn new(ca_name: &str) -> Pki {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, ca_name);
        let ca_key = KeyPair::generate().unwrap();
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(names)
            .unwrap()
            .signed_by(&leaf_key, &issuer)
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).unwrap();
            path
        };
        Pki {
            ca: write("ca.pem", ca_cert.pem()),
            cert: write("cert.pem", leaf.pem()),
            key: write("key.pem", leaf_key.serialize_pem()),
            _dir: dir,
        }
    }

    fn ca(&self) -> String {
        self.ca.display().to_string()
    }
}

impl Backend {
    /// `tests/backends/http_backend.js NAME 0 CERT KEY`: HTTPS on 127.0.0.1.
    fn node_tls(name: &str, pki: &Pki) -> Backend {
        let mut cmd = Command::new("node");
        cmd.arg(format!("{BACKENDS}/http_backend.js"))
            .args([name, "0"])
            .arg(&pki.cert)
            .arg(&pki.key);
        Backend::spawn(name, cmd)
            .unwrap_or_else(|| panic!("node https backend {name} did not start"))
    }

    fn websocket_tls(pki: &Pki) -> Backend {
        let mut cmd = Command::new("python3");
        cmd.arg(format!("{BACKENDS}/ws_echo.py"))
            .arg("0")
            .arg(&pki.cert)
            .arg(&pki.key);
        Backend::spawn("ws", cmd).expect("ws_echo.py over TLS did not start")
    }

    /// `localhost:PORT`, as an upstream server key.
    fn named(&self) -> String {
        format!("localhost:{}", self.port)
    }
}

/// A number a backend answered with (`/connections`, `/count`), asked through rein.
fn number(c: &mut Conn, path: &str) -> u64 {
    let r = c.get(path, &[]);
    assert_eq!(r.status, 200, "{r:?}");
    r.text().parse().unwrap()
}

/// Waits for a `warn` line of rein's log holding every one of `parts`.
fn logged(rein: &Rein, parts: &[&str]) {
    wait_for(&format!("a log line with {parts:?}"), || {
        rein.log_text()
            .lines()
            .any(|l| parts.iter().all(|p| l.contains(p)))
    });
}

#[test]
fn an_https_upstream_with_a_private_ca_is_verified_and_its_connections_kept() {
    let rein = Rein::start();
    let pki = Pki::new("Test CA");
    let b = Backend::node_tls("T", &pki);
    let addr = serve_upstream(
        &rein,
        json!({"servers": {b.named(): {}}, "tls": {"ca": pki.ca()}}),
    );
    let mut c = Conn::open(addr);
    let r = c.get("/headers", &[]);
    let (_, seen) = seen_headers(&r);
    // The server is sent its own name; the client's Host goes in X-Forwarded-Host.
    assert_eq!(header_values(&seen, "host"), [b.named()]);
    assert_eq!(header_values(&seen, "x-forwarded-host"), ["test"]);
    assert_eq!(header_values(&seen, "x-forwarded-proto"), ["http"]);

    for _ in 0..20 {
        assert_eq!(c.get("/whoami", &[]).text(), "T");
    }
    // Bodies both ways, larger than TLS records and socket buffers.
    let body: Vec<u8> = (0..=255u8).cycle().take(3 << 20).collect();
    let r = c.request("POST", "/echo", &[], &body);
    assert_eq!(r.status, 200);
    assert!(r.body == body, "the body must come back unchanged");

    let connections = number(&mut c, "/connections");
    assert!(
        connections < 5,
        "23 requests took {connections} TLS connections: keep-alive is not reused"
    );
    let status = server_status(&rein, &b.named());
    assert_eq!(status["connections_opened"], connections, "{status}");
}

#[test]
fn an_ip_literal_is_verified_against_the_certificates_ip_address() {
    let rein = Rein::start();
    let pki = Pki::new("Test CA");
    let b = Backend::node_tls("T", &pki);
    let addr = serve_upstream(
        &rein,
        json!({"servers": {b.addr(): {}}, "tls": {"ca": pki.ca()}}),
    );
    let r = get(addr, "/headers");
    let (_, seen) = seen_headers(&r);
    assert_eq!(header_values(&seen, "host"), [b.addr()]);
}

#[test]
fn an_https_proxy_target_is_verified_against_the_system_roots() {
    let rein = Rein::start();
    let pki = Pki::new("Test CA");
    let b = Backend::node_tls("T", &pki);
    let url = format!("https://{}", b.named());
    let addr = rein.serve(json!([{"action": {"proxy": url}}]));
    assert_eq!(get(addr, "/whoami").status, 502);
    logged(
        &rein,
        &[
            &format!("upstream=\"{url}\""),
            "TLS handshake with localhost failed: invalid peer certificate",
            "UnknownIssuer",
            "status=502",
        ],
    );
}

#[test]
fn a_certificate_for_another_name_is_refused() {
    let rein = Rein::start();
    let pki = Pki::new("Test CA");
    let b = Backend::node_tls("T", &pki);
    let addr = serve_upstream(
        &rein,
        json!({"servers": {b.named(): {}}, "tls": {"ca": pki.ca(), "server_name": "wrong.example"}}),
    );
    assert_eq!(get(addr, "/whoami").status, 502);
    logged(
        &rein,
        &[
            "upstream=\"u\"",
            "TLS handshake with wrong.example failed: invalid peer certificate",
            "status=502",
        ],
    );
    // The name given is the one verified and sent.
    let addr = serve_upstream(
        &rein,
        json!({"servers": {b.addr(): {}}, "tls": {"ca": pki.ca(), "server_name": "localhost"}}),
    );
    let (_, seen) = seen_headers(&get(addr, "/headers"));
    assert_eq!(
        header_values(&seen, "host"),
        [format!("localhost:{}", b.port)]
    );
}

#[test]
fn a_name_that_does_not_resolve_is_a_502() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"proxy": "https://nonexistent.invalid:8443"}}]));
    assert_eq!(get(addr, "/").status, 502);
    logged(
        &rein,
        &["cannot connect to nonexistent.invalid:8443", "status=502"],
    );
}

#[test]
fn a_server_whose_certificate_fails_is_skipped_like_one_that_refuses() {
    let rein = Rein::start();
    let pki = Pki::new("Test CA");
    let other = Pki::new("Other CA");
    let good = Backend::node_tls("good", &pki);
    let bad = Backend::node_tls("bad", &other);
    let addr = serve_upstream(
        &rein,
        json!({"servers": {good.named(): {}, bad.named(): {}}, "tls": {"ca": pki.ca()}}),
    );
    let mut c = Conn::open(addr);
    for _ in 0..6 {
        let r = c.get("/whoami", &[]);
        assert_eq!((r.status, r.text().as_str()), (200, "good"));
    }
    assert_eq!(server_status(&rein, &bad.named())["state"], "failed");
}

#[test]
fn active_health_checks_speak_tls() {
    let rein = Rein::start();
    let pki = Pki::new("Test CA");
    let b = Backend::node_tls("T", &pki);
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": {b.named(): {}},
            "tls": {"ca": pki.ca()},
            "health": {"active": {"path": "/whoami", "interval": 0.1, "timeout": 1, "rise": 1, "fall": 1}},
        }),
    );
    let mut c = Conn::open(addr);
    wait_for("probes to reach the backend", || {
        number(&mut c, "/count?path=/whoami") >= 2
    });
    assert_eq!(server_status(&rein, &b.named())["state"], "healthy");

    // Probes that fail verification take the server out.
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": {b.named(): {}},
            "tls": {"ca": pki.ca(), "server_name": "wrong.example"},
            "health": {"active": {"path": "/whoami", "interval": 0.1, "timeout": 1, "rise": 1, "fall": 1}},
            "queue_timeout": 0,
        }),
    );
    wait_for("the server to be unhealthy", || {
        server_status(&rein, &b.named())["state"] == "unhealthy"
    });
    assert_eq!(get(addr, "/whoami").status, 503);
}

#[test]
fn a_websocket_goes_through_an_https_upstream() {
    let rein = Rein::start();
    let pki = Pki::new("Test CA");
    let ws = Backend::websocket_tls(&pki);
    let addr = serve_upstream(
        &rein,
        json!({"servers": {ws.named(): {}}, "tls": {"ca": pki.ca()}}),
    );
    let mut c = Conn::open(addr);
    c.send_raw(
        b"GET /chat HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    );
    let r = c.read_head_only().expect("an answer to the handshake");
    assert_eq!(r.status, 101, "{r:?}");
    assert_eq!(
        r.header("sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    // One masked text frame, echoed unmasked.
    let mask = [0x37u8, 0xfa, 0x21, 0x3d];
    let payload = b"hello over TLS";
    let mut frame = vec![0x81, 0x80 | payload.len() as u8];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    c.send_raw(&frame);
    let mut head = [0u8; 2];
    c.reader().read_exact(&mut head).unwrap();
    assert_eq!(head, [0x81, payload.len() as u8]);
    let mut echoed = vec![0u8; payload.len()];
    c.reader().read_exact(&mut echoed).unwrap();
    assert_eq!(echoed, payload);
}

#[test]
fn tls_settings_are_refused_with_their_path() {
    let rein = Rein::start();
    let pki = Pki::new("Test CA");
    let refused = |config: Value| -> String {
        let (status, body) = rein.api("PUT", "/config", Some(&config.to_string()));
        assert_eq!(status, 400, "{body}");
        body["detail"].as_str().unwrap_or_default().to_owned()
    };
    let with_upstream = |u: Value| {
        json!({
            "listeners": {"127.0.0.1:0": {"pass": "upstreams/u"}},
            "upstreams": {"u": u},
        })
    };
    let detail = refused(with_upstream(
        json!({"servers": {"localhost:1": {}}, "tls": {"ca": "/nonexistent/ca.pem"}}),
    ));
    assert!(
        detail.starts_with("upstreams/u/tls/ca: cannot read /nonexistent/ca.pem"),
        "{detail}"
    );
    let detail = refused(with_upstream(
        json!({"servers": {"localhost:1": {}}, "tls": {"ca": pki.ca(), "verify": false}}),
    ));
    assert!(detail.starts_with("upstreams/u/tls"), "{detail}");
    assert!(detail.contains("verify"), "{detail}");
    let detail = refused(with_upstream(
        json!({"servers": {"unix:/run/app.sock": {}}, "tls": {}}),
    ));
    assert!(
        detail.starts_with("upstreams/u/servers/unix:/run/app.sock"),
        "{detail}"
    );
    let detail = refused(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [{"action": {"proxy": "https://unix:/run/app.sock"}}],
    }));
    assert!(detail.starts_with("routes/0/action/proxy"), "{detail}");
    let detail = refused(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [{"action": {"fastcgi": {"server": "upstreams/u", "root": "/srv"}}}],
        "upstreams": {"u": {"servers": {"localhost:9000": {}}, "tls": {}}},
    }));
    assert!(
        detail.starts_with("routes/0/action/fastcgi/server"),
        "{detail}"
    );
    let (_, config) = rein.api("GET", "/config", None);
    assert_eq!(config, json!({}), "nothing changed");
}
