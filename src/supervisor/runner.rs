//! The driver of one application: feeds the pure [`Machine`] with what happens to processes, timers and
//! the pool, and carries out the effects it returns.
//!
//! One task per application owns the machine; everything that waits (a process exiting, a readiness probe,
//! a timer, an instance draining) runs in a small task of its own and reports back as an [`Event`] on the
//! runner's channel, so the machine only ever sees one event at a time.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::conf::AppConf;
use super::isolation::InstanceCgroup;
use super::kind::LaunchError;
use super::launch::{server_addr, spec};
use super::logs::{Notices, Tail};
use super::machine::{
    Effect, Event, InstanceId, InstanceState, Machine, Policy, ReloadReport, TimerKind,
};
use super::spawn::{self, AppSocket, Output};
use super::watch;
use super::{AppView, Paths, ReloadCounts};
use crate::proxy::conns::ServerConns;
use crate::stats::counters::{AppStats, RestartCause};
use crate::upstream::{Member, ServerState, Upstream};

mod upkeep;

/// What the rest of rein asks of a running application.
pub enum Command {
    /// The configuration changed: new settings, and a rolling reload onto them; the report of the first reload
    /// that runs on them goes to the sender.
    Update(Box<AppConf>, Option<oneshot::Sender<ReloadReport>>),
    /// A rolling reload; the report goes to the sender once it is done.
    Reload(Option<oneshot::Sender<ReloadReport>>),
    /// Replace one instance by a new one started beside it (as for `limits`); the outcome goes to the sender
    /// once the new instance serves and the old one is withdrawn, or the replacement failed.
    Replace(InstanceId, oneshot::Sender<Replaced>),
    /// Stop every instance (gracefully) and end.
    Shutdown(oneshot::Sender<()>),
}

/// What became of a replacement asked for by [`Command::Replace`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replaced {
    /// The new instance serves; the old one is draining and stopping.
    Done { by: InstanceId },
    /// The new instance failed; the old one keeps serving.
    Failed(String),
    /// No running instance has that id.
    NoInstance,
    /// The instance is not serving, or a reload, another replacement or a replacement's back-off is under
    /// way: nothing was started.
    Busy,
}

/// How often memory limits and scaling are looked at.
const TICK: Duration = Duration::from_secs(1);

/// How long an exited instance's stderr is awaited, and how many of its last lines name its failure.
const STDERR_WAIT: Duration = Duration::from_millis(100);
const STDERR_LINES: usize = 5;

/// How often readiness probes and drain watchers look.
const POLL: Duration = Duration::from_millis(25);

struct Instance {
    /// The listening socket, kept open by rein for the instance's life.
    _socket: OwnedFd,
    addr: AppSocket,
    pid: Option<u32>,
    server: Arc<ServerState>,
    started: Instant,
    /// Ends the instance's probe and drain watcher.
    cancel: CancellationToken,
    /// When the instance was last seen serving, and its request count then (for scaling down).
    busy_at: Instant,
    requests_seen: u64,
    /// rein's lines about the instance in the app's log.
    notices: Notices,
}

pub struct Runner {
    name: String,
    conf: AppConf,
    paths: Paths,
    machine: Machine,
    upstream: Arc<Upstream>,
    instances: HashMap<InstanceId, Instance>,
    events: mpsc::UnboundedSender<Event>,
    respawn: Option<JoinHandle<()>>,
    waiting: Vec<oneshot::Sender<ReloadReport>>,
    /// Waiting for the first reload of a generation above the given one: the reload onto an update.
    waiting_update: Vec<(u64, oneshot::Sender<ReloadReport>)>,
    view: Arc<Mutex<AppView>>,
    /// The upstream's outcome counts when the running reload started.
    reload_base: Option<(u64, u64)>,
    /// What the last reload to end served and failed.
    reload_counts: Option<ReloadCounts>,
    /// Instances wanted now, between `spare` and `max` when the app scales.
    target: usize,
    /// When the app last scaled (one step per `idle_timeout` down).
    scaled_at: Instant,
    /// Watches the app's files (`watch`); dropped (stopped) with the runner or on a change of `watch`.
    watcher: Option<watch::Watcher>,
    /// Restarts and reloads, for the metrics; kept by the app's name across changes.
    stats: Arc<AppStats>,
    /// The replacement asked for through the API, and who waits for its outcome.
    replacing: Option<(InstanceId, oneshot::Sender<Replaced>)>,
}

