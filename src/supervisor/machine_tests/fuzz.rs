//! Randomised runs of the machine (fixed seeds): every event in any order, every invariant checked after each step.

use super::*;

/// xorshift64*: tiny, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_policy(rng: &mut Rng) -> Policy {
    Policy {
        processes: 1 + rng.below(4) as usize,
        ready_timeout: ms(500 + rng.below(3000)),
        stop_timeout: ms(500 + rng.below(3000)),
        drain_timeout: ms(500 + rng.below(3000)),
        min_restart_interval: ms(rng.below(2000)),
        backoff_max: ms(1 + rng.below(10_000)),
        max_failures: rng.below(7) as u32,
        stable_after: ms(rng.below(20_000)),
        reload: random_strategy(rng),
    }
}

fn random_strategy(rng: &mut Rng) -> ReloadStrategy {
    match rng.below(3) {
        0 => ReloadStrategy::Parallel,
        _ => ReloadStrategy::Rolling {
            batch: 1 + rng.below(3) as usize,
        },
    }
}

fn random_event(rng: &mut Rng, rig: &Rig) -> Event {
    let ids: Vec<InstanceId> = rig.status().instances.iter().map(|i| i.id).collect();
    // Mostly real ids, sometimes an unknown or long-gone one.
    let id = if ids.is_empty() || rng.below(10) == 0 {
        rng.below(rig.m.next_id + 3)
    } else {
        ids[rng.below(ids.len() as u64) as usize]
    };
    let kind = [ReadyTimeout, DrainTimeout, StopTimeout][rng.below(3) as usize];
    match rng.below(110) {
        0..=19 => Event::Spawned {
            id,
            pid: rng.below(1 << 20) as u32,
        },
        20..=37 => Event::Ready { id },
        38..=47 => Event::Exited {
            id,
            code: Some(1),
            signal: None,
            stderr: String::new(),
            oom_killed: false,
        },
        48..=50 => Event::SpawnFailed {
            id,
            error: "fuzz".into(),
        },
        51..=62 => Event::Drained { id },
        63..=77 => Event::Timer { id, kind },
        78..=87 => Event::RespawnDue,
        88..=94 => Event::Reload,
        95..=98 => Event::Resize {
            processes: rng.below(5) as usize,
        },
        99..=108 => {
            // Mostly a Ready instance: the only kind a Replace acts on.
            let ready: Vec<InstanceId> = rig.pool.iter().copied().collect();
            match ready.len() {
                0 => Event::Replace { id },
                n => Event::Replace {
                    id: ready[rng.below(n as u64) as usize],
                },
            }
        }
        _ => Event::Shutdown,
    }
}

