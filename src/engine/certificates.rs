//! The certificate store: Unit's `/certificates`, beside the document and changed under the same lock.

use serde_json::Value;

use super::{CertError, Engine};
use crate::compile::compile_with;
use crate::fleet::PublishError;
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
        if let Some(fleet) = self.fleet()
            && !fleet
                .put_certificate(name, pem, true)
                .await
                .map_err(fleet_error)?
        {
            return Err(CertError::Exists);
        }
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
        if let Some(fleet) = self.fleet() {
            fleet
                .put_certificate(name, &pem, false)
                .await
                .map_err(fleet_error)?;
        }
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

    /// The fleet's bundle `name` as its watch delivered it (`None`: deleted), installed as an upload or a
    /// renewal would be, never published again. A bundle the served document still names is kept.
    pub(crate) async fn adopt_certificate(&self, name: &str, pem: Option<&[u8]>) {
        let mut current = self.current.lock().await;
        let Some(pem) = pem else {
            if !current.certs.contains(name) {
                return;
            }
            if crate::tls::used_names(&current.doc).contains(name) {
                tracing::warn!(
                    certificate = name,
                    "the fleet deleted a certificate this node's configuration names; keeping it"
                );
                return;
            }
            if let Some(dir) = &self.cert_dir
                && let Err(e) = dir.remove(name)
            {
                tracing::warn!(certificate = name, error = %e, "cannot remove the fleet's deleted certificate");
            }
            current.certs = current.certs.without(name);
            tracing::info!(certificate = name, "certificate deleted by the fleet");
            self.server.shared().acme.changed();
            return;
        };
        if current.certs.get(name).is_some_and(|b| b.pem() == pem) {
            return;
        }
        let installed = self.install(&mut current, name, pem).await;
        match installed {
            Ok(()) => tracing::info!(certificate = name, "certificate from the fleet installed"),
            Err(e) => {
                tracing::error!(certificate = name, error = %e, "cannot install the fleet's certificate")
            }
        }
    }

    /// The fleet's bundles, as a full reading of etcd has them: each installed, and the bundles it does not
    /// have removed (unless the served document names them).
    pub(crate) async fn adopt_certificates(&self, bundles: Vec<(String, Vec<u8>)>) {
        let held = self.certificate_pems().await;
        for (name, _) in held
            .iter()
            .filter(|(n, _)| !bundles.iter().any(|(b, _)| b == n))
        {
            self.adopt_certificate(name, None).await;
        }
        for (name, pem) in &bundles {
            self.adopt_certificate(name, Some(pem)).await;
        }
    }

    /// Every stored bundle's PEM, by name: what a node seeding a fleet publishes.
    pub(crate) async fn certificate_pems(&self) -> Vec<(String, Vec<u8>)> {
        self.current.lock().await.certs.pems()
    }

    /// Parses, saves and serves `pem` as bundle `name`, recompiling the listeners that name it.
    async fn install(
        &self,
        current: &mut super::Current,
        name: &str,
        pem: &[u8],
    ) -> Result<(), CertError> {
        let bundle = Bundle::parse(pem, Some(crate::tls::now())).map_err(CertError::Invalid)?;
        let next = current.certs.with(name, std::sync::Arc::new(bundle));
        let snapshot = compile_with(&current.doc, &next).map_err(CertError::Apply)?;
        if let Some(dir) = &self.cert_dir {
            dir.save(name, pem).map_err(CertError::Save)?;
        }
        self.server
            .apply(snapshot, false)
            .await
            .map_err(CertError::Apply)?;
        current.certs = next;
        self.server.shared().acme.changed();
        Ok(())
    }

    /// Unit's `DELETE /certificates/NAME`: refused while a listener names the bundle.
    pub async fn delete_certificate(&self, name: &str) -> Result<(), CertError> {
        let mut current = self.current.lock().await;
        if !current.certs.contains(name) {
            return Err(CertError::NotFound);
        }
        let (base, _, _) = current.base();
        if crate::tls::used_names(&current.doc).contains(name)
            || crate::tls::used_names(base).contains(name)
        {
            return Err(CertError::InUse);
        }
        if let Some(fleet) = self.fleet() {
            fleet.delete_certificate(name).await.map_err(fleet_error)?;
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

/// A certificate change the fleet could not take.
fn fleet_error(e: PublishError) -> CertError {
    CertError::Unreachable(e.to_string())
}
