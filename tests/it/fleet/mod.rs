//! Fleets: three rein nodes sharing one configuration through a real 3-member etcd cluster, each node in a
//! network namespace of its own, under the faults a fleet must survive (a node that cannot apply a change, the
//! etcd leader killed, all of etcd stopped, a compaction past a node's revision, all of it under load); the
//! fleet's certificates, rolling reloads, an etcd over TLS with users, and ACME with Pebble.
//!
//! These tests need root (network namespaces) and Debian's `etcd-server`, `etcd-client` and `iproute2`
//! (scripts/test.sh installs them); without them they say why and pass. The ACME test also needs Pebble (see
//! tests/it/tls/pebble.rs), and the rolling reloads Node.js.

mod acme;
mod certificates;
mod changes;
mod cluster;
mod harness_check;
mod netns;
mod node;
mod outages;
mod rolling;
mod secured;
mod slow_link;
mod under_load;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{DEADLINE, wait_for};
use cluster::{Cluster, MEMBERS};
use netns::Netns;
use node::{DOC_HEADER, Node, PORT};

/// The nodes' names, in order: nodes[0] is "a".
const NAMES: [&str; 3] = ["a", "b", "c"];

/// An etcd cluster and three rein nodes, "a", "b" and "c"; everything stopped and removed on drop.
pub(crate) struct Fleet {
    pub(crate) name: String,
    // Dropped first: the nodes stop before etcd does.
    pub(crate) nodes: Vec<Node>,
    pub(crate) etcd: Cluster,
}

impl Fleet {
    /// A fleet whose nodes each know every etcd member; `None` (and why, printed) when this machine cannot
    /// run one.
    pub(crate) fn start(name: &str) -> Option<Fleet> {
        Fleet::start_with(name, |_| (0..MEMBERS).collect())
    }

    /// A fleet where node `i` knows only the etcd members `members(i)`.
    pub(crate) fn start_with(name: &str, members: impl Fn(usize) -> Vec<usize>) -> Option<Fleet> {
        if let Some(why) = cannot_run() {
            eprintln!("\n*** SKIPPED: {why} ***\n");
            return None;
        }
        let etcd = Cluster::new();
        let mut fleet = Fleet {
            name: name.to_owned(),
            nodes: Vec::new(),
            etcd,
        };
        // One after the other: the first publishes its document (an empty `--config`), the others have none of
        // their own and serve etcd's, as they do when restarted (a `--config` would win over their saved copy).
        for (i, node) in NAMES.iter().enumerate() {
            let ns = Netns::new();
            let urls: Vec<String> = members(i)
                .into_iter()
                .map(|m| fleet.etcd.client_url(m, ns.host))
                .collect();
            let extra: &[&str] = if i == 0 { &["--config", "EMPTY"] } else { &[] };
            fleet.nodes.push(Node::start(node, name, ns, &urls, extra));
        }
        fleet.wait_converged();
        Some(fleet)
    }

    /// Waits until every node serves the same etcd revision and sees every node live and applied on it;
    /// returns that revision.
    pub(crate) fn wait_converged(&self) -> i64 {
        let mut revision = 0;
        wait_for("every node applied the fleet's revision", || {
            match self.converged_revision() {
                Some(r) => {
                    revision = r;
                    true
                }
                None => false,
            }
        });
        revision
    }

    fn converged_revision(&self) -> Option<i64> {
        let views: Vec<Value> = self.nodes.iter().map(Node::fleet).collect();
        let revision = views[0]["revision"].as_i64()?;
        let all_applied = views.iter().all(|view| {
            view["revision"].as_i64() == Some(revision)
                && view["etcd"]["connected"] == true
                && NAMES.iter().all(|n| {
                    let node = &view["nodes"][n];
                    node["live"] == true
                        && node["applied"] == true
                        && node["revision"].as_i64() == Some(revision)
                })
        });
        all_applied.then_some(revision)
    }

    /// Waits until every node's listener serves the document tagged `tag`.
    pub(crate) fn wait_served(&self, tag: &str) {
        for node in &self.nodes {
            wait_for(&format!("node {} to serve {tag}", node.name), || {
                node.served().as_deref() == Some(tag)
            });
        }
    }

    /// The ETag of each node's `GET /config`, by node.
    pub(crate) fn etags(&self) -> BTreeMap<String, String> {
        self.nodes
            .iter()
            .map(|n| (n.name.clone(), n.config().1))
            .collect()
    }

    /// The etcd key of the fleet's document.
    pub(crate) fn config_key(&self) -> String {
        format!("/rein/{}/config", self.name)
    }
}

/// The fleet's document tagged `tag`: one listener, `*:8080`, answering 200 with `X-Doc: TAG`.
pub(crate) fn doc(tag: &str) -> Value {
    json!({
        "listeners": {format!("*:{PORT}"): {"pass": "routes"}},
        "routes": [{"action": {"return": 200, "response_headers": {DOC_HEADER: tag}}}],
    })
}

/// A temp dir for etcd's data and the nodes' state and logs: in memory (/dev/shm) when it has room. etcd and
/// rein sync what they write, and rein writes its log as it goes: on a machine whose disk is busy with other
/// tests, one sync or one write can stall for longer than a test's deadline, which would fail the test for the
/// disk's sake. A killed process's writes survive in memory as on disk (the kernel holds them).
pub(crate) fn temp_dir() -> tempfile::TempDir {
    // Each etcd member preallocates 64 MB of write-ahead log.
    const ROOM: u64 = 1 << 30;
    let shm = std::path::Path::new("/dev/shm");
    let room = nix::sys::statvfs::statvfs(shm)
        .map(|s| s.blocks_available() * s.fragment_size())
        .unwrap_or(0);
    let dir = if room >= ROOM {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    };
    dir.expect("temp dir")
}

/// Why the fleet tests cannot run here, if they cannot.
fn cannot_run() -> Option<String> {
    if !nix::unistd::Uid::effective().is_root() {
        return Some("the fleet tests need root (network namespaces for the nodes)".into());
    }
    let missing: Vec<&str> = ["etcd", "etcdctl", "ip"]
        .into_iter()
        .filter(|p| Command::new(p).arg("--version").output().is_err())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "the fleet tests need {} (scripts/test.sh installs etcd-server, etcd-client, iproute2)",
            missing.join(", ")
        )
    })
}

/// PUTs `doc` through `node` until it is accepted, retrying while the node answers 503 (etcd unreachable, as
/// during an election); fails on any other answer or at the deadline.
pub(crate) fn write_until_accepted(node: &Node, doc: &Value) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (status, body) = node.put(doc, None, "");
        match status {
            200 => return,
            503 if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            _ => panic!("PUT /config through {}: {status} {body}", node.name),
        }
    }
}

/// The names in a JSON array, sorted.
pub(crate) fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list
        .as_array()
        .unwrap_or_else(|| panic!("not a list of nodes: {list}"))
        .iter()
        .map(|n| n.as_str().unwrap_or_default().to_owned())
        .collect();
    names.sort();
    names
}
