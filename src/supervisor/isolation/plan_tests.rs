//! The ids an app takes inside its user namespace under Unit's rules, and what `language_deps` lends a rootfs.

use super::*;

fn host(root: bool) -> HostIds {
    HostIds {
        uid: 1000,
        gid: 1000,
        groups: root.then(|| vec![1000, 27]),
        root,
    }
}

fn iso(uidmap: &[(u32, u32, u32)], gidmap: &[(u32, u32, u32)]) -> Isolation {
    let map = |m: &[(u32, u32, u32)]| {
        m.iter()
            .map(|&(container, host, size)| IdMap {
                container,
                host,
                size,
            })
            .collect()
    };
    let mut iso = Isolation {
        uidmap: map(uidmap),
        gidmap: map(gidmap),
        new_privs: true,
        ..Isolation::default()
    };
    iso.namespaces.credential = true;
    iso
}

#[test]
fn maps_give_the_container_ids_or_name_the_map_that_misses() {
    let i = iso(&[(0, 1000, 1)], &[(0, 1000, 1), (100, 20, 10)]);
    let (uid, gid, groups, uid_map, gid_map) = inside(&i, &host(true)).unwrap();
    assert_eq!((uid, gid, groups), (0, 0, Some(vec![0, 107])));
    assert_eq!(
        (uid_map.as_str(), gid_map.as_str()),
        ("0 1000 1\n", "0 1000 1\n100 20 10\n")
    );
    // No map: the app's own ids, mapped to themselves.
    let (uid, gid, ..) = inside(&iso(&[], &[(1000, 1000, 1), (27, 27, 1)]), &host(true)).unwrap();
    assert_eq!((uid, gid), (1000, 1000));
    assert_eq!(
        inside(&iso(&[(0, 5000, 10)], &[]), &host(true)).unwrap_err(),
        ("uidmap", MapError::NoUid(1000))
    );
    assert_eq!(
        inside(&iso(&[], &[(0, 1000, 1)]), &host(true)).unwrap_err(),
        ("gidmap", MapError::NoGroup(27))
    );
    // Unprivileged: one line, its own id.
    assert_eq!(
        inside(&iso(&[(0, 1000, 2)], &[]), &host(false)).unwrap_err(),
        ("uidmap", MapError::NotOwnId(1000, 1000))
    );
    assert!(inside(&iso(&[(0, 1000, 1)], &[(0, 1000, 1)]), &host(false)).is_ok());
}

#[test]
fn a_rootfs_is_lent_the_program_and_support_files_it_lacks_and_gets_a_mount_namespace() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("usr/lib")).unwrap();
    let support = tempfile::tempdir().unwrap();
    let mut i = Isolation {
        rootfs: Some(root.path().to_owned()),
        new_privs: true,
        ..Isolation::default()
    };
    i.namespaces.uname = true;
    let at = Instance {
        app: "my app",
        program: Path::new("sh"),
        arguments: &["/nonexistent/x".into()],
        support: vec![support.path().to_owned()],
        cwd: None,
        cgroup_procs: Vec::new(),
        death_signal: 9,
    };
    let p = plan(&i, &host(true), &at).unwrap();
    assert!(p.has(libc::CLONE_NEWNS) && p.has(libc::CLONE_NEWUTS));
    assert_eq!(p.hostname.as_deref(), Some("my-app"));
    assert!((p.procfs, p.tmpfs) == (true, true));
    // What the rootfs has (usr/lib) is not lent; the shell and the support directory are.
    assert!(
        !p.binds.contains(&PathBuf::from("/usr/lib")),
        "{:?}",
        p.binds
    );
    assert!(
        p.binds.contains(&support.path().to_owned()),
        "{:?}",
        p.binds
    );
    assert!(p.binds.iter().any(|b| b.ends_with("sh")), "{:?}", p.binds);
    assert!(!p.binds.contains(&PathBuf::from("/nonexistent/x")));
}
