//! What goes in and out of the [`Machine`](super::Machine): the events it is fed, the effects it asks for,
//! and the status it reports.

use std::time::{Duration, Instant};

use super::InstanceId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceState {
    Starting,
    Ready,
    Draining,
    Stopping,
    /// Exited as asked (retired): only in [`AppStatus::exited`].
    Stopped,
    /// Exited unasked, never started, or stopped for not being ready in time: only in [`AppStatus::exited`].
    Errored,
}

/// Exited instances remembered for the status, newest last.
pub const EXITED_KEPT: usize = 5;

/// An instance that has exited, as the status shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExitedStatus {
    pub id: InstanceId,
    pub pid: Option<u32>,
    pub generation: u64,
    /// `Stopped` or `Errored`.
    pub state: InstanceState,
    /// Its exit status (or spawn error), and its failure when it failed.
    pub reason: String,
    pub at: Instant,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Spawned {
        id: InstanceId,
        pid: u32,
    },
    SpawnFailed {
        id: InstanceId,
        error: String,
    },
    Ready {
        id: InstanceId,
    },
    Exited {
        id: InstanceId,
        code: Option<i32>,
        signal: Option<i32>,
        /// The last lines it wrote to stderr (may be empty): named in the failure's reason.
        stderr: String,
        /// The kernel's OOM killer struck in the instance's cgroup (`isolation.cgroup.memory_max`).
        oom_killed: bool,
    },
    Drained {
        id: InstanceId,
    },
    Timer {
        id: InstanceId,
        kind: TimerKind,
    },
    RespawnDue,
    Reload,
    /// Replace this (Ready) instance by a new one of its generation.
    Replace {
        id: InstanceId,
    },
    Resize {
        processes: usize,
    },
    Shutdown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)] // each is a timeout of a different phase
pub enum TimerKind {
    ReadyTimeout,
    DrainTimeout,
    StopTimeout,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Spawn {
        id: InstanceId,
        generation: u64,
    },
    Admit {
        id: InstanceId,
    },
    Withdraw {
        id: InstanceId,
    },
    /// Only emitted once the instance has a pid (deferred until `Spawned`).
    Stop {
        id: InstanceId,
    },
    Kill {
        id: InstanceId,
    },
    ArmTimer {
        id: InstanceId,
        kind: TimerKind,
        after: Duration,
    },
    /// (Re)arm the single respawn timer; replaces any earlier one.
    ArmRespawn {
        after: Duration,
    },
    ReloadDone(ReloadReport),
    /// A replacement ended: `new` took over from `old` (ok), or it failed or
    /// was cancelled (`reason`). Once per accepted [`Event::Replace`].
    ReplaceDone {
        old: InstanceId,
        new: InstanceId,
        ok: bool,
        reason: Option<String>,
    },
    Errored {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReloadReport {
    pub ok: bool,
    pub generation: u64,
    pub took: Duration,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AppStatus {
    /// The serving generation (the one respawns use); a reload's target
    /// becomes serving only when it completes.
    pub generation: u64,
    pub errored: Option<String>,
    pub instances: Vec<InstanceStatus>,
    pub last_reload: Option<ReloadReport>,
    pub reloading: bool,
    /// Single-instance replacements completed (memory or request limit).
    pub replacements: u64,
    /// The last instances to exit, oldest first.
    pub exited: Vec<ExitedStatus>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InstanceStatus {
    pub id: InstanceId,
    pub pid: Option<u32>,
    pub state: InstanceState,
    pub generation: u64,
    pub started: Option<Instant>,
    /// Respawns after failure in this slot's lineage.
    pub restarts: u32,
}
