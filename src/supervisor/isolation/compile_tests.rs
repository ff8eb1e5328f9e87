//! `isolation` as written: what good values compile to, and each bad one refused with its JSON path.

use serde_json::{Value, json};

use super::*;
use crate::config::JsonPath;

fn compiled(v: Value) -> Result<Isolation, String> {
    let at = JsonPath::root()
        .key("applications")
        .key("a")
        .key("isolation");
    compile(&v, &at).map_err(|e| e.to_string())
}

#[test]
fn good_values_compile_to_what_they_say() {
    let i = compiled(json!({})).unwrap();
    assert!(i.new_privs && i.automount == Automount::default() && i.cgroup.is_none());
    let i = compiled(json!({
        "namespaces": {"credential": true, "pid": true, "mount": false},
        "uidmap": [{"container": 0, "host": 1000, "size": 1}],
        "rootfs": "/srv/jail/",
        "automount": {"tmpfs": false},
        "cgroup": {"path": "apps/a", "memory_max": "64M", "cpu_max": 0.5, "pids_max": 20},
        "new_privs": false,
    }))
    .unwrap();
    assert!(i.namespaces.credential && i.namespaces.pid && !i.namespaces.mount);
    assert_eq!(
        i.uidmap,
        [IdMap {
            container: 0,
            host: 1000,
            size: 1
        }]
    );
    assert_eq!(i.rootfs, Some(PathBuf::from("/srv/jail")));
    assert!(!i.automount.tmpfs && i.automount.procfs && i.automount.language_deps);
    let cg = i.cgroup.unwrap();
    assert_eq!(cg.path.as_deref(), Some("apps/a"));
    assert_eq!(
        cg.limits,
        Limits {
            memory_max: Some(64 << 20),
            cpu_quota_us: Some(50_000),
            pids_max: Some(20)
        }
    );
    assert!(!i.new_privs);
    assert_eq!(
        i.namespaces.flags(),
        libc::CLONE_NEWUSER | libc::CLONE_NEWPID
    );
}

#[test]
fn bad_values_are_refused_with_their_path() {
    let p = "applications/a/isolation";
    for (v, at) in [
        (json!({"nope": 1}), format!("{p}/nope")),
        (
            json!({"namespaces": {"ipc": true}}),
            format!("{p}/namespaces/ipc"),
        ),
        (
            json!({"namespaces": {"pid": 1}}),
            format!("{p}/namespaces/pid"),
        ),
        (
            json!({"uidmap": [{"container": 0, "host": 0, "size": 1}]}),
            format!("{p}/uidmap"),
        ),
        (
            json!({"namespaces": {"credential": true}, "gidmap": [{"container": 0, "host": 0}]}),
            format!("{p}/gidmap/0"),
        ),
        (
            json!({"namespaces": {"credential": true}, "uidmap": [{"container": 0, "host": 0, "size": 0}]}),
            format!("{p}/uidmap/0/size"),
        ),
        (
            json!({"namespaces": {"credential": true},
                   "uidmap": [{"container": 0, "host": 0, "size": 10}, {"container": 5, "host": 100, "size": 1}]}),
            format!("{p}/uidmap/1"),
        ),
        (json!({"rootfs": "/"}), format!("{p}/rootfs")),
        (json!({"rootfs": "jail"}), format!("{p}/rootfs")),
        (
            json!({"automount": {"sysfs": true}}),
            format!("{p}/automount/sysfs"),
        ),
        (json!({"cgroup": {}}), format!("{p}/cgroup")),
        (
            json!({"cgroup": {"path": "a/../b"}}),
            format!("{p}/cgroup/path"),
        ),
        (
            json!({"cgroup": {"memory_max": "1K"}}),
            format!("{p}/cgroup/memory_max"),
        ),
        (
            json!({"cgroup": {"cpu_max": 0}}),
            format!("{p}/cgroup/cpu_max"),
        ),
        (
            json!({"cgroup": {"pids_max": 0}}),
            format!("{p}/cgroup/pids_max"),
        ),
        (json!({"new_privs": "no"}), format!("{p}/new_privs")),
    ] {
        let e = compiled(v.clone()).expect_err(&v.to_string());
        assert!(e.starts_with(&format!("{at}:")), "{v}: {e}");
    }
}
