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

// ----- start-up and readiness ---------------------------------------------

#[test]
fn startup_spawns_n_instances_with_ready_timeouts() {
    let (rig, fx) = Rig::new(policy(3));
    let want: Vec<Effect> = (1..=3).flat_map(|id| spawn_fx(id, 1)).collect();
    assert_eq!(fx, want);
    let st = rig.status();
    assert_eq!(st.generation, 1);
    assert!(!st.reloading && st.errored.is_none() && st.last_reload.is_none());
    assert!(
        st.instances
            .iter()
            .all(|i| i.state == InstanceState::Starting && i.pid.is_none())
    );
}

#[test]
fn admitted_only_after_ready() {
    let (mut rig, _) = Rig::new(policy(2));
    assert!(rig.send(Event::Spawned { id: 1, pid: 11 }).is_empty());
    let st = rig.status();
    assert_eq!(st.instances[0].pid, Some(11));
    assert_eq!(st.instances[0].started, Some(rig.t0));
    rig.at(ms(300));
    assert_eq!(rig.send(Event::Ready { id: 1 }), vec![Admit { id: 1 }]);
    assert_eq!(rig.state(1), Some(InstanceState::Ready));
    assert_eq!(rig.state(2), Some(InstanceState::Starting));
}

#[test]
fn ready_timeout_stops_kills_and_respawns_with_backoff() {
    let (mut rig, _) = Rig::new(policy(1));
    rig.start(1);
    rig.at(secs(5));
    let fx = rig.timer(1, ReadyTimeout);
    assert_eq!(
        fx,
        vec![
            Stop { id: 1 },
            ArmTimer {
                id: 1,
                kind: StopTimeout,
                after: secs(10)
            },
            ArmRespawn { after: secs(1) }, // first failure: 1 s back-off
        ]
    );
    // A late Ready for the timed-out instance must not admit it.
    assert!(rig.send(Event::Ready { id: 1 }).is_empty());
    rig.at(secs(6));
    assert_eq!(rig.send(Event::RespawnDue), spawn_fx(2, 1).to_vec());
    assert_eq!(rig.status().instances[1].restarts, 1);
    rig.at(secs(15));
    assert_eq!(rig.timer(1, StopTimeout), vec![Kill { id: 1 }]);
    assert!(rig.timer(1, StopTimeout).is_empty(), "kill only once");
    assert!(
        rig.exit(1).is_empty(),
        "exit of a stopping instance is expected"
    );
    assert_eq!(rig.status().instances.len(), 1);
}

#[test]
fn spawn_failure_counts_and_respawns() {
    let (mut rig, _) = Rig::new(policy(1));
    let fx = rig.send(Event::SpawnFailed {
        id: 1,
        error: "ENOENT".into(),
    });
    assert_eq!(fx, vec![ArmRespawn { after: secs(1) }]);
    rig.at(secs(1));
    assert_eq!(rig.send(Event::RespawnDue), spawn_fx(2, 1).to_vec());
}

// ----- crash recovery -----------------------------------------------------

#[test]
fn crash_withdraws_and_respects_min_restart_interval() {
    let (mut rig, _) = Rig::new(Policy {
        min_restart_interval: secs(3),
        ..policy(1)
    });
    rig.up(1);
    rig.at(ms(500));
    let fx = rig.exit(1);
    // max(3 s − 0.5 s since start, 1 s back-off) = 2.5 s
    assert_eq!(fx, vec![Withdraw { id: 1 }, ArmRespawn { after: ms(2500) }]);
    rig.at(secs(2));
    assert_eq!(
        rig.send(Event::RespawnDue),
        vec![ArmRespawn { after: secs(1) }],
        "early: re-arm"
    );
    rig.at(secs(3));
    assert_eq!(rig.send(Event::RespawnDue), spawn_fx(2, 1).to_vec());
}

#[test]
fn backoff_doubles_per_failure_and_caps() {
    let (mut rig, _) = Rig::new(Policy {
        max_failures: 100,
        ..policy(1)
    });
    let mut id = 1;
    for want in [1, 2, 4, 8, 8, 8] {
        rig.up(id);
        rig.wait(ms(100));
        let fx = rig.exit(id);
        assert_eq!(respawn_after(&fx), Some(secs(want)));
        rig.wait(secs(want));
        let fx = rig.send(Event::RespawnDue);
        id += 1;
        assert_eq!(spawns(&fx), vec![(id, 1)]);
    }
    assert_eq!(rig.status().instances[0].restarts, 6);
}

