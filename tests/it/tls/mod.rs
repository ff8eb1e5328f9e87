//! HTTPS: Unit's certificates API, TLS listeners with SNI, live certificate changes, HTTP/2 over ALPN and h2c,
//! and the scheme every action sees.

mod acme;
pub(crate) mod pebble;
pub(crate) mod pki;

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use serde_json::{Value, json};

use crate::harness::{DEADLINE, Rein};
use pki::{Alg, Ca, TlsConn};

/// PUTs a bundle; the status and answer.
fn put_cert(rein: &Rein, name: &str, pem: &str) -> (u16, Value) {
    rein.api("PUT", &format!("/certificates/{name}"), Some(pem))
}

/// A TLS listener on 127.0.0.1:0 with `certificate`, answering `return 200` with the scheme and host.
fn https(rein: &Rein, certificate: Value) -> std::net::SocketAddr {
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes", "tls": {"certificate": certificate}}},
        "routes": [{"action": {"return": 200}}],
    }));
    rein.bound("127.0.0.1:0")
}

#[test]
fn the_certificates_api_describes_bundles_as_unit_does() {
    let rein = Rein::start();
    let ca = Ca::new();
    let (status, body) = put_cert(
        &rein,
        "site",
        &ca.bundle(&["example.com", "www.example.com"], Alg::Rsa),
    );
    assert_eq!(
        (status, &body),
        (200, &json!({"success": "Certificate chain uploaded."}))
    );
    let (status, site) = rein.api("GET", "/certificates/site", None);
    assert_eq!(status, 200);
    assert_eq!(site["key"], "RSA (2048 bits)");
    let leaf = &site["chain"][0];
    assert_eq!(leaf["subject"]["common_name"], "example.com");
    assert_eq!(
        leaf["subject"]["alt_names"],
        json!(["example.com", "www.example.com"])
    );
    assert_eq!(leaf["subject"]["organization"], "rein tests");
    assert_eq!(leaf["issuer"]["common_name"], "rein test CA");
    assert!(
        leaf["validity"]["until"]
            .as_str()
            .unwrap()
            .ends_with(" GMT"),
        "{leaf}"
    );
    assert_eq!(site["chain"][1]["subject"]["common_name"], "rein test CA");
    let (_, key) = rein.api("GET", "/certificates/site/key", None);
    assert_eq!(key, "RSA (2048 bits)");
    let (_, cn) = rein.api(
        "GET",
        "/certificates/site/chain/0/subject/common_name",
        None,
    );
    assert_eq!(cn, "example.com");
    put_cert(&rein, "ec", &ca.bundle(&["ec.example.com"], Alg::Ecdsa));
    let (_, all) = rein.api("GET", "/certificates", None);
    assert_eq!(all["ec"]["key"], "ECDH (256 bits)");
    assert!(!all.to_string().contains("PRIVATE"), "{all}");
    let saved = rein.state.join("certs/site.pem");
    let mode = std::fs::metadata(&saved).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(!rein.log_text().contains("PRIVATE KEY"));
    let (status, missing) = rein.api("GET", "/certificates/nope", None);
    assert_eq!(
        (status, &missing["error"]),
        (404, &json!("Certificate doesn't exist."))
    );
}

