//! The fleet's certificates: each bundle one key, `/rein/NAME/certificates/BUNDLE`, beside the document, so that
//! one watch over both delivers them in the order they were written (a bundle before the document that names
//! it); ACME issuance by one node at a time under an etcd lock.

use std::time::Duration;

use etcd_client::{Compare, CompareOp, LockOptions, Txn, TxnOp};

use super::{ConnectError, Fleet, PublishError};

impl Fleet {
    pub(super) fn certificates_prefix(&self) -> String {
        format!("{}certificates/", self.keys.root)
    }

    fn certificate_key(&self, name: &str) -> String {
        format!("{}{name}", self.certificates_prefix())
    }

    /// The range one watch follows: every certificate and the document (`certificates/` sorts before
    /// `config`, and no other key of the fleet may sort between them: `acme/`, `nodes/`, `orders/` and
    /// `outcomes/` sort outside).
    pub(super) fn document_range(&self) -> (String, String) {
        (
            self.certificates_prefix(),
            format!("{}\0", self.keys.config),
        )
    }

    /// The bundle name of a certificate key.
    pub(super) fn certificate_name<'k>(&self, key: &'k [u8]) -> Option<&'k str> {
        let name = key.strip_prefix(self.certificates_prefix().as_bytes())?;
        std::str::from_utf8(name).ok()
    }

    /// Stores `pem` as the fleet's bundle `name`; `create`: only if the fleet has no bundle by that name.
    /// Whether it was stored (not, when `create` and the name is taken).
    pub(crate) async fn put_certificate(
        &self,
        name: &str,
        pem: &[u8],
        create: bool,
    ) -> Result<bool, PublishError> {
        let key = self.certificate_key(name);
        let unreachable = |e: &dyn std::fmt::Display| PublishError::Unreachable(e.to_string());
        let mut client = self.client().await.map_err(|e| unreachable(&e))?;
        let mut txn = Txn::new();
        if create {
            txn = txn.when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)]);
        }
        let txn = txn.and_then([TxnOp::put(key.as_str(), pem.to_vec(), None)]);
        let answer = client.txn(txn).await.map_err(|e| unreachable(&e))?;
        Ok(answer.succeeded())
    }

    /// Removes the fleet's bundle `name`.
    pub(crate) async fn delete_certificate(&self, name: &str) -> Result<(), PublishError> {
        let mut client = self
            .client()
            .await
            .map_err(|e| PublishError::Unreachable(e.to_string()))?;
        client
            .delete(self.certificate_key(name), None)
            .await
            .map_err(|e| PublishError::Unreachable(e.to_string()))?;
        Ok(())
    }

    /// The fleet's bundle `name`, read from etcd itself: what a node that just took the ACME lock checks, since
    /// a bundle another node issued may not have reached it through the watch yet.
    pub(crate) async fn fetch_certificate(
        &self,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ConnectError> {
        let mut client = self.client().await?;
        let got = client.get(self.certificate_key(name), None).await?;
        Ok(got.kvs().first().map(|kv| kv.value().to_vec()))
    }

    /// Takes the fleet's lock for issuing bundle `name`, held until the returned guard is released or this
    /// node's lease on it ends (a node that dies while issuing lets the next one take over).
    pub(crate) async fn lock_issuance(&self, name: &str) -> Result<IssuanceLock, ConnectError> {
        let mut client = self.client().await?;
        let lease = client.lease_grant(30, None).await?.id();
        let (mut keeper, mut answers) = client.lease_keep_alive(lease).await?;
        let keep = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                if keeper.keep_alive().await.is_err() || answers.message().await.is_err() {
                    return;
                }
            }
        });
        let name = format!("{}acme/locks/{name}", self.keys.root);
        let locked = client
            .lock(name, Some(LockOptions::new().with_lease(lease)))
            .await;
        let key = match locked {
            Ok(l) => l.key().to_vec(),
            Err(e) => {
                keep.abort();
                let _ = client.lease_revoke(lease).await;
                return Err(e.into());
            }
        };
        Ok(IssuanceLock {
            client,
            key,
            lease,
            keep,
        })
    }
}

/// The fleet's ACME lock for one bundle.
pub(crate) struct IssuanceLock {
    client: etcd_client::Client,
    key: Vec<u8>,
    lease: i64,
    keep: tokio::task::JoinHandle<()>,
}

impl IssuanceLock {
    pub(crate) async fn release(mut self) {
        self.keep.abort();
        let _ = self.client.unlock(self.key.clone()).await;
        let _ = self.client.lease_revoke(self.lease).await;
    }
}
