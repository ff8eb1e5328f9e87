//! Counters behind `GET /status`: connections and requests, updated lock-free on the hot path.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::stats::snapshot::{Connections, Requests};

#[derive(Debug, Default)]
pub struct Counters {
    accepted: AtomicU64,
    closed: AtomicU64,
    open: AtomicU64,
    busy: AtomicU64,
    requests: AtomicU64,
}

impl Counters {
    pub fn connection_opened(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_closed(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        self.closed.fetch_add(1, Ordering::Relaxed);
    }

    pub fn request_started(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.busy.fetch_add(1, Ordering::Relaxed);
    }

    pub fn request_finished(&self) {
        self.busy.fetch_sub(1, Ordering::Relaxed);
    }

    /// Connections and requests now; `refused` (counted by admission) were closed on arrival for a
    /// connection limit.
    pub(crate) fn snapshot(&self, refused: u64) -> (Connections, Requests) {
        let open = self.open.load(Ordering::Relaxed);
        let busy = self.busy.load(Ordering::Relaxed).min(open);
        let connections = Connections {
            accepted: self.accepted.load(Ordering::Relaxed),
            active: busy,
            idle: open - busy,
            closed: self.closed.load(Ordering::Relaxed),
            refused,
        };
        let requests = Requests {
            total: self.requests.load(Ordering::Relaxed),
        };
        (connections, requests)
    }
}
