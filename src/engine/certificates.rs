//! The certificate store: Unit's `/certificates`, beside the document and changed under the same lock.

use serde_json::Value;

use super::{CertError, Engine};
use crate::compile::compile_with;
use crate::tls::Bundle;

impl Engine {
    /// Unit's `/certificates` object.
    pub async fn certificates(&self) -> Value {
        self.current.lock().await.certs.describe()
    }

    /// Each stored bundle's leaf expiry, in seconds since the epoch, by name.
    pub(crate) async fn certificate_expiry(&self) -> Vec<(String, i64)> {
        self.current.lock().await.certs.expiry()
    }

    /// The bundle stored under `name` (an issued or uploaded one, never an ACME placeholder).
    pub async fn certificate(&self, name: &str) -> Option<std::sync::Arc<Bundle>> {
        self.current.lock().await.certs.get(name).cloned()
    }

    /// Stores a new bundle under `name`, as Unit's `PUT /certificates/NAME`: a name in use is refused.
    pub async fn add_certificate(&self, name: &str, pem: &[u8]) -> Result<(), CertError> {
        let mut current = self.current.lock().await;
        if !crate::tls::valid_name(name) {
            return Err(CertError::InvalidName);
        }
        if pem.len() > crate::tls::MAX_BUNDLE {
            return Err(CertError::TooLarge);
        }
        if current.certs.contains(name) {
            return Err(CertError::Exists);
        }
        let bundle = Bundle::parse(pem, Some(crate::tls::now())).map_err(CertError::Invalid)?;
        // No listener names a new bundle yet, so nothing is recompiled.
        if let Some(dir) = &self.cert_dir {
            dir.save(name, pem).map_err(CertError::Save)?;
        }
        current.certs = current.certs.with(name, std::sync::Arc::new(bundle));
        tracing::info!(certificate = name, "certificate stored");
        Ok(())
    }

    /// Puts `bundle` under `name`, replacing the bundle there: listeners that name it serve the new one to new
    /// handshakes at once (an automatic renewal). Saved only once the configuration compiled and applied.
    pub async fn replace_certificate(&self, name: &str, bundle: Bundle) -> Result<(), CertError> {
        let mut current = self.current.lock().await;
        let pem = bundle.pem().to_vec();
        let next = current.certs.with(name, std::sync::Arc::new(bundle));
        let snapshot = compile_with(&current.doc, &next).map_err(CertError::Apply)?;
        if let Some(dir) = &self.cert_dir {
            dir.save(name, &pem).map_err(CertError::Save)?;
        }
        self.server
            .apply(snapshot, false)
            .await
            .map_err(CertError::Apply)?;
        current.certs = next;
        tracing::info!(certificate = name, "certificate replaced");
        Ok(())
    }

    /// Unit's `DELETE /certificates/NAME`: refused while a listener names the bundle.
    pub async fn delete_certificate(&self, name: &str) -> Result<(), CertError> {
        let mut current = self.current.lock().await;
        if !current.certs.contains(name) {
            return Err(CertError::NotFound);
        }
        if crate::tls::used_names(&current.doc).contains(name) {
            return Err(CertError::InUse);
        }
        if let Some(dir) = &self.cert_dir {
            dir.remove(name).map_err(CertError::Save)?;
        }
        current.certs = current.certs.without(name);
        tracing::info!(certificate = name, "certificate deleted");
        self.server.shared().acme.changed();
        Ok(())
    }
}