#[test]
fn fuzz_random_event_orders_keep_invariants() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut reloads_done = 0usize;
    // Tallies: [ok reloads, abandoned reloads, Errored, Kill, Admit,
    //          ok replacements, ended replacements]
    let mut seen = [0usize; 7];
    for _run in 0..20 {
        let (mut rig, fx) = Rig::new(random_policy(&mut rng));
        let mut last_spawn = spawns(&fx).last().map_or(0, |s| s.0);
        let mut stopped: BTreeSet<InstanceId> = BTreeSet::new();
        let mut reload_events = 0usize;
        let mut dones = 0usize;
        let mut last_done_gen = 0u64;
        // Replacements started (by their new instance) and not yet reported.
        let mut replacing: BTreeSet<InstanceId> = BTreeSet::new();
        for _step in 0..1000 {
            rig.wait(ms(rng.below(1500)));
            let ev = random_event(&mut rng, &rig);
            if ev == Event::Reload {
                reload_events += 1;
            }
            let mut by_policy = Vec::new();
            if rng.below(200) == 0 {
                by_policy = rig.m.set_policy(random_policy(&mut rng), rig.now);
                rig.apply(&by_policy);
            }
            let is_replace = matches!(ev, Event::Replace { .. });
            let by_event = rig.send(ev);
            let started = spawns(&by_event).first().map(|s| s.0);
            let phases = [
                (by_policy, None),
                (by_event, started.filter(|_| is_replace)),
            ];
            for (fx, replacement) in phases {
                if let Some(new) = replacement {
                    assert!(replacing.is_empty(), "one replacement at a time");
                    replacing.insert(new);
                }
                for e in fx {
                    match e {
                        ReplaceDone { new, ok, .. } => {
                            assert!(replacing.remove(&new), "one ReplaceDone per replacement");
                            seen[if ok { 5 } else { 6 }] += 1;
                        }
                        Spawn { id, .. } => {
                            assert!(id > last_spawn, "ids increase");
                            last_spawn = id;
                        }
                        Stop { id } => {
                            stopped.insert(id);
                        }
                        Kill { id } => {
                            assert!(stopped.contains(&id), "kill {id} without stop");
                            seen[3] += 1;
                        }
                        Errored { .. } => seen[2] += 1,
                        Admit { .. } => seen[4] += 1,
                        ReloadDone(r) => {
                            dones += 1;
                            seen[usize::from(!r.ok)] += 1;
                            assert!(r.generation > last_done_gen, "one ReloadDone per reload");
                            last_done_gen = r.generation;
                        }
                        _ => {}
                    }
                }
            }
            assert!(
                dones <= reload_events,
                "{dones} reports for {reload_events} reloads"
            );
        }
        reloads_done += dones;
    }
    // Replacements rarely complete in random order (a reload or an error
    // usually comes first): the cooperative fuzz below covers their success.
    assert!(
        seen[..5].iter().all(|&n| n >= 10) && seen[5] + seen[6] >= 10,
        "fuzz coverage too thin: {seen:?}"
    );
    assert!(
        reloads_done > 10,
        "the fuzz should exercise reloads, got {reloads_done}"
    );
}

/// A well-behaved driver in random order: every process reports in, some
/// crash, reloads keep coming; capacity must not dip during any reload
/// unless an instance crashed meanwhile.
#[test]
fn fuzz_reloads_with_cooperative_driver_never_drop_capacity() {
    let mut rng = Rng(42);
    let mut oks = 0;
    for _run in 0..50 {
        let n = 1 + rng.below(4) as usize;
        let (mut rig, fx) = Rig::new(policy(n));
        for (id, _) in spawns(&fx) {
            rig.up(id);
        }
        for _ in 0..5 {
            rig.floor = Some(n);
            let mut fx = rig.send(Event::Reload);
            let mut done = None;
            while done.is_none() {
                let (id, _) = spawns(&fx)[0];
                rig.wait(ms(rng.below(2000)));
                fx = if rng.below(10) == 0 {
                    rig.exit(id)
                } else {
                    rig.up(id)
                };
                for e in &fx {
                    if let Withdraw { id } = e {
                        rig.send(Event::Drained { id: *id });
                        rig.exit(*id);
                    }
                }
                done = reload_done(&fx).pop();
                if done.as_ref().is_some_and(|d| d.ok) {
                    oks += 1;
                }
            }
            rig.floor = None;
        }
        assert_eq!(rig.pool.len(), n);
    }
    assert!(oks > 100);
}

#[test]
fn respawn_timer_is_always_armed_for_the_earliest_pending_slot() {
    let (mut rig, _) = Rig::new(policy(2));
    rig.up(1);
    rig.up(2);
    rig.at(ms(100));
    assert_eq!(respawn_after(&rig.exit(1)), Some(secs(1))); // due 1.1 s
    rig.at(ms(200));
    let fx = rig.exit(2); // 2nd failure: due 2.2 s, later than the armed timer
    assert_eq!(fx, vec![Withdraw { id: 2 }]);
    rig.at(ms(1100));
    let mut want = spawn_fx(3, 1).to_vec();
    want.push(ArmRespawn { after: ms(1100) });
    assert_eq!(rig.send(Event::RespawnDue), want);
    rig.at(ms(2200));
    assert_eq!(rig.send(Event::RespawnDue), spawn_fx(4, 1).to_vec());
}

