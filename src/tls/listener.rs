//! A listener's `tls` object compiled into the rustls server configuration its connections are accepted with.
//!
//! Unit's schema: `{"certificate": "NAME" | ["A", "B"], "session": {"cache_size", "timeout", "tickets"},
//! "conf_commands": {...}}`. Several bundles are chosen by SNI against each one's names, the first being the
//! default, as in Unit. The configuration is built once per snapshot; a new snapshot (a changed listener, a
//! bundle replaced by the API or a renewal) serves new handshakes while connections already made keep theirs.

use std::sync::Arc;
use std::time::Duration;

use rustls::server::{ClientHello, ProducesTickets, ResolvesServerCert, ServerSessionMemoryCache};
use rustls::sign::CertifiedKey;
use rustls::{CipherSuite, ServerConfig, SupportedProtocolVersion};
use serde_json::Value;

use super::bundle::Bundle;
use super::store::Certificates;
use crate::config::walk::{boolean, integer, known_keys, object, seconds, string, strings};
use crate::config::{ConfigError, JsonPath};

/// ALPN protocols offered, best first: HTTP/2, then HTTP/1.1; and the ACME CA's, which only its validation
/// handshakes offer (the connection then ends after the handshake).
const ALPN: [&[u8]; 3] = [b"h2", b"http/1.1", super::validation::ACME_TLS];

/// Sessions kept for resumption when `session.cache_size` is not given.
const DEFAULT_CACHE: u64 = 10_240;

/// How long a session may be resumed when `session.timeout` is not given (Unit's default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// A TLS listener's compiled settings.
pub struct ListenerTls {
    pub config: Arc<ServerConfig>,
    /// The bundles it serves, by name, default first.
    pub certificates: Vec<String>,
}

impl std::fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerTls")
            .field("certificates", &self.certificates)
            .finish()
    }
}

pub fn compile(
    v: &Value,
    path: &JsonPath,
    store: &Certificates,
) -> Result<ListenerTls, ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["certificate", "session", "conf_commands"], path)?;
    let cpath = path.key("certificate");
    let names: Vec<String> = match map.get("certificate") {
        None => return Err(path.error("a TLS listener needs a \"certificate\"")),
        Some(Value::Array(_)) => strings(&map["certificate"], &cpath)?
            .into_iter()
            .map(str::to_owned)
            .collect(),
        Some(one) => vec![string(one, &cpath)?.to_owned()],
    };
    if names.is_empty() {
        return Err(cpath.error("names no certificate bundle"));
    }
    let mut bundles = Vec::with_capacity(names.len());
    for name in &names {
        let bundle = store
            .get(name)
            .ok_or_else(|| cpath.error(format!("Certificate \"{name}\" is not found.")))?;
        bundles.push(bundle.clone());
    }
    let versions = match map.get("conf_commands") {
        Some(c) => conf_commands(c, &path.key("conf_commands"))?,
        None => Versions::default(),
    };
    let session = match map.get("session") {
        Some(s) => Session::compile(s, &path.key("session"))?,
        None => Session::default(),
    };
    let config = server_config(bundles, &versions, &session)
        .map_err(|e| path.error(format!("cannot build the TLS configuration: {e}")))?;
    Ok(ListenerTls {
        config,
        certificates: names,
    })
}

/// Unit's `session` object.
struct Session {
    cache_size: u64,
    timeout: Duration,
    tickets: bool,
}

impl Default for Session {
    fn default() -> Self {
        Session {
            cache_size: DEFAULT_CACHE,
            timeout: DEFAULT_TIMEOUT,
            tickets: true,
        }
    }
}

impl Session {
    fn compile(v: &Value, path: &JsonPath) -> Result<Session, ConfigError> {
        let map = object(v, path)?;
        known_keys(map, &["cache_size", "timeout", "tickets"], path)?;
        let mut s = Session::default();
        if let Some(c) = map.get("cache_size") {
            s.cache_size = integer(c, &path.key("cache_size"), 10_000_000)?;
        }
        if let Some(t) = map.get("timeout") {
            s.timeout = seconds(t, &path.key("timeout"))?;
        }
        if let Some(t) = map.get("tickets") {
            s.tickets = match t {
                Value::Bool(_) => boolean(t, &path.key("tickets"))?,
                _ => {
                    return Err(path.key("tickets").error(
                        "rein makes and rotates its own ticket keys; give true or false rather than keys",
                    ));
                }
            };
        }
        Ok(s)
    }
}

/// The protocol versions allowed: TLS 1.2 and 1.3 unless `conf_commands` narrows them.
struct Versions {
    tls12: bool,
    tls13: bool,
}

impl Default for Versions {
    fn default() -> Self {
        Versions {
            tls12: true,
            tls13: true,
        }
    }
}

