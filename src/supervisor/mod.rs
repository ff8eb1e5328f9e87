//! Application processes: rein runs them, hands them their listening socket, gates traffic on readiness,
//! restarts them when they crash, and replaces them by rolling reloads without failing a request.
//!
//! Each application has a [`runner`] task driving a pure state [`machine`]; its ready instances are the
//! members of an [`Upstream`], so requests reach them through the proxy with its retries and its wait for an
//! available server. [`Supervisor::apply`] is the plan from one configuration to the next: start new
//! applications, reload changed ones, stop removed ones, leave the rest alone.

pub mod conf;
mod executable;
pub(crate) mod isolation;
pub mod kind;
mod launch;
pub mod layout;
mod leftovers;
pub(crate) mod logline;
pub mod logs;
mod machine;
mod ready;
mod runner;
pub mod spawn;
pub mod watch;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use crate::config::{ConfigError, JsonPath};
use crate::stats::snapshot::{
    AppRequests, AppStatus as StatusOfApp, ExitedStatus, InstanceStatus, Processes, ReloadStatus,
};
use crate::upstream::balance::Balance;
use crate::upstream::conf::UpstreamConf;
use crate::upstream::{ServerState, Upstream};
use conf::AppConf;
use kind::{Check, SupportFiles};
use machine::{AppStatus, InstanceId, InstanceState, ReloadReport};
pub(crate) use runner::Replaced;
use runner::{Command, Runner};

/// Where the supervisor keeps one application's sockets and log, and the support files apps read.
#[derive(Debug, Clone)]
pub struct Paths {
    pub sockets: PathBuf,
    pub log: PathBuf,
    /// rein's files the apps read.
    pub files: SupportFiles,
    /// Where running instances are recorded ([`leftovers`]).
    pub pids: PathBuf,
}

/// The supervisor's directories under `state_dir`, and rein's adapters.
fn prepare(state_dir: &Path) -> std::io::Result<()> {
    let run = state_dir.join("run");
    layout::dir(&run, layout::TRAVERSABLE)?;
    layout::dir(&run.join(layout::SOCKETS), layout::PRIVATE)?;
    layout::dir(&run.join(leftovers::DIR), layout::PRIVATE)?;
    layout::dir(&state_dir.join("logs"), layout::PRIVATE)?;
    for adapter in kind::ADAPTERS {
        let dir = run.join(adapter.dir);
        layout::dir(&dir, layout::READABLE)?;
        layout::write_readable(&dir.join(adapter.file), adapter.source)?;
    }
    Ok(())
}

/// Whether every path the app's `watch` names exists.
fn check_watched(conf: &AppConf, at: &JsonPath) -> Result<(), ConfigError> {
    match conf
        .watch
        .iter()
        .flat_map(|w| &w.paths)
        .find(|p| !p.exists())
    {
        Some(missing) => Err(at
            .key("watch")
            .key("paths")
            .error(format!("{} does not exist", missing.display()))),
        None => Ok(()),
    }
}

/// What `/status` shows of an application, refreshed by its runner.
#[derive(Default)]
pub struct AppView {
    status: Option<AppStatus>,
    servers: HashMap<InstanceId, Arc<ServerState>>,
    started: HashMap<InstanceId, Instant>,
    /// Requests answered and failed while the last reload ran.
    reload_counts: Option<ReloadCounts>,
}

/// The requests one reload saw: answered by the app, and failed by rein (502/503/504).
#[derive(Debug, Clone, Copy)]
struct ReloadCounts {
    generation: u64,
    served: u64,
    failed: u64,
}

struct App {
    conf: AppConf,
    upstream: Arc<Upstream>,
    commands: mpsc::UnboundedSender<Command>,
    view: Arc<Mutex<AppView>>,
}

pub struct Supervisor {
    dir: PathBuf,
    /// The user an application without `user` runs as (rein's `--user`, when rein is root).
    default_user: Option<String>,
    node: Option<(PathBuf, PathBuf)>,
    apps: Mutex<BTreeMap<String, App>>,
}

