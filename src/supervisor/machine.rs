//! Pure supervisor state machine for one application (sans-io, like s6 and
//! Sozu's cores): `state × event → effects`. Nothing here does I/O, reads a
//! clock, spawns or signals anything; time arrives as `Instant` arguments and
//! every side effect leaves as an [`Effect`] for the async driver to carry out.
//!
//! # Model
//! The app wants `policy.processes` instances. Each instance (one process) has
//! its own small state: `Starting → Ready → Draining → Stopping → (removed)`,
//! with `Starting → Stopping` for instances that never became ready.
//!
//! * An instance is *live* while Starting or Ready. The machine keeps
//!   `live (minus the extra ones) + scheduled respawns == processes`; that
//!   count is what [`Event::Resize`] trims or fills. *Extra* instances start
//!   beside the counted ones: a reload's candidates and a replacement.
//! * Only Ready instances are in the load-balancer pool: `Admit` is emitted
//!   exactly on `Starting → Ready`, `Withdraw` exactly when leaving Ready.
//! * Retiring an instance (reload, resize down, shutdown) is graceful: a Ready
//!   one is withdrawn and drained first (`Drained` or `DrainTimeout` → Stop),
//!   a Starting one (serving nothing) is stopped at once. Stop arms
//!   `StopTimeout`, which escalates to Kill once. A retiring instance's exit
//!   is expected: no failure, no respawn.
//! * Exited instances are removed from the table; the last [`EXITED_KEPT`]
//!   are remembered apart ([`AppStatus::exited`]) as `Stopped` (an exit rein
//!   asked for) or `Errored` (a crash, a failed spawn, a ready timeout), with
//!   why and when. `is_idle` tells the driver a shutdown is complete.
//!
//! # Failures and respawn
//! A crash before `stable_after`, a spawn failure or a ready timeout is a
//! failure of the app (one consecutive counter for the whole app, reset by a
//! crash after a stable run). The replacement is scheduled after
//! `max(min_restart_interval − time since the crashed instance's spawn,
//! backoff)`, backoff being 0 after a stable run, then 1 s, 2 s, 4 s, … capped
//! at `backoff_max`. After `max_failures` consecutive failures the app is
//! Errored (its reason names the latest failure): it is still respawned, but
//! never sooner than `backoff_max` after a failure, so a cause outside the app
//! (a missing mount, a database down) heals by itself. An instance becoming
//! Ready clears Errored (not the count: one more early crash errs again);
//! Reload or Resize clears both.
//!
//! `ArmRespawn` means "(re)arm THE respawn timer": a later one replaces an
//! earlier one. The machine always re-arms for its earliest pending respawn,
//! so a driver that instead keeps every timer also works (extras are no-ops).
//!
//! # Rolling reload (documented choices)
//! * **One at a time** (the default, `ReloadStrategy::Rolling { batch: 1 }`).
//!   Generation g+1 replaces g by spawning one *candidate* beside the old
//!   instances; when it is Ready it is Admitted, then one old instance is
//!   retired, then the next candidate is spawned. Gentler than all-at-once:
//!   at most one extra process (plus those draining), a broken build is caught
//!   on its first instance, and admitted capacity never drops below its level
//!   before the reload (Admit is emitted before Withdraw).
//! * **`batch` at a time** (`Rolling { batch: n }`): the same, with up to `n`
//!   candidates starting at once (never more than still needed); each one is
//!   admitted as soon as it is Ready and retires one old instance, and the
//!   next candidate starts in its place. At most `n` extra processes.
//! * **Which old one goes:** a cancelled pending respawn first (it serves
//!   nothing), then an old Starting one, then the newest old Ready one.
//! * **Done** when every counted instance is Ready and of the new generation:
//!   `ReloadDone{ok: true}` is emitted then, while the last old ones may still
//!   be draining. It also clears Errored and the failure count.
//! * **Abandon:** if the candidate fails (exits before Ready, SpawnFailed,
//!   ReadyTimeout) the reload is abandoned: the candidate is stopped, the old
//!   generation keeps serving, `ReloadDone{ok: false}` is emitted, and this
//!   is not an app failure (no back-off, no respawn of the candidate).
//!   Candidates admitted earlier *stay in service* (they passed readiness, and
//!   withdrawing them would drop capacity); the app runs mixed generations
//!   until the next reload, status shows each instance's generation.
//! * **Reload during a reload is queued** (coalesced to one more run after the
//!   current one ends, ok or not), so the newest request always ends up
//!   applied and every run emits exactly one `ReloadDone`.
//! * Instances that crash *during* a reload are respawned with the serving
//!   (old) generation; the reload replaces them like any old one.
//! * Generations are never reused: an abandoned g+1 makes the next try g+2.
//! * A reload runs with the strategy it started with; a policy change applies
//!   from the next reload.
//!
//! # Parallel reload (blue/green, `ReloadStrategy::Parallel`)
//! * All `processes` candidates start at once. A candidate that passes its
//!   readiness check is *held*: it stays Starting (not admitted, no traffic)
//!   and its ready timeout no longer applies.
//! * **Switch** when every candidate is held: all are Admitted, then every old
//!   instance is withdrawn and drained (pending respawns are cancelled), and
//!   `ReloadDone{ok: true}` is emitted — all in the same step, Admits first,
//!   so admitted capacity never drops.
//! * **Abandon** if any candidate fails (as in a rolling reload): every
//!   candidate is stopped — none ever served — and the old generation keeps
//!   serving. So either the whole new generation serves, or none of it.
//! * Peak: twice the processes (plus those draining). A resize during the
//!   reload starts or stops candidates to match.
//!
//! # Replacing one instance ([`Event::Replace`])
//! For an instance over its memory or request limit: a *replacement* of the
//! same generation (and `restarts` count) is spawned beside it; when it is
//! Ready it is Admitted, then the old one is retired (withdrawn, drained,
//! stopped), so capacity never drops. `ReplaceDone` is emitted once per
//! accepted `Replace`.
//! * **Ignored** (the driver asks again on its next check) unless the
//!   instance is Ready; while another replacement is in flight (one at a
//!   time: at most one extra process); during a reload (the reload replaces
//!   every instance anyway); while Errored or shut down; and during the
//!   replacement back-off (below).
//! * **A reload cancels** an in-flight replacement (its new instance, which
//!   serves nothing yet, is stopped), as does retiring the old instance
//!   (resize down, shutdown).
//! * **The replacement fails** (exits before Ready, SpawnFailed,
//!   ReadyTimeout): the old instance keeps serving. This is *not* an app
//!   failure — no failure count, no Errored, nothing respawned — but the next
//!   `Replace` is accepted only after a back-off (1 s, 2 s, 4 s, … capped at
//!   `backoff_max`, reset by a successful replacement or reload), so a build
//!   that cannot start is not retried every second.
//! * **The old instance exits first**: its exit is handled as usual (a
//!   failure if it was not stable), but the replacement, already starting,
//!   takes its slot instead of a respawn (`ReplaceDone{ok: false}`).
//!
//! # Resize
//! Growing spawns at once (not a failure, no back-off) — during a reload the
//! reload itself fills the gap with new-generation instances. Shrinking
//! cancels pending respawns first, then retires Starting instances, then the
//! *newest* Ready ones (the oldest have proven themselves stable).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