#[test]
fn bad_bundles_are_refused_and_nothing_changes() {
    let rein = Rein::start();
    let ca = Ca::new();
    let good = ca.bundle(&["a.test"], Alg::Ecdsa);
    assert_eq!(put_cert(&rein, "a", &good).0, 200);
    let (status, body) = put_cert(&rein, "a", &good);
    assert_eq!(
        (status, &body["error"]),
        (400, &json!("Certificate already exists."))
    );

    let (leaf, _) = ca.leaf(&["b.test"], Alg::Ecdsa, (-1, 30));
    let other_key = rcgen::KeyPair::generate().unwrap().serialize_pem();
    let cases = [
        ("garbage", "not a certificate".to_owned(), "no certificate"),
        ("nokey", leaf.clone(), "no private key"),
        ("mismatch", format!("{leaf}{other_key}"), "does not match"),
        (
            "expired",
            ca.bundle_valid(&["c.test"], Alg::Ecdsa, (-30, -1)),
            "expired",
        ),
    ];
    for (name, pem, why) in cases {
        let (status, body) = put_cert(&rein, name, &pem);
        assert_eq!(status, 400, "{name}: {body}");
        assert_eq!(body["error"], "Invalid certificate.", "{name}");
        assert!(
            body["detail"].as_str().unwrap().contains(why),
            "{name}: {body}"
        );
    }
    let (status, body) = put_cert(&rein, "..", &good);
    assert_eq!(
        (status, &body["error"]),
        (400, &json!("Invalid certificate name."))
    );
    let (_, all) = rein.api("GET", "/certificates", None);
    assert_eq!(all.as_object().unwrap().keys().collect::<Vec<_>>(), ["a"]);
}

#[test]
fn a_bundle_in_use_cannot_be_deleted_and_a_listener_needs_its_bundle() {
    let rein = Rein::start();
    let ca = Ca::new();
    put_cert(&rein, "a", &ca.bundle(&["a.test"], Alg::Ecdsa));
    let config = json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes", "tls": {"certificate": "missing"}}},
        "routes": [{"action": {"return": 200}}],
    });
    let (status, body) = rein.api("PUT", "/config", Some(&config.to_string()));
    assert_eq!(status, 400, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("listeners/127.0.0.1:0/tls/certificate"),
        "{body}"
    );
    https(&rein, json!("a"));
    let (status, body) = rein.api("DELETE", "/certificates/a", None);
    assert_eq!(
        (status, &body["error"]),
        (400, &json!("Certificate is used in the configuration."))
    );
    rein.configure(json!({}));
    let (status, body) = rein.api("DELETE", "/certificates/a", None);
    assert_eq!(
        (status, &body),
        (200, &json!({"success": "Certificate deleted."}))
    );
    assert!(!rein.state.join("certs/a.pem").exists());
}

#[test]
fn sni_picks_the_bundle_whose_names_match_the_first_is_the_default() {
    let rein = Rein::start();
    let ca = Ca::new();
    put_cert(&rein, "first", &ca.bundle(&["first.test"], Alg::Rsa));
    put_cert(&rein, "wild", &ca.bundle(&["*.wild.test"], Alg::Ecdsa));
    put_cert(
        &rein,
        "multi",
        &ca.bundle(&["one.test", "two.test"], Alg::Ecdsa),
    );
    let addr = https(&rein, json!(["first", "wild", "multi"]));
    let client = ca.client(&[b"http/1.1"]);
    let names = |sni: &str| TlsConn::open(addr, sni, client.clone()).peer_names();
    assert_eq!(names("first.test"), ["DNSName(first.test)"]);
    assert_eq!(names("a.wild.test"), ["DNSName(*.wild.test)"]);
    assert_eq!(
        names("two.test"),
        ["DNSName(one.test)", "DNSName(two.test)"]
    );
    // No bundle covers it: the first is served, and the client, checking the name, refuses it.
    let refused = TlsConn::try_open(addr, "wild.test", client.clone()).unwrap_err();
    assert!(
        refused.contains("NotValidForName") || refused.contains("invalid peer certificate"),
        "{refused}"
    );
    let mut conn = TlsConn::open(addr, "first.test", client);
    assert_eq!(conn.alpn().as_deref(), Some(&b"http/1.1"[..]));
    assert_eq!(conn.get("/", "first.test").status, 200);
}

