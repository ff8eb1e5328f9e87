//! The data plane: listeners, connections and requests, all reading the one published [`Snapshot`].
//!
//! [`Server::apply`] makes a new snapshot live: it binds listeners that are new (failing whole if one cannot be
//! bound), publishes the snapshot with one atomic store, then stops the listeners that are gone, whose open
//! connections finish their requests and close. Connections on listeners that stay are not touched.

mod access_log;
mod actions;
pub(crate) mod admission;
mod coalesce;
mod conn;
mod error_answer;
mod h1;
mod h2_floods;
mod handler;
mod listener;
pub(crate) mod passed;
mod request_body;
mod request_line;
mod status;
mod timeouts;
mod tracked;
mod unfinished_head;
mod upgrade;
mod validate;
mod wire_headers;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{ConfigError, JsonPath};
use crate::snapshot::{ListenAddr, Snapshot};
use crate::upstream::Upstreams;
pub use actions::error as error_page;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use h1::{Framing as RequestFraming, parse as parse_request_head};
pub(crate) use request_body::RequestBody;
pub use status::Counters;
pub use timeouts::ConnState;
pub(crate) use upgrade::ClientUpgrade;

/// A snapshot as served: with its open access log and its upstreams' run-time state.
pub struct Published {
    pub snapshot: Snapshot,
    pub access_log: Option<access_log::Sink>,
    pub upstreams: Upstreams,
}

/// What every connection shares.
pub struct Shared {
    pub current: ArcSwap<Published>,
    pub counters: Counters,
    pub admission: admission::Admission,
    /// The ACME task's challenges (answered on plain-HTTP listeners) and status.
    pub acme: Arc<crate::acme::Acme>,
    /// The engine serving this server, for a `metrics` action (set once the control API serves it).
    pub engine: std::sync::OnceLock<std::sync::Weak<crate::engine::Engine>>,
}

struct Running {
    drain: Drain,
    local: Option<SocketAddr>,
}

/// A listener's end, shared with its connections: `stop` tells them to finish what they have, and `last`
/// holds the configuration they finish on (the last one that had the listener), so a request half received
/// when its listener is removed is served as it would have been, as in Unit.
#[derive(Clone, Default)]
pub struct Drain {
    pub stop: CancellationToken,
    pub last: Arc<std::sync::OnceLock<Arc<Published>>>,
}

impl Running {
    /// Stops accepting on `addr`. A Unix socket's file goes at once, so no new client finds it and the
    /// path is free for a listener added again, while the workers' descriptors close as they notice.
    fn stop(&self, addr: &ListenAddr) {
        self.drain.stop.cancel();
        if let ListenAddr::Unix(path) = addr {
            let _ = std::fs::remove_file(path);
        }
    }
}

pub struct Server {
    shared: Arc<Shared>,
    /// Runs `applications`; without one (tests of the data plane alone) they answer 502.
    supervisor: Option<crate::supervisor::Supervisor>,
    listeners: Mutex<BTreeMap<ListenAddr, Running>>,
    conns: TaskTracker,
}

impl Server {
    /// A server with no listeners, serving an empty configuration.
    pub fn new() -> Self {
        let empty = crate::compile::compile(&serde_json::json!({}))
            .expect("the empty configuration compiles");
        Server {
            shared: Arc::new(Shared {
                current: ArcSwap::from_pointee(Published {
                    snapshot: empty,
                    access_log: None,
                    upstreams: Upstreams::default(),
                }),
                counters: Counters::default(),
                admission: Default::default(),
                acme: Arc::default(),
                engine: std::sync::OnceLock::new(),
            }),
            listeners: Mutex::new(BTreeMap::new()),
            conns: TaskTracker::new(),
            supervisor: None,
        }
    }

    /// A server that also runs applications.
    pub fn with_supervisor(supervisor: crate::supervisor::Supervisor) -> Self {
        Server {
            supervisor: Some(supervisor),
            ..Server::new()
        }
    }