#[test]
fn stable_run_resets_failure_count() {
    let (mut rig, _) = Rig::new(policy(1));
    rig.up(1);
    rig.wait(ms(100));
    assert_eq!(respawn_after(&rig.exit(1)), Some(secs(1)));
    rig.wait(secs(1));
    rig.send(Event::RespawnDue);
    rig.up(2);
    rig.wait(ms(100));
    assert_eq!(respawn_after(&rig.exit(2)), Some(secs(2)));
    rig.wait(secs(2));
    rig.send(Event::RespawnDue);
    rig.up(3);
    rig.wait(secs(61));
    // Up longer than stable_after: no failure, no delay.
    let mut want = vec![Withdraw { id: 3 }];
    want.extend(spawn_fx(4, 1));
    assert_eq!(rig.exit(3), want);
    rig.up(4);
    rig.wait(ms(100));
    assert_eq!(
        respawn_after(&rig.exit(4)),
        Some(secs(1)),
        "count restarted"
    );
}

fn crash_until_errored(rig: &mut Rig, crashes: u64) {
    for id in 1..=crashes {
        rig.up(id);
        rig.wait(ms(100));
        let fx = rig.exit(id);
        if id < crashes {
            let after = respawn_after(&fx).expect("respawn scheduled");
            rig.wait(after);
            assert_eq!(spawns(&rig.send(Event::RespawnDue)), vec![(id + 1, 1)]);
        } else {
            assert!(
                matches!(fx.as_slice(), [Withdraw { .. }, Errored { .. }]),
                "{fx:?}"
            );
        }
    }
}

#[test]
fn errored_after_max_failures_then_reload_clears_it() {
    let (mut rig, _) = Rig::new(Policy {
        max_failures: 3,
        ..policy(1)
    });
    crash_until_errored(&mut rig, 3);
    let st = rig.status();
    assert!(
        st.errored
            .as_deref()
            .unwrap()
            .contains("3 consecutive failures")
    );
    assert!(st.instances.is_empty());
    rig.wait(secs(100));
    assert!(
        rig.send(Event::RespawnDue).is_empty(),
        "no respawn while errored"
    );
    // Reload clears it and starts the new generation straight away.
    assert_eq!(rig.send(Event::Reload), spawn_fx(4, 2).to_vec());
    assert!(rig.status().errored.is_none());
    let fx = rig.up(4);
    assert_eq!(fx[0], Admit { id: 4 });
    let done = reload_done(&fx);
    assert!(done.len() == 1 && done[0].ok && done[0].generation == 2);
}

#[test]
fn resize_clears_errored() {
    let (mut rig, _) = Rig::new(Policy {
        max_failures: 2,
        ..policy(1)
    });
    crash_until_errored(&mut rig, 2);
    assert!(rig.status().errored.is_some());
    assert_eq!(
        rig.send(Event::Resize { processes: 1 }),
        spawn_fx(3, 1).to_vec()
    );
    assert!(rig.status().errored.is_none());
    // The count restarted: one more crash is not yet fatal.
    rig.up(3);
    rig.wait(ms(100));
    assert_eq!(respawn_after(&rig.exit(3)), Some(secs(1)));
}

// ----- rolling reload -----------------------------------------------------

#[test]
fn reload_single_instance_keeps_capacity() {
    let (mut rig, _) = Rig::new(policy(1));
    rig.up(1);
    rig.floor = Some(1);
    rig.at(secs(10));
    assert_eq!(rig.send(Event::Reload), spawn_fx(2, 2).to_vec());
    assert!(rig.status().reloading);
    assert_eq!(rig.status().generation, 1, "serving generation until done");
    rig.start(2);
    rig.at(secs(11));
    let report = ReloadReport {
        ok: true,
        generation: 2,
        took: secs(1),
        reason: None,
    };
    assert_eq!(
        rig.send(Event::Ready { id: 2 }),
        vec![
            Admit { id: 2 },
            Withdraw { id: 1 },
            ArmTimer {
                id: 1,
                kind: DrainTimeout,
                after: secs(30)
            },
            ReloadDone(report.clone()),
        ]
    );
    let st = rig.status();
    assert!(!st.reloading);
    assert_eq!((st.generation, st.last_reload), (2, Some(report)));
    assert_eq!(
        rig.send(Event::Drained { id: 1 }),
        vec![
            Stop { id: 1 },
            ArmTimer {
                id: 1,
                kind: StopTimeout,
                after: secs(10)
            }
        ]
    );
    assert!(rig.exit(1).is_empty());
    assert_eq!(rig.pool, BTreeSet::from([2]));
}

