//! At apply time: whether this machine can give an app the isolation it asks for. Each refusal names the
//! JSON path of the option the machine cannot honour; nothing is created or changed by the check.

use std::path::Path;

use super::plan::{HostIds, inside};
use super::{Isolation, cgroup};
use crate::config::{ConfigError, JsonPath};

/// Checks app `app`'s `isolation` (at `at`, the app's path) for a user `host` would run it as.
pub(crate) fn check(
    app: &str,
    iso: &Isolation,
    host: &HostIds,
    at: &JsonPath,
) -> Result<(), ConfigError> {
    let at = at.key("isolation");
    let ns = at.key("namespaces");
    if iso.namespaces.credential {
        user_namespaces().map_err(|why| ns.key("credential").error(why))?;
        inside(iso, host).map_err(|(key, e)| at.key(key).error(e.to_string()))?;
    }
    for (on, key, file) in [
        (iso.namespaces.pid, "pid", "pid"),
        (iso.namespaces.network, "network", "net"),
        (iso.namespaces.mount, "mount", "mnt"),
        (iso.namespaces.uname, "uname", "uts"),
        (iso.namespaces.cgroup, "cgroup", "cgroup"),
    ] {
        if on && !Path::new("/proc/self/ns").join(file).exists() {
            return Err(ns
                .key(key)
                .error(format!("this kernel has no {key} namespaces")));
        }
    }
    let privileged = host.root || iso.namespaces.credential;
    let needs_privilege = [
        (iso.rootfs.is_some(), at.key("rootfs")),
        (iso.namespaces.pid, ns.key("pid")),
        (iso.namespaces.network, ns.key("network")),
        (iso.namespaces.mount, ns.key("mount")),
        (iso.namespaces.uname, ns.key("uname")),
        (iso.namespaces.cgroup, ns.key("cgroup")),
    ];
    if let Some((_, p)) = needs_privilege.iter().find(|(on, _)| *on && !privileged) {
        return Err(p.error(
            "requires privileges: run rein as root, or add \"namespaces\": {\"credential\": true}",
        ));
    }
    if let Some(root) = &iso.rootfs
        && !root.is_dir()
    {
        return Err(at
            .key("rootfs")
            .error(format!("{} is not a directory", root.display())));
    }
    if let Some(cg) = &iso.cgroup {
        cgroup::can_create(app, cg)
            .map_err(|e| at.key("cgroup").key(blame(cg)).error(e.to_string()))?;
    }
    Ok(())
}

/// The key a cgroup refusal names: the first limit given, else `path`.
fn blame(cg: &super::Cgroup) -> &'static str {
    let l = &cg.limits;
    match (l.memory_max, l.cpu_quota_us, l.pids_max) {
        (Some(_), _, _) => "memory_max",
        (_, Some(_), _) => "cpu_max",
        (_, _, Some(_)) => "pids_max",
        _ => "path",
    }
}

/// Whether this process may create a user namespace: the kernel's switches, tried for real in a child that
/// exits at once.
fn user_namespaces() -> Result<(), String> {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0")
        && !nix::unistd::geteuid().is_root()
    {
        return Err("this machine forbids user namespaces to unprivileged users (kernel.unprivileged_userns_clone = 0)".into());
    }
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Err("this machine allows no user namespaces (user.max_user_namespaces = 0)".into());
    }
    if probe_user_namespace() {
        Ok(())
    } else {
        Err(
            "this machine refuses to create a user namespace (unshare(CLONE_NEWUSER) failed)"
                .into(),
        )
    }
}

/// Tries `unshare(CLONE_NEWUSER)` in a child that exits at once.
fn probe_user_namespace() -> bool {
    // SAFETY: the child makes only async-signal-safe system calls before `_exit`.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            libc::_exit(if libc::unshare(libc::CLONE_NEWUSER) == 0 {
                0
            } else {
                1
            });
        }
        if pid < 0 {
            return false;
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0) == pid
            && libc::WIFEXITED(status)
            && libc::WEXITSTATUS(status) == 0
    }
}
