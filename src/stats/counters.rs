//! The live counters the data plane and the supervisor move: lock-free atomics, reached through handles
//! resolved when a configuration is compiled (a listener's, an upstream's, an application's), never by a
//! lookup per request.
//!
//! The [`Registry`] hands out one handle per name and keeps it, so a listener, upstream or application that
//! survives a change (same name) keeps counting where it was. Handles nobody holds any more (a removed
//! listener) are forgotten when the metrics are next read.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The upper bounds of the request duration histogram's buckets, in seconds.
pub(crate) const DURATION_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The status classes requests are counted by: 1xx to 5xx.
pub(crate) const STATUS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Requests finished through one listener or to one target: by status class, by duration, and their body
/// bytes. Each worker thread counts in its own shard (its own cache lines), so workers finishing requests at
/// once never contend for a counter; reading sums the shards.
#[derive(Debug, Default)]
pub(crate) struct RequestStats {
    shards: [Shard; SHARDS],
}

/// Shards per counter set: workers past this many share shards (by their index modulo it).
const SHARDS: usize = 8;

/// One worker's share of a [`RequestStats`], alone on its cache lines (128 bytes: the pair of lines a
/// prefetcher moves together on x86).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    by_class: [AtomicU64; STATUS_CLASSES.len()],
    /// Requests per bucket, not cumulative (the exposition adds them up): one add per request.
    buckets: [AtomicU64; DURATION_BUCKETS.len()],
    micros: AtomicU64,
    received: AtomicU64,
    sent: AtomicU64,
}

/// What [`RequestStats`] held at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RequestTotals {
    pub by_class: [u64; STATUS_CLASSES.len()],
    /// Cumulative counts: requests that took at most each of [`DURATION_BUCKETS`].
    pub buckets: [u64; DURATION_BUCKETS.len()],
    pub count: u64,
    pub seconds: f64,
    pub received: u64,
    pub sent: u64,
}

impl RequestStats {
    /// The calling worker's shard.
    fn shard(&self) -> &Shard {
        &self.shards[crate::workers::current() % SHARDS]
    }

