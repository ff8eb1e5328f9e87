//! Automatic certificates against a real ACME server: Pebble, validating HTTP-01 on rein's plain listener.
//! Issuance from nothing, renewal of a short-lived certificate, a failed renewal that keeps the old one
//! serving, a restart that asks the CA for nothing; and, without a CA, the placeholder a listener serves until
//! its certificate is issued.

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use super::pebble::Pebble;
use super::pki::TlsConn;
use crate::harness::{Rein, get};

const NAMES: [&str; 2] = ["example.com", "www.example.com"];

/// Longer than the harness's deadline: an issuance is several round trips with the CA, and a renewal waits for
/// the certificate's renewal time.
const ACME_DEADLINE: Duration = Duration::from_secs(90);

/// The plain listener on 127.0.0.1:0 (the CA validates on it), answering 204 to anything routed.
fn plain_listener(rein: &Rein) -> u16 {
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [{"action": {"return": 204}}],
    }));
    rein.bound("127.0.0.1:0").port()
}

/// The plain listener, a TLS listener on 127.0.0.2:0 naming the ACME bundle `site`, and the `acme` section.
fn configure_acme(rein: &Rein, directory: &str, ca: &str) -> SocketAddr {
    rein.configure(json!({
        "listeners": {
            "127.0.0.1:0": {"pass": "routes"},
            "127.0.0.2:0": {"pass": "routes", "tls": {"certificate": "site"}},
        },
        "routes": [{"action": {"return": 204}}],
        "acme": {
            "directory": directory,
            "email": "admin@example.com",
            "accept_terms": true,
            "ca": ca,
            "certificates": {"site": {"names": NAMES}},
        },
    }));
    rein.bound("127.0.0.2:0")
}

/// `status.certificates.site`.
fn site_status(rein: &Rein) -> Value {
    rein.api("GET", "/status/certificates/site", None).1
}

