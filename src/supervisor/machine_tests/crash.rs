//! Crash recovery: withdrawal at once, the minimum restart interval, back-off, the errored state.

use super::*;

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
                matches!(fx.as_slice(), [Withdraw { .. }, Errored { .. }, ArmRespawn { after }] if *after == secs(8)),
                "errored, and retried at backoff_max: {fx:?}"
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
    // Reload clears it and starts the new generation straight away (the pending retry's slot).
    assert_eq!(rig.send(Event::Reload), spawn_fx(4, 2).to_vec());
    assert!(rig.status().errored.is_none());
    let fx = rig.up(4);
    assert_eq!(fx[0], Admit { id: 4 });
    let done = reload_done(&fx);
    assert!(done.len() == 1 && done[0].ok && done[0].generation == 2);
}

#[test]
fn an_errored_app_is_retried_at_backoff_max_until_an_instance_is_ready() {
    let (mut rig, _) = Rig::new(Policy {
        max_failures: 3,
        ..policy(1)
    });
    crash_until_errored(&mut rig, 3);
    // Each retry that fails keeps it errored, names the latest failure, and waits backoff_max (8 s) again.
    let mut id = 4;
    for why in ["spawn", "exit"] {
        rig.wait(secs(7));
        assert!(
            spawns(&rig.send(Event::RespawnDue)).is_empty(),
            "not before 8 s"
        );
        rig.wait(secs(1));
        assert_eq!(spawns(&rig.send(Event::RespawnDue)), vec![(id, 1)]);
        let fx = if why == "spawn" {
            rig.send(Event::SpawnFailed {
                id,
                error: "No such file or directory".into(),
            })
        } else {
            rig.start(id);
            rig.wait(ms(100));
            rig.exit(id)
        };
        assert_eq!(respawn_after(&fx), Some(secs(8)), "{why}: {fx:?}");
        assert!(
            !fx.iter().any(|e| matches!(e, Errored { .. })),
            "reported once"
        );
        let errored = rig.status().errored.unwrap();
        let last = if why == "spawn" {
            "spawn failed: No such file"
        } else {
            "exited with code"
        };
        assert!(errored.contains(last), "{errored}");
        id += 1;
    }
    // The cause went away: the next retry becomes ready and the app is no longer errored.
    rig.wait(secs(8));
    assert_eq!(spawns(&rig.send(Event::RespawnDue)), vec![(id, 1)]);
    assert_eq!(rig.up(id)[0], Admit { id });
    assert!(rig.status().errored.is_none());
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

#[test]
fn the_last_exits_are_kept_as_stopped_or_errored_with_why() {
    let (mut rig, _) = Rig::new(Policy {
        max_failures: 100,
        ..policy(1)
    });
    // Not ready in time: stopped by rein, but for a failure.
    rig.start(1);
    rig.wait(secs(5));
    rig.timer(1, TimerKind::ReadyTimeout);
    rig.send(Event::Exited {
        id: 1,
        code: None,
        signal: Some(15),
        stderr: "still loading".into(),
        oom_killed: false,
    });
    let e = &rig.status().exited[0];
    assert_eq!(
        (e.id, e.pid, e.state),
        (1, Some(1001), InstanceState::Errored)
    );
    assert_eq!(
        e.reason,
        "not ready in time, then killed by signal 15; its stderr ended: still loading"
    );
    // Crashes, one after another: only the last EXITED_KEPT are kept, oldest first.
    let mut id = 2;
    for _ in 0..EXITED_KEPT {
        rig.wait(secs(8));
        rig.send(Event::RespawnDue);
        rig.up(id);
        rig.exit(id);
        id += 1;
    }
    let ids: Vec<InstanceId> = rig.status().exited.iter().map(|e| e.id).collect();
    assert_eq!(ids, (2..id).collect::<Vec<_>>());
    // Retired (a reload): stopped.
    rig.wait(secs(8));
    rig.send(Event::RespawnDue);
    rig.up(id);
    rig.send(Event::Reload);
    rig.up(id + 1);
    rig.send(Event::Drained { id });
    rig.send(Event::Exited {
        id,
        code: Some(0),
        signal: None,
        stderr: String::new(),
        oom_killed: false,
    });
    let last = rig.status().exited.last().cloned().unwrap();
    assert_eq!((last.id, last.state), (id, InstanceState::Stopped));
    assert_eq!(last.reason, "retired by rein: exited with code 0");
}