#[test]
fn reload_two_instances_one_at_a_time() {
    let (mut rig, _) = Rig::new(policy(2));
    rig.up(1);
    rig.up(2);
    rig.floor = Some(2);
    assert_eq!(
        spawns(&rig.send(Event::Reload)),
        vec![(3, 2)],
        "one candidate at a time"
    );
    let fx = rig.up(3);
    assert_eq!(
        fx[..2],
        [Admit { id: 3 }, Withdraw { id: 2 }],
        "newest old goes first"
    );
    assert_eq!(spawns(&fx), vec![(4, 2)]);
    assert!(reload_done(&fx).is_empty());
    let fx = rig.up(4);
    assert_eq!(fx[..2], [Admit { id: 4 }, Withdraw { id: 1 }]);
    let done = reload_done(&fx);
    assert!(done.len() == 1 && done[0].ok && done[0].generation == 2);
    for id in [1, 2] {
        rig.send(Event::Drained { id });
        rig.exit(id);
    }
    assert_eq!(rig.pool, BTreeSet::from([3, 4]));
    assert!(rig.status().instances.iter().all(|i| i.generation == 2));
}

#[test]
fn reload_abandoned_when_new_instance_crashes() {
    let (mut rig, _) = Rig::new(policy(2));
    rig.up(1);
    rig.up(2);
    rig.floor = Some(2);
    // Many failed reloads are not app failures: never Errored.
    for attempt in 0..7u64 {
        let id = 3 + attempt;
        assert_eq!(spawns(&rig.send(Event::Reload)), vec![(id, 2 + attempt)]);
        rig.start(id);
        rig.wait(ms(200));
        let fx = rig.exit(id);
        assert_eq!(fx.len(), 1, "no respawn, no stop: {fx:?}");
        let done = reload_done(&fx);
        assert!(!done[0].ok && done[0].generation == 2 + attempt);
        assert!(
            done[0]
                .reason
                .as_deref()
                .unwrap()
                .contains("exited with code 1")
        );
    }
    let st = rig.status();
    assert!(st.errored.is_none() && !st.reloading);
    assert_eq!(st.generation, 1);
    assert_eq!(rig.pool, BTreeSet::from([1, 2]));
}

