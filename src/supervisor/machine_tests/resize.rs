//! Resizing and policy changes, alone and during a reload.

use super::*;

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
