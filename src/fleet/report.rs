//! This node's report in etcd, `/rein/NAME/nodes/NODE`: what it serves, under a lease, so that a node that
//! stops or loses etcd leaves the fleet view within the lease's time.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{ConnectError, Fleet};

/// How long a node's report outlives its last keep-alive.
const LEASE_TTL: i64 = 10;

/// What a node says about itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Report {
    /// The fleet revision of the document it serves (`None` before it served one of the fleet's).
    pub revision: Option<i64>,
    /// How many documents it applied since it started.
    pub generation: u64,
    /// The ETag of the document it serves.
    pub etag: String,
    /// The newer fleet revision it could not apply, and why.
    pub refused: Option<i64>,
    pub error: Option<String>,
    pub host: String,
    pub pid: u32,
    pub version: String,
    /// When the report last changed, in seconds since the epoch.
    pub updated: f64,
}

impl Report {
    pub(super) fn starting() -> Report {
        Report {
            revision: None,
            generation: 0,
            etag: String::new(),
            refused: None,
            error: None,
            host: nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            updated: 0.0,
        }
    }

    pub(super) fn touch(&mut self) {
        self.updated = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
    }

    /// Whether the node has dealt with `revision`: applied it (or a later one), or refused it.
    pub(crate) fn handled(&self, revision: i64) -> bool {
        self.revision.is_some_and(|r| r >= revision) || self.refused.is_some_and(|r| r >= revision)
    }
}

/// Keeps this node's report in etcd until `stop`, then withdraws it.
pub(super) async fn run(fleet: &Fleet, stop: &CancellationToken) {
    let mut pause = Duration::from_millis(100);
    while !stop.is_cancelled() {
        match hold(fleet, stop).await {
            Ok(()) => return,
            Err(e) => {
                tracing::debug!(error = %e, "cannot keep this node's report in etcd");
            }
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = stop.cancelled() => return,
        }
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

/// One lease: writes the report on each change, keeps the lease alive, revokes it on `stop`.
async fn hold(fleet: &Fleet, stop: &CancellationToken) -> Result<(), ConnectError> {
    let mut client = fleet.client().await?;
    let lease = client.lease_grant(LEASE_TTL, None).await?.id();
    let (mut keeper, mut answers) = client.lease_keep_alive(lease).await?;
    let mut reports = fleet.report.subscribe();
    let put = |client: &mut etcd_client::Client, report: &Report| {
        let text = serde_json::to_vec(report).unwrap_or_default();
        let options = etcd_client::PutOptions::new().with_lease(lease);
        let key = fleet.keys.node.clone();
        let mut client = client.clone();
        async move { client.put(key, text, Some(options)).await }
    };
    let first = reports.borrow_and_update().clone();
    put(&mut client, &first).await?;
    let mut tick = tokio::time::interval(Duration::from_secs((LEASE_TTL / 3) as u64));
    loop {
        tokio::select! {
            changed = reports.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
                let report = reports.borrow_and_update().clone();
                put(&mut client, &report).await?;
            }
            _ = tick.tick() => {
                keeper.keep_alive().await?;
                match answers.message().await? {
                    Some(a) if a.ttl() > 0 => {}
                    // The lease expired while etcd was away: a new one, and the report again.
                    _ => return Err(ConnectError::LeaseExpired),
                }
            }
            () = stop.cancelled() => {
                let _ = client.lease_revoke(lease).await;
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Report;

    #[test]
    fn a_revision_is_handled_once_applied_or_refused() {
        let mut r = Report::starting();
        assert!(!r.handled(5));
        r.revision = Some(4);
        assert!(!r.handled(5));
        r.refused = Some(5);
        assert!(r.handled(5));
        r.refused = None;
        r.revision = Some(6);
        assert!(r.handled(5));
    }
}
