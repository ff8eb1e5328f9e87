//! Unit's `isolation` on real apps: namespaces (PID, mount, uname, credential with a map), `new_privs`, a
//! `rootfs`, a cgroup memory limit the kernel enforces, and options this machine cannot honour refused with
//! nothing changed.

use std::net::SocketAddr;
use std::path::Path;

use serde_json::{Value, json};

use crate::harness::{Rein, get, wait_for};

const APP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/apps/isolation_app.py");
const PYTHON: &str = "/usr/bin/python3";

/// rein serving app `iso` (the isolation app, with `isolation` and `extra` settings) at `/`.
fn serve(rein: &Rein, isolation: Value, extra: Value) -> SocketAddr {
    let mut app = json!({
        "type": "external",
        "executable": PYTHON,
        "arguments": [APP],
        "isolation": isolation,
    });
    app.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    rein.serve_with(
        json!([{"action": {"pass": "applications/iso"}}]),
        json!({"applications": {"iso": app}}),
    )
}

fn seen(addr: SocketAddr) -> Value {
    let r = get(addr, "/");
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_str(&r.text()).unwrap()
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

#[test]
fn pid_mount_and_uname_namespaces_show_the_app_only_itself_and_its_name() {
    if !is_root() {
        return;
    }
    let rein = Rein::start();
    let ns = json!({"namespaces": {"pid": true, "mount": true, "uname": true}});
    let addr = serve(&rein, ns, json!({}));
    let me = seen(addr);
    // The namespace's init (rein's) is pid 1; the app is its only child.
    assert_eq!(me["pid"], 2, "{me}");
    assert_eq!(me["pids"], json!([1, 2]), "{me}");
    assert_eq!(me["listen_pid"], "2", "{me}");
    assert_eq!(me["hostname"], "iso", "{me}");
    assert_eq!(me["no_new_privs"], 0, "{me}");
    // rein's /status still tracks a host pid.
    let (_, status) = rein.api("GET", "/status", None);
    let pid = &status["applications"]["iso"]["instances"][0]["pid"];
    assert!(pid.as_u64().is_some_and(|p| p > 2), "{status}");
    // The instance's memory is the app's, below the shim rein tracks: 64 MiB held show.
    assert_eq!(get(addr, "/hold").status, 200);
    let (_, status) = rein.api("GET", "/status/applications/iso", None);
    let rss = status["instances"][0]["rss_bytes"].as_u64().unwrap_or(0);
    assert!(rss > 64 << 20, "{status}");
}

#[test]
fn new_privs_false_sets_no_new_privs() {
    let rein = Rein::start();
    let addr = serve(&rein, json!({"new_privs": false}), json!({}));
    assert_eq!(seen(addr)["no_new_privs"], 1);
}

#[test]
fn a_credential_namespace_maps_the_app_user_to_the_container_id() {
    if !is_root() {
        return;
    }
    let rein = Rein::start();
    let iso = json!({
        "namespaces": {"credential": true, "pid": true},
        "uidmap": [{"container": 0, "host": 65534, "size": 1}],
        "gidmap": [{"container": 0, "host": 65534, "size": 1}],
    });
    let addr = serve(&rein, iso, json!({"user": "nobody", "group": "nogroup"}));
    let me = seen(addr);
    assert_eq!(
        (me["uid"].clone(), me["gid"].clone()),
        (json!(0), json!(0)),
        "{me}"
    );
}

#[test]
fn a_rootfs_is_all_the_app_sees_with_its_runtime_lent_read_only() {
    if !is_root() {
        return;
    }
    let rein = Rein::start();
    let root = rein.dir.path().join("jail");
    std::fs::create_dir_all(root.join("srv")).unwrap();
    std::fs::write(root.join("srv/marker"), "jail").unwrap();
    let iso = json!({"namespaces": {"pid": true}, "rootfs": root});
    let addr = serve(&rein, iso, json!({}));
    let me = seen(addr);
    let entries: Vec<&str> = me["root"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(entries.contains(&"srv"), "{me}");
    assert!(
        !entries.contains(&"root") && !entries.contains(&"etc"),
        "{me}"
    );
    assert_eq!(me["pids"], json!([1, 2]), "{me}");
    // Nothing was mounted on the host.
    assert!(!root.join("proc/self").exists());
    assert!(
        !Path::new(&root.join("usr/lib"))
            .read_dir()
            .is_ok_and(|mut d| d.next().is_some())
    );
}

#[test]
fn an_option_the_machine_cannot_honour_is_refused_and_nothing_changes() {
    let rein = Rein::start();
    let addr = serve(&rein, json!({"new_privs": true}), json!({}));
    let before = rein.api("GET", "/config", None).1;
    // A uidmap that does not cover the app's user.
    let iso = json!({
        "namespaces": {"credential": true},
        "uidmap": [{"container": 0, "host": 4000000, "size": 1}],
    });
    let (status, body) = rein.api(
        "PUT",
        "/config/applications/iso/isolation",
        Some(&iso.to_string()),
    );
    assert_eq!(status, 400, "{body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with("applications/iso/isolation/uidmap"),
        "{body}"
    );
    // A memory controller this machine does not have, or a missing rootfs.
    let missing = json!({"rootfs": "/nonexistent/jail"});
    let (status, body) = rein.api(
        "PUT",
        "/config/applications/iso/isolation",
        Some(&missing.to_string()),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or_default()
            .starts_with("applications/iso/isolation/rootfs"),
        "{body}"
    );
    assert_eq!(rein.api("GET", "/config", None).1, before);
    assert_eq!(get(addr, "/").status, 200);
}

#[test]
fn a_memory_limit_kills_an_instance_that_allocates_past_it_and_rein_says_so() {
    if !is_root() {
        return;
    }
    let rein = Rein::start();
    let iso = json!({"cgroup": {"memory_max": "64M"}});
    let addr = serve(&rein, iso, json!({}));
    let first = seen(addr)["pid"].clone();
    // The request dies with its instance.
    let _ = std::panic::catch_unwind(|| get(addr, "/alloc"));
    wait_for("a new instance", || {
        std::panic::catch_unwind(|| seen(addr)["pid"].clone()).is_ok_and(|p| p != first)
    });
    let (_, status) = rein.api("GET", "/status", None);
    let exited = status["applications"]["iso"]["exited"].to_string();
    assert!(exited.contains("OOM killer"), "{status}");
    let (_, _, metrics) = rein.api_raw("GET", "/metrics", None, &[]);
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(
        metrics
            .lines()
            .any(|l| l.contains("oom_killed") && l.contains("iso") && !l.ends_with(" 0")),
        "{metrics}"
    );
    wait_for("the notice in the app's log", || {
        std::fs::read_to_string(rein.state.join("logs/iso.log"))
            .is_ok_and(|l| l.contains("out of memory"))
    });
    // Stopped, rein leaves no cgroup behind.
    let mut rein = rein;
    rein.signal(nix::sys::signal::Signal::SIGTERM);
    rein.wait_exit();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    for line in own.lines() {
        let (controllers, path) = line.split_once(':').unwrap().1.split_once(':').unwrap();
        let base = match controllers {
            "" => "/sys/fs/cgroup".to_owned(),
            c if c.split(',').any(|c| c == "memory") => "/sys/fs/cgroup/memory".to_owned(),
            _ => continue,
        };
        let app = Path::new(&base)
            .join(path.trim_start_matches('/'))
            .join("rein/iso");
        assert!(!app.exists(), "{} left behind", app.display());
    }
}