/// Unit passes `conf_commands` to OpenSSL. rustls has no such interface; the commands with a rustls meaning
/// (`MinProtocol`, `MaxProtocol`) are honoured, and any other is refused rather than silently ignored.
fn conf_commands(v: &Value, path: &JsonPath) -> Result<Versions, ConfigError> {
    let map = object(v, path)?;
    let mut versions = Versions::default();
    for (command, value) in map {
        let vpath = path.key(command);
        let value = string(value, &vpath)?;
        let version = match value.to_ascii_lowercase().as_str() {
            "tlsv1.2" => 12,
            "tlsv1.3" => 13,
            "tlsv1" | "tlsv1.1" | "sslv3" => {
                return Err(vpath.error("rein speaks TLS 1.2 and 1.3 only"));
            }
            _ => return Err(vpath.error("expected \"TLSv1.2\" or \"TLSv1.3\"")),
        };
        match command.to_ascii_lowercase().as_str() {
            "minprotocol" => versions.tls12 = version <= 12,
            "maxprotocol" => versions.tls13 = version >= 13,
            _ => {
                return Err(vpath.error(
                    "rein's TLS (rustls) takes only MinProtocol and MaxProtocol here; its cipher suites are fixed to strong ones",
                ));
            }
        }
    }
    if !versions.tls12 && !versions.tls13 {
        return Err(path.error("MinProtocol is above MaxProtocol"));
    }
    Ok(versions)
}

fn server_config(
    bundles: Vec<Arc<Bundle>>,
    versions: &Versions,
    session: &Session,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let mut allowed: Vec<&'static SupportedProtocolVersion> = Vec::new();
    if versions.tls13 {
        allowed.push(&rustls::version::TLS13);
    }
    if versions.tls12 {
        allowed.push(&rustls::version::TLS12);
    }
    let provider = Arc::new(provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&allowed)?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Sni { bundles }));
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    // rein's order of cipher suites (see `provider`), not the client's, as audits expect.
    config.ignore_client_order = true;
    config.session_storage = if session.cache_size > 0 {
        ServerSessionMemoryCache::new(session.cache_size as usize)
    } else {
        Arc::new(rustls::server::NoServerSessionStorage {})
    };
    if session.tickets {
        config.ticketer = Arc::new(Lifetime {
            inner: super::ticketer()?,
            seconds: session.timeout.as_secs().clamp(1, u64::from(u32::MAX)) as u32,
        });
        // TLS 1.3 clients get tickets instead of server-side sessions; one is enough for a browser's reuse.
        config.send_tls13_tickets = 1;
    }
    Ok(Arc::new(config))
}

/// aws-lc-rs's suites with AES-128-GCM ahead of AES-256-GCM in each TLS version, then ChaCha20-Poly1305.
/// AES-128 is what nginx with OpenSSL negotiates by default, and is as strong as the rest for any real
/// attacker (no practical attack on 128-bit AES keys); AES-256's four more rounds per block cost CPU on every
/// byte sent, which is most of what a keep-alive or HTTP/2 connection does.
fn provider() -> rustls::crypto::CryptoProvider {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    // A stable sort keeps the provider's order within each rank (TLS 1.3 before 1.2, ECDSA before RSA).
    provider.cipher_suites.sort_by_key(|suite| {
        let version = match suite.version() == &rustls::version::TLS13 {
            true => 0,
            false => 1,
        };
        let aead = match suite.suite() {
            CipherSuite::TLS13_AES_128_GCM_SHA256
            | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            | CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 0,
            CipherSuite::TLS13_AES_256_GCM_SHA384
            | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
            | CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => 1,
            _ => 2,
        };
        (version, aead)
    });
    provider
}

/// Picks the bundle whose names cover the client's SNI, else the first; a TLS-ALPN-01 validation handshake
/// gets its validation certificate instead.
#[derive(Debug)]
struct Sni {
    bundles: Vec<Arc<Bundle>>,
}

impl ResolvesServerCert for Sni {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if let Some(validation) = super::validation::lookup(&hello) {
            return Some(validation);
        }
        let chosen = hello
            .server_name()
            .map(str::to_ascii_lowercase)
            .and_then(|name| self.bundles.iter().find(|b| b.serves(&name)))
            .or_else(|| self.bundles.first())?;
        Some(chosen.key.clone())
    }
}

/// The process's ticket keys with the lifetime `session.timeout` asks for: the keys outlive configuration
/// changes, so a client's ticket still resumes after one.
#[derive(Debug)]
struct Lifetime {
    inner: Arc<dyn ProducesTickets>,
    seconds: u32,
}

impl ProducesTickets for Lifetime {
    fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    fn lifetime(&self) -> u32 {
        self.seconds.min(self.inner.lifetime())
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.inner.encrypt(plain)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        self.inner.decrypt(cipher)
    }
}