    /// Counts a finished request: its status, how long it took, and its response body's bytes.
    pub(crate) fn finished(&self, status: u16, took: Duration, sent: u64) {
        let shard = self.shard();
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        shard.by_class[class].fetch_add(1, Ordering::Relaxed);
        let secs = took.as_secs_f64();
        if let Some(i) = DURATION_BUCKETS.iter().position(|b| secs <= *b) {
            shard.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        shard.micros.fetch_add(micros, Ordering::Relaxed);
        shard.sent.fetch_add(sent, Ordering::Relaxed);
    }

    /// Counts request body bytes read from a client.
    pub(crate) fn received(&self, bytes: u64) {
        self.shard().received.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn totals(&self) -> RequestTotals {
        let sum = |field: fn(&Shard) -> &AtomicU64| -> u64 {
            self.shards
                .iter()
                .map(|s| field(s).load(Ordering::Relaxed))
                .sum()
        };
        let by_class: [u64; STATUS_CLASSES.len()] = std::array::from_fn(|i| {
            self.shards
                .iter()
                .map(|s| s.by_class[i].load(Ordering::Relaxed))
                .sum()
        });
        let mut running = 0;
        let buckets = std::array::from_fn(|i| {
            running += self
                .shards
                .iter()
                .map(|s| s.buckets[i].load(Ordering::Relaxed))
                .sum::<u64>();
            running
        });
        RequestTotals {
            by_class,
            buckets,
            count: by_class.iter().sum(),
            seconds: sum(|s| &s.micros) as f64 / 1e6,
            received: sum(|s| &s.received),
            sent: sum(|s| &s.sent),
        }
    }
}

/// One listener's counters.
#[derive(Debug, Default)]
pub(crate) struct ListenerStats {
    pub requests: RequestStats,
    accepted: AtomicU64,
    handshakes: AtomicU64,
    handshake_failures: AtomicU64,
}

/// What [`ListenerStats`] held at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ListenerTotals {
    pub requests: RequestTotals,
    pub accepted: u64,
    pub handshakes: u64,
    pub handshake_failures: u64,
}

impl ListenerStats {
    pub(crate) fn accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a TLS handshake, completed or not (failed or timed out).
    pub(crate) fn handshake(&self, completed: bool) {
        let counter = if completed {
            &self.handshakes
        } else {
            &self.handshake_failures
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn totals(&self) -> ListenerTotals {
        ListenerTotals {
            requests: self.requests.totals(),
            accepted: self.accepted.load(Ordering::Relaxed),
            handshakes: self.handshakes.load(Ordering::Relaxed),
            handshake_failures: self.handshake_failures.load(Ordering::Relaxed),
        }
    }
}

/// One route target's counters: its requests, and the retries of requests on another of its servers.
#[derive(Debug, Default)]
pub(crate) struct TargetStats {
    pub requests: RequestStats,
    retries: AtomicU64,
}

/// What [`TargetStats`] held at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TargetTotals {
    pub requests: RequestTotals,
    pub retries: u64,
}

impl TargetStats {
    pub(crate) fn retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn totals(&self) -> TargetTotals {
        TargetTotals {
            requests: self.requests.totals(),
            retries: self.retries.load(Ordering::Relaxed),
        }
    }
}

/// Why an application's instance was started again, as a bounded label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RestartCause {
    /// It exited (or was killed) without being asked.
    Exited,
    /// It could not be started at all.
    SpawnFailed,
    /// It was not ready within `ready_timeout`.
    ReadyTimeout,
    /// It was replaced for going over `limits.memory`.
    MemoryLimit,
    /// It was replaced for reaching `limits.requests`.
    RequestLimit,
    /// It was replaced on request (`/control/applications/NAME/instances/ID/restart`).
    Requested,
    /// The kernel's OOM killer killed it, over its cgroup's `memory_max`.
    OomKilled,
}

impl RestartCause {
    pub(crate) const ALL: [RestartCause; 7] = [
        RestartCause::Exited,
        RestartCause::SpawnFailed,
        RestartCause::ReadyTimeout,
        RestartCause::MemoryLimit,
        RestartCause::RequestLimit,
        RestartCause::Requested,
        RestartCause::OomKilled,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            RestartCause::Exited => "exited",
            RestartCause::SpawnFailed => "spawn_failed",
            RestartCause::ReadyTimeout => "ready_timeout",
            RestartCause::MemoryLimit => "memory_limit",
            RestartCause::RequestLimit => "request_limit",
            RestartCause::Requested => "requested",
            RestartCause::OomKilled => "oom_killed",
        }
    }
}

/// One application's counters: restarts by cause, reloads by outcome and their time.
#[derive(Debug, Default)]
pub(crate) struct AppStats {
    restarts: [AtomicU64; RestartCause::ALL.len()],
    reloads_ok: AtomicU64,
    reloads_failed: AtomicU64,
    reload_micros: AtomicU64,
}

/// What [`AppStats`] held at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct AppTotals {
    /// By [`RestartCause::ALL`]'s order.
    pub restarts: [u64; RestartCause::ALL.len()],
    pub reloads_ok: u64,
    pub reloads_failed: u64,
    pub reload_seconds: f64,
}

impl AppStats {
    pub(crate) fn restarted(&self, cause: RestartCause) {
        let i = RestartCause::ALL
            .iter()
            .position(|c| *c == cause)
            .unwrap_or(0);
        self.restarts[i].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn reloaded(&self, ok: bool, took: Duration) {
        let counter = if ok {
            &self.reloads_ok
        } else {
            &self.reloads_failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.reload_micros.fetch_add(micros, Ordering::Relaxed);
    }

    pub(crate) fn totals(&self) -> AppTotals {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        AppTotals {
            restarts: self.restarts.each_ref().map(load),
            reloads_ok: load(&self.reloads_ok),
            reloads_failed: load(&self.reloads_failed),
            reload_seconds: load(&self.reload_micros) as f64 / 1e6,
        }
    }
}

/// The handles by name, one map per kind.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    listeners: Handles<ListenerStats>,
    targets: Handles<TargetStats>,
    apps: Handles<AppStats>,
}

/// The process's registry: listeners, upstreams and applications are compiled and rebuilt in several places,
/// and each finds its counters here by name.
pub(crate) fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

impl Registry {
    /// The counters of the listener named `name` (its key in `listeners`).
    pub(crate) fn listener(&self, name: &str) -> Arc<ListenerStats> {
        self.listeners.get(name)
    }

