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
        .map(|n| Load::start_keyed(n.addr(PORT), &["/", "/"], served_doc))
        .collect();
    let started = Instant::now();
    let mut killed = None;
    for step in 1..=CHANGES {
        let node = &fleet.nodes[step as usize % fleet.nodes.len()];
        write_until_accepted(node, &doc(&format!("v{step}")));
        match step {
            2 => {
                let leader = fleet.etcd.leader();
                fleet.etcd.kill(leader);
                killed = Some(leader);
            }
            5 => fleet.etcd.start(killed.take().expect("a member killed")),
            _ => {}
        }
        // Pacing, not waiting for a condition: one change a second.
        let next = started + Duration::from_secs(step.into());
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
        assert!(ok.len() > 2, "node {} saw the changes: {ok:?}", node.name);
    }
    fleet.wait_converged();
    let etags = fleet.etags();
    assert!(etags.values().all(|e| *e == etags["a"]), "{etags:?}");
}

/// What a load's answers are counted by: the document that served them.
fn served_doc(r: &Response) -> String {
    r.header(DOC_HEADER).unwrap_or_default().to_owned()
}
