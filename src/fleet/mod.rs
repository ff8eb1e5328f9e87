//! A fleet: many rein nodes serving one configuration kept in etcd.
//!
//! The whole document is one key, `/rein/NAME/config`, so a change is one etcd write and no node ever reads
//! half of one. Every change through a node's control API is a compare-and-swap on the revision of the document
//! that node builds on ([`Fleet::publish`]): `If-Match` holds across the fleet, and of two concurrent writers
//! one gets 412. Each node follows the key ([`follow`]) and hands each new document to the engine's one change
//! path, which also saves it in the node's state directory: with etcd unreachable a node keeps serving, and
//! restarts from, that local copy. Each node reports what it serves under a lease ([`report`]), and any node
//! reads all the reports ([`view`]). A rolling reload goes through etcd too ([`rolling`]).
//!
//! One key rather than one key per field (as Traefik and APISIX keep theirs) is what makes a change atomic,
//! and it makes catching up after an outage one read: only the latest document matters.

mod certificates;
mod challenges;
mod connect;
mod follow;
mod publish;
mod report;
mod rolling;
mod view;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use connect::{ConnectError, Options};
pub(crate) use publish::PublishError;
pub(crate) use report::Report;
pub(crate) use rolling::NodeReload;

use crate::engine::Engine;

/// The keys of one fleet and one node in it.
#[derive(Debug, Clone)]
struct Keys {
    /// `/rein/NAME/`, under which every key of the fleet is.
    root: String,
    config: String,
    nodes: String,
    node: String,
}

impl Keys {
    fn new(fleet: &str, node: &str) -> Keys {
        let root = format!("/rein/{fleet}/");
        Keys {
            config: format!("{root}config"),
            nodes: format!("{root}nodes/"),
            node: format!("{root}nodes/{node}"),
            root,
        }
    }
}

/// Whether this node reaches etcd, and if not, why.
#[derive(Debug, Clone, Default)]
pub(crate) struct Link {
    pub connected: bool,
    pub error: Option<String>,
}

/// This node's membership of a fleet: its connection to etcd and what it reports.
pub struct Fleet {
    options: Options,
    keys: Keys,
    client: tokio::sync::Mutex<Option<etcd_client::Client>>,
    link: watch::Sender<Link>,
    report: watch::Sender<Report>,
}

impl Fleet {
    pub fn new(options: Options) -> Fleet {
        let keys = Keys::new(&options.fleet, &options.node);
        Fleet {
            keys,
            options,
            client: tokio::sync::Mutex::new(None),
            link: watch::Sender::new(Link::default()),
            report: watch::Sender::new(Report::starting()),
        }
    }

    /// The fleet's name.
    pub fn name(&self) -> &str {
        &self.options.fleet
    }

    /// The fleet's document and its revision, if etcd answers within `timeout` and holds one: what a node
    /// starts with, so that it does not start the applications of an older local copy only to replace them.
    pub async fn fetch(
        &self,
        timeout: std::time::Duration,
    ) -> Result<Option<(serde_json::Value, i64)>, ConnectError> {
        let read = async {
            let mut client = self.client().await?;
            let got = client
                .get(self.keys.config.as_str(), None)
                .await
                .map_err(ConnectError::Etcd)?;
            match got.kvs().first() {
                None => Ok(None),
                Some(kv) => {
                    let doc = serde_json::from_slice(kv.value())
                        .map_err(|e| ConnectError::Document(e.to_string()))?;
                    Ok(Some((doc, kv.mod_revision())))
                }
            }
        };
        tokio::time::timeout(timeout, read)
            .await
            .unwrap_or(Err(ConnectError::Timeout))
    }

    /// The connected client, connecting first if no attempt succeeded yet. The client reconnects by itself
    /// once it exists (it balances over every endpoint given).
    async fn client(&self) -> Result<etcd_client::Client, ConnectError> {
        let mut slot = self.client.lock().await;
        if let Some(c) = &*slot {
            return Ok(c.clone());
        }
        let client = self.options.connect().await?;
        *slot = Some(client.clone());
        Ok(client)
    }

    fn set_link(&self, link: Link) {
        self.link.send_if_modified(|old| {
            let changed = old.connected != link.connected || old.error != link.error;
            *old = link;
            changed
        });
    }

    /// Records what this node now serves (or refused), for its report in etcd.
    pub(crate) fn report(&self, edit: impl FnOnce(&mut Report)) {
        self.report.send_modify(|r| {
            edit(r);
            r.touch();
        });
    }
}

/// Runs `follow` (a watch that returns only when it fails, with why) again after each failure until `stop`,
/// pausing between tries from 0.1 s, doubling up to 2 s. `failed` hears each failure, and says whether the
/// pause starts over (the watch had been working).
async fn keep_following<F, Fut>(
    stop: &CancellationToken,
    mut follow: F,
    mut failed: impl FnMut(ConnectError) -> bool,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ConnectError>,
{
    let mut pause = Duration::from_millis(100);
    loop {
        let error = tokio::select! {
            error = follow() => error,
            () = stop.cancelled() => return,
        };
        if failed(error) {
            pause = Duration::from_millis(100);
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = stop.cancelled() => return,
        }
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

/// Follows the fleet's document and reports this node's state until `stop`.
pub fn spawn(
    fleet: Arc<Fleet>,
    engine: Arc<Engine>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let follow = follow::run(&fleet, &engine, &stop);
        let report = report::run(&fleet, &stop);
        let orders = rolling::carry_out(&fleet, &engine, &stop);
        let tokens = challenges::follow(&fleet, &engine, &stop);
        tokio::join!(follow, report, orders, tokens);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet() -> Fleet {
        Fleet::new(Options {
            endpoints: vec!["http://127.0.0.1:2379".to_owned()],
            fleet: "web".to_owned(),
            node: "n1".to_owned(),
            user: None,
            ca: None,
            identity: None,
        })
    }

    #[test]
    fn one_range_holds_the_document_and_the_certificates_and_nothing_else() {
        let fleet = fleet();
        let (start, end) = fleet.document_range();
        let inside = |key: &str| key >= start.as_str() && key < end.as_str();
        assert!(inside("/rein/web/config"));
        assert!(inside("/rein/web/certificates/site"));
        for other in [
            fleet.keys.node.clone(),
            format!("{}orders/n1", fleet.keys.root),
            format!("{}outcomes/n1", fleet.keys.root),
            format!("{}tok", fleet.challenges_prefix()),
            format!("{}acme/locks/site/1", fleet.keys.root),
            format!("{}n1", fleet.acks_prefix("tok")),
            "/rein/web2/config".to_owned(),
            "/rein/we/config".to_owned(),
        ] {
            assert!(!inside(&other), "{other} is in the document's range");
        }
        assert_eq!(
            fleet.certificate_name(b"/rein/web/certificates/site"),
            Some("site")
        );
        assert_eq!(fleet.certificate_name(b"/rein/web/config"), None);
    }
}