#[test]
fn a_certificate_change_serves_new_handshakes_and_keeps_open_connections() {
    let rein = Rein::start();
    let ca = Ca::new();
    put_cert(&rein, "old", &ca.bundle(&["site.test"], Alg::Ecdsa));
    put_cert(
        &rein,
        "new",
        &ca.bundle(&["site.test", "new.site.test"], Alg::Ecdsa),
    );
    let addr = https(&rein, json!("old"));
    let client = ca.client(&[b"http/1.1"]);
    let mut kept = TlsConn::open(addr, "site.test", client.clone());
    assert_eq!(kept.get("/", "site.test").status, 200);
    assert_eq!(kept.peer_names(), ["DNSName(site.test)"]);
    https(&rein, json!("new"));
    // A client of its own: the first one's session would resume with the old certificate.
    let fresh = TlsConn::open(addr, "site.test", ca.client(&[b"http/1.1"]));
    assert_eq!(
        fresh.peer_names(),
        ["DNSName(site.test)", "DNSName(new.site.test)"]
    );
    // The connection made before the change is still served, on its own certificate.
    assert_eq!(kept.get("/", "site.test").status, 200);
    assert_eq!(kept.peer_names(), ["DNSName(site.test)"]);
}

#[test]
fn certificates_survive_a_restart() {
    let mut rein = Rein::start();
    let ca = Ca::new();
    put_cert(&rein, "site", &ca.bundle(&["site.test"], Alg::Ecdsa));
    https(&rein, json!("site"));
    rein.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(rein.wait_exit().0, Some(0));
    let dir = std::mem::replace(&mut rein.dir, tempfile::tempdir().unwrap());
    let again = Rein::start_in(dir, &[]);
    again.wait_ready();
    let (_, all) = again.api("GET", "/certificates", None);
    assert_eq!(
        all["site"]["chain"][0]["subject"]["common_name"], "site.test",
        "{all}"
    );
    let addr = again.bound("127.0.0.1:0");
    let mut conn = TlsConn::open(addr, "site.test", ca.client(&[b"http/1.1"]));
    assert_eq!(conn.get("/", "site.test").status, 200);
}

/// curl against rein: `--resolve` so SNI and the certificate's name agree, the test CA trusted.
fn curl(
    ca: &Ca,
    dir: &std::path::Path,
    addr: std::net::SocketAddr,
    host: &str,
    args: &[&str],
) -> (String, String) {
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            &DEADLINE.as_secs().to_string(),
            "--cacert",
        ])
        .arg(&ca_file)
        .arg("--resolve")
        .arg(format!("{host}:{}:127.0.0.1", addr.port()))
        .args(["-w", "\n%{http_version} %{http_code}"])
        .args(args)
        .arg(format!("https://{host}:{}/", addr.port()))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, tail) = text.rsplit_once('\n').unwrap_or(("", &text));
    (body.to_owned(), tail.to_owned())
}

#[test]
fn http2_is_negotiated_by_alpn_and_the_scheme_is_https() {
    let rein = Rein::start();
    let ca = Ca::new();
    put_cert(&rein, "site", &ca.bundle(&["site.test"], Alg::Ecdsa));
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes", "tls": {"certificate": "site"}}},
        "routes": [
            {"match": {"scheme": "http"}, "action": {"return": 500}},
            {"action": {"return": 301, "location": "$scheme://$host/moved"}},
        ],
    }));
    let addr = rein.bound("127.0.0.1:0");
    let (_, tail) = curl(
        &ca,
        rein.dir.path(),
        addr,
        "site.test",
        &["--http2", "-o", "/dev/null", "-D", "-"],
    );
    assert!(tail.ends_with("2 301"), "{tail}");
    let (head, tail) = curl(
        &ca,
        rein.dir.path(),
        addr,
        "site.test",
        &["--http1.1", "-D", "-", "-o", "/dev/null"],
    );
    assert!(tail.ends_with("1.1 301"), "{tail}");
    let _ = head;
    let out = Command::new("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{redirect_url}",
            "--http2",
            "--cacert",
        ])
        .arg(rein.dir.path().join("ca.pem"))
        .arg("--resolve")
        .arg(format!("site.test:{}:127.0.0.1", addr.port()))
        .arg(format!("https://site.test:{}/", addr.port()))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "https://site.test/moved"
    );
}

