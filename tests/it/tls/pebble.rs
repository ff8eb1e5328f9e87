//! Pebble, Let's Encrypt's test CA, run by the ACME tests: its binaries (installed by scripts/test.sh into
//! `target/tools/`, or here with `go install` if Go is there), a configuration made per test, and
//! pebble-challtestsrv as its DNS server, answering 127.0.0.1 (or the address a test gives) for every name so
//! that its HTTP-01 and TLS-ALPN-01 validations reach rein's listeners.
//!
//! Pebble cannot bind port 0, so its ports are found free by binding 0 and releasing the port.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use super::pki::{Alg, Ca, TlsConn};

/// The Pebble release the tests run (scripts/test.sh installs the same one).
const VERSION: &str = "v2.10.1";

/// Pebble and its DNS server, stopped when dropped.
pub struct Pebble {
    pebble: Option<Child>,
    dns: Child,
    /// Our CA, which signed Pebble's own HTTPS certificate; rein's `acme.ca`.
    pub https_ca: Ca,
    pub https_ca_file: PathBuf,
    pub directory: String,
    management: SocketAddr,
    pub log: PathBuf,
}

/// Where the binaries are, installing them first if need be; `None` (and a loud message) if they cannot be.
fn binaries() -> Option<PathBuf> {
    static INSTALLED: Mutex<Option<bool>> = Mutex::new(None);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools");
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    let ok = *installed.get_or_insert_with(|| {
        let present =
            |d: &Path| d.join("pebble").exists() && d.join("pebble-challtestsrv").exists();
        present(&dir) || (install(&dir) && present(&dir))
    });
    if !ok {
        eprintln!(
            "\n*** SKIPPED: Pebble is not installed and `go install` failed; run scripts/test.sh \
             (it installs Go and Pebble into target/tools/) ***\n"
        );
    }
    ok.then_some(dir)
}

fn install(dir: &Path) -> bool {
    let go = ["go", "/usr/local/go/bin/go", "/usr/lib/go/bin/go"]
        .into_iter()
        .find(|g| {
            Command::new(g)
                .arg("version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    let Some(go) = go else { return false };
    Command::new(go)
        .arg("install")
        .arg(format!(
            "github.com/letsencrypt/pebble/v2/cmd/pebble@{VERSION}"
        ))
        .arg(format!(
            "github.com/letsencrypt/pebble/v2/cmd/pebble-challtestsrv@{VERSION}"
        ))
        .env("GOBIN", dir)
        .status()
        .is_ok_and(|s| s.success())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Pebble {
    /// Starts Pebble validating HTTP-01 on `http_port`, issuing certificates valid `validity` seconds; `None`
    /// when Pebble cannot be installed.
    pub fn start(dir: &Path, http_port: u16, validity: u64) -> Option<Pebble> {
        Pebble::start_validating(dir, http_port, free_port(), validity)
    }

    /// Starts Pebble validating HTTP-01 on `http_port` and TLS-ALPN-01 on `tls_port` (of 127.0.0.1).
    pub fn start_validating(
        dir: &Path,
        http_port: u16,
        tls_port: u16,
        validity: u64,
    ) -> Option<Pebble> {
        Pebble::start_answering(dir, http_port, tls_port, validity, Ipv4Addr::LOCALHOST)
    }

    /// Starts Pebble with its DNS server answering `address` for every name: it validates HTTP-01 on
    /// `address:http_port` and TLS-ALPN-01 on `address:tls_port` (a fleet node in a network namespace of its
    /// own, rather than the host's loopback).
    pub fn start_answering(
        dir: &Path,
        http_port: u16,
        tls_port: u16,
        validity: u64,
        address: Ipv4Addr,
    ) -> Option<Pebble> {
        let bin = binaries()?;
        let https_ca = Ca::new();
        let (cert, key) = https_ca.leaf(&["localhost"], Alg::Ecdsa, (-1, 30));
        let file = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let https_ca_file = file("pebble-https-ca.pem", &https_ca.pem());
        let (listen, management, dns) = (free_port(), free_port(), free_port());
        let config = json!({"pebble": {
            "listenAddress": format!("127.0.0.1:{listen}"),
            "managementListenAddress": format!("127.0.0.1:{management}"),
            "certificate": file("pebble-cert.pem", &cert),
            "privateKey": file("pebble-key.pem", &key.serialize_pem()),
            "httpPort": http_port,
            "tlsPort": tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
            "retryAfter": {"authz": 1, "order": 1},
            "profiles": {"default": {"description": "the tests'", "validityPeriod": validity}},
        }});
        let config = file("pebble.json", &config.to_string());
        let log = dir.join("pebble.log");
        let out = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .unwrap()
        };
        let dns_server = Command::new(bin.join("pebble-challtestsrv"))
            .args(["-defaultIPv4", &address.to_string(), "-defaultIPv6", ""])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", ""])
            .args(["-dnsserver", &format!("127.0.0.1:{dns}")])
            .args(["-management", &format!("127.0.0.1:{}", free_port())])
            .stdin(Stdio::null())
            .stdout(out())
            .stderr(out())
            .spawn()
            .expect("spawn pebble-challtestsrv");
        let pebble = Command::new(bin.join("pebble"))
            .arg("-config")
            .arg(&config)
            .args(["-dnsserver", &format!("127.0.0.1:{dns}")])
            // No random waits before validating, and no nonces refused at random: the tests test rein.
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .stdin(Stdio::null())
            .stdout(out())
            .stderr(out())
            .spawn()
            .expect("spawn pebble");
        let pebble = Pebble {
            pebble: Some(pebble),
            dns: dns_server,
            https_ca,
            https_ca_file,
            directory: format!("https://localhost:{listen}/dir"),
            management: SocketAddr::from(([127, 0, 0, 1], management)),
            log,
        };
        pebble.wait_listening(listen);
        Some(pebble)
    }

    fn wait_listening(&self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for p in [port, self.management.port()] {
            while TcpStream::connect(("127.0.0.1", p)).is_err() {
                assert!(
                    Instant::now() < deadline,
                    "Pebble did not start:\n{}",
                    self.log_text()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// The root Pebble signs its chains with (it makes a new one at each start), from its management API.
    pub fn root(&self) -> String {
        let client = self.https_ca.client(&[b"http/1.1"]);
        let mut conn = TlsConn::open(self.management, "localhost", client);
        let response = conn.get("/roots/0", "localhost");
        assert_eq!(response.status, 200, "{}", response.text());
        response.text()
    }

    /// A TLS client that trusts Pebble's root only.
    pub fn client(&self) -> Arc<rustls::ClientConfig> {
        let root = self.root();
        let mut roots = rustls::RootCertStore::empty();
        use rustls::pki_types::pem::PemObject;
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(root.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Arc::new(config)
    }

    /// Stops Pebble (its DNS server stays), as a CA that is down.
    pub fn stop(&mut self) {
        if let Some(mut p) = self.pebble.take() {
            let _ = p.kill();
            let _ = p.wait();
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- pebble log ---\n{}", self.log_text());
        }
        self.stop();
        let _ = self.dns.kill();
        let _ = self.dns.wait();
    }
}