pub fn policy(conf: &AppConf) -> Policy {
    Policy {
        processes: conf.processes,
        ready_timeout: conf.ready_timeout,
        stop_timeout: conf.stop_timeout,
        drain_timeout: conf.drain_timeout,
        min_restart_interval: conf.min_restart_interval,
        backoff_max: conf.backoff_max,
        max_failures: conf.max_failures,
        stable_after: conf.stable_after,
        reload: conf.reload,
    }
}

impl Runner {
    /// Starts the application's task; returns its command channel.
    pub fn start(
        name: String,
        conf: AppConf,
        paths: Paths,
        upstream: Arc<Upstream>,
        view: Arc<Mutex<AppView>>,
    ) -> mpsc::UnboundedSender<Command> {
        let (commands_tx, commands) = mpsc::unbounded_channel();
        let (events, events_rx) = mpsc::unbounded_channel();
        let (machine, effects) = Machine::new(policy(&conf), Instant::now());
        let target = conf.processes;
        let mut runner = Runner {
            stats: crate::stats::registry().app(&name),
            name,
            conf,
            paths,
            machine,
            upstream,
            instances: HashMap::new(),
            events,
            respawn: None,
            waiting: Vec::new(),
            waiting_update: Vec::new(),
            view,
            reload_base: None,
            reload_counts: None,
            target,
            scaled_at: Instant::now(),
            watcher: None,
            replacing: None,
        };
        runner.start_watching();
        tokio::spawn(async move {
            runner.carry_out(effects);
            runner.run(commands, events_rx).await;
        });
        commands_tx
    }