#[test]
fn h2c_with_prior_knowledge_on_a_plain_listener_that_asks_for_it() {
    let rein = Rein::start();
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes", "h2c": true}},
        "routes": [{"action": {"return": 204}}],
    }));
    let addr = rein.bound("127.0.0.1:0");
    let run = |flag: &str| {
        let out = Command::new("curl")
            .args([
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_version} %{http_code}",
                flag,
            ])
            .arg(format!("http://127.0.0.1:{}/", addr.port()))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(run("--http2-prior-knowledge"), "2 204");
    assert_eq!(run("--http1.1"), "1.1 204");
}

#[test]
fn tls_settings_are_checked_with_their_paths() {
    let rein = Rein::start();
    let ca = Ca::new();
    put_cert(&rein, "a", &ca.bundle(&["a.test"], Alg::Ecdsa));
    let bad = [
        (
            json!({"certificate": "a", "conf_commands": {"CipherString": "HIGH"}}),
            "tls/conf_commands/CipherString",
        ),
        (
            json!({"certificate": "a", "conf_commands": {"MinProtocol": "TLSv1.1"}}),
            "tls/conf_commands/MinProtocol",
        ),
        (
            json!({"certificate": "a", "session": {"tickets": "a2V5"}}),
            "tls/session/tickets",
        ),
        (
            json!({"certificate": "a", "session": {"cache": 1}}),
            "tls/session",
        ),
        (json!({"certificate": []}), "tls/certificate"),
    ];
    for (tls, path) in bad {
        let config = json!({
            "listeners": {"127.0.0.1:0": {"pass": "routes", "tls": tls}},
            "routes": [{"action": {"return": 200}}],
        });
        let (status, body) = rein.api("PUT", "/config", Some(&config.to_string()));
        assert_eq!(status, 400, "{tls}: {body}");
        assert!(
            body["detail"].as_str().unwrap().contains(path),
            "{tls}: {body}"
        );
    }
    let good = json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes", "tls": {
            "certificate": ["a"],
            "session": {"cache_size": 100, "timeout": 60, "tickets": false},
            "conf_commands": {"MinProtocol": "TLSv1.3"},
        }}},
        "routes": [{"action": {"return": 200}}],
    });
    rein.configure(good);
    let addr = rein.bound("127.0.0.1:0");
    let tls12 = rustls::ClientConfig::builder_with_protocol_versions(&[&rustls::version::TLS12])
        .with_root_certificates({
            let mut roots = rustls::RootCertStore::empty();
            for cert in <rustls::pki_types::CertificateDer as rustls::pki_types::pem::PemObject>::pem_slice_iter(ca.pem().as_bytes()) {
                roots.add(cert.unwrap()).unwrap();
            }
            roots
        })
        .with_no_client_auth();
    assert!(TlsConn::try_open(addr, "a.test", std::sync::Arc::new(tls12)).is_err());
    assert!(TlsConn::try_open(addr, "a.test", ca.client(&[])).is_ok());
}

