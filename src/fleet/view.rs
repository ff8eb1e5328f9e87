//! The fleet view: every live node's report beside the fleet's revision, read from etcd by any node.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{GetOptions, WatchOptions};
use serde_json::{Value, json};

use super::{ConnectError, Fleet, Report};

/// How long a read of the view waits for etcd before answering with this node's own report alone.
const READ_TIMEOUT: Duration = Duration::from_secs(3);

/// The fleet's revision and the live nodes' reports, as etcd holds them.
pub(super) struct Reading {
    revision: Option<i64>,
    pub(super) nodes: BTreeMap<String, Report>,
    /// etcd's revision when it was read: where a watch for what comes next starts.
    now: i64,
}

/// What became of one write across the fleet.
#[derive(Debug, Default)]
pub(crate) struct Spread {
    pub applied: Vec<String>,
    pub refused: BTreeMap<String, String>,
    pub pending: Vec<String>,
}

impl Spread {
    /// The `"fleet"` member of a write's answer with `?wait=fleet`.
    pub(crate) fn to_json(&self, revision: i64) -> Value {
        json!({
            "revision": revision,
            "applied": self.applied,
            "refused": self.refused,
            "pending": self.pending,
        })
    }
}

impl Fleet {
    /// `GET /fleet`: which nodes are live, which revision each serves, which diverge and why.
    pub(crate) async fn view(&self) -> Value {
        let link = self.link.borrow().clone();
        let mut etcd = json!({"connected": link.connected, "error": link.error});
        let reading = match tokio::time::timeout(READ_TIMEOUT, self.read_again()).await {
            Ok(Ok(r)) => Some(r),
            Ok(Err(e)) => {
                etcd["error"] = json!(e.to_string());
                None
            }
            Err(_) => {
                etcd["error"] = json!(ConnectError::Timeout.to_string());
                None
            }
        };
        // Without etcd, this node still says what it serves.
        let (revision, nodes) = match reading {
            Some(r) => (r.revision, r.nodes),
            None => {
                let own = self.report.borrow().clone();
                (None, BTreeMap::from([(self.options.node.clone(), own)]))
            }
        };
        let nodes: serde_json::Map<String, Value> = nodes
            .into_iter()
            .map(|(name, report)| {
                let applied =
                    revision.is_some() && report.revision == revision && report.error.is_none();
                let mut v = serde_json::to_value(&report).unwrap_or_default();
                v["live"] = json!(true);
                v["applied"] = json!(applied);
                (name, v)
            })
            .collect();
        json!({
            "name": self.options.fleet,
            "node": self.options.node,
            "etcd": etcd,
            "revision": revision,
            "nodes": nodes,
        })
    }

    /// [`Fleet::read`], once more after a failure: the first request may have gone to a member that just died.
    async fn read_again(&self) -> Result<Reading, ConnectError> {
        match tokio::time::timeout(READ_TIMEOUT / 2, self.read()).await {
            Ok(Ok(reading)) => Ok(reading),
            _ => self.read().await,
        }
    }

    pub(super) async fn read(&self) -> Result<Reading, ConnectError> {
        let mut client = self.client().await?;
        let config = client.get(self.keys.config.as_str(), None).await?;
        let revision = config
            .kvs()
            .first()
            .map(etcd_client::KeyValue::mod_revision);
        let listed = client
            .get(
                self.keys.nodes.as_str(),
                Some(GetOptions::new().with_prefix()),
            )
            .await?;
        let now = listed.header().map_or(0, |h| h.revision());
        let nodes = listed
            .kvs()
            .iter()
            .filter_map(|kv| {
                Some((
                    self.node_name(kv.key())?,
                    serde_json::from_slice(kv.value()).ok()?,
                ))
            })
            .collect();
        Ok(Reading {
            revision,
            nodes,
            now,
        })
    }

    fn node_name(&self, key: &[u8]) -> Option<String> {
        let name = key.strip_prefix(self.keys.nodes.as_bytes())?;
        String::from_utf8(name.to_vec()).ok()
    }

    /// Waits until every live node applied or refused `revision`, or `timeout` passed; says which did what.
    pub(crate) async fn spread(&self, revision: i64, timeout: Duration) -> Spread {
        let mut nodes = BTreeMap::new();
        let waited = tokio::time::timeout(timeout, self.wait_handled(revision, &mut nodes)).await;
        if let Ok(Err(e)) = waited {
            tracing::debug!(error = %e, "cannot follow the fleet's nodes");
        }
        let mut spread = Spread::default();
        for (name, report) in nodes {
            if report.revision.is_some_and(|r| r >= revision)
                && report.refused.is_none_or(|r| r < revision)
            {
                spread.applied.push(name);
            } else if report.refused.is_some_and(|r| r >= revision) {
                let why = report.error.unwrap_or_default();
                spread.refused.insert(name, why);
            } else {
                spread.pending.push(name);
            }
        }
        spread
    }

    /// Fills `nodes` with the live nodes' reports, as they change, until each handled `revision`. The watch
    /// is opened before the reading, from "now": one started at a past revision may lag (etcd catches such
    /// watchers up only every 100 ms); the events the reading already holds are skipped.
    async fn wait_handled(
        &self,
        revision: i64,
        nodes: &mut BTreeMap<String, Report>,
    ) -> Result<(), ConnectError> {
        let mut client = self.client().await?;
        let options = WatchOptions::new().with_prefix();
        let mut stream = client
            .watch(self.keys.nodes.as_str(), Some(options))
            .await?;
        let reading = self.read().await?;
        *nodes = reading.nodes;
        if nodes.values().all(|r| r.handled(revision)) {
            return Ok(());
        }
        while let Some(answer) = stream.message().await? {
            for event in answer.events() {
                let Some(kv) = event.kv() else { continue };
                let Some(name) = self.node_name(kv.key()) else {
                    continue;
                };
                if kv.mod_revision() != 0 && kv.mod_revision() <= reading.now {
                    continue;
                }
                match (
                    event.event_type(),
                    serde_json::from_slice::<Report>(kv.value()),
                ) {
                    (etcd_client::EventType::Put, Ok(report)) => {
                        nodes.insert(name, report);
                    }
                    _ => {
                        nodes.remove(&name);
                    }
                }
            }
            if nodes.values().all(|r| r.handled(revision)) {
                return Ok(());
            }
        }
        Err(ConnectError::Watch("etcd ended the watch".to_owned()))
    }
}