    async fn run(
        &mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        mut events: mpsc::UnboundedReceiver<Event>,
    ) {
        let mut done: Option<oneshot::Sender<()>> = None;
        let mut ticks = tokio::time::interval(TICK);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                Some(event) = events.recv() => {
                    self.count_restart(&event);
                    let effects = self.machine.handle(event, Instant::now());
                    self.carry_out(effects);
                }
                Some(command) = commands.recv(), if done.is_none() => {
                    done = self.command(command);
                }
                _ = ticks.tick(), if done.is_none() => self.tick(),
            }
            self.publish_view();
            if done.is_some() && self.machine.is_idle() {
                break;
            }
        }
        if let Some(done) = done {
            let _ = done.send(());
        }
    }

    /// Counts an instance that fails (exits unasked, cannot start, is not ready in time): the machine starts
    /// another in its place.
    fn count_restart(&self, event: &Event) {
        let state_of = |id: InstanceId| {
            let status = self.machine.status(Instant::now());
            status
                .instances
                .iter()
                .find(|i| i.id == id)
                .map(|i| i.state)
        };
        let cause = match event {
            Event::SpawnFailed { .. } => RestartCause::SpawnFailed,
            Event::Exited {
                oom_killed: true, ..
            } => RestartCause::OomKilled,
            Event::Exited { id, .. }
                if matches!(
                    state_of(*id),
                    Some(InstanceState::Starting | InstanceState::Ready)
                ) =>
            {
                RestartCause::Exited
            }
            Event::Timer {
                id,
                kind: TimerKind::ReadyTimeout,
            } if state_of(*id) == Some(InstanceState::Starting) => RestartCause::ReadyTimeout,
            _ => return,
        };
        self.stats.restarted(cause);
    }

    /// Starts the replacement of instance `id` asked for through the API; the machine refuses it (no effects)
    /// unless the instance is ready and no reload, replacement or back-off is under way.
    fn replace(&mut self, id: InstanceId, reply: oneshot::Sender<Replaced>, now: Instant) {
        if !self.instances.contains_key(&id) {
            let _ = reply.send(Replaced::NoInstance);
            return;
        }
        let effects = self.machine.handle(Event::Replace { id }, now);
        if effects.is_empty() {
            let _ = reply.send(Replaced::Busy);
            return;
        }
        tracing::info!(app = %self.name, instance = id, "replacing the instance, as asked");
        self.stats.restarted(RestartCause::Requested);
        self.replacing = Some((id, reply));
        self.carry_out(effects);
    }

    fn command(&mut self, command: Command) -> Option<oneshot::Sender<()>> {
        let now = Instant::now();
        let effects = match command {
            Command::Update(conf, reply) => {
                if let Some(reply) = reply {
                    self.waiting_update
                        .push((self.newest_generation(now), reply));
                }
                let rewatch = conf.watch != self.conf.watch;
                self.conf = *conf;
                self.target = self.conf.processes;
                if rewatch {
                    self.start_watching();
                }
                let mut effects = self.machine.set_policy(policy(&self.conf), now);
                effects.extend(self.machine.handle(Event::Reload, now));
                effects
            }
            Command::Reload(reply) => {
                self.waiting.extend(reply);
                self.machine.handle(Event::Reload, now)
            }
            Command::Replace(id, reply) => {
                self.replace(id, reply, now);
                return None;
            }
            Command::Shutdown(done) => {
                let effects = self.machine.handle(Event::Shutdown, now);
                self.carry_out(effects);
                return Some(done);
            }
        };
        self.carry_out(effects);
        None
    }

    fn carry_out(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::Spawn { id, generation } => self.spawn(id, generation),
                Effect::Admit { id } => self.admit(id),
                Effect::Withdraw { id } => self.withdraw(id),
                Effect::Stop { id } => self.stop(id),
                Effect::Kill { id } => self.signal(id, Signal::SIGKILL),
                Effect::ArmTimer { id, kind, after } => {
                    self.later(after, Event::Timer { id, kind });
                }
                Effect::ArmRespawn { after } => {
                    if let Some(old) = self.respawn.take() {
                        old.abort();
                    }
                    self.respawn = Some(self.later(after, Event::RespawnDue));
                }
                Effect::ReloadDone(report) => self.reload_done(report),
                Effect::ReplaceDone {
                    old,
                    new,
                    ok,
                    reason,
                } => {
                    if ok {
                        tracing::info!(app = %self.name, instance = old, by = new, "instance replaced");
                    } else {
                        tracing::warn!(app = %self.name, instance = old, by = new, reason, "replacement ended early; the instance keeps its place");
                    }
                    if let Some((_, reply)) = self.replacing.take_if(|(id, _)| *id == old) {
                        let _ = reply.send(match ok {
                            true => Replaced::Done { by: new },
                            false => Replaced::Failed(reason.unwrap_or_default()),
                        });
                    }
                }
                Effect::Errored { reason } => {
                    tracing::error!(app = %self.name, reason, "application errored: retrying it every restart.backoff_max");
                }
            }
        }
    }

    fn later(&self, after: Duration, event: Event) -> JoinHandle<()> {
        let events = self.events.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let _ = events.send(event);
        })
    }

    fn spawn(&mut self, id: InstanceId, generation: u64) {
        let started = self.start_process(id);
        let event = match started {
            Ok(pid) => Event::Spawned { id, pid },
            Err(error) => {
                tracing::error!(app = %self.name, instance = id, generation, %error, "cannot start the application");
                self.notices(id).write(&format!("not started: {error}"));
                Event::SpawnFailed {
                    id,
                    error: error.to_string(),
                }
            }
        };
        let _ = self.events.send(event);
    }

    /// rein's lines about instance `id` when it has no process to hold them: into the file its stderr (else
    /// its stdout) would go to, if that can be opened.
    fn notices(&self, id: InstanceId) -> Notices {
        let default = Output::Log(self.paths.log.clone());
        let err = self.conf.stderr.as_ref().unwrap_or(&default);
        let out = self.conf.stdout.as_ref().unwrap_or(&default);
        let log = err
            .path()
            .or(out.path())
            .and_then(|path| super::logs::shared(path, Default::default()).ok());
        Notices::new(log, id)
    }

    /// Creates the instance's socket and process, and the tasks that watch them.
    fn start_process(&mut self, id: InstanceId) -> Result<u32, StartError> {
        let (socket, addr) =
            spawn::listen(self.conf.socket, &self.paths.sockets, id).map_err(StartError::Socket)?;
        let spec = spec(&self.name, &self.conf, &self.paths, addr.clone(), id)?;
        // A handoff instance's channel: rein keeps one end, the child gets the other (closed here once it
        // is spawned, so that rein reads the end of the channel when the instance exits).
        let pair = match self.conf.kind.hands_off() {
            true => Some(tokio::net::UnixStream::pair().map_err(StartError::Socket)?),
            false => None,
        };
        let spawned = spawn::spawn_with(
            &spec,
            socket.as_fd(),
            pair.as_ref().map(|(_, child)| child.as_fd()),
        )
        .map_err(StartError::Spawn)?;
        let channel = pair.map(|(ours, _)| crate::handoff::Channel::start(ours));
        let pid = spawned.child.id().ok_or(StartError::ExitedAtOnce)?;
        super::leftovers::record(&self.paths.pids, pid);
        tracing::info!(app = %self.name, instance = id, pid, socket = %addr, "instance started");
        let notices = spawned.notices;
        let cancel = CancellationToken::new();
        self.watch_exit(
            id,
            spawned.child,
            spawned.stderr,
            spawned.stderr_tail,
            notices.clone(),
            spawned.cgroup,
        );
        self.probe(id, addr.clone(), cancel.clone());
        let server = Arc::new(match (self.conf.kind.speaks_fastcgi(), channel) {
            (true, _) => {
                let per_worker = self.conf.kind.fastcgi_per_worker();
                ServerState::with_conns(server_addr(&addr), ServerConns::own_fastcgi(per_worker))
            }
            (false, Some(channel)) => ServerState::handing_off(server_addr(&addr), channel),
            (false, None) => ServerState::new(server_addr(&addr)),
        });
        self.instances.insert(
            id,
            Instance {
                _socket: socket,
                addr,
                pid: Some(pid),
                server,
                started: Instant::now(),
                cancel,
                busy_at: Instant::now(),
                requests_seen: 0,
                notices,
            },
        );
        Ok(pid)
    }

    /// Reports the exit the moment it happens (tokio's child reaper), never by polling, with the last lines
    /// of its stderr.
    fn watch_exit(
        &self,
        id: InstanceId,
        mut child: tokio::process::Child,
        stderr_pump: JoinHandle<std::io::Result<u64>>,
        stderr_tail: Arc<Mutex<Tail>>,
        notices: Notices,
        cgroup: Option<InstanceCgroup>,
    ) {
        let events = self.events.clone();
        let leader = child.id();
        let pids = self.paths.pids.clone();
        let app = self.name.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            // What the instance left behind (workers of a killed master, stray grandchildren) goes with it:
            // it would hold the socket and serve requests nobody supervises.
            if let Some(pid) = leader {
                let _ = spawn::signal_group(pid, Signal::SIGKILL);
                super::leftovers::forget(&pids, pid);
            }
            // Its last words may still be in the pipe: the pump ends as soon as the group is gone, within a
            // millisecond or so; bounded (an escaped grandchild may hold the pipe) so that a crash still
            // leaves the pool at once.
            let _ = tokio::time::timeout(STDERR_WAIT, stderr_pump).await;
            let stderr = stderr_tail
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .reason(STDERR_LINES);
            let (code, signal) = match status {
                Ok(s) => {
                    use std::os::unix::process::ExitStatusExt;
                    (s.code(), s.signal())
                }
                Err(_) => (None, None),
            };
            let oom_killed = cgroup.as_ref().is_some_and(InstanceCgroup::oom_killed);
            // Usually empty by now (the group is killed and the leader reaped): removed before rein may exit.
            let cgroup = cgroup.filter(|c| !c.remove());
            // After its last words (the pump above), so the log reads in order.
            let mut notice = exit_notice(code, signal);
            if oom_killed {
                notice.push_str(
                    ": out of memory (the kernel's OOM killer, over isolation.cgroup.memory_max)",
                );
                tracing::warn!(%app, instance = id, pid = leader, "instance killed by the kernel's OOM killer over its cgroup's memory_max");
            }
            notices.write(&notice);
            let _ = events.send(Event::Exited {
                id,
                code,
                signal,
                stderr,
                oom_killed,
            });
            if let Some(cgroup) = cgroup {
                remove_cgroup(cgroup).await;
            }
        });
    }

    /// Tries the readiness check until it passes (the machine's ready timeout bounds the wait).
    fn probe(&self, id: InstanceId, addr: AppSocket, cancel: CancellationToken) {
        let events = self.events.clone();
        let readiness = self.conf.readiness.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    ready = super::ready::check(&addr, &readiness) => if ready {
                        let _ = events.send(Event::Ready { id });
                        return;
                    },
                }
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(POLL) => {}
                }
            }
        });
    }

    fn admit(&mut self, id: InstanceId) {
        let Some(instance) = self.instances.get(&id) else {
            return;
        };
        let mut members: Vec<Member> = self.upstream.members().as_ref().clone();
        members.push(Member {
            weight: 1.0,
            max_connections: self.conf.kind.concurrency(),
            pipelining: self.conf.kind.pipelining(),
            state: instance.server.clone(),
        });
        self.upstream.set_members(members);
        tracing::info!(app = %self.name, instance = id, socket = %instance.addr, "instance ready: taking requests");
        instance.notices.write("ready: taking requests");
    }

    /// Takes the instance out of the pool, and reports `Drained` once its requests in flight are done.
    fn withdraw(&mut self, id: InstanceId) {
        let Some(instance) = self.instances.get(&id) else {
            return;
        };
        let members: Vec<Member> = self
            .upstream
            .members()
            .iter()
            .filter(|m| !Arc::ptr_eq(&m.state, &instance.server))
            .cloned()
            .collect();
        self.upstream.set_members(members);
        let (server, cancel, events) = (
            instance.server.clone(),
            instance.cancel.clone(),
            self.events.clone(),
        );
        let requests = server.withdraw();
        // A handoff instance hands its idle connections back and says when it holds none.
        if let Some(channel) = &server.handoff {
            channel.drain();
        }
        let held = |s: &ServerState| s.handoff.as_ref().is_some_and(|c| !c.is_drained());
        let mut busy = requests || held(&server);
        tokio::spawn(async move {
            while busy {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(POLL) => {}
                }
                busy = server.busy() || held(&server);
            }
            let _ = events.send(Event::Drained { id });
        });
    }

    /// Closes rein's idle connections to the instance, then sends the stop signal: the instance is drained
    /// and withdrawn already, so nothing will use them, and it need not wait on them while it stops.
    fn stop(&mut self, id: InstanceId) {
        if let Some(instance) = self.instances.get(&id) {
            instance.server.close_idle();
        }
        self.signal(id, self.conf.stop_signal);
    }

    fn signal(&mut self, id: InstanceId, signal: Signal) {
        let Some((pid, notices)) = self
            .instances
            .get(&id)
            .and_then(|i| Some((i.pid?, &i.notices)))
        else {
            return;
        };
        notices.write(&format!("stopping: {signal} sent"));
        if let Err(e) = spawn::signal_group(pid, signal) {
            tracing::debug!(app = %self.name, instance = id, pid, %e, "signal not delivered");
        }
    }

    /// (Re)starts watching the configured files: a change becomes a rolling reload, never a hard restart.
    fn start_watching(&mut self) {
        self.watcher = None;
        let Some(conf) = &self.conf.watch else {
            return;
        };
        let (events, name) = (self.events.clone(), self.name.clone());
        let started = watch::start(conf, move |changed| {
            tracing::info!(app = %name, file = %changed.display(), "file changed: rolling reload");
            let _ = events.send(Event::Reload);
        });
        match started {
            Ok(w) => self.watcher = Some(w),
            Err(e) => {
                tracing::error!(app = %self.name, error = %e, "cannot watch the application's files")
            }
        }
    }

    fn reload_done(&mut self, report: ReloadReport) {
        self.stats.reloaded(report.ok, report.took);
        // Counted here, at the reload's own end, not when the machine is next seen idle: a queued reload begins
        // in the same step as this one ends, and its counts would otherwise be folded into the next one's.
        let outcomes = self.upstream.outcomes();
        let base = self.reload_base.take().unwrap_or(outcomes);
        self.reload_counts = Some(ReloadCounts {
            generation: report.generation,
            served: outcomes.0 - base.0,
            failed: outcomes.1 - base.1,
        });
        if report.ok {
            tracing::info!(app = %self.name, generation = report.generation, took_ms = report.took.as_millis() as u64, "reload done");
        } else {
            tracing::error!(app = %self.name, generation = report.generation, reason = ?report.reason, "reload abandoned; the previous instances keep serving");
        }
        for waiter in self.waiting.drain(..) {
            let _ = waiter.send(report.clone());
        }
        let (done, waiting) = std::mem::take(&mut self.waiting_update)
            .into_iter()
            .partition(|(after, _)| report.generation > *after);
        self.waiting_update = waiting;
        for (_, waiter) in done {
            let _ = waiter.send(report.clone());
        }
    }

    /// The newest generation begun: a reload's target while one runs. A reload that starts later (a queued
    /// one included) has a higher one, and runs on the configuration set now.
    fn newest_generation(&self, now: Instant) -> u64 {
        let status = self.machine.status(now);
        let instances = status.instances.iter().map(|i| i.generation);
        instances.fold(status.generation, u64::max)
    }

    /// Refreshes what `/status` shows, and forgets instances that have exited.
    fn publish_view(&mut self) {
        let now = Instant::now();
        let status = self.machine.status(now);
        let live: Vec<InstanceId> = status.instances.iter().map(|i| i.id).collect();
        self.instances.retain(|id, instance| {
            let keep = live.contains(id);
            if !keep {
                instance.cancel.cancel();
                if let AppSocket::Unix(path) = &instance.addr {
                    let _ = std::fs::remove_file(path);
                }
                self.conf
                    .kind
                    .instance_gone(&instance.addr, &self.paths.sockets);
            }
            keep
        });
        let servers: HashMap<InstanceId, Arc<ServerState>> = self
            .instances
            .iter()
            .map(|(id, i)| (*id, i.server.clone()))
            .collect();
        self.upstream.set_errored(status.errored.is_some());
        if status.reloading && self.reload_base.is_none() {
            self.reload_base = Some(self.upstream.outcomes());
        }
        let mut view = self.view.lock().unwrap_or_else(|e| e.into_inner());
        view.reload_counts = self.reload_counts;
        view.status = Some(status);
        view.servers = servers;
        view.started = self
            .instances
            .iter()
            .map(|(id, i)| (*id, i.started))
            .collect();
    }
}

/// Why an instance could not be started; the state machine records it as the instance's failure.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error("cannot create the socket: {0}")]
    Socket(std::io::Error),
    #[error("cannot prepare the instance: {0}")]
    Launch(#[from] LaunchError),
    #[error("{0}")]
    Spawn(std::io::Error),
    #[error("the process exited at once")]
    ExitedAtOnce,
}

/// Removes an exited instance's cgroup still held by a process that is leaving it.
async fn remove_cgroup(cgroup: InstanceCgroup) {
    for _ in 0..40 {
        if cgroup.remove() {
            return;
        }
        tokio::time::sleep(POLL).await;
    }
    tracing::warn!(cgroup = ?cgroup, "cannot remove an exited instance's cgroup: it still holds processes");
}

/// rein's line in the app's log when an instance has exited: how it ended.
fn exit_notice(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(n)) => match Signal::try_from(n) {
            Ok(signal) => format!("killed by {signal}"),
            Err(_) => format!("killed by signal {n}"),
        },
        (None, None) => "exited (its status could not be read)".to_owned(),
    }
}
