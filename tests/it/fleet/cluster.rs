//! A 3-member etcd cluster (Debian's `etcd` 3.4) started by a test in a temp dir, and the faults the fleet
//! tests inflict on it: a member killed and restarted, the whole cluster stopped, a compaction.
//!
//! etcd cannot bind port 0: its ports are found free by binding them and releasing them, below the kernel's
//! ephemeral range. Client URLs listen on every address, so that rein nodes in network namespaces reach them
//! through their veth's host side, and are advertised on 127.0.0.1; peer URLs stay on 127.0.0.1. Every wait is
//! a deadline on `etcdctl`'s answer.

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::DEADLINE;

pub(crate) const MEMBERS: usize = 3;

/// The cluster; every member is killed when it is dropped.
pub(crate) struct Cluster {
    dir: tempfile::TempDir,
    members: Vec<Member>,
}

struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

impl Cluster {
    /// Starts the three members of a new cluster and waits until it is healthy.
    pub(crate) fn new() -> Cluster {
        let dir = super::temp_dir();
        let members = (0..MEMBERS)
            .map(|i| Member {
                name: format!("m{i}"),
                client_port: free_port(),
                peer_port: free_port(),
                child: None,
            })
            .collect();
        let mut cluster = Cluster { dir, members };
        for i in 0..MEMBERS {
            cluster.spawn(i, "new");
        }
        cluster.wait_healthy();
        cluster
    }

    /// Member `i`'s client URL as a host reaches it at `host` (127.0.0.1, or a veth's host side).
    pub(crate) fn client_url(&self, i: usize, host: Ipv4Addr) -> String {
        format!("http://{host}:{}", self.members[i].client_port)
    }

    /// Kills member `i` (SIGKILL) and waits for it to exit.
    pub(crate) fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again on its data directory and waits until the running members are healthy.
    pub(crate) fn start(&mut self, i: usize) {
        self.spawn(i, "existing");
        self.wait_healthy();
    }

    pub(crate) fn stop_all(&mut self) {
        for i in 0..MEMBERS {
            self.kill(i);
        }
    }

    /// Starts every stopped member at once (one alone has no quorum) and waits until the cluster is healthy.
    pub(crate) fn start_all(&mut self) {
        for i in 0..MEMBERS {
            if self.members[i].child.is_none() {
                self.spawn(i, "existing");
            }
        }
        self.wait_healthy();
    }

    /// The index of the leader, once the running members agree on one.
    pub(crate) fn leader(&self) -> usize {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(i) = self.running().find(|&i| self.is_leader(i)) {
                return i;
            }
            assert!(Instant::now() < deadline, "no etcd leader\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Compacts the key space at its current revision (so a watch from any older revision is refused);
    /// returns that revision.
    pub(crate) fn compact_to_latest(&self) -> i64 {
        let header = self.json(&["get", "/", "-w", "json"]);
        let revision = header["header"]["revision"]
            .as_i64()
            .unwrap_or_else(|| panic!("no revision in {header}"));
        self.etcdctl_ok(&["compact", &revision.to_string(), "--physical"]);
        revision
    }

    /// The value at `key`, `None` if there is none.
    pub(crate) fn get(&self, key: &str) -> Option<String> {
        let out = self.etcdctl_ok(&["get", key, "--print-value-only"]);
        let value = String::from_utf8_lossy(&out.stdout);
        let value = value.strip_suffix('\n').unwrap_or(&value);
        (!value.is_empty()).then(|| value.to_owned())
    }

    fn spawn(&mut self, i: usize, state: &str) {
        let initial_cluster = self
            .members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let m = &self.members[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(i))
            .expect("etcd log");
        let child = Command::new("etcd")
            .arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(self.dir.path().join(&m.name))
            .arg(format!(
                "--listen-client-urls=http://0.0.0.0:{}",
                m.client_port
            ))
            .arg(format!(
                "--advertise-client-urls=http://127.0.0.1:{}",
                m.client_port
            ))
            .arg(format!(
                "--listen-peer-urls=http://127.0.0.1:{}",
                m.peer_port
            ))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{}",
                m.peer_port
            ))
            .arg(format!("--initial-cluster={initial_cluster}"))
            .arg(format!("--initial-cluster-state={state}"))
            .arg(format!(
                "--initial-cluster-token=rein-{}",
                std::process::id()
            ))
            .args(["--logger=zap", "--log-level=warn"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("etcd log"))
            .stderr(log)
            .spawn()
            .expect("spawn etcd (Debian's etcd-server)");
        self.members[i].child = Some(child);
    }

    fn running(&self) -> impl Iterator<Item = usize> + '_ {
        (0..MEMBERS).filter(|&i| self.members[i].child.is_some())
    }