#[test]
fn the_scheme_reaches_fastcgi_upstreams_and_websockets_over_tls() {
    let rein = Rein::start();
    let ca = Ca::new();
    put_cert(&rein, "site", &ca.bundle(&["site.test"], Alg::Ecdsa));
    let backend = crate::http2::Backend::start();
    let ws = crate::http2::Backend::script("ws_echo.py", &["0"]);
    let php = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/php");
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes", "tls": {"certificate": "site"}}},
        "routes": [
            {"match": {"uri": "/headers"}, "action": {"proxy": format!("http://127.0.0.1:{}", backend.1)}},
            {"match": {"uri": "/chat"}, "action": {"proxy": format!("http://127.0.0.1:{}", ws.1)}},
            {"action": {"pass": "applications/php"}},
        ],
        "applications": {"php": {"type": "php", "root": php, "processes": 1}},
    }));
    let addr = rein.bound("127.0.0.1:0");
    let dir = rein.dir.path();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    let out = Command::new("curl")
        .args(["-sS", "--http2", "--cacert"])
        .arg(dir.join("ca.pem"))
        .arg("--resolve")
        .arg(format!("site.test:{}:127.0.0.1", addr.port()))
        .arg(format!("https://site.test:{}/env.php", addr.port()))
        .output()
        .unwrap();
    let env: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(env["https"], "on", "{env}");
    assert_eq!(env["request_scheme"], "https", "{env}");

    let mut conn = TlsConn::open(addr, "site.test", ca.client(&[b"http/1.1"]));
    let headers = conn.get("/headers", "site.test");
    let seen: Value = serde_json::from_slice(&headers.body).unwrap();
    let proto = seen["headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| {
            h[0].as_str()
                .unwrap()
                .eq_ignore_ascii_case("x-forwarded-proto")
        })
        .map(|h| h[1].clone());
    assert_eq!(proto, Some(json!("https")), "{seen}");

    // HTTP/1.1 Upgrade over TLS: the WebSocket handshake is tunnelled.
    let mut ws_conn = TlsConn::open(addr, "site.test", ca.client(&[b"http/1.1"]));
    let r = ws_conn.exchange_head(
        b"GET /chat HTTP/1.1\r\nHost: site.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    );
    assert_eq!(r.status, 101, "{:?}", r.headers);
    assert_eq!(
        r.header("sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
}

/// What `openssl s_client -brief` (OpenSSL's own client, for `site.test` at `addr`, with `options`) prints
/// after `label` once its handshake completes; `None` if it does not.
fn s_client_says(addr: SocketAddr, options: &[&str], label: &str) -> Option<String> {
    let out = Command::new("openssl")
        .args(["s_client", "-brief"])
        .args(options)
        .args(["-servername", "site.test", "-connect"])
        .arg(addr.to_string())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl");
    // With -brief, a completed handshake prints "Protocol version: …", "Ciphersuite: …" (on standard error).
    let text = String::from_utf8_lossy(&[out.stdout, out.stderr].concat()).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(label))
        .map(str::to_owned)
}

#[test]
fn tls_1_0_and_1_1_are_refused_and_1_2_and_1_3_are_served() {
    let rein = Rein::start();
    let ca = Ca::new();
    put_cert(&rein, "site", &ca.bundle(&["site.test"], Alg::Rsa));
    let addr = https(&rein, json!("site"));
    // OpenSSL's own client, allowed the old versions (security level 0) so that only rein can refuse them.
    let handshake = |version: &str| {
        s_client_says(
            addr,
            &[version, "-cipher", "DEFAULT@SECLEVEL=0"],
            "Protocol version: ",
        )
    };
    assert_eq!(handshake("-tls1"), None);
    assert_eq!(handshake("-tls1_1"), None);
    assert_eq!(handshake("-tls1_2").as_deref(), Some("TLSv1.2"));
    assert_eq!(handshake("-tls1_3").as_deref(), Some("TLSv1.3"));
}

#[test]
fn the_server_picks_aes_128_gcm_even_when_the_client_prefers_aes_256() {
    let rein = Rein::start();
    let ca = Ca::new();
    put_cert(&rein, "site", &ca.bundle(&["site.test"], Alg::Rsa));
    let addr = https(&rein, json!("site"));
    // The client lists AES-256 first: the suite chosen is rein's preference, not the client's.
    let suite = |version: &str, option: &str, suites: &str| {
        s_client_says(addr, &[version, option, suites], "Ciphersuite: ")
    };
    assert_eq!(
        suite(
            "-tls1_3",
            "-ciphersuites",
            "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"
        )
        .as_deref(),
        Some("TLS_AES_128_GCM_SHA256")
    );
    assert_eq!(
        suite(
            "-tls1_2",
            "-cipher",
            "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES128-GCM-SHA256"
        )
        .as_deref(),
        Some("ECDHE-RSA-AES128-GCM-SHA256")
    );
    // A client without AES-128 still gets a strong suite it offers.
    assert_eq!(
        suite("-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384").as_deref(),
        Some("TLS_AES_256_GCM_SHA384")
    );
}
