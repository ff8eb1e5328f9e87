//! Upstreams at run time: servers with their health and counters (and the proxy's connections to them, stored
//! as is), a balancer, the admission of requests to the servers' slots, and the active health checks.
//!
//! Upstream state outlives configuration changes: [`Upstreams::build`] reuses an upstream whose configuration
//! is unchanged as it is, and a server kept across a change keeps its connections and its health, so no
//! connection to an unchanged server is dropped. Requests in flight hold the objects of the configuration they started on.

mod admission;
pub mod balance;
pub mod conf;
pub(crate) mod conns;
pub mod health;
mod line;
#[cfg(test)]
mod slots_tests;
pub mod tls;

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use arc_swap::ArcSwap;
use std::time::{Duration, Instant};

use crate::config::{ConfigError, JsonPath};
use crate::stats::counters::TargetStats;
use crate::stats::snapshot::{ServerStatus, UpstreamStatus};

use crate::link::ServerAddr;
use crate::link::tls::TlsTarget;
use admission::Admission;
pub(crate) use admission::Wanted;
use balance::{Balancer, Candidate};
use conf::UpstreamConf;
use conns::{ConnSlot, Conns};
use health::{Change, Health};
use tls::SystemRoots;

/// One server of one upstream.
pub struct ServerState {
    pub addr: ServerAddr,
    /// How to reach it over TLS, for a server of an upstream with `tls`.
    pub tls: Option<TlsTarget>,
    /// The proxy's connections to it, stored here to live as long as the server is kept.
    pub(crate) conns: ConnSlot,
    health: Mutex<Health>,
    /// The health is clean ([`Health::is_clean`]): what every request asks, answered without the lock that
    /// the other worker threads take too. Written under that lock.
    clean: AtomicBool,
    active: AtomicU32,
    /// Taken out of its upstream (an app instance about to stop): no new request may start on it.
    withdrawn: AtomicBool,
    /// A Node.js instance that takes client connections itself (`"handoff": true`).
    pub(crate) handoff: Option<Arc<crate::handoff::Channel>>,
    /// Connections dialled to this server (HTTP and FastCGI): with keep-alive working, far fewer than
    /// requests.
    opened: AtomicU64,
    requests: AtomicU64,
    failures: AtomicU64,
}

impl ServerState {
    pub fn new(addr: ServerAddr) -> Self {
        ServerState {
            addr,
            tls: None,
            conns: ConnSlot::default(),
            health: Mutex::new(Health::new()),
            clean: AtomicBool::new(true),
            active: AtomicU32::new(0),
            withdrawn: AtomicBool::new(false),
            handoff: None,
            opened: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }
    }

    /// A server reached over TLS.
    pub fn with_tls(addr: ServerAddr, tls: TlsTarget) -> Self {
        ServerState {
            tls: Some(tls),
            ..ServerState::new(addr)
        }
    }

    /// The `Host` requests to it carry instead of the client's: a TLS server's name.
    pub fn host(&self) -> Option<&str> {
        self.tls.as_ref().map(TlsTarget::host)
    }

    /// A server whose connections are set up from the start (an app instance's, which rein knows more of).
    pub(crate) fn with_conns(addr: ServerAddr, conns: impl Conns) -> Self {
        ServerState {
            conns: ConnSlot::filled(conns),
            ..ServerState::new(addr)
        }
    }

    /// An app instance that takes client connections handed to it over `channel`.
    pub(crate) fn handing_off(addr: ServerAddr, channel: Arc<crate::handoff::Channel>) -> Self {
        ServerState {
            handoff: Some(channel),
            ..ServerState::new(addr)
        }
    }