pub use super::conf::ReloadStrategy;
pub use interface::{
    AppStatus, EXITED_KEPT, Effect, Event, ExitedStatus, InstanceState, InstanceStatus,
    ReloadReport, TimerKind,
};

/// First back-off step; doubles per consecutive failure up to `backoff_max`.
const BACKOFF_BASE: Duration = Duration::from_secs(1);

/// Upper bound for any respawn delay, so absurd policies cannot overflow
/// `Instant` arithmetic (the machine must never panic).
const MAX_DELAY: Duration = Duration::from_secs(365 * 24 * 3600);

pub type InstanceId = u64;

#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub processes: usize,
    pub ready_timeout: Duration,
    pub stop_timeout: Duration,
    pub drain_timeout: Duration,
    pub min_restart_interval: Duration,
    pub backoff_max: Duration,
    pub max_failures: u32,
    pub stable_after: Duration,
    pub reload: ReloadStrategy,
}

#[derive(Debug, Clone)]
struct Instance {
    generation: u64,
    state: InstanceState,
    pid: Option<u32>,
    /// When Spawn was issued: the slot's "last start" for min_restart_interval.
    spawned_at: Instant,
    /// When the process was reported running: uptime for `stable_after`.
    started: Option<Instant>,
    restarts: u32,
    killed: bool,
    /// A parallel reload's candidate that passed readiness: Starting, held
    /// back (not admitted) until the whole new generation is ready.
    held: bool,
    /// Why it was stopped when that was for a failure (not ready in time).
    failed: Option<String>,
}

