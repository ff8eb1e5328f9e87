//! etcd failing under the fleet: its leader killed, all of it stopped and started again, and a compaction past
//! the revision a node last saw.

use super::{Fleet, doc, names, write_until_accepted};
use crate::harness::wait_for;

/// The etcd leader killed: writes go on once a new leader is elected (the API may answer 503 meanwhile), and
/// every node applies them.
#[test]
fn writes_go_on_when_the_etcd_leader_is_killed() {
    let Some(mut fleet) = Fleet::start("leader") else {
        return;
    };
    let (status, body) = fleet.nodes[0].put(&doc("v1"), None, "?wait=fleet");
    assert_eq!(status, 200, "{body}");
    fleet.wait_served("v1");

    let leader = fleet.etcd.leader();
    fleet.etcd.kill(leader);
    write_until_accepted(&fleet.nodes[1], &doc("v2"));
    fleet.wait_served("v2");
    fleet.wait_converged();
    let etags = fleet.etags();
    assert!(etags.values().all(|e| *e == etags["a"]), "{etags:?}");
}

/// All of etcd stopped: every node keeps serving, every write is refused with 503 and changes nothing, a node
/// restarted serves its local copy. etcd started again: every node reconnects, and a write is applied
/// everywhere.
#[test]
fn with_all_of_etcd_stopped_nodes_serve_on_and_refuse_writes_then_catch_up() {
    let Some(mut fleet) = Fleet::start("outage") else {
        return;
    };
    let (status, body) = fleet.nodes[0].put(&doc("v1"), None, "?wait=fleet");
    assert_eq!(status, 200, "{body}");
    fleet.wait_served("v1");
    fleet.wait_converged();
    let etags = fleet.etags();

    fleet.etcd.stop_all();
    for node in &fleet.nodes {
        let (status, body) = node.put(&doc("lost"), None, "");
        assert_eq!(
            status, 503,
            "a write through {} with etcd down: {body}",
            node.name
        );
        assert!(body["error"].is_string(), "{body}");
    }
    for node in &fleet.nodes {
        wait_for(&format!("{} to see etcd gone", node.name), || {
            node.fleet()["etcd"]["connected"] == false
        });
    }
    fleet.wait_served("v1");
    assert_eq!(fleet.etags(), etags, "nothing changed");

    fleet.nodes[1].rein.restart();
    fleet.wait_served("v1");
    assert_eq!(
        fleet.nodes[1].config().1,
        etags["b"],
        "b restarted on its copy"
    );

    fleet.etcd.start_all();
    fleet.wait_converged();
    let (status, body) = fleet.nodes[2].put(&doc("v2"), None, "?wait=fleet");
    assert_eq!(status, 200, "{body}");
    assert_eq!(names(&body["fleet"]["applied"]), ["a", "b", "c"], "{body}");
    fleet.wait_served("v2");
}

/// c knows only etcd member 3. Member 3 killed, two writes through a, the key space compacted at the latest
/// revision, member 3 started again: c cannot watch from its revision any more, re-reads the document and
/// converges with the others.
#[test]
fn a_node_whose_revision_was_compacted_rereads_the_document() {
    let Some(mut fleet) =
        Fleet::start_with(
            "compaction",
            |i| if i == 2 { vec![2] } else { vec![0, 1, 2] },
        )
    else {
        return;
    };
    let (status, body) = fleet.nodes[0].put(&doc("v1"), None, "?wait=fleet");
    assert_eq!(status, 200, "{body}");
    fleet.wait_served("v1");

    fleet.etcd.kill(2);
    write_until_accepted(&fleet.nodes[0], &doc("v2"));
    write_until_accepted(&fleet.nodes[0], &doc("v3"));
    for node in &fleet.nodes[..2] {
        wait_for(&format!("{} to serve v3", node.name), || {
            node.served().as_deref() == Some("v3")
        });
    }
    assert_eq!(
        fleet.nodes[2].served().as_deref(),
        Some("v1"),
        "c, cut off from etcd, keeps its document"
    );
    let compacted = fleet.etcd.compact_to_latest();

    fleet.etcd.start(2);
    fleet.wait_served("v3");
    let revision = fleet.wait_converged();
    assert!(
        revision <= compacted,
        "no write since the compaction: {revision} > {compacted}"
    );
    let etags = fleet.etags();
    assert!(etags.values().all(|e| *e == etags["a"]), "{etags:?}");
}

/// A node that stops leaves the fleet view once its lease expires, and a write then waits for the others only.
#[test]
fn a_stopped_node_leaves_the_fleet_view_when_its_lease_expires() {
    let Some(mut fleet) = Fleet::start("departure") else {
        return;
    };
    drop(fleet.nodes.pop());
    let a = &fleet.nodes[0];
    wait_for("c's lease to expire", || {
        a.fleet()["nodes"].get("c").is_none()
    });
    let (status, body) = a.put(&doc("v1"), None, "?wait=fleet");
    assert_eq!(status, 200, "{body}");
    assert_eq!(names(&body["fleet"]["applied"]), ["a", "b"], "{body}");
    assert_eq!(
        names(&body["fleet"]["pending"]),
        Vec::<String>::new(),
        "{body}"
    );
    fleet.wait_served("v1");
}
