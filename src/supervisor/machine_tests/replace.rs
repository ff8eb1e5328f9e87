//! Replacing one instance (its memory or request limit): a twin beside it, then the old one retired.

use super::*;

fn replace_done(fx: &[Effect]) -> Vec<(InstanceId, InstanceId, bool, Option<String>)> {
    fx.iter()
        .filter_map(|e| match e {
            ReplaceDone {
                old,
                new,
                ok,
                reason,
            } => Some((*old, *new, *ok, reason.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn replace_starts_a_twin_beside_the_instance_then_retires_it() {
    let (mut rig, _) = Rig::new(policy(2));
    rig.up(1);
    rig.up(2);
    rig.floor = Some(2);
    assert_eq!(rig.send(Event::Replace { id: 1 }), spawn_fx(3, 1).to_vec());
    assert_eq!(rig.state(1), Some(InstanceState::Ready), "still serving");
    assert!(!rig.status().reloading);
    assert_eq!(
        rig.up(3),
        vec![
            Admit { id: 3 },
            Withdraw { id: 1 },
            ArmTimer {
                id: 1,
                kind: DrainTimeout,
                after: secs(30)
            },
            ReplaceDone {
                old: 1,
                new: 3,
                ok: true,
                reason: None
            },
        ]
    );
    rig.send(Event::Drained { id: 1 });
    assert!(rig.exit(1).is_empty());
    let st = rig.status();
    assert_eq!(st.replacements, 1);
    assert_eq!(st.generation, 1);
    assert!(st.last_reload.is_none(), "not a reload");
    assert_eq!(rig.pool, BTreeSet::from([2, 3]));
    assert_eq!(rig.state(2), Some(InstanceState::Ready), "left alone");
}

#[test]
fn replace_keeps_the_generation_and_restart_count_of_the_instance() {
    let (mut rig, _) = Rig::new(policy(1));
    rig.up(1);
    rig.wait(ms(100));
    rig.exit(1);
    rig.wait(secs(1));
    rig.send(Event::RespawnDue);
    rig.up(2); // restarts 1
    assert_eq!(spawns(&rig.send(Event::Replace { id: 2 })), vec![(3, 1)]);
    let st = rig.status();
    assert_eq!(st.instances.iter().find(|i| i.id == 3).unwrap().restarts, 1);
}

#[test]
fn replace_is_ignored_unless_the_instance_is_ready_and_none_is_in_flight() {
    let (mut rig, _) = Rig::new(policy(3));
    rig.up(1);
    rig.up(2);
    rig.start(3);
    for id in [3, 99] {
        assert!(rig.send(Event::Replace { id }).is_empty(), "{id}");
    }
    assert_eq!(spawns(&rig.send(Event::Replace { id: 1 })), vec![(4, 1)]);
    for id in [1, 2, 4] {
        assert!(
            rig.send(Event::Replace { id }).is_empty(),
            "one at a time: {id}"
        );
    }
    rig.up(4);
    assert_eq!(rig.state(1), Some(InstanceState::Draining));
    assert!(
        rig.send(Event::Replace { id: 1 }).is_empty(),
        "already retired"
    );
    assert_eq!(spawns(&rig.send(Event::Replace { id: 2 })), vec![(5, 1)]);
}

#[test]
fn a_failed_replacement_keeps_the_old_instance_and_backs_off() {
    let (mut rig, _) = Rig::new(Policy {
        max_failures: 2,
        backoff_max: secs(4),
        ..policy(1)
    });
    rig.up(1);
    rig.floor = Some(1);
    let mut id = 1;
    // Never an app failure: more failures than max_failures, no Errored.
    for (attempt, backoff) in [1, 2, 4, 4].into_iter().enumerate() {
        id += 1;
        assert_eq!(spawns(&rig.send(Event::Replace { id: 1 })), vec![(id, 1)]);
        rig.start(id);
        let fx = if attempt % 2 == 0 {
            rig.exit(id)
        } else {
            rig.wait(secs(5));
            rig.timer(id, ReadyTimeout)
        };
        let done = replace_done(&fx);
        assert_eq!(done.len(), 1, "{fx:?}");
        assert!(
            !done[0].2
                && done[0]
                    .3
                    .as_ref()
                    .unwrap()
                    .contains(&format!("instance {id}"))
        );
        assert!(
            spawns(&fx).is_empty() && respawn_after(&fx).is_none(),
            "{fx:?}"
        );
        assert!(!fx.iter().any(|e| matches!(e, Errored { .. })));
        rig.exit(id);
        rig.wait(secs(backoff) - ms(1));
        assert!(
            rig.send(Event::Replace { id: 1 }).is_empty(),
            "back-off {backoff} s"
        );
        rig.wait(ms(1));
    }
    assert!(rig.status().errored.is_none());
    assert_eq!(rig.pool, BTreeSet::from([1]));
    // A spawn failure is a failure too; a success resets the back-off.
    assert_eq!(spawns(&rig.send(Event::Replace { id: 1 })), vec![(6, 1)]);
    let fx = rig.send(Event::SpawnFailed {
        id: 6,
        error: "exec".into(),
    });
    assert!(!replace_done(&fx)[0].2);
    rig.wait(secs(4));
    assert_eq!(spawns(&rig.send(Event::Replace { id: 1 })), vec![(7, 1)]);
    assert!(replace_done(&rig.up(7))[0].2);
    assert_eq!(spawns(&rig.send(Event::Replace { id: 7 })), vec![(8, 1)]);
    rig.exit(8);
    rig.wait(secs(1));
    assert_eq!(
        spawns(&rig.send(Event::Replace { id: 7 })),
        vec![(9, 1)],
        "back to 1 s"
    );
}

#[test]
fn when_the_old_instance_exits_first_the_replacement_takes_its_slot() {
    let (mut rig, _) = Rig::new(policy(2));
    rig.up(1);
    rig.up(2);
    rig.send(Event::Replace { id: 1 }); // 3
    rig.at(ms(100));
    let fx = rig.exit(1);
    assert_eq!(fx[0], Withdraw { id: 1 });
    let done = replace_done(&fx);
    assert!(!done[0].2 && done[0].3.as_ref().unwrap().contains("takes its place"));
    assert!(
        spawns(&fx).is_empty() && respawn_after(&fx).is_none(),
        "no respawn: {fx:?}"
    );
    assert_eq!(rig.up(3), vec![Admit { id: 3 }], "nothing left to retire");
    assert_eq!(rig.pool, BTreeSet::from([2, 3]));
    assert_eq!(rig.status().replacements, 0);
    // Now an ordinary instance: its crash is respawned as usual.
    rig.at(ms(200));
    let fx = rig.exit(3);
    assert!(respawn_after(&fx).is_some(), "{fx:?}");
}

#[test]
fn a_reload_cancels_a_replacement_and_replace_waits_for_it() {
    let (mut rig, _) = Rig::new(policy(2));
    rig.up(1);
    rig.up(2);
    rig.floor = Some(2);
    rig.send(Event::Replace { id: 1 }); // 3
    rig.start(3);
    let fx = rig.send(Event::Reload);
    assert!(fx.contains(&Stop { id: 3 }), "{fx:?}");
    assert!(replace_done(&fx)[0].3.as_ref().unwrap().contains("reload"));
    assert_eq!(spawns(&fx), vec![(4, 2)]);
    assert!(
        rig.send(Event::Replace { id: 2 }).is_empty(),
        "ignored during a reload"
    );
    rig.exit(3);
    rig.up(4);
    let fx = rig.up(5);
    assert!(reload_done(&fx)[0].ok);
    assert_eq!(
        spawns(&rig.send(Event::Replace { id: 4 })),
        vec![(6, 2)],
        "no back-off: a cancellation is not a failure"
    );
}

#[test]
fn retiring_the_old_instance_cancels_its_replacement() {
    let (mut rig, _) = Rig::new(policy(2));
    rig.up(1);
    rig.up(2);
    rig.send(Event::Replace { id: 2 }); // 3
    rig.start(3);
    // Resize down retires the newest Ready one: 2, whose replacement goes too.
    let fx = rig.send(Event::Resize { processes: 1 });
    assert!(fx.contains(&Stop { id: 3 }) && fx.contains(&Withdraw { id: 2 }));
    assert!(!replace_done(&fx)[0].2);
    assert_eq!(rig.pool, BTreeSet::from([1]));
    // Shutdown, too.
    rig.send(Event::Replace { id: 1 }); // 4
    let fx = rig.send(Event::Shutdown);
    assert_eq!(replace_done(&fx).len(), 1);
    assert!(fx.contains(&Withdraw { id: 1 }));
    rig.start(4);
    assert!(rig.send(Event::Replace { id: 1 }).is_empty());
}

#[test]
fn replace_is_ignored_while_errored() {
    let (mut rig, _) = Rig::new(Policy {
        max_failures: 1,
        ..policy(2)
    });
    rig.up(1);
    rig.up(2);
    rig.at(ms(100));
    assert!(matches!(
        rig.exit(2)[..],
        [Withdraw { .. }, Errored { .. }, ArmRespawn { .. }]
    ));
    assert!(rig.send(Event::Replace { id: 1 }).is_empty());
}