impl Instance {
    fn live(&self) -> bool {
        matches!(self.state, InstanceState::Starting | InstanceState::Ready)
    }
}

/// A slot waiting for its back-off to elapse.
#[derive(Debug, Clone, Copy)]
struct Respawn {
    due: Instant,
    restarts: u32,
}

#[derive(Debug, Clone)]
struct Reload {
    generation: u64,
    started: Instant,
    /// Fixed when the reload starts: a policy change applies to the next one.
    strategy: ReloadStrategy,
    /// The new instances currently starting beside the old ones.
    candidates: BTreeSet<InstanceId>,
}

/// A single-instance replacement in flight: `new` (Starting) will take over
/// from `old` (Ready).
#[derive(Debug, Clone, Copy)]
struct Replacement {
    old: InstanceId,
    new: InstanceId,
}

pub struct Machine {
    policy: Policy,
    /// Serving generation: used for respawns and resizes.
    generation: u64,
    /// Highest generation ever issued, so reload targets are never reused.
    last_generation: u64,
    next_id: InstanceId,
    instances: BTreeMap<InstanceId, Instance>,
    respawns: Vec<Respawn>,
    failures: u32,
    errored: Option<String>,
    reload: Option<Reload>,
    reload_queued: bool,
    last_reload: Option<ReloadReport>,
    replacement: Option<Replacement>,
    /// Consecutive failed replacements, and when the next may start.
    replace_failures: u32,
    replace_not_before: Option<Instant>,
    replacements: u64,
    exited: std::collections::VecDeque<ExitedStatus>,
    shut_down: bool,
    /// Effects of the event being handled; drained by `take`.
    out: Vec<Effect>,
}

impl Machine {
    /// Creates the machine and spawns `policy.processes` instances of generation 1.
    pub fn new(policy: Policy, now: Instant) -> (Machine, Vec<Effect>) {
        let mut m = Machine {
            policy,
            generation: 1,
            last_generation: 1,
            next_id: 1,
            instances: BTreeMap::new(),
            respawns: Vec::new(),
            failures: 0,
            errored: None,
            reload: None,
            reload_queued: false,
            last_reload: None,
            replacement: None,
            replace_failures: 0,
            replace_not_before: None,
            replacements: 0,
            exited: Default::default(),
            shut_down: false,
            out: Vec::new(),
        };
        m.fill(now);
        let fx = m.take();
        (m, fx)
    }

    pub fn handle(&mut self, event: Event, now: Instant) -> Vec<Effect> {
        match event {
            Event::Spawned { id, pid } => self.on_spawned(id, pid, now),
            Event::SpawnFailed { id, error } => {
                // A process that is running cannot fail to spawn: stale.
                if self.instances.get(&id).is_some_and(|i| i.pid.is_none()) {
                    self.on_gone(id, format!("spawn failed: {error}"), "", now);
                }
            }
            Event::Ready { id } => self.on_ready(id, now),
            Event::Exited {
                id,
                code,
                signal,
                stderr,
                oom_killed,
            } => {
                let why = match (code, signal) {
                    (_, Some(s)) if oom_killed => {
                        format!(
                            "killed by signal {s}: out of memory (the kernel's OOM killer, over its cgroup's memory_max)"
                        )
                    }
                    (_, Some(s)) => format!("killed by signal {s}"),
                    (Some(c), None) => format!("exited with code {c}"),
                    (None, None) => "exited".to_string(),
                };
                self.on_gone(id, why, &stderr, now);
            }
            Event::Drained { id } => {
                if self.state_of(id) == Some(InstanceState::Draining) {
                    self.stop(id);
                }
            }
            Event::Timer { id, kind } => self.on_timer(id, kind, now),
            Event::RespawnDue => self.on_respawn_due(now),
            Event::Reload => self.begin_reload(now),
            Event::Replace { id } => self.begin_replace(id, now),
            Event::Resize { processes } => self.resize(processes, now),
            Event::Shutdown => self.shutdown(now),
        }
        self.take()
    }

    /// Replaces the policy. Deviation from the brief: takes `now` and returns
    /// effects, because a changed `processes` is a Resize and must be able to
    /// spawn or retire instances right away.
    pub fn set_policy(&mut self, policy: Policy, now: Instant) -> Vec<Effect> {
        let processes = policy.processes;
        let changed = processes != self.policy.processes;
        self.policy = policy;
        if changed {
            self.resize(processes, now);
        }
        self.take()
    }

