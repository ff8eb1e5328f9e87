//! A rolling reload across the fleet: one batch of nodes at a time, each node's reload zero-failure as a
//! local one (new instances serve before the old ones stop).
//!
//! The node asked coordinates: it puts an order under each node of the batch (`/rein/NAME/orders/NODE`) and
//! waits for each node's outcome (`/rein/NAME/outcomes/NODE`) before the next batch. A node that fails (or
//! does not answer in time) stops the roll: the nodes after it keep their instances. Every node carries out
//! the orders addressed to it ([`carry_out`]).

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{EventType, GetOptions, WatchOptions};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{ConnectError, Fleet};
use crate::engine::Engine;

/// How long one node's reload may take before the roll stops.
const NODE_DEADLINE: Duration = Duration::from_secs(120);

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    id: String,
    app: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Outcome {
    id: String,
    error: Option<String>,
}

/// What became of the roll on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NodeReload {
    Reloaded,
    Failed(String),
    /// Not reached: an earlier node failed.
    Skipped,
}

impl Fleet {
    fn order_key(&self, node: &str) -> String {
        format!("{}orders/{node}", self.keys.root)
    }

    fn outcomes(&self) -> String {
        format!("{}outcomes/", self.keys.root)
    }

    /// Reloads `app` on every live node, `batch` nodes at a time, in the order of their names.
    pub(crate) async fn rolling_reload(
        &self,
        app: &str,
        batch: usize,
    ) -> Result<BTreeMap<String, NodeReload>, ConnectError> {
        let nodes: Vec<String> = self.read().await?.nodes.into_keys().collect();
        let mut done = BTreeMap::new();
        for group in nodes.chunks(batch.max(1)) {
            if done.values().any(|r| matches!(r, NodeReload::Failed(_))) {
                done.extend(group.iter().map(|n| (n.clone(), NodeReload::Skipped)));
                continue;
            }
            done.extend(self.reload_batch(app, group).await?);
        }
        Ok(done)
    }

    /// Orders `nodes` to reload `app` and waits for each one's outcome.
    async fn reload_batch(
        &self,
        app: &str,
        nodes: &[String],
    ) -> Result<BTreeMap<String, NodeReload>, ConnectError> {
        let mut client = self.client().await?;
        let id = order_id();
        // Watched from before the orders, so that no outcome can come before the watch.
        let now = client
            .get(self.outcomes(), Some(GetOptions::new().with_count_only()))
            .await?
            .header()
            .map_or(0, |h| h.revision());
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(now + 1);
        let mut outcomes = client.watch(self.outcomes(), Some(options)).await?;
        let order = serde_json::to_vec(&Order {
            id: id.clone(),
            app: app.to_owned(),
        })
        .unwrap_or_default();
        for node in nodes {
            client
                .put(self.order_key(node), order.clone(), None)
                .await?;
        }
        let mut results: BTreeMap<String, NodeReload> = BTreeMap::new();
        let wait = async {
            while let Some(answer) = outcomes.message().await? {
                for event in answer
                    .events()
                    .iter()
                    .filter(|e| e.event_type() == EventType::Put)
                {
                    let Some(kv) = event.kv() else { continue };
                    let node = kv.key().strip_prefix(self.outcomes().as_bytes());
                    let node = node.and_then(|n| std::str::from_utf8(n).ok());
                    let outcome = serde_json::from_slice::<Outcome>(kv.value()).ok();
                    if let (Some(node), Some(outcome)) = (node, outcome)
                        && outcome.id == id
                    {
                        let result = outcome
                            .error
                            .map_or(NodeReload::Reloaded, NodeReload::Failed);
                        results.insert(node.to_owned(), result);
                    }
                }
                if results.len() == nodes.len() {
                    return Ok(());
                }
            }
            Err(ConnectError::Watch("etcd ended the watch".to_owned()))
        };
        let waited = tokio::time::timeout(NODE_DEADLINE, wait).await;
        if let Ok(Err(e)) = waited {
            return Err(e);
        }
        for node in nodes {
            results.entry(node.clone()).or_insert_with(|| {
                NodeReload::Failed("the node did not answer in time".to_owned())
            });
        }
        Ok(results)
    }
}

/// A name no other order shares.
fn order_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos}-{n}", std::process::id())
}

/// Carries out the orders addressed to this node until `stop`, reconnecting after each failure.
pub(super) async fn carry_out(fleet: &Fleet, engine: &Engine, stop: &CancellationToken) {
    let failed = |e: ConnectError| {
        tracing::debug!(error = %e, "lost the fleet's orders; following them again");
        false
    };
    super::keep_following(stop, || follow_orders(fleet, engine), failed).await;
}

/// Watches this node's order key from now: orders given while the node was away are not carried out late.
async fn follow_orders(fleet: &Fleet, engine: &Engine) -> ConnectError {
    let run = async {
        let mut client = fleet.client().await?;
        let key = fleet.order_key(&fleet.options.node);
        let mut orders = client.watch(key, None).await?;
        while let Some(answer) = orders.message().await? {
            for event in answer
                .events()
                .iter()
                .filter(|e| e.event_type() == EventType::Put)
            {
                let Some(order) = event
                    .kv()
                    .and_then(|kv| serde_json::from_slice::<Order>(kv.value()).ok())
                else {
                    continue;
                };
                let error = reload(engine, &order.app).await;
                let outcome = serde_json::to_vec(&Outcome {
                    id: order.id,
                    error,
                })
                .unwrap_or_default();
                let key = format!("{}{}", fleet.outcomes(), fleet.options.node);
                client.put(key, outcome, None).await?;
            }
        }
        Err::<(), _>(ConnectError::Watch("etcd ended the watch".to_owned()))
    };
    match run.await {
        Err(e) => e,
        Ok(()) => ConnectError::Watch("etcd ended the watch".to_owned()),
    }
}

/// This node's part of a roll: the same reload as `GET /control/applications/NAME/restart`.
async fn reload(engine: &Engine, app: &str) -> Option<String> {
    let Some(supervisor) = engine.server().supervisor() else {
        return Some("this node runs no applications".to_owned());
    };
    tracing::info!(
        application = app,
        "reloading for the fleet's rolling reload"
    );
    match supervisor.restart(app).await {
        None => Some(format!("no application \"{app}\" on this node")),
        Some(report) if report.ok => None,
        Some(report) => Some(report.reason.unwrap_or_else(|| {
            "the reload failed; the previous instances keep serving".to_owned()
        })),
    }
}