#[test]
fn reload_abandoned_on_ready_timeout() {
    let (mut rig, _) = Rig::new(policy(1));
    rig.up(1);
    rig.floor = Some(1);
    rig.send(Event::Reload);
    rig.start(2);
    rig.at(secs(5));
    let fx = rig.timer(2, ReadyTimeout);
    assert_eq!(
        fx[..2],
        [
            Stop { id: 2 },
            ArmTimer {
                id: 2,
                kind: StopTimeout,
                after: secs(10)
            }
        ]
    );
    assert_eq!(fx.len(), 3, "no respawn: {fx:?}");
    assert!(
        reload_done(&fx)[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("not ready")
    );
    rig.at(secs(15));
    assert_eq!(rig.timer(2, StopTimeout), vec![Kill { id: 2 }]);
    assert!(rig.exit(2).is_empty());
    assert_eq!(rig.pool, BTreeSet::from([1]));
}

#[test]
fn abandoned_reload_keeps_admitted_new_instances_and_never_reuses_generation() {
    let (mut rig, _) = Rig::new(policy(2));
    rig.up(1);
    rig.up(2);
    rig.floor = Some(2);
    rig.send(Event::Reload);
    rig.up(3); // admitted, old 2 retired, candidate 4 spawned
    let fx = rig.send(Event::SpawnFailed {
        id: 4,
        error: "exec".into(),
    });
    assert!(!reload_done(&fx)[0].ok);
    assert_eq!(
        rig.pool,
        BTreeSet::from([1, 3]),
        "mixed generations, full capacity"
    );
    assert_eq!(rig.status().generation, 1);
    // The next reload targets generation 3 and replaces both 1 and 3.
    assert_eq!(spawns(&rig.send(Event::Reload)), vec![(5, 3)]);
    let fx = rig.up(5);
    assert_eq!(fx[1], Withdraw { id: 3 });
    let fx = rig.up(6);
    assert_eq!(fx[1], Withdraw { id: 1 });
    assert_eq!(reload_done(&fx)[0].generation, 3);
    assert_eq!(rig.status().generation, 3);
}

#[test]
fn reload_during_reload_is_queued_and_coalesced() {
    let (mut rig, _) = Rig::new(policy(1));
    rig.up(1);
    rig.floor = Some(1);
    rig.send(Event::Reload);
    assert!(rig.send(Event::Reload).is_empty());
    assert!(rig.send(Event::Reload).is_empty());
    let fx = rig.up(2);
    assert_eq!(reload_done(&fx).len(), 1);
    assert_eq!(spawns(&fx), vec![(3, 3)], "queued reload starts at once");
    assert!(rig.status().reloading);
    let fx = rig.up(3);
    assert_eq!(reload_done(&fx)[0].generation, 3);
    assert!(
        spawns(&fx).is_empty(),
        "both queued requests coalesced into one run"
    );
    assert!(!rig.status().reloading);
}

#[test]
fn old_instance_crash_during_reload_is_covered_by_the_reload() {
    let (mut rig, _) = Rig::new(policy(2));
    rig.up(1);
    rig.up(2);
    rig.send(Event::Reload); // candidate 3
    rig.at(secs(1));
    let fx = rig.exit(1);
    assert_eq!(fx, vec![Withdraw { id: 1 }, ArmRespawn { after: secs(1) }]);
    let fx = rig.up(3);
    assert_eq!(fx[0], Admit { id: 3 });
    assert!(
        !fx.contains(&Withdraw { id: 2 }),
        "the pending respawn is cancelled instead"
    );
    assert_eq!(spawns(&fx), vec![(4, 2)]);
    rig.at(secs(2));
    assert!(rig.send(Event::RespawnDue).is_empty());
    let fx = rig.up(4);
    assert_eq!(fx[1], Withdraw { id: 2 });
    assert!(reload_done(&fx)[0].ok);
}

// ----- stopping -----------------------------------------------------------

#[test]
fn drain_timeout_stops_and_late_drained_is_ignored() {
    let (mut rig, _) = Rig::new(policy(2));
    rig.up(1);
    rig.up(2);
    assert_eq!(
        rig.send(Event::Resize { processes: 1 }),
        vec![
            Withdraw { id: 2 },
            ArmTimer {
                id: 2,
                kind: DrainTimeout,
                after: secs(30)
            }
        ]
    );
    rig.at(secs(30));
    assert_eq!(
        rig.timer(2, DrainTimeout),
        vec![
            Stop { id: 2 },
            ArmTimer {
                id: 2,
                kind: StopTimeout,
                after: secs(10)
            }
        ]
    );
    assert!(rig.send(Event::Drained { id: 2 }).is_empty());
    assert!(rig.timer(2, DrainTimeout).is_empty());
    rig.at(secs(40));
    assert_eq!(rig.timer(2, StopTimeout), vec![Kill { id: 2 }]);
    assert!(
        rig.send(Event::Exited {
            id: 2,
            code: None,
            signal: Some(9)
        })
        .is_empty()
    );
    assert_eq!(rig.pool, BTreeSet::from([1]));
}

#[test]
fn shutdown_drains_ready_stops_starting_and_never_respawns() {
    let (mut rig, _) = Rig::new(policy(3));
    rig.up(1);
    rig.start(2);
    rig.at(ms(100));
    rig.exit(3); // pending respawn, dropped by shutdown
    let fx = rig.send(Event::Shutdown);
    assert_eq!(
        fx,
        vec![
            Withdraw { id: 1 },
            ArmTimer {
                id: 1,
                kind: DrainTimeout,
                after: secs(30)
            },
            Stop { id: 2 },
            ArmTimer {
                id: 2,
                kind: StopTimeout,
                after: secs(10)
            },
        ]
    );
    assert!(rig.exit(2).is_empty());
    rig.send(Event::Drained { id: 1 });
    rig.at(secs(20));
    assert_eq!(rig.timer(1, StopTimeout), vec![Kill { id: 1 }]);
    for ev in [
        Event::RespawnDue,
        Event::Reload,
        Event::Resize { processes: 5 },
        Event::Shutdown,
    ] {
        assert!(rig.send(ev).is_empty());
    }
    assert!(!rig.m.is_idle());
    assert!(rig.exit(1).is_empty());
    assert!(rig.m.is_idle());
}

#[test]
fn shutdown_during_reload_reports_it_abandoned() {
    let (mut rig, _) = Rig::new(policy(1));
    rig.up(1);
    rig.send(Event::Reload);
    rig.start(2);
    rig.send(Event::Reload); // queued: must not run after shutdown
    let fx = rig.send(Event::Shutdown);
    let done = reload_done(&fx);
    assert!(done.len() == 1 && !done[0].ok && done[0].reason.as_deref() == Some("shutdown"));
    assert!(fx.contains(&Stop { id: 2 }) && fx.contains(&Withdraw { id: 1 }));
    assert!(spawns(&fx).is_empty());
}

#[test]
fn stop_before_spawned_is_deferred_until_pid_is_known() {
    let (mut rig, _) = Rig::new(policy(1));
    assert!(
        rig.send(Event::Shutdown).is_empty(),
        "nothing to signal yet"
    );
    assert_eq!(
        rig.start(1),
        vec![
            Stop { id: 1 },
            ArmTimer {
                id: 1,
                kind: StopTimeout,
                after: secs(10)
            }
        ]
    );
    assert!(rig.exit(1).is_empty());
    assert!(rig.m.is_idle());
}

// ----- resize and policy --------------------------------------------------

#[test]
fn resize_up_spawns_and_down_retires_starting_then_newest() {
    let (mut rig, _) = Rig::new(policy(1));
    rig.up(1);
    let fx = rig.send(Event::Resize { processes: 3 });
    assert_eq!(spawns(&fx), vec![(2, 1), (3, 1)]);
    rig.up(2);
    rig.start(3);
    let fx = rig.send(Event::Resize { processes: 1 });
    assert_eq!(
        fx,
        vec![
            Stop { id: 3 },
            ArmTimer {
                id: 3,
                kind: StopTimeout,
                after: secs(10)
            },
            Withdraw { id: 2 },
            ArmTimer {
                id: 2,
                kind: DrainTimeout,
                after: secs(30)
            },
        ]
    );
    assert_eq!(rig.pool, BTreeSet::from([1]));
}

#[test]
fn resize_down_cancels_pending_respawn_first() {
    let (mut rig, _) = Rig::new(policy(2));
    rig.up(1);
    rig.up(2);
    rig.at(ms(100));
    assert!(respawn_after(&rig.exit(2)).is_some());
    assert!(rig.send(Event::Resize { processes: 1 }).is_empty());
    rig.at(secs(10));
    assert!(rig.send(Event::RespawnDue).is_empty());
    assert_eq!(rig.pool, BTreeSet::from([1]));
}

#[test]
fn resize_during_reload_is_filled_by_the_reload() {
    let (mut rig, _) = Rig::new(policy(1));
    rig.up(1);
    rig.floor = Some(1);
    rig.send(Event::Reload); // candidate 2
    assert!(rig.send(Event::Resize { processes: 2 }).is_empty());
    let fx = rig.up(2);
    assert!(!fx.contains(&Withdraw { id: 1 }), "no surplus yet");
    assert_eq!(spawns(&fx), vec![(3, 2)]);
    let fx = rig.up(3);
    assert_eq!(fx[1], Withdraw { id: 1 });
    assert!(reload_done(&fx)[0].ok);
    assert_eq!(rig.pool, BTreeSet::from([2, 3]));
}

#[test]
fn set_policy_applies_later_and_count_change_resizes() {
    let (mut rig, _) = Rig::new(policy(1));
    let p = Policy {
        ready_timeout: secs(9),
        ..policy(1)
    };
    assert!(rig.m.set_policy(p.clone(), rig.now).is_empty());
    let fx = rig.m.set_policy(Policy { processes: 2, ..p }, rig.now);
    rig.apply(&fx);
    assert_eq!(
        fx,
        vec![
            Spawn {
                id: 2,
                generation: 1
            },
            ArmTimer {
                id: 2,
                kind: ReadyTimeout,
                after: secs(9)
            }
        ]
    );
}

// ----- stale and out-of-order events ---------------------------------------

#[test]
fn stale_and_unknown_events_are_ignored() {
    let (mut rig, _) = Rig::new(policy(1));
    rig.up(1);
    let stale = [
        Event::Timer {
            id: 1,
            kind: ReadyTimeout,
        },
        Event::Timer {
            id: 1,
            kind: DrainTimeout,
        },
        Event::Timer {
            id: 1,
            kind: StopTimeout,
        },
        Event::Timer {
            id: 99,
            kind: StopTimeout,
        },
        Event::Ready { id: 1 },
        Event::Ready { id: 99 },
        Event::Spawned { id: 1, pid: 4242 },
        Event::Spawned { id: 99, pid: 1 },
        Event::SpawnFailed {
            id: 1,
            error: "late".into(),
        },
        Event::Drained { id: 1 },
        Event::Exited {
            id: 99,
            code: Some(0),
            signal: None,
        },
        Event::RespawnDue,
    ];
    for ev in stale {
        assert!(rig.send(ev.clone()).is_empty(), "{ev:?}");
    }
    assert_eq!(rig.status().instances[0].pid, Some(1001));
    rig.at(secs(100));
    rig.exit(1);
    assert!(rig.exit(1).is_empty(), "second exit");
}

#[path = "machine_tests/fuzz.rs"]
mod fuzz;
#[path = "machine_tests/replace.rs"]
mod replace;
#[path = "machine_tests/strategies.rs"]
mod strategies;
