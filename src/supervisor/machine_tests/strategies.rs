//! The reload strategies of the machine: batches of candidates, and `parallel` (blue/green) reloads.

use super::*;

fn admits(fx: &[Effect]) -> Vec<InstanceId> {
    fx.iter()
        .filter_map(|e| match e {
            Admit { id } => Some(*id),
            _ => None,
        })
        .collect()
}

fn withdraws(fx: &[Effect]) -> Vec<InstanceId> {
    fx.iter()
        .filter_map(|e| match e {
            Withdraw { id } => Some(*id),
            _ => None,
        })
        .collect()
}

#[test]
fn batch_reload_runs_up_to_batch_candidates_at_once() {
    let (mut rig, _) = Rig::new(with_strategy(4, ReloadStrategy::Rolling { batch: 2 }));
    for id in 1..=4 {
        rig.up(id);
    }
    rig.floor = Some(4);
    assert_eq!(spawns(&rig.send(Event::Reload)), vec![(5, 2), (6, 2)]);
    let fx = rig.up(5);
    assert_eq!(fx[..2], [Admit { id: 5 }, Withdraw { id: 4 }]);
    assert_eq!(
        spawns(&fx),
        vec![(7, 2)],
        "the next candidate takes its turn"
    );
    let fx = rig.up(6);
    assert_eq!(fx[..2], [Admit { id: 6 }, Withdraw { id: 3 }]);
    assert_eq!(spawns(&fx), vec![(8, 2)]);
    let fx = rig.up(7);
    assert_eq!(fx[..2], [Admit { id: 7 }, Withdraw { id: 2 }]);
    assert!(spawns(&fx).is_empty(), "no more than still needed");
    assert!(reload_done(&fx).is_empty());
    let fx = rig.up(8);
    assert_eq!(fx[..2], [Admit { id: 8 }, Withdraw { id: 1 }]);
    let done = reload_done(&fx);
    assert!(done.len() == 1 && done[0].ok && done[0].generation == 2);
    assert_eq!(rig.pool, BTreeSet::from([5, 6, 7, 8]));
}

#[test]
fn batch_larger_than_the_app_starts_only_what_is_needed() {
    let (mut rig, _) = Rig::new(with_strategy(2, ReloadStrategy::Rolling { batch: 8 }));
    rig.up(1);
    rig.up(2);
    rig.floor = Some(2);
    assert_eq!(spawns(&rig.send(Event::Reload)), vec![(3, 2), (4, 2)]);
    // Out of order: the second candidate is ready first.
    assert_eq!(rig.up(4)[..2], [Admit { id: 4 }, Withdraw { id: 2 }]);
    let fx = rig.up(3);
    assert_eq!(fx[..2], [Admit { id: 3 }, Withdraw { id: 1 }]);
    assert!(reload_done(&fx)[0].ok);
}

#[test]
fn batch_reload_abandoned_stops_every_starting_candidate() {
    let (mut rig, _) = Rig::new(with_strategy(3, ReloadStrategy::Rolling { batch: 2 }));
    for id in 1..=3 {
        rig.up(id);
    }
    rig.floor = Some(3);
    rig.send(Event::Reload); // candidates 4 and 5
    assert_eq!(spawns(&rig.up(4)), vec![(6, 2)]); // old 3 retired
    rig.start(6);
    let fx = rig.exit(5);
    assert!(fx.contains(&Stop { id: 6 }), "{fx:?}");
    let done = reload_done(&fx);
    assert!(!done[0].ok && done[0].reason.as_deref().unwrap().contains("instance 5"));
    assert!(spawns(&fx).is_empty(), "no respawn: {fx:?}");
    assert_eq!(rig.pool, BTreeSet::from([1, 2, 4]), "admitted ones stay");
    let st = rig.status();
    assert!(st.errored.is_none() && !st.reloading && st.generation == 1);
}

#[test]
fn parallel_reload_switches_when_every_new_instance_is_ready() {
    let (mut rig, _) = Rig::new(with_strategy(3, ReloadStrategy::Parallel));
    for id in 1..=3 {
        rig.up(id);
    }
    rig.floor = Some(3);
    rig.at(secs(10));
    assert_eq!(
        spawns(&rig.send(Event::Reload)),
        vec![(4, 2), (5, 2), (6, 2)],
        "all at once"
    );
    assert!(rig.up(4).is_empty(), "held: not admitted yet");
    assert_eq!(rig.state(4), Some(InstanceState::Starting));
    rig.at(secs(15));
    assert!(
        rig.timer(4, ReadyTimeout).is_empty(),
        "a held candidate has passed its readiness"
    );
    assert!(rig.send(Event::Ready { id: 4 }).is_empty(), "Ready twice");
    assert!(rig.up(5).is_empty());
    let fx = rig.up(6);
    assert_eq!(admits(&fx), vec![4, 5, 6]);
    assert_eq!(withdraws(&fx), vec![3, 2, 1]);
    assert_eq!(fx[..3], [Admit { id: 4 }, Admit { id: 5 }, Admit { id: 6 }]);
    let done = reload_done(&fx);
    assert!(done.len() == 1 && done[0].ok && done[0].generation == 2);
    assert_eq!(done[0].took, secs(5));
    assert_eq!(fx.last(), Some(&ReloadDone(done[0].clone())));
    assert_eq!(rig.pool, BTreeSet::from([4, 5, 6]));
    assert_eq!(rig.status().generation, 2);
    for id in 1..=3 {
        assert_eq!(rig.state(id), Some(InstanceState::Draining));
    }
}

