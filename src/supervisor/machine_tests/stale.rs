//! Events that no longer apply (stale generations, unknown instances) are ignored.

use super::*;

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
            stderr: String::new(),
            oom_killed: false,
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
