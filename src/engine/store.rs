//! Where the engine keeps the document: the node's state directory and, in a fleet, etcd.
//!
//! Keeping is two steps around the moment a change goes live. [`Store::prepare`] does everything that can be
//! refused: it writes the local copy beside `conf.json` (a full disk refuses the change) and, in a fleet,
//! writes the fleet's document as a compare-and-swap on the revision the change built on (a concurrent writer
//! refuses it). Only then does the engine apply the change, and [`Prepared::commit`] puts the local copy in
//! place. The fleet's write comes before applying so that a writer that loses the race never applies what it
//! then has to undo; a node that fails to apply what the fleet took keeps its previous configuration and
//! reports why, like every other node.

use std::sync::Arc;

use serde_json::Value;

use super::ChangeError;
use crate::fleet::{Fleet, PublishError};
use crate::state::{PendingSave, StateDir, StateError};

/// The state directory, when there is one, and the fleet, when the node is in one.
pub struct Store {
    local: Option<StateDir>,
    fleet: Option<Arc<Fleet>>,
}

/// A change written where it is kept, not yet in place locally.
pub(super) struct Prepared<'a> {
    local: Option<PendingSave<'a>>,
    /// The fleet's revision of the document, when it is the fleet's.
    pub revision: Option<i64>,
    fleet_name: Option<&'a str>,
}

impl Store {
    /// Nowhere: the document lives in memory only.
    #[cfg(test)]
    pub fn none() -> Store {
        Store {
            local: None,
            fleet: None,
        }
    }

    /// The state directory alone.
    pub fn local(state: StateDir) -> Store {
        Store {
            local: Some(state),
            fleet: None,
        }
    }

    /// A fleet's etcd, with the state directory as the node's own copy.
    pub fn fleet(state: StateDir, fleet: Arc<Fleet>) -> Store {
        Store {
            local: Some(state),
            fleet: Some(fleet),
        }
    }

    pub(super) fn state(&self) -> Option<&StateDir> {
        self.local.as_ref()
    }

    pub(super) fn in_fleet(&self) -> Option<&Fleet> {
        self.fleet.as_deref()
    }

    /// Writes `doc` everywhere it is kept but in place locally. `publish`: the change is this node's, so the
    /// fleet takes it if its document is still at `base`; otherwise the change came from the fleet (or is the
    /// first document) and `base` is its revision. `startup`: a local copy that cannot be written is logged,
    /// not refused, as the first document must be served.
    pub(super) async fn prepare(
        &self,
        doc: &Value,
        base: Option<i64>,
        publish: bool,
        startup: bool,
    ) -> Result<Prepared<'_>, ChangeError> {
        let local = match &self.local {
            Some(state) => match state.prepare(doc) {
                Ok(pending) => Some(pending),
                Err(e) if startup => {
                    tracing::error!(error = %e, "serving the configuration without saving it: changes will be refused until the state directory can be written");
                    None
                }
                Err(e) => return Err(e.into()),
            },
            None => None,
        };
        let revision = match &self.fleet {
            Some(fleet) if publish => {
                Some(fleet.publish(doc, base).await.map_err(|e| match e {
                    PublishError::Stale { current } => ChangeError::Stale { current },
                    PublishError::Unreachable(why) => ChangeError::Unreachable(why),
                })?)
            }
            _ => base,
        };
        Ok(Prepared {
            local,
            revision,
            fleet_name: self.fleet.as_deref().map(Fleet::name),
        })
    }
}

impl Prepared<'_> {
    /// Puts the local copy in place, with the fleet revision it is, so that a restart catches up from there.
    pub(super) fn commit(self) -> Result<(), StateError> {
        let Some(local) = self.local else {
            return Ok(());
        };
        let state = local.state();
        local.commit()?;
        if let (Some(fleet), Some(revision)) = (self.fleet_name, self.revision)
            && let Err(e) = state.save_revision(fleet, revision)
        {
            // The document is in place; an older revision on record only makes a restart replay more.
            tracing::warn!(error = %e, "cannot record the fleet revision of the saved configuration");
        }
        Ok(())
    }
}
