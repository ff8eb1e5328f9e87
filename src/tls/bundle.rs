//! A certificate bundle as Unit takes it: one PEM body holding the chain (leaf first) and its private key.
//!
//! [`Bundle::parse`] checks everything a listener would otherwise discover at its first handshake: the PEM
//! parses, there is exactly one private key, it matches the leaf, and the leaf is valid now. The parsed form
//! keeps the signing key rustls needs, the names SNI is matched against, and the description the API shows;
//! the PEM text itself is kept only to be saved, and is never returned by the API.

use std::sync::Arc;

use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::{PemObject, SectionKind};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::Value;

use super::describe;

/// The largest bundle taken, as Unit's limit on an upload's size keeps a chain to a sane length.
pub const MAX_BUNDLE: usize = 1024 * 1024;

/// Why a PEM body is not a usable bundle.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("the PEM data does not parse: {0}")]
    Pem(String),
    #[error("no certificate in the bundle")]
    NoCertificate,
    #[error("no private key in the bundle")]
    NoKey,
    #[error("more than one private key in the bundle")]
    SeveralKeys,
    #[error("the certificate does not parse: {0}")]
    Certificate(#[from] describe::CertificateError),
    #[error("the private key is not usable: {0}")]
    Key(String),
    #[error("the private key does not match the certificate")]
    KeyMismatch,
    #[error("the certificate expired on {0}")]
    Expired(String),
    #[error("the certificate is not valid before {0}")]
    NotYetValid(String),
}

/// A parsed, checked certificate bundle.
#[derive(Debug)]
pub struct Bundle {
    pub(crate) key: Arc<CertifiedKey>,
    /// The leaf's DNS names (lowercase), its common name when it has none; SNI is matched against them.
    names: Vec<String>,
    description: Value,
    /// The leaf's validity, in seconds since the epoch.
    not_before: i64,
    not_after: i64,
    pem: Vec<u8>,
}

impl Bundle {
    /// Parses and checks `pem`; with `now` (seconds since the epoch), also that the leaf is valid then.
    pub fn parse(pem: &[u8], now: Option<i64>) -> Result<Bundle, BundleError> {
        let (chain, key) = split(pem)?;
        let leaf = describe::Leaf::read(&chain[0])?;
        if let Some(now) = now {
            if now > leaf.not_after {
                return Err(BundleError::Expired(describe::date(leaf.not_after)));
            }
            if now < leaf.not_before {
                return Err(BundleError::NotYetValid(describe::date(leaf.not_before)));
            }
        }
        let key_text = describe::key(&chain[0]);
        let description = describe::bundle(&chain, &key_text);
        let provider = rustls::crypto::aws_lc_rs::default_provider();
        let signing = provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| BundleError::Key(e.to_string()))?;
        let certified = CertifiedKey::new(chain, signing);
        match certified.keys_match() {
            Ok(()) => {}
            Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
                return Err(BundleError::KeyMismatch);
            }
            Err(e) => return Err(BundleError::Key(e.to_string())),
        }
        Ok(Bundle {
            key: Arc::new(certified),
            names: leaf.names,
            description,
            not_before: leaf.not_before,
            not_after: leaf.not_after,
            pem: pem.to_vec(),
        })
    }

    /// Unit's JSON description: the key's type and size, and each chain element's subject, issuer and validity.
    pub fn description(&self) -> &Value {
        &self.description
    }

    pub fn pem(&self) -> &[u8] {
        &self.pem
    }

    /// When the leaf's validity starts, in seconds since the epoch.
    pub fn not_before(&self) -> i64 {
        self.not_before
    }

    /// When the leaf expires, in seconds since the epoch.
    pub fn not_after(&self) -> i64 {
        self.not_after
    }

    /// Whether the leaf is for `server_name` (lowercase): an exact name, or a wildcard `*.example.com` covering
    /// one label (`a.example.com`, not `example.com` nor `a.b.example.com`), as RFC 6125 has it.
    pub fn serves(&self, server_name: &str) -> bool {
        self.names.iter().any(|n| name_matches(n, server_name))
    }
}

fn name_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(suffix) => name
            .split_once('.')
            .is_some_and(|(label, rest)| !label.is_empty() && rest == suffix),
        None => pattern == name,
    }
}

/// The chain, leaf first, and the one private key of a PEM body.
fn split(
    pem: &[u8],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), BundleError> {
    let mut chain = Vec::new();
    let mut key = None;
    for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(pem) {
        let (kind, der) = section.map_err(|e| BundleError::Pem(e.to_string()))?;
        let found = match kind {
            SectionKind::Certificate => {
                chain.push(CertificateDer::from(der));
                continue;
            }
            SectionKind::PrivateKey => PrivateKeyDer::Pkcs8(der.into()),
            SectionKind::RsaPrivateKey => PrivateKeyDer::Pkcs1(der.into()),
            SectionKind::EcPrivateKey => PrivateKeyDer::Sec1(der.into()),
            _ => continue,
        };
        if key.replace(found).is_some() {
            return Err(BundleError::SeveralKeys);
        }
    }
    if chain.is_empty() {
        return Err(BundleError::NoCertificate);
    }
    let key = key.ok_or(BundleError::NoKey)?;
    Ok((chain, key))
}

#[cfg(test)]
mod tests {
    use super::name_matches;

    #[test]
    fn wildcards_cover_one_label() {
        assert!(name_matches("*.example.com", "a.example.com"));
        assert!(!name_matches("*.example.com", "example.com"));
        assert!(!name_matches("*.example.com", "a.b.example.com"));
        assert!(!name_matches("*.example.com", ".example.com"));
        assert!(name_matches("example.com", "example.com"));
        assert!(!name_matches("example.com", "www.example.com"));
    }
}
