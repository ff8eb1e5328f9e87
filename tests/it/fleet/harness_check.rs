//! The fleet harness alone, without rein's fleet: the etcd cluster elects a new leader when its leader is
//! killed, a namespace reaches etcd through its veth and the host reaches the namespace, and namespaces are
//! removed on drop.

use std::net::TcpStream;
use std::process::Command;

use super::cannot_run;
use super::cluster::Cluster;
use super::netns::Netns;

#[test]
fn the_fleet_harness_runs_etcd_and_namespaces() {
    if let Some(why) = cannot_run() {
        eprintln!("\n*** SKIPPED: {why} ***\n");
        return;
    }
    let mut etcd = Cluster::new();
    let leader = etcd.leader();
    etcd.kill(leader);
    let next = etcd.leader();
    assert_ne!(next, leader);
    etcd.start(leader);
    assert_eq!(etcd.get("/nothing"), None);
    assert!(etcd.compact_to_latest() > 0);

    let ns = Netns::new();
    let name = ns.name.clone();
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, "etcdctl"])
        .arg(format!("--endpoints={}", etcd.client_url(next, ns.host)))
        .args(["endpoint", "health"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let holder = ns.hold_port(8080);
    TcpStream::connect((ns.inside, 8080)).expect("the namespace from the host");
    drop(holder);
    drop(ns);
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&list.stdout).contains(&name));
}
