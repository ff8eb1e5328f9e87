//! Stopping: drains and their time-outs, shutdown, a stop before the pid is known.

use super::*;

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
    assert_eq!(rig.timer(2, DrainTimeout), stop_fx(2).to_vec());
    assert!(rig.send(Event::Drained { id: 2 }).is_empty());
    assert!(rig.timer(2, DrainTimeout).is_empty());
    rig.at(secs(40));
    assert_eq!(rig.timer(2, StopTimeout), vec![Kill { id: 2 }]);
    assert!(
        rig.send(Event::Exited {
            id: 2,
            code: None,
            signal: Some(9),
            stderr: String::new(),
            oom_killed: false,
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
    assert_eq!(rig.start(1), stop_fx(1).to_vec());
    assert!(rig.exit(1).is_empty());
    assert!(rig.m.is_idle());
}