/// Waits until `status.certificates.site` satisfies `cond`; returns it.
fn wait_site(rein: &Rein, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + ACME_DEADLINE;
    loop {
        let site = site_status(rein);
        if cond(&site) {
            return site;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {site}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The issued chain verifies against Pebble's root for each name, and the request is served.
fn serves_every_name(pebble: &Pebble, tls: SocketAddr) {
    let client = pebble.client();
    for name in NAMES {
        let mut conn = TlsConn::open(tls, name, client.clone());
        assert_eq!(conn.peer_names(), NAMES.map(|n| format!("DNSName({n})")));
        assert_eq!(conn.get("/", name).status, 204);
    }
}

/// The issued leaf as `/certificates` describes it.
fn leaf(rein: &Rein) -> Value {
    rein.api("GET", "/certificates/site/chain/0", None).1
}

/// Starts Pebble for `rein`'s plain listener and has rein obtain `site`; `None` if Pebble is not installed.
fn issued(rein: &Rein, validity: u64) -> Option<(Pebble, SocketAddr)> {
    let port = plain_listener(rein);
    let pebble = Pebble::start(rein.dir.path(), port, validity)?;
    let ca = pebble.https_ca_file.display().to_string();
    let tls = configure_acme(rein, &pebble.directory, &ca);
    wait_site(rein, "the first issuance", |s| s["state"] == "valid");
    Some((pebble, tls))
}

#[test]
fn acme_issues_a_certificate_from_nothing() {
    let rein = Rein::start();
    let Some((pebble, tls)) = issued(&rein, 7_776_000) else {
        return;
    };
    let site = site_status(&rein);
    assert_eq!(site["managed"], "acme");
    assert_eq!(site["names"], json!(NAMES));
    assert!(
        site["expires"].is_string() && site["next_renewal"].is_string(),
        "{site}"
    );
    assert_eq!(site["last_error"], Value::Null);
    serves_every_name(&pebble, tls);
    // Listed under /certificates like an uploaded bundle, saved beside them; the account key kept, private.
    assert!(
        leaf(&rein)["issuer"]["common_name"]
            .as_str()
            .unwrap()
            .contains("Pebble")
    );
    assert!(rein.state.join("certs/site.pem").exists());
    let accounts: Vec<_> = std::fs::read_dir(rein.state.join("acme"))
        .unwrap()
        .collect();
    assert_eq!(accounts.len(), 1);
    let mode = accounts[0]
        .as_ref()
        .unwrap()
        .metadata()
        .unwrap()
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
    let log = rein.log_text();
    assert!(log.contains("ACME account registered"), "{log}");
    assert!(log.contains("certificate issued and installed"), "{log}");
    assert!(!log.contains("PRIVATE KEY"));
    // Deleted through the API once no listener names it, the bundle is obtained again.
    let saved = rein.state.join("certs/site.pem");
    let first = std::fs::read(&saved).unwrap();
    assert_eq!(rein.api("DELETE", "/certificates/site", None).0, 400);
    rein.api("DELETE", "/config/listeners/127.0.0.2:0", None);
    assert_eq!(rein.api("DELETE", "/certificates/site", None).0, 200);
    let deadline = Instant::now() + ACME_DEADLINE;
    // A new key each time: the saved bundle differs, where the description may not (same names, same second).
    let obtained_again = || std::fs::read(&saved).is_ok_and(|now| now != first);
    while !obtained_again() {
        assert!(
            Instant::now() < deadline,
            "not obtained again: {}",
            site_status(&rein)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn acme_renews_a_short_lived_certificate() {
    let rein = Rein::start();
    // 30 seconds: renewed a third of its lifetime before it ends, 20 seconds after it was issued.
    let Some((pebble, tls)) = issued(&rein, 30) else {
        return;
    };
    let client = pebble.client();
    let first = leaf(&rein);
    let mut kept = TlsConn::open(tls, "example.com", client.clone());
    assert_eq!(kept.get("/", "example.com").status, 204);
    let deadline = Instant::now() + ACME_DEADLINE;
    while leaf(&rein) == first {
        assert!(
            Instant::now() < deadline,
            "not renewed: {}",
            site_status(&rein)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(site_status(&rein)["state"], "valid");
    // New handshakes get the new certificate; the connection made before the renewal keeps working.
    let mut fresh = TlsConn::open(tls, "www.example.com", client);
    assert_eq!(fresh.get("/", "www.example.com").status, 204);
    assert_eq!(kept.get("/", "example.com").status, 204);
}

#[test]
fn acme_failed_renewal_keeps_the_certificate_serving() {
    let rein = Rein::start();
    // Renewal is due 27 seconds after issuance; the certificate is still valid 13 seconds after that.
    let Some((mut pebble, tls)) = issued(&rein, 40) else {
        return;
    };
    let client = pebble.client();
    let first = leaf(&rein);
    pebble.stop();
    let site = wait_site(&rein, "a failed renewal", |s| s["state"] == "failed");
    assert!(
        site["last_error"].as_str().is_some_and(|e| !e.is_empty()),
        "{site}"
    );
    assert!(site["expires"].is_string(), "{site}");
    assert_eq!(leaf(&rein), first);
    let mut conn = TlsConn::open(tls, "example.com", client);
    assert_eq!(conn.get("/", "example.com").status, 204);
    assert!(rein.log_text().contains("the current one keeps serving"));
}

#[test]
fn acme_restart_keeps_the_issued_certificate_without_asking_again() {
    let mut rein = Rein::start();
    let Some((mut pebble, _)) = issued(&rein, 7_776_000) else {
        return;
    };
    let client = pebble.client();
    let first = leaf(&rein);
    // With the CA down, a request to it would fail and show in /status.
    pebble.stop();
    rein.signal(Signal::SIGTERM);
    assert_eq!(rein.wait_exit().0, Some(0));
    let logged = rein.log_text().len();

    let dir = std::mem::replace(&mut rein.dir, tempfile::tempdir().unwrap());
    let again = Rein::start_in(dir, &[]);
    again.wait_ready();
    let site = wait_site(&again, "the restored bundle", |s| s["state"] == "valid");
    assert_eq!(site["last_error"], Value::Null);
    assert_eq!(leaf(&again), first);
    let mut conn = TlsConn::open(again.bound("127.0.0.2:0"), "www.example.com", client);
    assert_eq!(conn.get("/", "www.example.com").status, 204);
    let log = again.log_text();
    let since = &log[logged..];
    assert!(!since.contains("requesting a certificate"), "{since}");
    assert!(!since.contains("ACME account registered"), "{since}");
}

#[test]
fn acme_listener_serves_a_placeholder_until_issued() {
    let rein = Rein::start();
    let (status, refused) = rein.api(
        "PUT",
        "/config/acme",
        Some(r#"{"certificates": {"site": {"names": ["example.com"]}}}"#),
    );
    assert_eq!(status, 400);
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .starts_with("acme/accept_terms"),
        "{refused}"
    );
    let plain = SocketAddr::from(([127, 0, 0, 1], plain_listener(&rein)));
    // A CA nobody answers for: the certificate stays unissued.
    let tls = configure_acme(&rein, "https://127.0.0.1:1/dir", "/nonexistent/ca.pem");
    let out = Command::new("curl")
        .args(["-skv", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg("--resolve")
        .arg(format!("www.example.com:{}:127.0.0.2", tls.port()))
        .arg(format!("https://www.example.com:{}/", tls.port()))
        .output()
        .expect("curl");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "204", "{stderr}");
    assert!(stderr.contains("rein placeholder"), "{stderr}");
    let site = wait_site(&rein, "the failed attempt", |s| s["state"] == "failed");
    assert!(
        site["last_error"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/ca.pem"),
        "{site}"
    );
    // Never listed nor saved.
    assert_eq!(rein.api("GET", "/certificates", None).1, json!({}));
    assert!(!rein.state.join("certs/site.pem").exists());
    // An unknown challenge token is routed as any request.
    assert_eq!(
        get(plain, "/.well-known/acme-challenge/unknown").status,
        204
    );
}

#[test]
fn acme_tls_alpn_01_issues_through_the_tls_listener_alone() {
    let rein = Rein::start();
    // No plain listener at all: the CA validates each name with a handshake on the TLS listener. Until Pebble
    // runs, the CA named is one nobody answers for.
    let acme = |directory: &str, ca: &str| {
        json!({
            "directory": directory,
            "accept_terms": true,
            "ca": ca,
            "certificates": {"site": {"names": NAMES, "challenge": "tls-alpn-01"}},
        })
    };
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes", "tls": {"certificate": "site"}}},
        "routes": [{"action": {"return": 204}}],
        "acme": acme("https://127.0.0.1:1/dir", "/nonexistent/ca.pem"),
    }));
    let tls = rein.bound("127.0.0.1:0");
    let nothing_there = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http_port = nothing_there.local_addr().unwrap().port();
    drop(nothing_there);
    let Some(pebble) = Pebble::start_validating(rein.dir.path(), http_port, tls.port(), 7_776_000)
    else {
        return;
    };
    let ca = pebble.https_ca_file.display().to_string();
    let body = acme(&pebble.directory, &ca).to_string();
    assert_eq!(rein.api("PUT", "/config/acme", Some(&body)).0, 200);
    let site = wait_site(&rein, "issuance by TLS-ALPN-01", |s| s["state"] == "valid");
    assert_eq!(site["last_error"], Value::Null);
    serves_every_name(&pebble, tls);
    // The validation certificates are withdrawn once the order is settled: a handshake offering acme-tls/1
    // now gets the issued bundle, and no HTTP.
    let out = Command::new("openssl")
        .args([
            "s_client",
            "-alpn",
            "acme-tls/1",
            "-servername",
            "example.com",
        ])
        .arg("-connect")
        .arg(tls.to_string())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ALPN protocol: acme-tls/1"), "{text}");
    assert!(text.contains("Pebble"), "{text}");
}

#[test]
fn acme_challenge_must_be_one_rein_answers() {
    let rein = Rein::start();
    let (status, refused) = rein.api(
        "PUT",
        "/config/acme",
        Some(r#"{"accept_terms": true, "certificates": {"site": {"names": ["example.com"], "challenge": "dns-01"}}}"#),
    );
    assert_eq!(status, 400);
    assert!(
        refused["detail"].as_str().unwrap().starts_with(
            "acme/certificates/site/challenge: must be \"http-01\" or \"tls-alpn-01\""
        ),
        "{refused}"
    );
}
