//! Rolling reloads: one instance at a time, capacity kept, abandoned when the new version fails.

use super::*;

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
    assert_eq!(rig.send(Event::Drained { id: 1 }), stop_fx(1).to_vec());
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
    assert_eq!(fx[..2], stop_fx(2));
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
