//! The hierarchy read from a hybrid machine's and a pure v2 machine's `/proc` files, the layout each gives,
//! and an instance's cgroup created on a fake v2 cgroupfs (a plain directory).

use std::path::Path;

use super::*;

const HYBRID_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
const HYBRID_SELF: &str = "9:name=systemd:/\n8:pids:/\n4:memory:/jobs/42\n1:cpu:/\n0::/\n";
const V2_MOUNTS: &str = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
const V2_SELF: &str = "0::/system.slice/rein.service\n";

fn limits(memory: bool, cpu: bool, pids: bool) -> Limits {
    Limits {
        memory_max: memory.then_some(64 << 20),
        cpu_quota_us: cpu.then_some(50_000),
        pids_max: pids.then_some(10),
    }
}

#[test]
fn a_hybrid_machine_uses_the_v1_controllers_for_limits() {
    let m = mounts(HYBRID_MOUNTS, HYBRID_SELF, |_| String::new());
    let unified = m.iter().find(|m| m.v2).unwrap();
    assert!(unified.controllers.is_empty());
    let memory = m.iter().find(|m| m.controllers == ["memory"]).unwrap();
    assert_eq!(memory.own, "jobs/42");
    let l = layout(&m, &limits(true, false, true)).unwrap();
    let dirs: Vec<&Path> = l.hierarchies.iter().map(|(m, _)| m.dir.as_path()).collect();
    assert_eq!(
        dirs,
        [
            Path::new("/sys/fs/cgroup/memory"),
            Path::new("/sys/fs/cgroup/pids")
        ]
    );
    assert_eq!(
        app_dir(memory, &default_path("my app")),
        Path::new("/sys/fs/cgroup/memory/jobs/42/rein/my_app")
    );
    assert_eq!(
        app_dir(memory, "/abs/x"),
        Path::new("/sys/fs/cgroup/memory/abs/x")
    );
    // A path without limits groups the processes in the v2 mount, as Unit does.
    let l = layout(&m, &Limits::default()).unwrap();
    assert!(l.hierarchies[0].0.v2);
}

#[test]
fn a_v2_machine_uses_its_one_hierarchy_or_names_the_missing_controller() {
    let m = mounts(V2_MOUNTS, V2_SELF, |_| "cpuset cpu io memory pids".into());
    let l = layout(&m, &limits(true, true, true)).unwrap();
    assert_eq!(l.hierarchies.len(), 1);
    assert_eq!(l.hierarchies[0].0.own, "system.slice/rein.service");
    let m = mounts(V2_MOUNTS, V2_SELF, |_| "cpu io".into());
    assert_eq!(
        layout(&m, &limits(true, false, false)),
        Err(CgroupError::NoController("memory"))
    );
    assert_eq!(
        layout(&[], &Limits::default()),
        Err(CgroupError::NoHierarchy)
    );
}

#[test]
fn the_oom_kill_count_is_read_from_v1_and_v2_files() {
    assert_eq!(
        oom_kills("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n"),
        1
    );
    assert_eq!(
        oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"),
        0
    );
    assert_eq!(oom_kills(""), 0);
}

#[test]
fn an_instance_cgroup_on_a_fake_v2_tree_gets_its_limits_and_rein_a_leaf_of_its_own() {
    let root = tempfile::tempdir().unwrap();
    let own = root.path().join("system.slice/rein.service");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(own.join("cgroup.procs"), "100\n").unwrap();
    let mount = Mount {
        dir: root.path().to_owned(),
        own: "system.slice/rein.service".into(),
        controllers: vec!["cpu".into(), "memory".into(), "pids".into()],
        v2: true,
    };
    let cg = Cgroup {
        path: None,
        limits: limits(true, true, true),
    };
    let made = InstanceCgroup::create_in(&[mount], "api", &cg, 3).unwrap();
    let leaf = own.join("rein/api/instance-3");
    assert_eq!(made.dirs(), std::slice::from_ref(&leaf));
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    assert_eq!(read(&leaf.join("memory.max")), (64 << 20).to_string());
    assert_eq!(read(&leaf.join("cpu.max")), "50000 100000");
    assert_eq!(read(&leaf.join("pids.max")), "10");
    for dir in [
        root.path().to_owned(),
        own.clone(),
        own.join("rein"),
        own.join("rein/api"),
    ] {
        assert_eq!(
            read(&dir.join("cgroup.subtree_control")),
            "+memory +cpu +pids",
            "{}",
            dir.display()
        );
    }
    // rein's own processes moved to a leaf, so that its cgroup may hand controllers down.
    assert_eq!(read(&own.join("supervisor/cgroup.procs")), "100");
    assert_eq!(made.procs(), [leaf.join("cgroup.procs")]);
    assert!(!made.oom_killed());
    std::fs::write(leaf.join("memory.events"), "oom 1\noom_kill 1\n").unwrap();
    assert!(made.oom_killed());
}