    /// Taken out of its upstream: no new request or connection may go to it.
    pub(crate) fn is_withdrawn(&self) -> bool {
        self.withdrawn.load(Ordering::SeqCst)
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the health, keeping `clean` in step.
    fn update_health<R>(&self, f: impl FnOnce(&mut Health) -> R) -> R {
        let mut health = self.health();
        let result = f(&mut health);
        self.clean.store(health.is_clean(), Ordering::Release);
        result
    }

    /// Clears the active checks' verdict (see [`Health::forget_probes`]).
    fn forget_probes(&self) {
        self.update_health(Health::forget_probes);
    }

    /// Available as far as health goes. The clock is read only for a server with something held against it.
    fn is_available(&self, now: &mut LazyNow) -> bool {
        self.clean.load(Ordering::Acquire) || self.health().is_available(now.get())
    }

    /// Requests in flight on it. Sequentially consistent, as the wake-up rule of [`Slot`]'s drop needs.
    pub fn active(&self) -> u32 {
        self.active.load(Ordering::SeqCst)
    }

    /// Marks the server as leaving, and tells whether requests are still in flight on it.
    ///
    /// A request may have picked the server from the member list of a moment ago: either it sees the mark
    /// after taking its slot and gives the slot back, or this sees its slot (both sides are sequentially
    /// consistent). So once this says none, none will start: an app instance can be stopped without a
    /// request reaching it later (a PHP-FPM instance's socket is rein's and stays open until the instance is
    /// gone, so such a request would wait on it until the read timeout).
    pub fn withdraw(&self) -> bool {
        self.withdrawn.store(true, Ordering::SeqCst);
        self.busy()
    }

    /// Whether requests are in flight on it, as [`ServerState::withdraw`] needs to know.
    pub fn busy(&self) -> bool {
        self.active.load(Ordering::SeqCst) > 0
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Counts a connection dialled to this server.
    pub fn opened(&self) {
        self.opened.fetch_add(1, Ordering::Relaxed);
    }

    /// FastCGI requests queued on a busy connection ([`Member::pipelining`]).
    pub fn pipelined(&self) -> u64 {
        self.conns.get().map_or(0, |c| c.pipelined())
    }

    /// Requests holding a slot of this server that wait for a connection to it (or a seat on one).
    pub fn waiting(&self) -> u32 {
        self.conns.get().map_or(0, |c| c.waiting())
    }

    pub fn connections_opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    pub fn idle_connections(&self) -> usize {
        self.conns.get().map_or(0, |c| c.idle())
    }

    /// Closes every idle connection to it (an app instance about to stop).
    pub fn close_idle(&self) {
        if let Some(conns) = self.conns.get() {
            conns.clear();
        }
    }
}

/// The time, read once and only if asked for.
#[derive(Default)]
struct LazyNow(Option<Instant>);

impl LazyNow {
    fn get(&mut self) -> Instant {
        *self.0.get_or_insert_with(Instant::now)
    }
}

/// Candidates gathered on the stack when an upstream has at most this many servers.
const INLINE_CANDIDATES: usize = 16;

/// A slot taken on a server for one request: counted as active until dropped.
pub struct Slot {
    pub server: Arc<ServerState>,
    /// The server's `max_connections` in its upstream, when it has one.
    pub limit: Option<u32>,
    /// FastCGI requests without a body that may queue behind the one in progress on each connection
    /// ([`Member::pipelining`]).
    pub pipelining: u32,
    upstream: Arc<Upstream>,
    /// The lane of the upstream's line it is held on (the worker thread that took it).
    lane: usize,
}

impl Slot {
    /// Records the outcome of the request on this server, for passive health.
    pub fn record(&self, ok: bool) {
        self.upstream.record(&self.server, ok);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.server.active.fetch_sub(1, Ordering::SeqCst);
        // A freed slot may let a request waiting on `max_connections` go.
        self.upstream.admission.release(self.lane);
    }
}

/// A server as a member of an upstream: its share of the traffic, and its state.
#[derive(Clone)]
pub struct Member {
    pub weight: f64,
    pub max_connections: Option<u32>,
    /// Each of its `max_connections` FastCGI connections may carry this many requests queued behind the one
    /// in progress (see [`crate::fastcgi::pipeline`]): PHP-FPM or a WSGI adapter, which read a request exactly
    /// to its end. 0: none.
    pub pipelining: u32,
    pub state: Arc<ServerState>,
}

impl Member {
    /// Requests the server takes at once: `max_connections`, each with the requests that may queue behind it.
    pub fn slots(&self) -> Option<u32> {
        let depth = self.pipelining.saturating_add(1);
        self.max_connections.map(|max| max.saturating_mul(depth))
    }
}

pub struct Upstream {
    /// `upstreams/NAME`'s name, the URL of a `proxy` action, or `applications/NAME`.
    pub name: String,
    /// Balancing, health, timeouts, retries; `conf.servers` is what `members` started from.
    pub conf: UpstreamConf,
    /// The servers now: fixed by the configuration, or changed at run time for an application's instances.
    members: ArcSwap<Vec<Member>>,
    balancer: Mutex<Balancer>,
    /// Requests waiting for a server, and what wakes them.
    admission: Admission,
    /// Whether the servers change at run time: a request that failed on every server may then wait for a new
    /// one; with fixed servers it would only wait for nothing.
    dynamic: bool,
    /// An application's supervisor reports it errored (see [`Upstream::set_errored`]).
    errored: AtomicBool,
    /// Whose turn it is to take a client connection handed to an instance ([`crate::handoff::pick`]).
    turn: AtomicUsize,
    /// Requests answered by a server, and requests rein had to answer with an error (502/503/504).
    answered: AtomicU64,
    failed: AtomicU64,
    /// The counters of this route target, kept by its name across changes.
    pub(crate) stats: Arc<TargetStats>,
}

impl Upstream {
    /// An upstream over `members`; active health checks start if the configuration asks for them.
    pub fn new(name: &str, conf: UpstreamConf, members: Vec<Member>) -> Arc<Upstream> {
        Self::build(name, conf, members, false)
    }

    /// An upstream whose servers come and go at run time (an application's instances), starting with none.
    pub fn dynamic(name: &str, conf: UpstreamConf) -> Arc<Upstream> {
        Self::build(name, conf, Vec::new(), true)
    }

    /// A named upstream, counted in the metrics as the target `upstreams/NAME`.
    fn named(name: &str, conf: UpstreamConf, members: Vec<Member>) -> Arc<Upstream> {
        let label = format!("upstreams/{name}");
        Self::build_with_lanes(name, &label, conf, members, false, crate::workers::count())
    }

    fn build(name: &str, conf: UpstreamConf, members: Vec<Member>, dynamic: bool) -> Arc<Upstream> {
        Self::build_with_lanes(name, name, conf, members, dynamic, crate::workers::count())
    }

    /// An upstream with one lane of waiting requests per `lanes` worker threads.
    pub(crate) fn build_with_lanes(
        name: &str,
        label: &str,
        conf: UpstreamConf,
        members: Vec<Member>,
        dynamic: bool,
        lanes: usize,
    ) -> Arc<Upstream> {
        let upstream = Arc::new(Upstream {
            name: name.to_owned(),
            dynamic,
            errored: AtomicBool::new(false),
            turn: AtomicUsize::new(0),
            balancer: Mutex::new(Balancer::new(members.len())),
            members: ArcSwap::from_pointee(members),
            conf,
            admission: Admission::new(lanes),
            answered: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            stats: crate::stats::registry().target(label),
        });
        if upstream.conf.active.is_some() {
            tokio::spawn(check::run(Arc::downgrade(&upstream)));
        }
        // Off a runtime (unit tests of the balancing), there is nothing to sweep.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(sweep(Arc::downgrade(&upstream)));
        }
        upstream
    }

    /// Counts a request's outcome: answered by a server, or failed with a proxy error.
    pub fn count(&self, answered: bool) {
        let counter = if answered {
            &self.answered
        } else {
            &self.failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests answered and failed so far.
    pub fn outcomes(&self) -> (u64, u64) {
        (
            self.answered.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }

    /// Counts turns for [`crate::handoff::pick`].
    pub(crate) fn next_turn(&self) -> usize {
        self.turn.fetch_add(1, Ordering::Relaxed)
    }

    pub fn members(&self) -> Arc<Vec<Member>> {
        self.members.load_full()
    }

    /// Replaces the servers (an application's instances coming and going); waiting requests look again.
    pub fn set_members(&self, members: Vec<Member>) {
        self.members.store(Arc::new(members));
        self.admission.changed();
    }

    /// An application is errored (crashing over and over; its next retry is up to `restart.backoff_max`
    /// away) or no longer: while it is and has no instance, a request gets its 503 at once rather than after
    /// the whole `queue_timeout`, and requests already waiting get theirs now.
    pub fn set_errored(&self, errored: bool) {
        if self.errored.swap(errored, Ordering::SeqCst) != errored && errored {
            self.admission.changed();
        }
    }

    /// Whether `m` can take a request now (ignoring which servers this request already tried).
    fn can_take(m: &Member, now: &mut LazyNow) -> bool {
        m.weight > 0.0
            && !m.state.withdrawn.load(Ordering::Relaxed)
            && m.slots().is_none_or(|max| m.state.active() < max)
            && m.state.is_available(now)
    }

    /// Takes a slot on the server the balancer picks among those available and not in `exclude`.
    pub fn pick(
        self: &Arc<Self>,
        client: Option<IpAddr>,
        exclude: &[Arc<ServerState>],
    ) -> Option<Slot> {
        let mut now = LazyNow::default();
        loop {
            let members = self.members.load();
            let mut candidate = |m: &Member| Candidate {
                weight: m.weight,
                active: m.state.active(),
                available: !exclude.iter().any(|e| Arc::ptr_eq(e, &m.state))
                    && Self::can_take(m, &mut now),
            };
            let index = match members.len() {
                // One server: whatever the algorithm, it is the one if it can take the request. No list, no
                // balancer lock (shared by every worker thread).
                1 => Some(0).filter(|_| candidate(&members[0]).is_usable())?,
                n if n <= INLINE_CANDIDATES => {
                    let mut list = [Candidate::NONE; INLINE_CANDIDATES];
                    for (slot, m) in list.iter_mut().zip(members.iter()) {
                        *slot = candidate(m);
                    }
                    self.balance(&list[..n], client, !exclude.is_empty())?
                }
                _ => {
                    let list: Vec<Candidate> = members.iter().map(candidate).collect();
                    self.balance(&list, client, !exclude.is_empty())?
                }
            };
            let member = &members[index];
            let before = member.state.active.fetch_add(1, Ordering::SeqCst);
            let slot = Slot {
                server: member.state.clone(),
                limit: member.max_connections,
                pipelining: member.pipelining,
                upstream: self.clone(),
                lane: self.admission.hold(),
            };
            let over = member.slots().is_some_and(|max| before >= max);
            if over || slot.server.withdrawn.load(Ordering::SeqCst) {
                // Another worker took the last slot since the candidates were read, or the server was
                // withdrawn after this request read the member list: give the slot back and look again. A
                // PHP instance must never get more requests than workers (an extra one would wait behind
                // kept-alive connections that hold them all).
                drop(slot);
                continue;
            }
            slot.server.requests.fetch_add(1, Ordering::Relaxed);
            return Some(slot);
        }
    }

    /// A slot on a server, now or as soon as one can take the request (see [`Admission::acquire`]).
    pub(crate) async fn acquire(self: &Arc<Self>, wanted: Wanted<'_>) -> Option<Slot> {
        self.admission.acquire(self, wanted).await
    }

    /// Slots free now on servers that can take a request (`u32::MAX` for any without a connection limit).
    pub(super) fn free_slots(&self) -> u32 {
        let mut now = LazyNow::default();
        self.members
            .load()
            .iter()
            .filter(|m| Self::can_take(m, &mut now))
            .map(|m| {
                m.slots()
                    .map_or(u32::MAX, |max| max.saturating_sub(m.state.active()))
            })
            .fold(0, u32::saturating_add)
    }

    /// Requests waiting in rein now: for their first server, or, holding a slot of one whose FastCGI
    /// connections pipeline, for a connection or a seat on one.
    pub fn queued(&self) -> u32 {
        let waiting: u32 = self.members.load().iter().map(|m| m.state.waiting()).sum();
        self.admission.queued() + waiting
    }

    /// Whether the configuration gave this upstream no server at all (`"servers": {}`): nothing will ever
    /// answer, which Unit reports as 502.
    pub fn has_no_servers(&self) -> bool {
        !self.dynamic && self.members.load().is_empty()
    }

    /// Whether no server is left to try or to wait for: fixed servers, every one of them already failed for
    /// this request; or an errored application without an instance.
    pub fn exhausted(&self, excluded: &[Arc<ServerState>]) -> bool {
        if self.dynamic {
            return self.errored.load(Ordering::SeqCst) && self.members.load().is_empty();
        }
        self.members
            .load()
            .iter()
            .all(|m| excluded.iter().any(|e| Arc::ptr_eq(e, &m.state)))
    }

    /// The server for a first try takes a turn of the rotation; a retry (`retry`: some server already failed
    /// this request) does not, so a refusing server's share is not counted twice.
    fn balance(
        &self,
        candidates: &[Candidate],
        client: Option<IpAddr>,
        retry: bool,
    ) -> Option<usize> {
        let mut balancer = self.balancer.lock().unwrap_or_else(|e| e.into_inner());
        if retry {
            balancer.peek(self.conf.balance, candidates, client)
        } else {
            balancer.pick(self.conf.balance, candidates, client)
        }
    }

    /// The earliest moment a server out on a passive time-out comes back, if any is out now.
    pub fn next_return(&self) -> Option<Instant> {
        let now = Instant::now();
        self.members
            .load()
            .iter()
            .filter_map(|m| m.state.health().out_until())
            .filter(|t| *t > now)
            .min()
    }

    /// Records the outcome of a request on `server` for passive health.
    pub fn record(&self, server: &ServerState, ok: bool) {
        let change = if ok {
            // A success on a clean server changes nothing: spare the lock.
            if server.clean.load(Ordering::Acquire) {
                return;
            }
            server.update_health(Health::request_succeeded)
        } else {
            server.failures.fetch_add(1, Ordering::Relaxed);
            let now = Instant::now();
            server.update_health(|h| h.request_failed(&self.conf.passive, now))
        };
        self.announce(server, change, "request");
    }

    fn announce(&self, server: &ServerState, change: Change, by: &str) {
        let addr = &server.addr;
        match change {
            Change::WentDown => {
                tracing::warn!(upstream = %self.name, server = %addr, by, "server unavailable")
            }
            Change::CameUp => {
                tracing::info!(upstream = %self.name, server = %addr, by, "server available again");
                self.admission.changed();
            }
            Change::None => {}
        }
    }

    /// Each server's state and counters, in the upstream's order.
    pub(crate) fn status(&self) -> UpstreamStatus {
        let now = Instant::now();
        let servers = self
            .members
            .load()
            .iter()
            .map(|m| {
                let s = &m.state;
                let entry = ServerStatus {
                    state: s.health().state_name(now),
                    active: s.active(),
                    idle_connections: s.idle_connections(),
                    connections_opened: s.connections_opened(),
                    pipelined: s.pipelined(),
                    requests: s.requests.load(Ordering::Relaxed),
                    failures: s.failures.load(Ordering::Relaxed),
                };
                (s.addr.to_string(), entry)
            })
            .collect();
        UpstreamStatus { servers }
    }
}

/// Every upstream of one configuration: named ones and those behind `proxy` actions.
#[derive(Default)]
pub struct Upstreams {
    pub named: HashMap<String, Arc<Upstream>>,
    pub proxies: HashMap<String, Arc<Upstream>>,
    /// Each application's ready instances, kept up to date by the supervisor.
    pub apps: HashMap<String, Arc<Upstream>>,
}

impl Upstreams {
    /// The upstreams for a new configuration, reusing what `previous` had where nothing changed. Fails,
    /// naming the key, when an upstream's TLS settings cannot be put to use (a `ca` file that cannot be
    /// read).
    pub fn build(
        previous: &Upstreams,
        named: &BTreeMap<String, UpstreamConf>,
        proxies: &BTreeMap<String, UpstreamConf>,
    ) -> Result<Upstreams, ConfigError> {
        let mut roots = SystemRoots::default();
        let mut make = |old: &HashMap<String, Arc<Upstream>>,
                        confs: &BTreeMap<String, UpstreamConf>,
                        section: Option<&str>|
         -> Result<HashMap<String, Arc<Upstream>>, ConfigError> {
            confs
                .iter()
                .map(|(name, conf)| {
                    let upstream = reuse_or_create(old.get(name), name, section, conf, &mut roots)
                        .map_err(|e| e.at(&tls_path(section, name)))?;
                    Ok((name.clone(), upstream))
                })
                .collect()
        };
        Ok(Upstreams {
            named: make(&previous.named, named, Some("upstreams"))?,
            proxies: make(&previous.proxies, proxies, None)?,
            apps: HashMap::new(),
        })
    }

    /// The named upstreams' state, by name.
    pub(crate) fn status(&self) -> BTreeMap<String, UpstreamStatus> {
        self.named
            .iter()
            .map(|(n, u)| (n.clone(), u.status()))
            .collect()
    }
}

/// Where the `tls` object of an upstream is: `upstreams/NAME/tls`. A `proxy` action's target (no section)
/// has no `tls` object, nor any file to read: its path is never shown.
fn tls_path(section: Option<&str>, name: &str) -> JsonPath {
    match section {
        Some(section) => JsonPath::root().key(section).key(name).key("tls"),
        None => JsonPath::root().key("routes"),
    }
}

fn reuse_or_create(
    old: Option<&Arc<Upstream>>,
    name: &str,
    section: Option<&str>,
    conf: &UpstreamConf,
    roots: &mut SystemRoots,
) -> Result<Arc<Upstream>, tls::SetupError> {
    if let Some(old) = old.filter(|o| o.conf == *conf) {
        return Ok(old.clone());
    }
    // A server's connections are kept only while it is reached the same way: with other TLS settings, its
    // pooled connections (and its health) belong to another way of reaching it.
    let previous = old.filter(|o| o.conf.tls == conf.tls).map(|o| o.members());
    let kept = |addr: &ServerAddr| {
        previous
            .iter()
            .flat_map(|p| p.iter())
            .find(|m| m.state.addr == *addr)
            .map(|m| m.state.clone())
    };
    // The configuration (and the files it reads) only for servers not kept: compile refused a `tls` upstream
    // with a server it cannot name (a Unix socket), so each gets its target.
    let tls_config = match &conf.tls {
        Some(tls) if conf.servers.iter().any(|s| kept(&s.addr).is_none()) => {
            Some((tls::client_config(tls, roots)?, tls))
        }
        _ => None,
    };
    let fresh = |addr: &ServerAddr| {
        let target = tls_config.as_ref().and_then(|(config, tls)| {
            TlsTarget::new(config.clone(), tls.server_name.as_ref(), addr)
        });
        Arc::new(match target {
            Some(target) => ServerState::with_tls(addr.clone(), target),
            None => ServerState::new(addr.clone()),
        })
    };
    let members = conf
        .servers
        .iter()
        .map(|s| Member {
            weight: s.weight,
            max_connections: s.max_connections,
            pipelining: u32::from(s.pipelining),
            state: kept(&s.addr).unwrap_or_else(|| fresh(&s.addr)),
        })
        .collect::<Vec<_>>();
    // A server kept across a change keeps its health, but not a verdict of active checks that are now off:
    // nothing would ever probe it back, and it would stay out for good.
    if conf.active.is_none() {
        for m in &members {
            m.state.forget_probes();
        }
    }
    Ok(match section {
        Some(_) => Upstream::named(name, conf.clone(), members),
        None => Upstream::new(name, conf.clone(), members),
    })
}

mod check;

/// Closes pooled connections once idle for the upstream's idle timeout, checking at half that interval (at
/// most once a second), until the upstream is gone. Taking a connection drops the expired ones too, but a
/// server with no requests would keep them, and their buffers, for good.
async fn sweep(upstream: WeakUpstream) {
    let every = match upstream.upgrade() {
        Some(u) => (u.conf.timeouts.idle / 2).max(Duration::from_secs(1)),
        None => return,
    };
    let mut ticker = Ticker::new(upstream, every);
    while let Some(upstream) = ticker.next().await {
        let idle = upstream.conf.timeouts.idle;
        for member in upstream.members().iter() {
            if let Some(conns) = member.state.conns.get() {
                conns.expire(idle);
            }
        }
    }
}

/// For the background tasks (checks, sweeps): a weak handle, so they end when the configuration that made
/// them is gone.
type WeakUpstream = Weak<Upstream>;

/// Ticks at an interval for as long as an upstream lives.
struct Ticker {
    upstream: WeakUpstream,
    ticks: tokio::time::Interval,
}

impl Ticker {
    fn new(upstream: WeakUpstream, every: Duration) -> Ticker {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Ticker { upstream, ticks }
    }

    /// The upstream at the next tick; `None` once it is gone.
    async fn next(&mut self) -> Option<Arc<Upstream>> {
        self.ticks.tick().await;
        self.upstream.upgrade()
    }
}