    pub fn supervisor(&self) -> Option<&crate::supervisor::Supervisor> {
        self.supervisor.as_ref()
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Makes `snapshot` live; on error nothing has changed.
    ///
    /// With `check_apps`, an application whose executable cannot be run refuses the change. At start-up it
    /// does not: a saved configuration is never refused for an app that broke meanwhile; the app is reported
    /// as failing and retried with back-off instead.
    /// Returns the rolling reloads of the applications the change altered, to wait for.
    pub async fn apply(
        &self,
        snapshot: Snapshot,
        check_apps: bool,
    ) -> Result<crate::supervisor::Reloads, ConfigError> {
        let mut running = self.listeners.lock().await;
        if let Some(supervisor) = &self.supervisor
            && check_apps
        {
            supervisor.validate(&snapshot.applications)?;
        }
        let access_log = self.open_access_log(&snapshot)?;
        let mut fresh = Vec::new();
        for (addr, l) in &snapshot.listeners {
            if running.contains_key(addr) {
                continue;
            }
            // One descriptor per worker, all for the one socket, made now: running out of descriptors
            // refuses the change rather than half-making it. Dropping `fresh` on error closes what was
            // bound so far.
            let bound = listener::Bound::bind(addr, l.backlog)
                .and_then(|b| b.copies(crate::workers::count()))
                .map_err(|e| {
                    JsonPath::root()
                        .key("listeners")
                        .key(&l.name)
                        .error(format!("cannot listen on {addr}: {e}"))
                })?;
            fresh.push((addr.clone(), bound));
        }
        let removed: Vec<ListenAddr> = running
            .keys()
            .filter(|a| !snapshot.listeners.contains_key(*a))
            .cloned()
            .collect();
        let mut upstreams = Upstreams::build(
            &self.shared.current.load().upstreams,
            &snapshot.upstreams,
            &snapshot.proxies,
        )?;
        let mut reloads = crate::supervisor::Reloads::default();
        if let Some(supervisor) = &self.supervisor {
            (upstreams.apps, reloads) = supervisor.apply(&snapshot.applications);
        }
        let last = self.shared.current.load_full();
        for addr in &removed {
            if let Some(r) = running.get(addr) {
                let _ = r.drain.last.set(last.clone());
            }
        }
        self.shared.current.store(Arc::new(Published {
            snapshot,
            access_log,
            upstreams,
        }));
        for addr in removed {
            if let Some(r) = running.remove(&addr) {
                tracing::info!(listener = %addr, "listener removed; draining its connections");
                r.stop(&addr);
            }
        }
        for (addr, bound) in fresh {
            tracing::info!(listener = %addr, "listening");
            let drain = Drain::default();
            let local = bound.first().and_then(listener::Bound::local_addr);
            self.accept_on_workers(bound, &addr, &drain);
            running.insert(addr, Running { drain, local });
        }
        Ok(reloads)
    }

    /// Accepts on each of `bound` from its worker thread, or on the caller's runtime when there are no
    /// workers (then `bound` holds one).
    fn accept_on_workers(&self, bound: Vec<listener::Bound>, addr: &ListenAddr, drain: &Drain) {
        for (i, bound) in bound.into_iter().enumerate() {
            let accept = listener::accept_loop(
                bound,
                addr.clone(),
                self.shared.clone(),
                drain.clone(),
                self.conns.clone(),
            );
            match crate::workers::handle(i) {
                Some(worker) => drop(worker.spawn(accept)),
                None => drop(tokio::spawn(accept)),
            }
        }
    }

    /// Reuses the open log when its path is unchanged; opens (and checks) a new one otherwise.
    fn open_access_log(
        &self,
        snapshot: &Snapshot,
    ) -> Result<Option<access_log::Sink>, ConfigError> {
        let Some(conf) = &snapshot.access_log else {
            return Ok(None);
        };
        let current = self.shared.current.load();
        if let Some(sink) = current
            .access_log
            .as_ref()
            .filter(|s| s.path() == conf.path)
        {
            return Ok(Some(sink.clone()));
        }
        access_log::Sink::open(&conf.path).map(Some).map_err(|e| {
            JsonPath::root()
                .key("access_log")
                .error(format!("cannot open {}: {e}", conf.path.display()))
        })
    }

    /// Opens the access log again at its path, after the lines already queued (SIGUSR1: logrotate renamed
    /// it).
    pub fn reopen_access_log(&self) {
        if let Some(sink) = &self.shared.current.load().access_log {
            sink.reopen();
        }
    }

    /// The addresses listeners are bound to, by listener name (a `:0` port shows the port chosen).
    pub async fn bound_addresses(&self) -> BTreeMap<String, String> {
        let running = self.listeners.lock().await;
        let current = self.shared.current.load();
        running
            .iter()
            .filter_map(|(addr, r)| {
                let name = current.snapshot.listeners.get(addr)?.name.clone();
                let bound = r.local.map_or_else(|| addr.to_string(), |a| a.to_string());
                Some((name, bound))
            })
            .collect()
    }

    /// Stops accepting everywhere, lets in-flight requests finish, and waits up to `deadline` for them.
    pub async fn shutdown(&self, deadline: Duration) -> bool {
        for (addr, r) in self.listeners.lock().await.iter() {
            r.stop(addr);
        }
        self.conns.close();
        tokio::time::timeout(deadline, self.conns.wait())
            .await
            .is_ok()
    }
}

impl Default for Server {
    fn default() -> Self {
        Self::new()
    }
}
