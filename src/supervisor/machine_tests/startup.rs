//! Start-up and readiness: instances spawned, admitted only once ready, a ready timeout.

use super::*;

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