/// A cooperative driver (no Ready instance ever crashes) in random order,
/// with every reload strategy and single-instance replacements mixed in: the
/// pool never drops below `processes`, and settles back to exactly that.
#[test]
fn fuzz_strategies_and_replacements_with_cooperative_driver_never_drop_capacity() {
    let mut rng = Rng(7);
    // [ok reloads, abandoned reloads, ok replacements, failed replacements]
    let mut seen = [0usize; 4];
    for _run in 0..40 {
        let n = 1 + rng.below(4) as usize;
        let (mut rig, fx) = Rig::new(with_strategy(n, random_strategy(&mut rng)));
        for (id, _) in spawns(&fx) {
            rig.up(id);
        }
        rig.floor = Some(n);
        // Instances started and not yet Ready, withdrawn, and stopped.
        let (mut starting, mut draining, mut stopping) =
            (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        for _step in 0..300 {
            rig.wait(ms(rng.below(1000)));
            let pick = |set: &BTreeSet<InstanceId>, rng: &mut Rng| {
                set.iter()
                    .nth(rng.below(set.len().max(1) as u64) as usize)
                    .copied()
            };
            let fx = match rng.below(20) {
                0 => {
                    if rng.below(3) == 0 {
                        let fx = rig
                            .m
                            .set_policy(with_strategy(n, random_strategy(&mut rng)), rig.now);
                        rig.apply(&fx);
                    }
                    rig.send(Event::Reload)
                }
                1..=3 => match pick(&rig.pool, &mut rng) {
                    Some(id) => rig.send(Event::Replace { id }),
                    None => Vec::new(),
                },
                4..=11 => match pick(&starting, &mut rng) {
                    Some(id) => {
                        starting.remove(&id);
                        let mut fx = rig.send(Event::Spawned { id, pid: id as u32 });
                        if rng.below(8) == 0 {
                            fx.extend(rig.exit(id));
                        } else {
                            fx.extend(rig.send(Event::Ready { id }));
                        }
                        fx
                    }
                    None => Vec::new(),
                },
                12..=15 => match pick(&draining, &mut rng) {
                    Some(id) => {
                        draining.remove(&id);
                        rig.send(Event::Drained { id })
                    }
                    None => Vec::new(),
                },
                _ => match pick(&stopping, &mut rng) {
                    Some(id) => {
                        stopping.remove(&id);
                        rig.exit(id)
                    }
                    None => Vec::new(),
                },
            };
            for e in &fx {
                match e {
                    Spawn { id, .. } => {
                        starting.insert(*id);
                    }
                    Withdraw { id } => {
                        draining.insert(*id);
                    }
                    Stop { id } => {
                        starting.remove(id);
                        stopping.insert(*id);
                    }
                    ReloadDone(r) => seen[usize::from(!r.ok)] += 1,
                    ReplaceDone { ok, .. } => seen[if *ok { 2 } else { 3 }] += 1,
                    _ => {}
                }
            }
        }
        // Let everything finish: start what is starting, drain and stop the rest.
        while !(starting.is_empty() && draining.is_empty() && stopping.is_empty()) {
            let mut fx = Vec::new();
            if let Some(id) = starting.pop_first() {
                fx.extend(rig.send(Event::Spawned { id, pid: id as u32 }));
                fx.extend(rig.send(Event::Ready { id }));
            } else if let Some(id) = draining.pop_first() {
                fx.extend(rig.send(Event::Drained { id }));
            } else if let Some(id) = stopping.pop_first() {
                fx.extend(rig.exit(id));
            }
            for e in &fx {
                match e {
                    Spawn { id, .. } => {
                        starting.insert(*id);
                    }
                    Withdraw { id } => {
                        draining.insert(*id);
                    }
                    Stop { id } => {
                        starting.remove(id);
                        stopping.insert(*id);
                    }
                    _ => {}
                }
            }
        }
        let st = rig.status();
        assert!(!st.reloading && st.errored.is_none(), "{st:?}");
        assert_eq!(rig.pool.len(), n, "{st:?}");
        assert_eq!(st.instances.len(), n, "{st:?}");
    }
    assert!(seen.iter().all(|&k| k >= 10), "coverage too thin: {seen:?}");
}