    /// `_now` is unused today (status holds instants, not durations) but kept
    /// so the driver's call sites need not change if uptimes are added.
    pub fn status(&self, _now: Instant) -> AppStatus {
        AppStatus {
            generation: self.generation,
            errored: self.errored.clone(),
            instances: self
                .instances
                .iter()
                .map(|(&id, i)| InstanceStatus {
                    id,
                    pid: i.pid,
                    state: i.state,
                    generation: i.generation,
                    started: i.started,
                    restarts: i.restarts,
                })
                .collect(),
            last_reload: self.last_reload.clone(),
            reloading: self.reload.is_some(),
            replacements: self.replacements,
            exited: self.exited.iter().cloned().collect(),
        }
    }

    /// True once shut down and every process has exited.
    pub fn is_idle(&self) -> bool {
        self.shut_down && self.instances.is_empty()
    }

    // ----- event handlers -------------------------------------------------

    fn on_spawned(&mut self, id: InstanceId, pid: u32, now: Instant) {
        let Some(inst) = self.instances.get_mut(&id) else {
            return;
        };
        if inst.pid.is_some() {
            return;
        }
        inst.pid = Some(pid);
        inst.started = Some(now);
        // It was retired before it had a pid: deliver the deferred Stop now.
        if inst.state == InstanceState::Stopping {
            self.signal_stop(id);
        }
    }

    fn on_ready(&mut self, id: InstanceId, now: Instant) {
        let parallel = self
            .reload
            .as_ref()
            .is_some_and(|r| r.strategy == ReloadStrategy::Parallel);
        let candidate = self.is_candidate(id);
        let Some(inst) = self.instances.get_mut(&id) else {
            return;
        };
        if inst.state != InstanceState::Starting || inst.held {
            return;
        }
        if candidate && parallel {
            // Held back until the whole new generation is ready.
            inst.held = true;
            self.advance_reload(now);
            return;
        }
        inst.state = InstanceState::Ready;
        self.out.push(Effect::Admit { id });
        // A retry of an errored app worked. The failure count stays until a stable run resets it.
        self.errored = None;
        if candidate {
            // Admitted first, then one old instance retired: capacity never dips.
            self.reload
                .as_mut()
                .expect("candidate implies reload")
                .candidates
                .remove(&id);
            self.trim();
            self.advance_reload(now);
        } else if let Some(r) = self.replacement.filter(|r| r.new == id) {
            // Admitted first, then the old one retired: capacity never dips.
            self.replacement = None;
            self.replacements += 1;
            self.replace_failures = 0;
            self.replace_not_before = None;
            self.retire(r.old);
            self.out.push(Effect::ReplaceDone {
                old: r.old,
                new: r.new,
                ok: true,
                reason: None,
            });
        }
    }

    /// The process is gone (exited or never started); `stderr` is what it last said there, if anything.
    fn on_gone(&mut self, id: InstanceId, why: String, stderr: &str, now: Instant) {
        let Some(inst) = self.instances.remove(&id) else {
            return;
        };
        // What it said is the most useful part of the reason (a traceback's last line, "cannot run …").
        let said = |reason: String| match stderr {
            "" => reason,
            _ => format!("{reason}; its stderr ended: {stderr}"),
        };
        self.remember_exit(id, &inst, &why, said(why.clone()), now);
        match inst.state {
            InstanceState::Starting if self.is_candidate(id) => {
                self.abandon_reload(said(format!("new instance {id} {why} before ready")), now);
            }
            InstanceState::Starting if self.is_replacement(id) => {
                self.replace_failed(said(format!("{why} before ready")), now);
            }
            InstanceState::Starting => {
                self.on_failure(&inst, said(format!("{why} before ready")), now)
            }
            InstanceState::Ready => {
                self.out.push(Effect::Withdraw { id });
                if let Some(r) = self.replacement.filter(|r| r.old == id) {
                    // Its replacement, already starting, takes the slot (no respawn).
                    self.replacement = None;
                    self.out.push(Effect::ReplaceDone {
                        old: r.old,
                        new: r.new,
                        ok: false,
                        reason: Some(format!(
                            "instance {id} {why} first: instance {} takes its place",
                            r.new
                        )),
                    });
                }
                self.on_failure(&inst, said(why), now);
            }
            // Being retired: the exit is what we asked for.
            _ => {}
        }
    }