impl Supervisor {
    /// A supervisor keeping its files under `state_dir` (the layout: [`layout`]). A state directory that
    /// cannot be prepared (read-only, full) does not stop rein: what needs no application is served, and each
    /// application fails to start with its own error until the directory can be written.
    ///
    /// `default_user` is who an application without `user` runs as: Unit runs its applications as an
    /// unprivileged user (its `--user`, `nobody` by default) rather than as the root it was started as.
    pub fn new(state_dir: &Path, default_user: Option<String>) -> Supervisor {
        let run = state_dir.join("run");
        if let Err(e) = prepare(state_dir) {
            tracing::error!(dir = %state_dir.display(), error = %e, "cannot prepare the applications' directories: applications cannot start until it can be written");
        }
        let stopped = leftovers::stop_all(&run.join(leftovers::DIR));
        if !stopped.is_empty() {
            tracing::warn!(groups = ?stopped, "stopped application processes a previous rein left running");
        }
        Supervisor {
            dir: state_dir.to_owned(),
            default_user,
            node: kind::node::install_node_support(&run).ok(),
            apps: Mutex::new(BTreeMap::new()),
        }
    }

    /// rein's files the apps read, where [`prepare`] wrote them.
    fn files(&self) -> SupportFiles {
        SupportFiles {
            node: self.node.clone(),
            run: self.dir.join("run"),
        }
    }

