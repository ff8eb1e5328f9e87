//! Writing the fleet's document: one compare-and-swap on the revision the writer built on.

use std::time::Duration;

use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnOpResponse};
use serde_json::Value;

use super::Fleet;

/// Why the fleet's document was not written; nothing changed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PublishError {
    /// Another node wrote first: the writer built on an older document.
    #[error("the fleet's configuration changed since this node read it (ETag {current})")]
    Stale { current: String },
    #[error("etcd is unreachable, so the fleet's configuration cannot change: {0}")]
    Unreachable(String),
}

/// How long a write keeps trying while etcd elects a leader or a member is down.
const WRITE_DEADLINE: Duration = Duration::from_secs(6);
/// How long it tries when this node has already lost etcd: the client is told soon that nothing changed.
const WRITE_DEADLINE_UNLINKED: Duration = Duration::from_secs(1);
/// How long one attempt may take: a request sent to a member that just died waits for nothing, and is sent
/// again (to a member that answers) rather than waiting out the connection's own timeout. An attempt that
/// landed without its answer is recognised by the next one.
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(1500);

impl Fleet {
    /// Writes `doc` as the fleet's document if the key is still at `base` (its mod revision; `None`: the fleet
    /// has no document yet). Returns the new revision.
    pub(crate) async fn publish(
        &self,
        doc: &Value,
        base: Option<i64>,
    ) -> Result<i64, PublishError> {
        let text = serde_json::to_vec(doc).map_err(|e| PublishError::Unreachable(e.to_string()))?;
        let patience = if self.link.borrow().connected {
            WRITE_DEADLINE
        } else {
            WRITE_DEADLINE_UNLINKED
        };
        let deadline = tokio::time::Instant::now() + patience;
        let mut pause = Duration::from_millis(50);
        let mut retried = false;
        loop {
            let attempt =
                tokio::time::timeout(ATTEMPT_TIMEOUT, self.try_publish(&text, base, retried));
            let outcome = attempt.await.unwrap_or_else(|_| {
                Err(PublishError::Unreachable(
                    "etcd did not answer in time".to_owned(),
                ))
            });
            match outcome {
                Err(PublishError::Unreachable(why))
                    if tokio::time::Instant::now() + pause < deadline =>
                {
                    tracing::debug!(error = %why, "etcd refused a write; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(800));
                    retried = true;
                }
                result => return result,
            }
        }
    }

    /// One attempt; `retried`: an earlier attempt may have landed without its answer reaching this node.
    async fn try_publish(
        &self,
        text: &[u8],
        base: Option<i64>,
        retried: bool,
    ) -> Result<i64, PublishError> {
        let key = self.keys.config.as_str();
        let unreachable = |e: &dyn std::fmt::Display| PublishError::Unreachable(e.to_string());
        let mut client = self.client().await.map_err(|e| unreachable(&e))?;
        let unchanged = match base {
            Some(revision) => Compare::mod_revision(key, CompareOp::Equal, revision),
            None => Compare::create_revision(key, CompareOp::Equal, 0),
        };
        let txn = Txn::new()
            .when([unchanged])
            .and_then([TxnOp::put(key, text.to_vec(), None)])
            .or_else([TxnOp::get(key, None)]);
        let answer = client.txn(txn).await.map_err(|e| unreachable(&e))?;
        if answer.succeeded() {
            return answer
                .header()
                .map(|h| h.revision())
                .ok_or_else(|| unreachable(&"etcd's answer has no revision"));
        }
        let current = answer.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(got) => got.kvs().first().cloned(),
            _ => None,
        });
        // A retried write whose first attempt landed (its answer lost) finds its own document.
        if let Some(kv) = current.as_ref().filter(|kv| retried && kv.value() == text) {
            return Ok(kv.mod_revision());
        }
        let current = current
            .and_then(|kv| serde_json::from_slice::<Value>(kv.value()).ok())
            .unwrap_or_default();
        Err(PublishError::Stale {
            current: crate::engine::etag(&current),
        })
    }
}