    /// Keeps the last [`EXITED_KEPT`] exits for the status: `Errored` unless rein retired it for no fault. A
    /// retired instance's exit is what rein asked for: it says so, without what the process last said (that
    /// would read as a failure).
    fn remember_exit(
        &mut self,
        id: InstanceId,
        inst: &Instance,
        why: &str,
        said: String,
        now: Instant,
    ) {
        let (state, reason) = match (inst.state, &inst.failed) {
            (InstanceState::Draining | InstanceState::Stopping, None) => {
                (InstanceState::Stopped, format!("retired by rein: {why}"))
            }
            (_, Some(failure)) => (InstanceState::Errored, format!("{failure}, then {said}")),
            _ => (InstanceState::Errored, said),
        };
        if self.exited.len() == EXITED_KEPT {
            self.exited.pop_front();
        }
        self.exited.push_back(ExitedStatus {
            id,
            pid: inst.pid,
            generation: inst.generation,
            state,
            reason,
            at: now,
        });
    }

    fn on_timer(&mut self, id: InstanceId, kind: TimerKind, now: Instant) {
        let Some(inst) = self.instances.get(&id) else {
            return;
        };
        match (kind, inst.state) {
            // Passed readiness: held for a parallel reload's switch.
            (TimerKind::ReadyTimeout, InstanceState::Starting) if inst.held => {}
            (TimerKind::ReadyTimeout, InstanceState::Starting) => {
                let inst = inst.clone();
                if let Some(i) = self.instances.get_mut(&id) {
                    i.failed = Some("not ready in time".to_string());
                }
                if self.is_candidate(id) {
                    self.abandon_reload(format!("new instance {id} not ready in time"), now);
                } else if self.is_replacement(id) {
                    self.stop(id);
                    self.replace_failed("not ready in time".to_string(), now);
                } else {
                    self.stop(id);
                    self.on_failure(&inst, "not ready in time".to_string(), now);
                }
            }
            (TimerKind::DrainTimeout, InstanceState::Draining) => self.stop(id),
            // Armed only once Stop was signalled, i.e. once the pid is known.
            (TimerKind::StopTimeout, InstanceState::Stopping)
                if inst.pid.is_some() && !inst.killed =>
            {
                self.instances.get_mut(&id).expect("checked").killed = true;
                self.out.push(Effect::Kill { id });
            }
            _ => {} // stale: the instance has moved on
        }
    }

    fn resize(&mut self, processes: usize, now: Instant) {
        self.policy.processes = processes;
        if self.shut_down {
            return;
        }
        self.clear_errored();
        self.trim();
        self.fill(now);
        self.advance_reload(now);
    }

    fn shutdown(&mut self, now: Instant) {
        if self.shut_down {
            return;
        }
        self.shut_down = true;
        self.reload_queued = false;
        self.respawns.clear();
        self.cancel_replacement("shutdown");
        if let Some(r) = self.reload.take() {
            self.report_reload(r, false, Some("shutdown".to_string()), now);
        }
        let ids: Vec<InstanceId> = self.instances.keys().copied().collect();
        for id in ids {
            self.retire(id);
        }
    }

    // ----- capacity -------------------------------------------------------

    /// Slots the app currently accounts for: live instances (reload
    /// candidates and a replacement are extra, beside them) plus respawns
    /// waiting on back-off.
    fn counted(&self) -> usize {
        let live = self
            .instances
            .iter()
            .filter(|(id, i)| i.live() && !self.is_extra(**id))
            .count();
        live + self.respawns.len()
    }

    /// Spawns up to `processes` at once (start-up, resize, recovery). During
    /// a reload the reload fills gaps with new-generation instances instead.
    fn fill(&mut self, now: Instant) {
        if self.shut_down || self.errored.is_some() || self.reload.is_some() {
            return;
        }
        while self.counted() < self.policy.processes {
            self.spawn(self.generation, 0, now);
        }
    }

    /// Retires the surplus above `processes`, cheapest capacity first.
    fn trim(&mut self) {
        while self.counted() > self.policy.processes {
            if let Some(last) = (0..self.respawns.len()).max_by_key(|&k| self.respawns[k].due) {
                self.respawns.swap_remove(last);
                continue;
            }
            let target = self.reload.as_ref().map(|r| r.generation);
            let victim = self
                .instances
                .iter()
                .filter(|(id, i)| i.live() && !self.is_extra(**id))
                // Old generation first, then not-yet-serving, then newest.
                .min_by_key(|(id, i)| {
                    let new = Some(i.generation) == target;
                    let ready = i.state == InstanceState::Ready;
                    (new, ready, std::cmp::Reverse(**id))
                })
                .map(|(id, _)| *id);
            match victim {
                Some(id) => self.retire(id),
                None => break,
            }
        }
    }

