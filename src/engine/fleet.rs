//! The engine's side of a fleet: documents from the fleet's watch, the fleet's first document, and this
//! node's report of what it serves.

use serde_json::Value;

use super::{ChangeError, ChangeOptions, Current, Desired, Engine, etag};
use crate::fleet::PublishError;
use crate::history::Source;

impl Engine {
    /// The fleet this node is in, if any.
    pub(crate) fn fleet(&self) -> Option<&crate::fleet::Fleet> {
        self.store.in_fleet()
    }

    /// The newest fleet revision this node dealt with, applied or refused; `None` before any.
    pub(crate) async fn fleet_seen(&self) -> Option<i64> {
        let current = self.current.lock().await;
        let refused = current.desired.as_ref().map(|d| d.revision);
        current.revision.max(refused)
    }

    /// Applies the fleet's document at `revision` through the one change path, unless this node already dealt
    /// with it (its own write, seen again by the watch). A document that does not parse, compile or apply
    /// leaves the running configuration as it was, and the node's report says why.
    pub(crate) async fn adopt(&self, text: &[u8], revision: i64) {
        if self.fleet_seen().await.is_some_and(|seen| seen >= revision) {
            return;
        }
        let doc: Value = match serde_json::from_slice(text) {
            Ok(doc) => doc,
            Err(e) => {
                let mut current = self.current.lock().await;
                let why = format!("the fleet's document is not valid JSON: {e}");
                self.refuse(&mut current, Value::Null, revision, why);
                return;
            }
        };
        let opts = ChangeOptions {
            adopt: Some(revision),
            ..ChangeOptions::default()
        };
        let kept = doc.clone();
        match self.replace(Source::Fleet, doc, opts).await {
            Ok(_) => tracing::info!(revision, "applied the fleet's configuration"),
            Err(e) => {
                log_refusal(revision, &e);
                // A refusal the change path did not record (the local copy could not be written).
                let mut current = self.current.lock().await;
                if current
                    .revision
                    .max(current.desired.as_ref().map(|d| d.revision))
                    < Some(revision)
                {
                    self.refuse(&mut current, kept, revision, e.to_string());
                }
            }
        }
    }

    /// Reads the fleet's newest document from etcd and applies it, without waiting for the watch: what a
    /// change that lost the compare-and-swap builds on next.
    pub(super) async fn catch_up(&self) {
        let Some(fleet) = self.fleet() else { return };
        match fleet.fetch(std::time::Duration::from_secs(3)).await {
            Ok(Some((doc, revision))) => {
                let text = serde_json::to_vec(&doc).unwrap_or_default();
                self.adopt(&text, revision).await;
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(error = %e, "cannot read the fleet's newest document"),
        }
    }

    /// Publishes the running document as the fleet's first; the fleet had none.
    pub(crate) async fn seed_fleet(&self) -> Result<i64, PublishError> {
        let mut current = self.current.lock().await;
        let Some(fleet) = self.store.in_fleet() else {
            return Err(PublishError::Unreachable("not in a fleet".to_owned()));
        };
        let revision = fleet.publish(&current.doc, None).await?;
        if let Some(state) = self.store.state()
            && let Err(e) = state.save_revision(fleet.name(), revision)
        {
            tracing::warn!(error = %e, "cannot record the fleet revision of the saved configuration");
        }
        current.revision = Some(revision);
        self.report(&current);
        Ok(revision)
    }

    /// Remembers the fleet's document at `revision` as refused, with why.
    pub(super) fn refuse(&self, current: &mut Current, doc: Value, revision: i64, error: String) {
        current.desired = Some(Desired {
            etag: etag(&doc),
            doc,
            revision,
            error,
        });
        self.report(current);
    }

    /// Tells the fleet what this node serves now.
    pub(super) fn report(&self, current: &Current) {
        let Some(fleet) = self.store.in_fleet() else {
            return;
        };
        fleet.report(|r| {
            r.revision = current.revision;
            r.generation = current.generation;
            r.etag = current.etag.clone();
            r.refused = current.desired.as_ref().map(|d| d.revision);
            r.error = current.desired.as_ref().map(|d| d.error.clone());
        });
    }
}

fn log_refusal(revision: i64, error: &ChangeError) {
    tracing::error!(revision, error = %error, "cannot apply the fleet's configuration; serving the previous one");
}