    fn endpoints(&self) -> String {
        self.running()
            .map(|i| self.client_url(i, Ipv4Addr::LOCALHOST))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn wait_healthy(&mut self) {
        let deadline = Instant::now() + DEADLINE;
        loop {
            self.assert_running();
            if self.etcdctl(&["endpoint", "health"]).status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the etcd cluster did not become healthy\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Fails at once, with its log, when a member meant to run has exited (a port taken meanwhile).
    fn assert_running(&mut self) {
        for i in 0..MEMBERS {
            let exited = self.members[i]
                .child
                .as_mut()
                .is_some_and(|c| c.try_wait().ok().flatten().is_some());
            assert!(!exited, "etcd member {i} exited\n{}", self.logs());
        }
    }

    fn is_leader(&self, i: usize) -> bool {
        let out = etcdctl(
            &self.client_url(i, Ipv4Addr::LOCALHOST),
            &["endpoint", "status", "-w", "json"],
        );
        let status: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let status = &status[0]["Status"];
        let (me, leader) = (&status["header"]["member_id"], &status["leader"]);
        me.is_u64() && me == leader
    }

    fn etcdctl(&self, args: &[&str]) -> Output {
        etcdctl(&self.endpoints(), args)
    }

    fn etcdctl_ok(&self, args: &[&str]) -> Output {
        let out = self.etcdctl(args);
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
        out
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.etcdctl_ok(args);
        serde_json::from_slice(&out.stdout).expect("etcdctl's JSON")
    }

    fn log_path(&self, i: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}.log", self.members[i].name))
    }

    /// The end of every member's log, for a failure message.
    fn logs(&self) -> String {
        (0..MEMBERS)
            .map(|i| {
                let text = std::fs::read_to_string(self.log_path(i)).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(30)..].join("\n");
                format!("--- etcd member {i} log (end) ---\n{tail}\n")
            })
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        self.stop_all();
    }
}

/// `etcdctl --endpoints ENDPOINTS ARGS`, with timeouts short enough for a poll.
fn etcdctl(endpoints: &str, args: &[&str]) -> Output {
    Command::new("etcdctl")
        .arg(format!("--endpoints={endpoints}"))
        .args(["--dial-timeout=1s", "--command-timeout=3s"])
        .args(args)
        .env("ETCDCTL_API", "3")
        .stdin(Stdio::null())
        .output()
        .expect("run etcdctl (Debian's etcd-client)")
}

/// A port free now, below the kernel's ephemeral range: a port from that range, released, may be taken as the
/// source port of any outgoing connection (etcd's own, between members of another test's cluster) before etcd
/// binds it. Candidates are spread by the test process's pid, so that parallel runs rarely try the same ones.
pub(super) fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let (low, span) = (10_000, ephemeral.saturating_sub(10_000).max(1));
    let seed = std::process::id().wrapping_mul(7919);
    for _ in 0..1000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let Ok(port) = u16::try_from(low + seed.wrapping_add(n) % span) else {
            continue;
        };
        if TcpListener::bind(("0.0.0.0", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port below {ephemeral}");
}