#[test]
fn parallel_reload_is_abandoned_if_any_new_instance_fails() {
    let (mut rig, _) = Rig::new(with_strategy(2, ReloadStrategy::Parallel));
    rig.up(1);
    rig.up(2);
    rig.floor = Some(2);
    rig.send(Event::Reload); // 3 and 4
    rig.up(3); // held
    rig.start(4);
    let fx = rig.exit(4);
    assert_eq!(
        fx[..2],
        stop_fx(3),
        "the held one never served and is stopped"
    );
    let done = reload_done(&fx);
    assert!(!done[0].ok && done[0].reason.as_deref().unwrap().contains("instance 4"));
    assert!(rig.exit(3).is_empty());
    assert_eq!(rig.pool, BTreeSet::from([1, 2]));
    let st = rig.status();
    assert!(st.errored.is_none() && !st.reloading && st.generation == 1);
    // Not ready in time is a failure too; the next try is generation 3.
    assert_eq!(spawns(&rig.send(Event::Reload)), vec![(5, 3), (6, 3)]);
    rig.up(6);
    rig.start(5);
    rig.at(secs(5));
    let fx = rig.timer(5, ReadyTimeout);
    assert!(fx.contains(&Stop { id: 5 }) && fx.contains(&Stop { id: 6 }));
    assert!(
        reload_done(&fx)[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("not ready in time")
    );
    assert_eq!(rig.pool, BTreeSet::from([1, 2]));
}

#[test]
fn parallel_reload_cancels_respawns_of_crashed_old_instances_at_the_switch() {
    let (mut rig, _) = Rig::new(with_strategy(2, ReloadStrategy::Parallel));
    rig.up(1);
    rig.up(2);
    rig.send(Event::Reload); // 3 and 4
    rig.at(secs(1));
    assert_eq!(
        rig.exit(1),
        vec![Withdraw { id: 1 }, ArmRespawn { after: secs(1) }]
    );
    rig.up(3);
    let fx = rig.up(4);
    assert_eq!(admits(&fx), vec![3, 4]);
    assert_eq!(withdraws(&fx), vec![2]);
    assert!(reload_done(&fx)[0].ok);
    rig.at(secs(3));
    assert!(rig.send(Event::RespawnDue).is_empty(), "cancelled");
    assert_eq!(rig.pool, BTreeSet::from([3, 4]));
}

#[test]
fn resize_during_a_parallel_reload_starts_or_stops_candidates() {
    let (mut rig, _) = Rig::new(with_strategy(2, ReloadStrategy::Parallel));
    rig.up(1);
    rig.up(2);
    rig.send(Event::Reload); // 3 and 4
    assert_eq!(
        spawns(&rig.send(Event::Resize { processes: 3 })),
        vec![(5, 2)]
    );
    rig.up(3);
    rig.up(4);
    let fx = rig.up(5);
    assert_eq!(admits(&fx), vec![3, 4, 5]);
    assert_eq!(withdraws(&fx), vec![2, 1]);
    // Shrinking while the next one runs: surplus candidates (not yet ready
    // first) are stopped, and the held one left completes the switch.
    assert_eq!(
        spawns(&rig.send(Event::Reload)),
        vec![(6, 3), (7, 3), (8, 3)]
    );
    rig.up(6);
    rig.start(7);
    rig.start(8);
    let fx = rig.send(Event::Resize { processes: 1 });
    assert!(fx.contains(&Stop { id: 7 }) && fx.contains(&Stop { id: 8 }));
    assert_eq!(admits(&fx), vec![6]);
    assert_eq!(withdraws(&fx), vec![5, 4, 3]);
    assert!(reload_done(&fx)[0].ok);
    assert_eq!(rig.pool, BTreeSet::from([6]));
}

#[test]
fn a_reload_keeps_the_strategy_it_started_with() {
    let (mut rig, _) = Rig::new(with_strategy(2, ReloadStrategy::Parallel));
    rig.up(1);
    rig.up(2);
    rig.floor = Some(2);
    rig.send(Event::Reload); // 3 and 4, in parallel
    let fx = rig.m.set_policy(policy(2), rig.now);
    assert!(fx.is_empty());
    assert!(rig.up(3).is_empty(), "still held: parallel");
    let fx = rig.up(4);
    assert_eq!(admits(&fx), vec![3, 4]);
    // The next one rolls.
    assert_eq!(spawns(&rig.send(Event::Reload)), vec![(5, 3)]);
    assert_eq!(rig.up(5)[..2], [Admit { id: 5 }, Withdraw { id: 4 }]);
}
