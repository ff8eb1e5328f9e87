//! ACME HTTP-01 tokens shared by the fleet: the node that orders a certificate puts each token under
//! `/rein/NAME/acme/challenges/TOKEN`, and every node answers it, since the CA reaches whichever node the load
//! balancer sends it to. Each node acknowledges a token it answers (`/rein/NAME/acme/acks/TOKEN/NODE`), and the
//! ordering node tells the CA to look only once every live node did (or a few seconds passed): a node whose
//! watch is late would otherwise route the CA's request as any other and fail the order.

use std::time::Duration;

use etcd_client::{EventType, GetOptions, PutOptions, WatchOptions};
use tokio_util::sync::CancellationToken;

use super::{ConnectError, Fleet};
use crate::engine::Engine;

/// How long a shared token outlives a node that died while the CA was validating it.
const CHALLENGE_TTL: i64 = 300;

/// How long the ordering node waits for every live node to answer a token before the CA looks anyway.
const ACK_WAIT: Duration = Duration::from_secs(5);

impl Fleet {
    /// Shares an HTTP-01 token with every node and waits until every live node answers it, or withdraws it
    /// (`None`).
    pub(crate) async fn share_challenge(&self, token: &str, key_authorization: Option<&str>) {
        let key = format!("{}{token}", self.challenges_prefix());
        let shared = async {
            let mut client = self.client().await?;
            match key_authorization {
                Some(ka) => {
                    // Watched from before the token is put, so that no acknowledgement comes before the watch.
                    let acks = self.acks_prefix(token);
                    let options = WatchOptions::new().with_prefix();
                    let mut stream = client.watch(acks.as_str(), Some(options)).await?;
                    let lease = client.lease_grant(CHALLENGE_TTL, None).await?.id();
                    let options = PutOptions::new().with_lease(lease);
                    client.put(key, ka, Some(options)).await?;
                    let waited =
                        tokio::time::timeout(ACK_WAIT, self.wait_acks(&acks, &mut stream)).await;
                    if !matches!(waited, Ok(Ok(()))) {
                        tracing::warn!(
                            token,
                            "not every node of the fleet acknowledged the ACME token in time; the CA looks anyway"
                        );
                    }
                }
                None => {
                    client.delete(key, None).await?;
                    let acks = self.acks_prefix(token);
                    client
                        .delete(acks, Some(etcd_client::DeleteOptions::new().with_prefix()))
                        .await?;
                }
            }
            Ok::<(), ConnectError>(())
        };
        if let Err(e) = shared.await {
            tracing::warn!(error = %e, "cannot share an ACME HTTP-01 token with the fleet");
        }
    }

    /// Returns once every live node acknowledged the token whose acknowledgements are under `acks`.
    async fn wait_acks(
        &self,
        acks: &str,
        stream: &mut etcd_client::WatchStream,
    ) -> Result<(), ConnectError> {
        let mut client = self.client().await?;
        let live: Vec<String> = self.read().await?.nodes.into_keys().collect();
        let got = client
            .get(acks, Some(GetOptions::new().with_prefix()))
            .await?;
        let mut acked: Vec<String> = got
            .kvs()
            .iter()
            .filter_map(|kv| node_of(acks, kv.key()))
            .collect();
        while !live.iter().all(|n| acked.contains(n)) {
            let Some(answer) = stream.message().await? else {
                return Err(ConnectError::Watch("etcd ended the watch".to_owned()));
            };
            let put = answer
                .events()
                .iter()
                .filter(|e| e.event_type() == EventType::Put);
            acked.extend(put.filter_map(|e| node_of(acks, e.kv()?.key())));
        }
        Ok(())
    }

    pub(super) fn challenges_prefix(&self) -> String {
        format!("{}acme/challenges/", self.keys.root)
    }

    pub(super) fn acks_prefix(&self, token: &str) -> String {
        format!("{}acme/acks/{token}/", self.keys.root)
    }
}

/// Answers the fleet's tokens on this node's listeners until `stop`.
pub(super) async fn follow(fleet: &Fleet, engine: &Engine, stop: &CancellationToken) {
    let failed = |e: ConnectError| {
        tracing::debug!(error = %e, "lost the fleet's ACME tokens; following them again");
        false
    };
    super::keep_following(stop, || mirror(fleet, engine), failed).await;
}

/// Reads the tokens, then follows them; returns why it stopped.
async fn mirror(fleet: &Fleet, engine: &Engine) -> ConnectError {
    let acme = &engine.server().shared().acme;
    let run = async {
        let mut client = fleet.client().await?;
        let prefix = fleet.challenges_prefix();
        let got = client
            .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
            .await?;
        for kv in got.kvs() {
            if let (Some(token), Ok(ka)) = (token(&prefix, kv.key()), kv.value_str()) {
                acme.mirror_challenge(token, Some(ka));
                acknowledge(fleet, &mut client, token, kv.lease()).await?;
            }
        }
        let now = got.header().map_or(0, |h| h.revision());
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(now + 1);
        let mut stream = client.watch(prefix.as_str(), Some(options)).await?;
        while let Some(answer) = stream.message().await? {
            for event in answer.events() {
                let Some(kv) = event.kv() else { continue };
                let Some(token) = token(&prefix, kv.key()) else {
                    continue;
                };
                match event.event_type() {
                    EventType::Put => {
                        acme.mirror_challenge(token, kv.value_str().ok());
                        acknowledge(fleet, &mut client, token, kv.lease()).await?;
                    }
                    EventType::Delete => acme.mirror_challenge(token, None),
                }
            }
        }
        Ok::<(), ConnectError>(())
    };
    match run.await {
        Err(e) => e,
        Ok(()) => ConnectError::Watch("etcd ended the watch".to_owned()),
    }
}

/// Says the token is answered here, under the token's own lease (it goes when the token does).
async fn acknowledge(
    fleet: &Fleet,
    client: &mut etcd_client::Client,
    token: &str,
    lease: i64,
) -> Result<(), ConnectError> {
    let key = format!("{}{}", fleet.acks_prefix(token), fleet.options.node);
    let options = (lease != 0).then(|| PutOptions::new().with_lease(lease));
    client.put(key, "", options).await?;
    Ok(())
}

/// The node an acknowledgement key under `acks` is from.
fn node_of(acks: &str, key: &[u8]) -> Option<String> {
    let node = key.strip_prefix(acks.as_bytes())?;
    String::from_utf8(node.to_vec()).ok()
}

fn token<'k>(prefix: &str, key: &'k [u8]) -> Option<&'k str> {
    std::str::from_utf8(key.strip_prefix(prefix.as_bytes())?).ok()
}
