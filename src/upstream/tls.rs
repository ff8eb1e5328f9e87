//! TLS to upstream servers: an upstream's `tls` option (and what an `https://` proxy target gets) and the rustls
//! client configuration it makes; each server's handshake is [`crate::link::tls::TlsTarget`]'s.
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
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;

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

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
