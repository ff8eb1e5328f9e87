//! TLS to upstream servers: an upstream's `tls` option (and what an `https://` proxy target gets), the rustls
//! client configuration it makes, and the handshake that puts a connection under the HTTP/1.1 client.
//!
//! ```json
//! {"tls": {"ca": "/etc/rein/internal-ca.pem", "server_name": "api.internal"}}
//! ```
//! Certificates are verified against the system's roots, or with `ca` against the authorities of that PEM
//! file only. The name sent in SNI and verified against the certificate is the server's host (an IP
//! literal is verified against the certificate's IP addresses, and no SNI is sent for it), or `server_name`.
//! Requests to the server carry that name as `Host`: a TLS server may refuse a `Host` other than the name
//! it was reached by (RFC 9110 §7.4). Files are read when a configuration that needs them is applied.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, DnsName, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::conf::ServerAddr;
use crate::config::walk::{known_keys, object, string};
use crate::config::{ConfigError, JsonPath};

/// An upstream's `tls`, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsConf {
    /// A PEM file of the authorities to trust instead of the system's roots.
    pub ca: Option<PathBuf>,
    /// The name to send and verify instead of each server's host.
    pub server_name: Option<ServerName<'static>>,
}

/// Compiles `tls`: an object with the optional `ca` and `server_name`.
pub fn compile(v: &Value, path: &JsonPath) -> Result<TlsConf, ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["ca", "server_name"], path)?;
    let mut conf = TlsConf::default();
    if let Some(ca) = map.get("ca") {
        let cpath = path.key("ca");
        let file = string(ca, &cpath)?;
        if !file.starts_with('/') {
            return Err(cpath.error("must be an absolute path to a PEM file"));
        }
        conf.ca = Some(PathBuf::from(file));
    }
    if let Some(name) = map.get("server_name") {
        let npath = path.key("server_name");
        let name = ServerName::try_from(string(name, &npath)?.to_owned())
            .map_err(|_| npath.error("must be a DNS name or an IP address"))?;
        conf.server_name = Some(name);
    }
    Ok(conf)
}

/// Whether `s` is a DNS name a server can be reached by.
pub(crate) fn is_dns_name(s: &str) -> bool {
    DnsName::try_from(s).is_ok()
}

/// Why an upstream's TLS settings could not be put to use.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot read {}: {source}", path.display())]
    ReadCa { path: PathBuf, source: io::Error },
    #[error("{} holds no PEM certificate", path.display())]
    NoCa { path: PathBuf },
    #[error("{}: not a usable certificate: {reason}", path.display())]
    BadCa { path: PathBuf, reason: String },
    #[error("cannot set up TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

impl SetupError {
    /// The error, at the path of the `tls` object it concerns.
    pub fn at(self, tls: &JsonPath) -> ConfigError {
        match self {
            SetupError::Rustls(_) => tls.error(self.to_string()),
            _ => tls.key("ca").error(self.to_string()),
        }
    }
}

/// The system's root certificates, read at most once per configuration change, and only if needed.
#[derive(Default)]
pub struct SystemRoots(Option<Arc<RootCertStore>>);

impl SystemRoots {
    fn get(&mut self) -> Arc<RootCertStore> {
        self.0.get_or_insert_with(load_system_roots).clone()
    }
}

fn load_system_roots() -> Arc<RootCertStore> {
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        tracing::warn!(error = %e, "reading the system's root certificates");
    }
    let mut roots = RootCertStore::empty();
    let (_, ignored) = roots.add_parsable_certificates(found.certs);
    if ignored > 0 {
        tracing::debug!(ignored, "unusable system root certificates left out");
    }
    if roots.is_empty() {
        tracing::warn!(
            "no system root certificates found: HTTPS upstreams without \"ca\" will fail verification"
        );
    }
    Arc::new(roots)
}

/// The client configuration an upstream's connections share, and with it the TLS sessions they resume: TLS
/// 1.2 and 1.3 (rustls's safe defaults), ALPN `http/1.1`.
pub fn client_config(
    conf: &TlsConf,
    system: &mut SystemRoots,
) -> Result<Arc<ClientConfig>, SetupError> {
    let roots = match &conf.ca {
        Some(path) => Arc::new(read_ca(path)?),
        None => system.get(),
    };
    // The provider is named rather than taken from the process default, which more than one crypto backend
    // in the dependency tree would leave undecided.
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The authorities of a PEM file: every certificate in it.
fn read_ca(path: &Path) -> Result<RootCertStore, SetupError> {
    let pem = std::fs::read(path).map_err(|source| SetupError::ReadCa {
        path: path.to_owned(),
        source,
    })?;
    let bad = |reason: String| SetupError::BadCa {
        path: path.to_owned(),
        reason,
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| bad(e.to_string()))?;
        roots.add(cert).map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(SetupError::NoCa {
            path: path.to_owned(),
        });
    }
    Ok(roots)
}

/// What connecting to one server over TLS needs.
pub struct TlsTarget {
    connector: TlsConnector,
    name: ServerName<'static>,
    /// The `Host` of requests to this server: the name, with the port unless it is 443.
    host: String,
}

impl TlsTarget {
    /// For the server at `addr` of an upstream with `conf`; `None` for a Unix socket without a name.
    pub fn new(config: Arc<ClientConfig>, conf: &TlsConf, addr: &ServerAddr) -> Option<TlsTarget> {
        let name = match (&conf.server_name, addr) {
            (Some(name), _) => name.clone(),
            (None, ServerAddr::Tcp(a)) => ServerName::IpAddress(a.ip().into()),
            (None, ServerAddr::Name(host, _)) => ServerName::try_from(host.clone()).ok()?,
            (None, ServerAddr::Unix(_)) => return None,
        };
        let host = host_field(&name, addr.port()?);
        Some(TlsTarget {
            connector: TlsConnector::from(config),
            name,
            host,
        })
    }

    /// The `Host` field's value for requests to this server.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The TLS handshake on a connected socket. A failure names the server's name and says why (an
    /// unknown authority, a certificate for another name, a server that does not speak TLS).
    pub async fn handshake(&self, tcp: TcpStream) -> io::Result<TlsStream<TcpStream>> {
        self.connector
            .connect(self.name.clone(), tcp)
            .await
            .map_err(|e| {
                let kind = match e.kind() {
                    io::ErrorKind::TimedOut => io::ErrorKind::TimedOut,
                    _ => io::ErrorKind::InvalidData,
                };
                let name = self.name.to_str().into_owned();
                io::Error::new(kind, HandshakeError { name, source: e })
            })
    }
}

/// A failed handshake, with the name it was for.
#[derive(Debug, thiserror::Error)]
#[error("TLS handshake with {name} failed: {source}")]
struct HandshakeError {
    name: String,
    source: io::Error,
}

/// `name[:port]` as a `Host` field: an IPv6 address in brackets, port 443 left out.
fn host_field(name: &ServerName<'_>, port: u16) -> String {
    let host = match name {
        ServerName::IpAddress(rustls_pki_types::IpAddr::V6(_)) => format!("[{}]", name.to_str()),
        _ => name.to_str().into_owned(),
    };
    match port {
        443 => host,
        port => format!("{host}:{port}"),
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