    fn apps(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, App>> {
        self.apps.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks what only the filesystem can tell: each executable exists and can be run, each watched path
    /// exists, and a PHP app's `options.file` is a file. The error names the key to blame.
    pub fn validate(&self, apps: &BTreeMap<String, AppConf>) -> Result<(), ConfigError> {
        for (name, conf) in &self.with_default_user(apps) {
            let at = JsonPath::root().key("applications").key(name);
            check_watched(conf, &at)?;
            self.check_support_files(conf, &at)?;
            isolation::check_app(name, conf, &at)?;
            self.check_program(name, conf, &at)?;
        }
        Ok(())
    }

    /// Whether the app's user, when it is another user (rein being root), can read the support files rein
    /// gives the app (the Node.js preload, the Python adapter): they live in the state directory, and a
    /// directory above it may be closed to that user. Checked before the program, whose own failure (a
    /// Python import check that cannot open the adapter) would blame another key.
    fn check_support_files(&self, conf: &AppConf, at: &JsonPath) -> Result<(), ConfigError> {
        let Some(user) = conf.user.as_deref() else {
            return Ok(());
        };
        if !nix::unistd::geteuid().is_root() {
            return Ok(());
        }
        let Some(file) = conf.kind.support_file(&self.files()) else {
            return Ok(());
        };
        layout::check_readable(&file, user, conf.group.as_deref()).map_err(|e| match &e {
            e if e.is_about_the_group() => at.key("group").error(e.to_string()),
            layout::ReadableError::Closed { .. } => at.key("user").error(format!(
                "{e}; rein's support files are in its state directory (--state): give it one that user can reach"
            )),
            e => at.key("user").error(e.to_string()),
        })
    }

    /// Whether the app's program can start, as its type checks it (the executable; PHP-FPM for PHP; for an
    /// adapter's app, that it loads, unless it runs unchanged already).
    fn check_program(&self, name: &str, conf: &AppConf, at: &JsonPath) -> Result<(), ConfigError> {
        let paths = self.paths(name);
        // Started as an instance would be (environment, user, group), on a socket it never uses.
        let spec = || {
            let socket = spawn::AppSocket::Unix(paths.sockets.join("check.sock"));
            launch::spec(name, conf, &paths, socket, 0)
        };
        conf.kind.check(&Check {
            conf,
            at,
            unchanged: self.apps().get(name).is_some_and(|app| app.conf == *conf),
            spec: &spec,
        })
    }

    /// Moves the running applications to `apps`; returns each application's upstream for routing, and the
    /// reloads of the changed ones, to wait for.
    pub fn apply(
        &self,
        apps: &BTreeMap<String, AppConf>,
    ) -> (HashMap<String, Arc<Upstream>>, Reloads) {
        let mut reloads = Reloads::default();
        let apps = &self.with_default_user(apps);
        let mut running = self.apps();
        let gone: Vec<String> = running
            .keys()
            .filter(|n| !apps.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(app) = running.remove(&name) {
                tracing::info!(app = %name, "application removed: stopping it");
                let (done, _) = oneshot::channel();
                let _ = app.commands.send(Command::Shutdown(done));
            }
        }
        for (name, conf) in apps {
            match running.get_mut(name) {
                Some(app) if app.conf == *conf => {}
                Some(app) => {
                    tracing::info!(app = %name, "application changed: rolling reload");
                    app.conf = conf.clone();
                    let (reply, report) = oneshot::channel();
                    let update = Command::Update(Box::new(conf.clone()), Some(reply));
                    if app.commands.send(update).is_ok() {
                        reloads.0.push((name.clone(), conf.ready_timeout, report));
                    }
                }
                None => {
                    let app = self.start(name, conf);
                    running.insert(name.clone(), app);
                }
            }
        }
        let upstreams = running
            .iter()
            .map(|(n, a)| (n.clone(), a.upstream.clone()))
            .collect();
        (upstreams, reloads)
    }

    /// The applications as they run: one without `user` gets the default user, if there is one.
    fn with_default_user(&self, apps: &BTreeMap<String, AppConf>) -> BTreeMap<String, AppConf> {
        let mut apps = apps.clone();
        if let Some(user) = &self.default_user {
            for conf in apps.values_mut().filter(|c| c.user.is_none()) {
                conf.user = Some(user.clone());
            }
        }
        apps
    }

    /// Where application `name` keeps its sockets and log.
    fn paths(&self, name: &str) -> Paths {
        Paths {
            sockets: self
                .dir
                .join("run")
                .join(layout::SOCKETS)
                .join(layout::sockets_dir_name(name)),
            log: self.log_path(name),
            files: self.files(),
            pids: self.dir.join("run").join(leftovers::DIR),
        }
    }

    fn start(&self, name: &str, conf: &AppConf) -> App {
        let paths = self.paths(name);
        let _ = std::fs::create_dir_all(&paths.sockets);
        let upstream = Upstream::dynamic(&format!("applications/{name}"), upstream_conf(conf));
        let view = Arc::new(Mutex::new(AppView::default()));
        let commands = Runner::start(
            name.to_owned(),
            conf.clone(),
            paths,
            upstream.clone(),
            view.clone(),
        );
        App {
            conf: conf.clone(),
            upstream,
            commands,
            view,
        }
    }

    /// The file holding an application's standard output and error.
    pub fn log_path(&self, name: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{name}.log"))
    }

    /// A rolling reload of `name`; answers when it is done (or abandoned).
    pub async fn restart(&self, name: &str) -> Option<ReloadReport> {
        let (reply, report) = oneshot::channel();
        {
            let apps = self.apps();
            let app = apps.get(name)?;
            app.commands.send(Command::Reload(Some(reply))).ok()?;
        }
        report.await.ok()
    }

    /// Replaces instance `id` of `name` by a new one started beside it; answers once the new one serves (or
    /// failed, the old one serving on). `None` when there is no such application.
    pub async fn replace(&self, name: &str, id: u64) -> Option<Replaced> {
        let (reply, outcome) = oneshot::channel();
        {
            let apps = self.apps();
            let app = apps.get(name)?;
            app.commands.send(Command::Replace(id, reply)).ok()?;
        }
        outcome.await.ok()
    }

    /// Stops every application, waiting up to `deadline`.
    pub async fn shutdown(&self, deadline: Duration) {
        let waits: Vec<oneshot::Receiver<()>> = std::mem::take(&mut *self.apps())
            .into_values()
            .filter_map(|app| {
                let (done, wait) = oneshot::channel();
                app.commands
                    .send(Command::Shutdown(done))
                    .ok()
                    .map(|_| wait)
            })
            .collect();
        let _ = tokio::time::timeout(deadline, futures_util::future::join_all(waits)).await;
    }

    /// Each application's state, instances and Unit's counts, by name.
    pub(crate) fn status(&self) -> BTreeMap<String, StatusOfApp> {
        let apps = self.apps();
        apps.iter()
            .map(|(name, app)| {
                let locked = app.view.lock().unwrap_or_else(|e| e.into_inner());
                let queued = app.upstream.queued();
                let (processes, in_flight) = unit_counts(&locked);
                let mut status = view_status(&locked);
                drop(locked);
                status.queued = queued;
                status.processes = processes;
                status.requests = AppRequests {
                    active: in_flight + u64::from(queued),
                };
                (name.clone(), status)
            })
            .collect()
    }
}

/// The rolling reloads a configuration change started: each changed application, its readiness timeout, and
/// the report of its reload.
#[derive(Default)]
pub struct Reloads(Vec<(String, Duration, oneshot::Receiver<ReloadReport>)>);

impl Reloads {
    /// Waits until each changed application's new instances serve, or its reload is abandoned, or its
    /// readiness timeout (and a second) has passed; returns what happened to those whose new instances do not
    /// serve, by name. The previous instances keep serving those.
    pub async fn wait(self) -> BTreeMap<String, String> {
        let waits = self.0.into_iter().map(|(name, timeout, report)| async move {
            let wait = timeout + Duration::from_secs(1);
            let outcome = match tokio::time::timeout(wait, report).await {
                Ok(Ok(report)) if report.ok => return None,
                Ok(Ok(report)) => format!(
                    "the new instances failed ({}); the previous instances keep serving",
                    report.reason.as_deref().unwrap_or("no reason given")
                ),
                Ok(Err(_)) => return None,
                Err(_) => format!(
                    "the new instances were not ready within {} s; the previous instances serve until they are",
                    wait.as_secs_f64()
                ),
            };
            Some((name, outcome))
        });
        futures_util::future::join_all(waits)
            .await
            .into_iter()
            .flatten()
            .collect()
    }
}

/// The upstream behind an application: the instance with the fewest requests in flight, no passive health
/// (the supervisor knows when an instance dies), retries of idempotent requests caught on a dying instance,
/// and a wait while no instance is ready.
fn upstream_conf(conf: &AppConf) -> UpstreamConf {
    let mut u = UpstreamConf::with_servers(Vec::new());
    // An instance is usually one event loop or one worker (Node.js, Python, PHP-FPM's pool): one stalled by a
    // garbage collection, a slow request or the scheduler keeps its requests in flight, and round-robin would
    // keep queueing its share behind them while the others idle. Ties, as when idle, alternate; an app that
    // scales packs them onto its oldest instances instead, so that light traffic lets the newest fall idle
    // and be retired (`Runner::scale`).
    u.balance = match conf.scale {
        Some(scale) if scale.max > scale.spare => Balance::Packed,
        _ => Balance::LeastConnections,
    };
    u.passive.failures = 0;
    u.queue_timeout = conf.ready_timeout.min(Duration::from_secs(30));
    // `limits.timeout` bounds the whole exchange: waiting for the answer, and waiting for the app to take the
    // request's body.
    if let Some(t) = conf.request_timeout {
        u.timeouts.read = t;
        u.timeouts.send = t;
    }
    // A request the app took longer than `limits.timeout` over is a 504 there and then: not sent again to
    // another instance (where it would run twice), nor kept waiting for one. Retries of requests caught on a
    // dying instance, sooner, still go on.
    u.retries.timeout = u.retries.timeout.min(u.timeouts.read);
    u
}

/// Unit's `processes` counts and the requests in flight to the instances.
fn unit_counts(view: &AppView) -> (Processes, u64) {
    let (mut running, mut starting, mut idle, mut in_flight) = (0u64, 0u64, 0u64, 0u64);
    for i in view.status.iter().flat_map(|s| &s.instances) {
        let active = view.servers.get(&i.id).map_or(0, |s| u64::from(s.active()));
        in_flight += active;
        match i.state {
            InstanceState::Starting => starting += 1,
            InstanceState::Ready | InstanceState::Draining => {
                running += 1;
                if active == 0 && i.state == InstanceState::Ready {
                    idle += 1;
                }
            }
            InstanceState::Stopping | InstanceState::Stopped | InstanceState::Errored => {}
        }
    }
    let processes = Processes {
        running,
        starting,
        idle,
    };
    (processes, in_flight)
}

fn view_status(view: &AppView) -> StatusOfApp {
    let Some(status) = &view.status else {
        return StatusOfApp::default();
    };
    let now = Instant::now();
    let handoff = |s: Option<&Arc<ServerState>>| s.and_then(|s| s.handoff.clone());
    let instances = status
        .instances
        .iter()
        .map(|i| {
            let server = view.servers.get(&i.id);
            let usage = i.pid.and_then(crate::stats::process::instance_usage);
            InstanceStatus {
                id: i.id,
                pid: i.pid,
                state: state_name(i.state),
                generation: i.generation,
                uptime: view
                    .started
                    .get(&i.id)
                    .map(|s| now.duration_since(*s).as_secs_f64()),
                restarts: i.restarts,
                rss_bytes: usage.map(|u| u.rss_bytes),
                requests: server.map(|s| s.requests()),
                in_flight: server.map(|s| s.active()),
                idle_connections: server.map(|s| s.idle_connections()),
                connections_opened: server.map(|s| s.connections_opened()),
                pipelined: server.map(|s| s.pipelined()),
                connections_handed: handoff(server).map(|c| c.handed()),
                connections_returned: handoff(server).map(|c| c.returned()),
                cpu_seconds: usage.map(|u| u.cpu_seconds),
            }
        })
        .collect();
    // The counts of that very reload only (both are taken as it ends).
    let counts = view.reload_counts.filter(|c| {
        status
            .last_reload
            .as_ref()
            .is_some_and(|r| r.generation == c.generation)
    });
    let exited = status
        .exited
        .iter()
        .map(|e| ExitedStatus {
            id: e.id,
            pid: e.pid,
            state: state_name(e.state),
            generation: e.generation,
            reason: e.reason.clone(),
            seconds_ago: now.duration_since(e.at).as_secs_f64(),
        })
        .collect();
    let state = if status.errored.is_some() {
        "errored"
    } else if status.reloading {
        "reloading"
    } else {
        "running"
    };
    StatusOfApp {
        generation: Some(status.generation),
        state: Some(state),
        errored: status.errored.clone(),
        instances,
        exited: Some(exited),
        replacements: Some(status.replacements),
        last_reload: status.last_reload.as_ref().map(|r| ReloadStatus {
            ok: r.ok,
            generation: r.generation,
            seconds: r.took.as_secs_f64(),
            reason: r.reason.clone(),
            requests_served: counts.map(|c| c.served),
            requests_failed: counts.map(|c| c.failed),
        }),
        ..StatusOfApp::default()
    }
}

fn state_name(state: InstanceState) -> &'static str {
    match state {
        InstanceState::Starting => "starting",
        InstanceState::Ready => "ready",
        InstanceState::Draining => "draining",
        InstanceState::Stopping => "stopping",
        InstanceState::Stopped => "stopped",
        InstanceState::Errored => "errored",
    }
}

/// Resident memory of an instance whose process is `pid` ([`crate::stats::process::instance_usage`]).
pub(crate) fn rss_bytes(pid: u32) -> Option<u64> {
    crate::stats::process::instance_usage(pid).map(|u| u.rss_bytes)
}
