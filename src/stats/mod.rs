//! One home for what rein counts: live counters ([`counters`]), the typed snapshot of `/status`
//! ([`snapshot`]) each owner fills, and its two renderings: Unit's `/status` JSON ([`status`]) and the
//! Prometheus text format ([`prometheus`]).

pub(crate) mod counters;
pub(crate) mod process;
pub(crate) mod prometheus;
pub(crate) mod snapshot;
pub(crate) mod status;

use crate::engine::Engine;
pub(crate) use counters::registry;
use counters::{AppTotals, ListenerTotals, TargetTotals};
use snapshot::{ConfigStatus, ListenerStatus, Status};

/// Everything `GET /metrics` shows: the status, and the counters and readings only the metrics carry.
#[derive(Debug, Clone)]
pub(crate) struct Metrics {
    pub status: Status,
    pub listeners: Vec<(String, ListenerTotals)>,
    pub targets: Vec<(String, TargetTotals)>,
    pub apps: Vec<(String, AppTotals)>,
    /// Each stored certificate's expiry, in seconds since the epoch.
    pub certificates: Vec<(String, i64)>,
    pub process: process::OwnProcess,
}

/// The status now, each part from its owner.
pub(crate) async fn status(engine: &Engine) -> Status {
    let server = engine.server();
    let shared = server.shared();
    let (connections, requests) = shared.counters.snapshot(shared.admission.refused());
    let listeners = server
        .bound_addresses()
        .await
        .into_iter()
        .map(|(name, address)| (name, ListenerStatus { address }))
        .collect();
    let (generation, changed_at) = engine.generation_and_change().await;
    Status {
        connections,
        requests,
        listeners,
        upstreams: shared.current.load().upstreams.status(),
        applications: server.supervisor().map(|s| s.status()).unwrap_or_default(),
        certificates: shared.acme.status(),
        config: ConfigStatus {
            generation,
            changed_at,
        },
        modules: snapshot::Empty,
    }
}

/// The status and every counter, for `GET /metrics`.
pub(crate) async fn metrics(engine: &Engine) -> Metrics {
    let status = status(engine).await;
    let registry = registry();
    Metrics {
        status,
        listeners: registry.listener_totals(),
        targets: registry.target_totals(),
        apps: registry.app_totals(),
        certificates: engine.certificate_expiry().await,
        process: process::own(),
    }
}