    // ----- per-instance transitions ---------------------------------------

    fn spawn(&mut self, generation: u64, restarts: u32, now: Instant) -> InstanceId {
        let id = self.next_id;
        self.next_id += 1;
        self.instances.insert(
            id,
            Instance {
                generation,
                state: InstanceState::Starting,
                pid: None,
                spawned_at: now,
                started: None,
                restarts,
                killed: false,
                held: false,
                failed: None,
            },
        );
        self.out.push(Effect::Spawn { id, generation });
        // Armed at spawn, not at Spawned: a hung exec is caught too.
        self.arm(id, TimerKind::ReadyTimeout, self.policy.ready_timeout);
        id
    }

    /// Graceful exit: drain a serving instance, stop one that serves nothing.
    fn retire(&mut self, id: InstanceId) {
        if self.replacement.is_some_and(|r| r.old == id) {
            self.cancel_replacement(&format!("instance {id} retired"));
        }
        match self.state_of(id) {
            Some(InstanceState::Ready) => {
                self.set_state(id, InstanceState::Draining);
                self.out.push(Effect::Withdraw { id });
                self.arm(id, TimerKind::DrainTimeout, self.policy.drain_timeout);
            }
            Some(InstanceState::Starting) => self.stop(id),
            _ => {}
        }
    }

    fn stop(&mut self, id: InstanceId) {
        self.set_state(id, InstanceState::Stopping);
        if let Some(i) = self.instances.get_mut(&id) {
            i.held = false;
        }
        if self.instances.get(&id).is_some_and(|i| i.pid.is_some()) {
            self.signal_stop(id);
        } // else: deferred to `Spawned` (nothing to signal yet)
    }

    fn signal_stop(&mut self, id: InstanceId) {
        self.out.push(Effect::Stop { id });
        self.arm(id, TimerKind::StopTimeout, self.policy.stop_timeout);
    }

    fn arm(&mut self, id: InstanceId, kind: TimerKind, after: Duration) {
        self.out.push(Effect::ArmTimer { id, kind, after });
    }

    fn state_of(&self, id: InstanceId) -> Option<InstanceState> {
        self.instances.get(&id).map(|i| i.state)
    }

    fn set_state(&mut self, id: InstanceId, state: InstanceState) {
        if let Some(i) = self.instances.get_mut(&id) {
            i.state = state;
        }
    }

    fn take(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.out)
    }

    /// Internal consistency, checked by the tests after every event.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        if let Some(r) = &self.reload {
            assert!(
                !r.candidates.is_empty(),
                "a reload always has a candidate between events"
            );
            for c in &r.candidates {
                let inst = &self.instances[c];
                assert_eq!(inst.state, InstanceState::Starting);
                assert_eq!(inst.generation, r.generation);
            }
            match r.strategy {
                ReloadStrategy::Rolling { batch } => {
                    assert!(r.candidates.len() <= batch.max(1), "over the batch");
                }
                ReloadStrategy::Parallel => {
                    assert!(
                        r.candidates.iter().any(|c| !self.instances[c].held),
                        "all held: the switch is due"
                    );
                    assert!(r.candidates.len() <= self.policy.processes.max(1));
                }
            }
            assert!(self.replacement.is_none(), "no replacement during a reload");
        }
        for (id, i) in &self.instances {
            if i.held {
                assert!(self.is_candidate(*id), "only candidates are held");
                assert_eq!(i.state, InstanceState::Starting);
            }
        }
        if let Some(r) = self.replacement {
            assert_eq!(self.instances[&r.new].state, InstanceState::Starting);
            assert_eq!(self.instances[&r.old].state, InstanceState::Ready);
            assert_eq!(
                self.instances[&r.new].generation,
                self.instances[&r.old].generation
            );
        }
        if self.shut_down {
            assert!(self.replacement.is_none());
            assert!(self.respawns.is_empty() && self.reload.is_none());
            assert!(self.instances.values().all(|i| !i.live()));
            return;
        }
        assert!(self.counted() <= self.policy.processes, "over capacity");
        if self.reload.is_none() {
            assert_eq!(self.counted(), self.policy.processes, "slots lost");
        }
    }
}

mod interface;
mod reload;
mod replace;
mod respawn;

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
