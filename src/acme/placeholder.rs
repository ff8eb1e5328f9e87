//! Self-signed stand-ins for the ACME bundles not issued yet, so a listener that names one comes up at once
//! (and its plain-HTTP sibling can answer the CA's challenge) instead of being refused.
//!
//! Made in memory and never saved: the store, `/certificates` and the state directory see only issued bundles.
//! Each is made once per set of names and kept, so recompiling the configuration does not make a new key.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::config::AcmeConf;
use crate::config::{ConfigError, JsonPath};
use crate::tls::{Bundle, BundleError, Certificates};

/// Stand-ins kept at most; past this (names changed that many times) the cache starts over.
const MAX_KEPT: usize = 256;

/// `store`, with a stand-in under each name `conf` manages that `store` does not hold yet.
pub fn fill(
    store: &Certificates,
    conf: &AcmeConf,
    path: &JsonPath,
) -> Result<Certificates, ConfigError> {
    let mut filled = store.clone();
    for (name, managed) in &conf.certificates {
        if store.contains(name) {
            continue;
        }
        let bundle = stand_in(&managed.names).map_err(|e| {
            path.key(name)
                .error(format!("cannot make a placeholder certificate: {e}"))
        })?;
        filled = filled.with(name, bundle);
    }
    Ok(filled)
}

/// The stand-in for `names`, made on first use.
fn stand_in(names: &[String]) -> Result<Arc<Bundle>, PlaceholderError> {
    static KEPT: OnceLock<Mutex<BTreeMap<Vec<String>, Arc<Bundle>>>> = OnceLock::new();
    let kept = KEPT.get_or_init(Default::default);
    // A poisoned lock only means a panic elsewhere mid-insert; the map of finished bundles is still sound.
    let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(b) = kept.get(names) {
        return Ok(b.clone());
    }
    let bundle = Arc::new(self_signed(names)?);
    if kept.len() >= MAX_KEPT {
        kept.clear();
    }
    kept.insert(names.to_vec(), bundle.clone());
    Ok(bundle)
}

/// Why a stand-in could not be made.
#[derive(Debug, thiserror::Error)]
enum PlaceholderError {
    #[error(transparent)]
    Generate(#[from] rcgen::Error),
    #[error(transparent)]
    Bundle(#[from] BundleError),
}

fn self_signed(names: &[String]) -> Result<Bundle, PlaceholderError> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(names.to_vec())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        "rein placeholder: ACME certificate not issued yet",
    );
    let cert = params.self_signed(&key)?;
    let pem = format!("{}{}", cert.pem(), key.serialize_pem());
    Ok(Bundle::parse(pem.as_bytes(), None)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stand_ins_cover_their_names_and_are_made_once() {
        let names = vec!["a.example".to_owned(), "b.example".to_owned()];
        let first = stand_in(&names).expect("made");
        assert!(first.serves("b.example"));
        assert!(Arc::ptr_eq(&first, &stand_in(&names).expect("kept")));
    }
}
