//! ACME HTTP-01 tokens shared by the fleet: the node that orders a certificate puts each token under
//! `/rein/NAME/acme/challenges/TOKEN`, and every node answers it, since the CA reaches whichever node the load
//! balancer sends it to.

use std::time::Duration;

use etcd_client::{EventType, GetOptions, PutOptions, WatchOptions};
use tokio_util::sync::CancellationToken;

use super::{ConnectError, Fleet};
use crate::engine::Engine;

/// How long a shared token outlives a node that died while the CA was validating it.
const CHALLENGE_TTL: i64 = 300;

impl Fleet {
    /// Shares an HTTP-01 token with every node, or withdraws it (`None`).
    pub(crate) async fn share_challenge(&self, token: &str, key_authorization: Option<&str>) {
        let key = format!("{}{token}", self.challenges_prefix());
        let shared = async {
            let mut client = self.client().await?;
            match key_authorization {
                Some(ka) => {
                    let lease = client.lease_grant(CHALLENGE_TTL, None).await?.id();
                    let options = PutOptions::new().with_lease(lease);
                    client.put(key, ka, Some(options)).await?;
                }
                None => {
                    client.delete(key, None).await?;
                }
            }
            Ok::<(), ConnectError>(())
        };
        if let Err(e) = shared.await {
            tracing::warn!(error = %e, "cannot share an ACME HTTP-01 token with the fleet");
        }
    }

    pub(super) fn challenges_prefix(&self) -> String {
        format!("{}acme/challenges/", self.keys.root)
    }
}

/// Answers the fleet's tokens on this node's listeners until `stop`.
pub(super) async fn follow(fleet: &Fleet, engine: &Engine, stop: &CancellationToken) {
    let mut pause = Duration::from_millis(100);
    loop {
        let failed = tokio::select! {
            failed = mirror(fleet, engine) => failed,
            () = stop.cancelled() => return,
        };
        tracing::debug!(error = %failed, "lost the fleet's ACME tokens; following them again");
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = stop.cancelled() => return,
        }
        pause = (pause * 2).min(Duration::from_secs(2));
    }
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
                    EventType::Put => acme.mirror_challenge(token, kv.value_str().ok()),
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

fn token<'k>(prefix: &str, key: &'k [u8]) -> Option<&'k str> {
    std::str::from_utf8(key.strip_prefix(prefix.as_bytes())?).ok()
}
