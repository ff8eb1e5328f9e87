//! Tests for the supervisor machine: a scripted driver (`Rig`) that mirrors
//! the load-balancer pool from the effects and checks the rules after every
//! event, explicit scenarios, and a random-order fuzz loop.

use super::*;
use Effect::*;
use TimerKind::*;
use std::collections::BTreeSet;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

fn policy(processes: usize) -> Policy {
    Policy {
        processes,
        ready_timeout: secs(5),
        stop_timeout: secs(10),
        drain_timeout: secs(30),
        min_restart_interval: secs(1),
        backoff_max: secs(8),
        max_failures: 5,
        stable_after: secs(60),
        reload: ReloadStrategy::default(),
    }
}

/// A fake driver: feeds events at `now`, mirrors the pool, checks invariants.
struct Rig {
    m: Machine,
    t0: Instant,
    now: Instant,
    pool: BTreeSet<InstanceId>,
    readied: BTreeSet<InstanceId>,
    /// If set, the pool may never shrink below this, after any single effect.
    floor: Option<usize>,
}

impl Rig {
    fn new(p: Policy) -> (Rig, Vec<Effect>) {
        let t0 = Instant::now();
        let (m, fx) = Machine::new(p, t0);
        let mut rig = Rig {
            m,
            t0,
            now: t0,
            pool: BTreeSet::new(),
            readied: BTreeSet::new(),
            floor: None,
        };
        rig.apply(&fx);
        (rig, fx)
    }

    /// Sets the clock to `t0 + d`.
    fn at(&mut self, d: Duration) {
        self.now = self.t0 + d;
    }

    fn wait(&mut self, d: Duration) {
        self.now += d;
    }

    fn send(&mut self, ev: Event) -> Vec<Effect> {
        if let Event::Ready { id } = ev {
            self.readied.insert(id);
        }
        let fx = self.m.handle(ev, self.now);
        self.apply(&fx);
        fx
    }

    fn apply(&mut self, fx: &[Effect]) {
        for e in fx {
            match e {
                Admit { id } => {
                    assert!(self.readied.contains(id), "admitted {id} before Ready");
                    assert!(self.pool.insert(*id), "admitted {id} twice");
                }
                Withdraw { id } => assert!(self.pool.remove(id), "withdrew {id} not in pool"),
                _ => {}
            }
            if let Some(floor) = self.floor {
                assert!(self.pool.len() >= floor, "capacity dropped: {fx:?}");
            }
        }
        let ready: BTreeSet<InstanceId> = self
            .status()
            .instances
            .iter()
            .filter(|i| i.state == InstanceState::Ready)
            .map(|i| i.id)
            .collect();
        assert_eq!(ready, self.pool, "pool must be exactly the Ready instances");
        self.m.check_invariants();
    }

    fn status(&self) -> AppStatus {
        self.m.status(self.now)
    }

    fn start(&mut self, id: InstanceId) -> Vec<Effect> {
        self.send(Event::Spawned {
            id,
            pid: 1000 + id as u32,
        })
    }

    fn up(&mut self, id: InstanceId) -> Vec<Effect> {
        assert!(self.start(id).is_empty());
        self.send(Event::Ready { id })
    }

    fn exit(&mut self, id: InstanceId) -> Vec<Effect> {
        self.send(Event::Exited {
            id,
            code: Some(1),
            signal: None,
            stderr: String::new(),
            oom_killed: false,
        })
    }

    fn timer(&mut self, id: InstanceId, kind: TimerKind) -> Vec<Effect> {
        self.send(Event::Timer { id, kind })
    }

    fn state(&self, id: InstanceId) -> Option<InstanceState> {
        self.status()
            .instances
            .iter()
            .find(|i| i.id == id)
            .map(|i| i.state)
    }
}

fn with_strategy(processes: usize, reload: ReloadStrategy) -> Policy {
    Policy {
        reload,
        ..policy(processes)
    }
}

fn spawns(fx: &[Effect]) -> Vec<(InstanceId, u64)> {
    fx.iter()
        .filter_map(|e| match e {
            Spawn { id, generation } => Some((*id, *generation)),
            _ => None,
        })
        .collect()
}

fn spawn_fx(id: InstanceId, generation: u64) -> [Effect; 2] {
    [
        Spawn { id, generation },
        ArmTimer {
            id,
            kind: ReadyTimeout,
            after: secs(5),
        },
    ]
}

/// What stopping instance `id` asks for: its SIGTERM, and the timer after which it is killed.
fn stop_fx(id: InstanceId) -> [Effect; 2] {
    [
        Stop { id },
        ArmTimer {
            id,
            kind: StopTimeout,
            after: secs(10),
        },
    ]
}

fn reload_done(fx: &[Effect]) -> Vec<ReloadReport> {
    fx.iter()
        .filter_map(|e| match e {
            ReloadDone(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn respawn_after(fx: &[Effect]) -> Option<Duration> {
    fx.iter().find_map(|e| match e {
        ArmRespawn { after } => Some(*after),
        _ => None,
    })
}

#[path = "machine_tests/crash.rs"]
mod crash;
#[path = "machine_tests/fuzz.rs"]
mod fuzz;
#[path = "machine_tests/reload.rs"]
mod reload;
#[path = "machine_tests/replace.rs"]
mod replace;
#[path = "machine_tests/resize.rs"]
mod resize;
#[path = "machine_tests/stale.rs"]
mod stale;
#[path = "machine_tests/startup.rs"]
mod startup;
#[path = "machine_tests/stop.rs"]
mod stop;
#[path = "machine_tests/strategies.rs"]
mod strategies;