    /// The counters of a route target: `upstreams/NAME`, `applications/NAME`, a `proxy` URL, or a
    /// `fastcgi` action's `fastcgi:ADDRESS`.
    pub(crate) fn target(&self, name: &str) -> Arc<TargetStats> {
        self.targets.get(name)
    }

    /// The counters of the application named `name`.
    pub(crate) fn app(&self, name: &str) -> Arc<AppStats> {
        self.apps.get(name)
    }

    pub(crate) fn listener_totals(&self) -> Vec<(String, ListenerTotals)> {
        self.listeners.live(ListenerStats::totals)
    }

    pub(crate) fn target_totals(&self) -> Vec<(String, TargetTotals)> {
        self.targets.live(TargetStats::totals)
    }

    pub(crate) fn app_totals(&self) -> Vec<(String, AppTotals)> {
        self.apps.live(AppStats::totals)
    }
}

#[derive(Debug)]
struct Handles<T>(Mutex<BTreeMap<String, Arc<T>>>);

impl<T> Default for Handles<T> {
    fn default() -> Self {
        Handles(Mutex::new(BTreeMap::new()))
    }
}

impl<T: Default> Handles<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<T>>> {
        // Entries are only inserted or removed whole: one left by a panicking holder is consistent.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, name: &str) -> Arc<T> {
        self.lock().entry(name.to_owned()).or_default().clone()
    }

    /// Every handle still held outside the registry, read with `read`; the others are forgotten.
    fn live<R>(&self, read: impl Fn(&T) -> R) -> Vec<(String, R)> {
        let mut map = self.lock();
        map.retain(|_, h| Arc::strong_count(h) > 1);
        map.iter().map(|(n, h)| (n.clone(), read(h))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_class_and_bucket() {
        let stats = RequestStats::default();
        stats.finished(200, Duration::from_millis(3), 10);
        stats.finished(404, Duration::from_millis(30), 5);
        stats.finished(502, Duration::from_secs(60), 0);
        stats.received(7);
        let t = stats.totals();
        assert_eq!(t.by_class, [0, 1, 0, 1, 1]);
        assert_eq!(t.count, 3);
        assert_eq!(t.buckets[0], 1, "≤ 5 ms");
        assert_eq!(t.buckets[3], 2, "≤ 50 ms, cumulative");
        assert_eq!(
            t.buckets[DURATION_BUCKETS.len() - 1],
            2,
            "60 s is over every bound"
        );
        assert_eq!((t.sent, t.received), (15, 7));
        assert!((t.seconds - 60.033).abs() < 1e-9);
    }

    #[test]
    fn each_worker_counts_in_its_own_shard_and_reading_sums_them() {
        let stats = RequestStats::default();
        // Threads playing workers 0, 1 and SHARDS + 1 (which shares worker 1's shard).
        std::thread::scope(|scope| {
            for worker in [0, 1, SHARDS + 1] {
                let stats = &stats;
                scope.spawn(move || {
                    crate::workers::pretend_current(worker);
                    for _ in 0..100 {
                        stats.finished(200, Duration::from_millis(1), 2);
                    }
                    stats.received(1);
                });
            }
        });
        let in_shard = |i: usize| stats.shards[i].by_class[1].load(Ordering::Relaxed);
        assert_eq!((in_shard(0), in_shard(1)), (100, 200));
        let t = stats.totals();
        assert_eq!(
            (t.count, t.buckets[0], t.sent, t.received),
            (300, 300, 600, 3)
        );
        assert_eq!(std::mem::align_of::<Shard>(), 128);
    }

    #[test]
    fn a_name_keeps_its_counters_while_held_and_is_forgotten_after() {
        let registry = Registry::default();
        let first = registry.target("upstreams/a");
        first.requests.finished(200, Duration::ZERO, 0);
        assert_eq!(registry.target("upstreams/a").totals().requests.count, 1);
        assert_eq!(registry.target_totals().len(), 1);
        drop(first);
        assert!(registry.target_totals().is_empty());
    }
}
