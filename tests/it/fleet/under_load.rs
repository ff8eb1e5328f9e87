//! The fleet under load: requests to every node's listener while the configuration changes every second
//! through rotating nodes and the etcd leader is killed and restarted. No request may fail.

use std::time::{Duration, Instant};

use super::node::{DOC_HEADER, PORT};
use super::{Fleet, doc, write_until_accepted};
use crate::harness::Response;
use crate::load::{Load, assert_no_failures};

/// Configuration changes during the run, one a second.
const CHANGES: u32 = 8;

#[test]
fn no_request_fails_while_the_configuration_changes_and_an_etcd_member_restarts() {
    let Some(mut fleet) = Fleet::start("load") else {
        return;
    };
    let (status, body) = fleet.nodes[0].put(&doc("v0"), None, "?wait=fleet");
    assert_eq!(status, 200, "{body}");
    fleet.wait_served("v0");

    let loads: Vec<Load> = fleet
        .nodes
        .iter()
        .map(|n| Load::start_keyed(n.addr(PORT), &["/"], served_doc))
        .collect();
    let mut killed = None;
    for step in 1..=CHANGES {
        let node = &fleet.nodes[step as usize % fleet.nodes.len()];
        let step_started = Instant::now();
        write_until_accepted(node, &doc(&format!("v{step}")));
        // Shown if the test fails: how long each write took.
        eprintln!(
            "v{step} through {}: {:?}",
            node.name,
            step_started.elapsed()
        );
        match step {
            2 => {
                let leader = fleet.etcd.leader();
                fleet.etcd.kill(leader);
                eprintln!("etcd leader {leader} killed");
                killed = Some(leader);
            }
            5 => {
                let member = killed.take().expect("a member killed");
                fleet.etcd.start(member);
                eprintln!(
                    "etcd member {member} started again, {:?} into the step",
                    step_started.elapsed()
                );
            }
            _ => {}
        }
        // Pacing, not waiting for a condition: a change a second at most (a write may take longer while etcd
        // elects a leader).
        let next = step_started + Duration::from_secs(1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let last = format!("v{CHANGES}");
    fleet.wait_served(&last);
    for load in &loads {
        load.wait_answers(&last, 10);
    }

    for (node, load) in fleet.nodes.iter().zip(loads) {
        let (ok, failures) = load.finish();
        eprintln!("node {}: answers by document {ok:?}", node.name);
        assert_no_failures(&ok, &failures);
        // A node may skip a document it learns of together with a newer one (after etcd's leader died).
        assert!(
            ok.len() > CHANGES as usize / 2,
            "node {} served the changes: {ok:?}",
            node.name
        );
    }
    fleet.wait_converged();
    let etags = fleet.etags();
    assert!(etags.values().all(|e| *e == etags["a"]), "{etags:?}");
}

/// What a load's answers are counted by: the document that served them.
fn served_doc(r: &Response) -> String {
    r.header(DOC_HEADER).unwrap_or_default().to_owned()
}
