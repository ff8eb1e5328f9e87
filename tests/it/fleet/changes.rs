//! Changes through one node: applied on every node, compare-and-swap between concurrent writers, and a node
//! that cannot apply a change while the others do.

use serde_json::{Value, json};

use super::node::PORT;
use super::{Fleet, doc, names};
use crate::harness::Rein;

/// A rein started without `--etcd` has no fleet view.
#[test]
fn without_etcd_there_is_no_fleet_view() {
    let rein = Rein::start();
    assert_eq!(rein.api("GET", "/fleet", None).0, 404);
}

/// A change through node a answers once every node applied it (`?wait=fleet`); then b and c serve it, every
/// node answers the same document with the same ETag, and etcd holds it under the fleet's key.
#[test]
fn a_change_through_one_node_is_applied_on_every_node() {
    let Some(fleet) = Fleet::start("changes") else {
        return;
    };
    let (status, body) = fleet.nodes[0].put(&doc("v1"), None, "?wait=fleet");
    assert_eq!(status, 200, "{body}");
    let report = &body["fleet"];
    assert_eq!(names(&report["applied"]), ["a", "b", "c"], "{body}");
    assert_eq!(report["refused"], json!({}), "{body}");
    assert_eq!(names(&report["pending"]), Vec::<String>::new(), "{body}");

    fleet.wait_served("v1");
    let revision = fleet.wait_converged();
    assert_eq!(report["revision"].as_i64(), Some(revision), "{body}");
    let etags = fleet.etags();
    assert!(
        etags.values().all(|e| *e == etags["a"]),
        "one document, one ETag: {etags:?}"
    );
    for node in &fleet.nodes {
        assert_eq!(node.config().0, doc("v1"), "GET /config on {}", node.name);
    }
    let stored = fleet
        .etcd
        .get(&fleet.config_key())
        .expect("the document in etcd");
    let stored: Value = serde_json::from_str(&stored).expect("JSON in etcd");
    assert_eq!(stored, doc("v1"));
}

/// Two writes carrying the same `If-Match`, through a and b at once: one wins, the other gets 412, and every
/// node ends on the winner's document; the ETag both writers saw is stale everywhere afterwards.
#[test]
fn of_two_concurrent_writers_with_the_same_if_match_one_gets_412() {
    let Some(fleet) = Fleet::start("writers") else {
        return;
    };
    let (status, body) = fleet.nodes[0].put(&doc("v1"), None, "?wait=fleet");
    assert_eq!(status, 200, "{body}");
    let (_, etag) = fleet.nodes[0].config();
    assert_eq!(fleet.nodes[1].config().1, etag, "the same ETag on a and b");

    let barrier = std::sync::Barrier::new(2);
    let answers: Vec<(u16, Value)> = std::thread::scope(|s| {
        let writes: Vec<_> = [("a", 0), ("b", 1)]
            .into_iter()
            .map(|(tag, i)| {
                let (node, etag, barrier) = (&fleet.nodes[i], &etag, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    node.put(&doc(&format!("from-{tag}")), Some(etag), "")
                })
            })
            .collect();
        writes.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut statuses: Vec<u16> = answers.iter().map(|(s, _)| *s).collect();
    statuses.sort();
    assert_eq!(statuses, [200, 412], "{answers:?}");
    let winner = if answers[0].0 == 200 {
        "from-a"
    } else {
        "from-b"
    };

    fleet.wait_served(winner);
    fleet.wait_converged();
    let (status, body) = fleet.nodes[2].put(&doc("late"), Some(&etag), "");
    assert_eq!(status, 412, "a stale If-Match through c: {body}");
    fleet.wait_served(winner);
}

/// Writes without `If-Match` carry no precondition: through alternating nodes, each right after the other
/// (before the next node may have seen the previous write), every one is accepted and the last one wins.
#[test]
fn writes_without_if_match_through_alternating_nodes_are_all_accepted() {
    const WRITES: usize = 40;
    let Some(fleet) = Fleet::start("alternating") else {
        return;
    };
    let mut refused = Vec::new();
    for i in 0..WRITES {
        let node = &fleet.nodes[i % 2];
        let (status, body) = node.put(&doc(&format!("v{i}")), None, "");
        if status != 200 {
            refused.push(format!("v{i} through {}: {status} {body}", node.name));
        }
    }
    assert!(refused.is_empty(), "writes refused: {refused:#?}");
    fleet.wait_served(&format!("v{}", WRITES - 1));
    fleet.wait_converged();
}

/// c's namespace has the port of the new listener taken: the change through a succeeds, a and b serve it, c
/// keeps serving the previous document, and the answer, `/fleet` and `rein status --fleet` say c refused it
/// and why (the address).
#[test]
fn a_node_that_cannot_apply_a_change_keeps_its_configuration_and_the_fleet_view_says_why() {
    let Some(fleet) = Fleet::start("refusal") else {
        return;
    };
    let (a, c) = (&fleet.nodes[0], &fleet.nodes[2]);
    let (status, body) = a.put(&doc("v1"), None, "?wait=fleet");
    assert_eq!(status, 200, "{body}");
    fleet.wait_served("v1");

    let taken = PORT + 1;
    let _holder = c.ns.hold_port(taken);
    let mut v2 = doc("v2");
    v2["listeners"][format!("*:{taken}")] = json!({"pass": "routes"});
    let (status, body) = a.put(&v2, None, "?wait=fleet");
    assert_eq!(status, 200, "{body}");
    let report = &body["fleet"];
    assert_eq!(names(&report["applied"]), ["a", "b"], "{body}");
    let why = report["refused"]["c"].as_str().unwrap_or_default();
    assert!(
        why.contains(&taken.to_string()),
        "c's refusal names the address: {body}"
    );

    for node in &fleet.nodes[..2] {
        crate::harness::wait_for(&format!("{} to serve v2 on both ports", node.name), || {
            node.served().as_deref() == Some("v2")
                && std::net::TcpStream::connect(node.addr(taken)).is_ok()
        });
    }
    assert_eq!(
        c.served().as_deref(),
        Some("v1"),
        "c keeps its configuration"
    );

    for node in &fleet.nodes {
        let view = node.fleet();
        let c_view = &view["nodes"]["c"];
        assert_eq!(c_view["applied"], false, "{view}");
        let error = c_view["error"].as_str().unwrap_or_default();
        assert!(error.contains(&taken.to_string()), "{view}");
        assert_eq!(view["nodes"]["a"]["applied"], true, "{view}");
        assert_eq!(view["nodes"]["b"]["applied"], true, "{view}");
    }

    let out = a.rein.cli(&["status", "--fleet"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no line for {name} in\n{text}"))
            .to_owned()
    };
    assert!(line("a").contains("applied"), "{text}");
    assert!(line("b").contains("applied"), "{text}");
    let c_line = line("c");
    assert!(
        c_line.contains("refused") && c_line.contains(&taken.to_string()),
        "{text}"
    );
}
