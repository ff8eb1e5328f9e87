//! Rolling reloads across the fleet: an application on every node reloaded node by node through the API and the
//! CLI, each node's instances replaced with no request failing; and a roll that stops at the first node whose
//! new instances cannot start, leaving that node and the ones after it serving their previous instances.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::node::{Node, PORT};
use super::{Fleet, names};
use crate::harness::{Response, wait_for};
use crate::load::{Load, assert_no_failures};

const HELLO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/apps/hello.js");

/// The application's name in the document.
const APP: &str = "hello";

/// The fleet's document: a listener on [`PORT`] whose route passes to the application `node ARGUMENTS`.
fn app_doc(arguments: Value) -> Value {
    json!({
        "listeners": {format!("*:{PORT}"): {"pass": "routes"}},
        "routes": [{"action": {"pass": format!("applications/{APP}")}}],
        "applications": {APP: {
            "type": "external", "executable": "node", "arguments": arguments, "processes": 1
        }},
    })
}

/// The pids of `node`'s ready instances of [`APP`].
fn ready_pids(node: &Node) -> BTreeSet<u64> {
    let (_, status) = node
        .rein
        .api("GET", &format!("/status/applications/{APP}"), None);
    status["instances"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["state"] == "ready")
        .filter_map(|i| i["pid"].as_u64())
        .collect()
}

/// Writes `doc` through a, waits until every node applied it and runs one ready instance; returns each node's
/// instance pids, in node order.
fn deploy(fleet: &Fleet, doc: &Value) -> Vec<BTreeSet<u64>> {
    let (status, body) = fleet.nodes[0].put(doc, None, "?wait=fleet");
    assert_eq!(status, 200, "{body}");
    assert_eq!(names(&body["fleet"]["applied"]), ["a", "b", "c"], "{body}");
    fleet
        .nodes
        .iter()
        .map(|node| {
            let mut pids = BTreeSet::new();
            wait_for(&format!("{}'s instance ready", node.name), || {
                pids = ready_pids(node);
                pids.len() == 1
            });
            pids
        })
        .collect()
}

/// Waits until `node` runs one ready instance and none of `before`; returns its pids.
fn wait_replaced(node: &Node, before: &BTreeSet<u64>) -> BTreeSet<u64> {
    let mut pids = BTreeSet::new();
    wait_for(&format!("{}'s instance replaced", node.name), || {
        pids = ready_pids(node);
        pids.len() == 1 && pids.is_disjoint(before)
    });
    pids
}

/// `GET /fleet/applications/APP/restart` through `node`.
fn roll(node: &Node, query: &str) -> (u16, Value) {
    node.rein.api(
        "GET",
        &format!("/fleet/applications/{APP}/restart{query}"),
        None,
    )
}

fn body_text(r: &Response) -> String {
    r.text()
}

/// A roll through a reloads the application on every node, each node's instance replaced, while requests to
/// every node's listener all succeed; `rein reload --fleet --batch 2` through a's state directory does it again.
#[test]
fn a_rolling_reload_replaces_every_nodes_instance_without_failing_a_request() {
    let Some(fleet) = Fleet::start("rolling") else {
        return;
    };
    let before = deploy(&fleet, &app_doc(json!([HELLO])));
    let loads: Vec<Load> = fleet
        .nodes
        .iter()
        .map(|n| Load::start_keyed(n.addr(PORT), &["/"], body_text))
        .collect();
    for load in &loads {
        load.wait_answers("hi", 10);
    }

    let (status, body) = roll(&fleet.nodes[0], "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"success": "Ok", "nodes": {"a": "reloaded", "b": "reloaded", "c": "reloaded"}})
    );
    let after: Vec<BTreeSet<u64>> = fleet
        .nodes
        .iter()
        .zip(&before)
        .map(|(node, pids)| wait_replaced(node, pids))
        .collect();
    for load in &loads {
        load.wait_answers("hi", 10);
    }
    for (node, load) in fleet.nodes.iter().zip(loads) {
        let (ok, failures) = load.finish();
        eprintln!("node {}: answers {ok:?}", node.name);
        assert_no_failures(&ok, &failures);
    }

    let out = fleet.nodes[0]
        .rein
        .cli(&["reload", APP, "--fleet", "--batch", "2"]);
    assert!(
        out.status.success(),
        "rein reload --fleet: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for (node, pids) in fleet.nodes.iter().zip(&after) {
        wait_replaced(node, pids);
    }
}

/// The application exits at once on a node whose namespace address names a marker file in its directory; the
/// marker for b is made after every node started its instance. A roll through a reloads a, fails on b (the
/// first node, in name order, whose new instance cannot start) and skips c; b and c keep their instances, and
/// every node serves on.
#[test]
fn a_rolling_reload_that_fails_on_one_node_stops_there_and_the_previous_instances_serve_on() {
    let Some(fleet) = Fleet::start("rolling-fail") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let app = dir.path().join("refuses.js");
    std::fs::write(
        &app,
        "// Exits at once when a file `fail-ADDRESS` for one of this host's addresses is in the directory given.\n\
         const fs = require('fs'), os = require('os'), path = require('path');\n\
         const addresses = Object.values(os.networkInterfaces()).flat().map(i => i.address);\n\
         if (addresses.some(a => fs.existsSync(path.join(process.argv[2], 'fail-' + a)))) process.exit(1);\n\
         require('http').createServer((q, s) => s.end('hi')).listen(3000);\n",
    )
    .expect("the app");
    let doc = app_doc(json!([
        app.display().to_string(),
        dir.path().display().to_string()
    ]));
    let before = deploy(&fleet, &doc);
    let (a, b) = (&fleet.nodes[0], &fleet.nodes[1]);
    std::fs::write(dir.path().join(format!("fail-{}", b.ns.inside)), "").expect("the marker");

    let (status, body) = roll(a, "");
    assert_eq!(status, 500, "{body}");
    let nodes = &body["nodes"];
    assert_eq!(nodes["a"], "reloaded", "{body}");
    assert!(
        nodes["b"]
            .as_str()
            .is_some_and(|s| s.starts_with("failed: ")),
        "{body}"
    );
    assert_eq!(nodes["c"], "skipped", "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| e.contains("node b")),
        "{body}"
    );

    wait_replaced(a, &before[0]);
    for (node, pids) in fleet.nodes.iter().zip(&before).skip(1) {
        assert_eq!(&ready_pids(node), pids, "{} keeps its instance", node.name);
    }
    for node in &fleet.nodes {
        let response = crate::harness::get(node.addr(PORT), "/");
        assert_eq!(response.status, 200, "on {}", node.name);
        assert_eq!(response.text(), "hi", "on {}", node.name);
    }
}
