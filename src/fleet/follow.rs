//! Following the fleet's document: each new revision goes through the engine's change path.
//!
//! A node watches the key from the revision after the last one it dealt with (applied or refused), so a node
//! that was away, or restarted from its local copy, catches up with what it missed; of a batch of events only
//! the newest document is applied, since each is whole. When that revision was compacted away, the node reads
//! the key instead. A node that never saw the fleet's document reads it; when the fleet has none yet, the node
//! publishes its own, so the first node of a fleet seeds it.

use etcd_client::{EventType, GetOptions, WatchOptions};
use tokio_util::sync::CancellationToken;

use super::{ConnectError, Fleet, Link, PublishError};
use crate::engine::Engine;

/// Follows the fleet's document until `stop`, reconnecting after each failure.
pub(super) async fn run(fleet: &Fleet, engine: &Engine, stop: &CancellationToken) {
    let failed = |e: ConnectError| {
        let was_connected = fleet.link.borrow().connected;
        if was_connected {
            tracing::warn!(error = %e, "lost etcd; serving the last applied configuration");
        }
        fleet.set_link(Link {
            connected: false,
            error: Some(e.to_string()),
        });
        was_connected
    };
    super::keep_following(stop, || follow(fleet, engine), failed).await;
}

/// Watches until the connection fails; returns why.
async fn follow(fleet: &Fleet, engine: &Engine) -> ConnectError {
    let mut client = match fleet.client().await {
        Ok(c) => c,
        Err(e) => return e,
    };
    let mut from = match engine.fleet_seen().await {
        Some(seen) => seen + 1,
        None => match read(fleet, engine, &mut client).await {
            Ok(next) => next,
            Err(e) => return e,
        },
    };
    loop {
        match watch(fleet, engine, &mut client, from).await {
            Ok(next) => from = next,
            Err(e) => return e,
        }
    }
}

/// One watch from `from` over the document and the certificates: applies what it sees; returns the revision
/// to watch from after a compaction.
async fn watch(
    fleet: &Fleet,
    engine: &Engine,
    client: &mut etcd_client::Client,
    mut from: i64,
) -> Result<i64, ConnectError> {
    let (start, end) = fleet.document_range();
    let options = WatchOptions::new()
        .with_range(end)
        .with_start_revision(from)
        .with_progress_notify();
    let mut stream = client.watch(start, Some(options)).await?;
    fleet.set_link(Link {
        connected: true,
        error: None,
    });
    while let Some(answer) = stream.message().await? {
        if answer.compact_revision() > 0 {
            tracing::info!(
                from,
                compacted = answer.compact_revision(),
                "the revisions this node missed were compacted; reading the fleet's document"
            );
            return read(fleet, engine, client).await;
        }
        if answer.canceled() {
            return Err(ConnectError::Watch(answer.cancel_reason().to_owned()));
        }
        let mut newest = None;
        for event in answer.events() {
            let Some(kv) = event.kv() else { continue };
            from = from.max(kv.mod_revision() + 1);
            // Bundles first, in order: a document names only bundles written before it.
            if let Some(name) = fleet.certificate_name(kv.key()) {
                let pem = (event.event_type() == EventType::Put).then(|| kv.value());
                engine.adopt_certificate(name, pem).await;
            } else if kv.key() == fleet.keys.config.as_bytes() {
                newest = Some((event.event_type(), kv));
            }
        }
        match newest {
            Some((EventType::Put, kv)) => engine.adopt(kv.value(), kv.mod_revision()).await,
            Some((EventType::Delete, _)) => {
                tracing::warn!(
                    "the fleet's document was deleted from etcd; this node puts back the one it serves"
                );
                seed(fleet, engine).await?;
            }
            None => {
                if let Some(h) = answer.header() {
                    from = from.max(h.revision() + 1);
                }
            }
        }
    }
    Err(ConnectError::Watch("etcd ended the watch".to_owned()))
}

/// Reads the fleet's document and certificates (one consistent reading) and applies them if newer than
/// what this node dealt with; seeds the fleet when it has no document. Returns the revision to watch from.
async fn read(
    fleet: &Fleet,
    engine: &Engine,
    client: &mut etcd_client::Client,
) -> Result<i64, ConnectError> {
    loop {
        let (start, end) = fleet.document_range();
        let got = client
            .get(start, Some(GetOptions::new().with_range(end)))
            .await?;
        let now = got.header().map_or(0, |h| h.revision());
        let mut bundles = Vec::new();
        let mut document = None;
        for kv in got.kvs() {
            match fleet.certificate_name(kv.key()) {
                Some(name) => bundles.push((name.to_owned(), kv.value().to_vec())),
                None if kv.key() == fleet.keys.config.as_bytes() => document = Some(kv),
                None => {}
            }
        }
        let Some(kv) = document else {
            if let Some(revision) = seed(fleet, engine).await? {
                return Ok(revision + 1);
            }
            continue;
        };
        engine.adopt_certificates(bundles).await;
        if engine
            .fleet_seen()
            .await
            .is_none_or(|seen| seen < kv.mod_revision())
        {
            engine.adopt(kv.value(), kv.mod_revision()).await;
        }
        return Ok(now + 1);
    }
}

/// Publishes this node's document and certificates as the fleet's first. `None` when another node seeded it
/// first.
async fn seed(fleet: &Fleet, engine: &Engine) -> Result<Option<i64>, ConnectError> {
    for (name, pem) in engine.certificate_pems().await {
        fleet
            .put_certificate(&name, &pem, true)
            .await
            .map_err(|e| ConnectError::Watch(e.to_string()))?;
    }
    match engine.seed_fleet().await {
        Ok(revision) => {
            tracing::info!(
                revision,
                "the fleet had no configuration: published this node's"
            );
            Ok(Some(revision))
        }
        Err(PublishError::Stale { .. }) => Ok(None),
        Err(PublishError::Unreachable(why)) => Err(ConnectError::Watch(why)),
    }
}
