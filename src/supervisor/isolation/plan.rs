//! What the exec shim is told for one instance, resolved in rein before the fork: the namespaces, the uid/gid
//! maps and the ids the app takes inside, the mounts, the cgroups to join.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{IdMap, Isolation};

/// The shim's instructions (passed on its command line as JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// `unshare` flags (`CLONE_NEWNS` added when there is a `rootfs`).
    pub flags: i32,
    /// The text written to the child's `uid_map` / `gid_map` (with a credential namespace).
    pub uid_map: Option<String>,
    pub gid_map: Option<String>,
    /// rein is not root: `setgroups` is denied in the namespace, as the kernel requires for an unprivileged map.
    pub deny_setgroups: bool,
    /// The ids the app takes (inside its user namespace when it has one); `None`: unchanged.
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub groups: Option<Vec<u32>>,
    /// The new hostname (a `uname` namespace): the app's name.
    pub hostname: Option<String>,
    pub rootfs: Option<PathBuf>,
    /// Host paths mounted read-only at the same place inside `rootfs` (`language_deps`).
    pub binds: Vec<PathBuf>,
    /// Symbolic links recreated inside `rootfs` when missing there (`/lib -> usr/lib`).
    pub links: Vec<(PathBuf, PathBuf)>,
    pub procfs: bool,
    pub tmpfs: bool,
    pub cgroup_procs: Vec<PathBuf>,
    pub no_new_privs: bool,
    /// Entered last (inside `rootfs`).
    pub cwd: Option<PathBuf>,
    pub death_signal: i32,
}

impl Plan {
    pub(super) fn has(&self, flag: libc::c_int) -> bool {
        self.flags & flag != 0
    }
}

/// The app's ids on the host: its user, group and groups (rein's own when it does not switch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostIds {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups to set; `None` when rein does not switch users (not root).
    pub groups: Option<Vec<u32>>,
    pub root: bool,
}

/// A map that cannot give the app's ids a meaning inside, in Unit's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MapError {
    #[error("has no \"host\" entry for uid {0}, the app's user")]
    NoUid(u32),
    #[error("has no \"host\" entry for gid {0}, the app's group")]
    NoGid(u32),
    #[error("has no \"host\" entry for gid {0}, one of the user's supplementary groups")]
    NoGroup(u32),
    #[error("has {0} entries but rein, not running as root, may map only one: its own id")]
    Unprivileged(usize),
    #[error(
        "maps host id {0} but rein, not running as root, may map only its own id ({1}) with \"size\": 1"
    )]
    NotOwnId(u32, u32),
}

/// The ids inside: `(uid, gid, groups, uid_map, gid_map)`; the error says which map (`"uidmap"` or
/// `"gidmap"`) is to blame.
pub(crate) type Inside = (u32, u32, Option<Vec<u32>>, String, String);

pub(crate) fn inside(iso: &Isolation, host: &HostIds) -> Result<Inside, (&'static str, MapError)> {
    let identity = |id: u32| {
        vec![IdMap {
            container: id,
            host: id,
            size: 1,
        }]
    };
    let uidmap = if iso.uidmap.is_empty() {
        identity(host.uid)
    } else {
        iso.uidmap.clone()
    };
    let gidmap = if iso.gidmap.is_empty() {
        identity(host.gid)
    } else {
        iso.gidmap.clone()
    };
    if !host.root {
        unprivileged(&uidmap, host.uid).map_err(|e| ("uidmap", e))?;
        unprivileged(&gidmap, host.gid).map_err(|e| ("gidmap", e))?;
    }
    let find = |maps: &[IdMap], id: u32| maps.iter().find_map(|m| m.inside(id));
    let uid = find(&uidmap, host.uid).ok_or(("uidmap", MapError::NoUid(host.uid)))?;
    let gid = find(&gidmap, host.gid).ok_or(("gidmap", MapError::NoGid(host.gid)))?;
    let groups = match &host.groups {
        Some(groups) => Some(
            groups
                .iter()
                .map(|g| find(&gidmap, *g).ok_or(("gidmap", MapError::NoGroup(*g))))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None => None,
    };
    let text = |maps: &[IdMap]| -> String {
        maps.iter()
            .map(|m| format!("{} {} {}\n", m.container, m.host, m.size))
            .collect()
    };
    Ok((uid, gid, groups, text(&uidmap), text(&gidmap)))
}

/// An unprivileged process may write one line, mapping its own id alone.
fn unprivileged(maps: &[IdMap], own: u32) -> Result<(), MapError> {
    match maps {
        [m] if m.host == own && m.size == 1 => Ok(()),
        [m] => Err(MapError::NotOwnId(m.host, own)),
        _ => Err(MapError::Unprivileged(maps.len())),
    }
}

/// What one instance's shim does. `program` is the app's program as the spec names it; `arguments` its
/// arguments; `support` rein's own files the app needs (Node.js preload): the last two, and the program, are
/// lent read-only to a `rootfs` that lacks them.
pub(crate) struct Instance<'a> {
    pub app: &'a str,
    pub program: &'a Path,
    pub arguments: &'a [String],
    pub support: Vec<PathBuf>,
    pub cwd: Option<PathBuf>,
    pub cgroup_procs: Vec<PathBuf>,
    pub death_signal: i32,
}

/// The system directories a dynamically linked interpreter needs (its loader, libc, its standard library).
const SYSTEM_DIRS: &[&str] = &["/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib"];

pub(crate) fn plan(iso: &Isolation, host: &HostIds, at: &Instance) -> Result<Plan, MapError> {
    let mut plan = Plan {
        flags: iso.namespaces.flags(),
        no_new_privs: !iso.new_privs,
        cwd: at.cwd.clone(),
        cgroup_procs: at.cgroup_procs.clone(),
        death_signal: at.death_signal,
        uid: Some(host.uid),
        gid: Some(host.gid),
        groups: host.groups.clone(),
        ..Plan::default()
    };
    if iso.namespaces.credential {
        let (uid, gid, groups, uid_map, gid_map) = inside(iso, host).map_err(|(_, e)| e)?;
        plan.deny_setgroups = !host.root;
        plan.groups = if host.root { groups } else { None };
        (plan.uid, plan.gid) = (Some(uid), Some(gid));
        (plan.uid_map, plan.gid_map) = (Some(uid_map), Some(gid_map));
    }
    if iso.namespaces.uname {
        plan.hostname = Some(hostname(at.app));
    }
    if let Some(root) = &iso.rootfs {
        // A rootfs always gets a mount namespace of its own: its mounts never reach the host's.
        plan.flags |= libc::CLONE_NEWNS;
        plan.rootfs = Some(root.clone());
        plan.procfs = iso.automount.procfs;
        plan.tmpfs = iso.automount.tmpfs;
        if iso.automount.language_deps {
            (plan.binds, plan.links) = language_deps(root, at);
        }
    }
    Ok(plan)
}

/// `language_deps`: the program (found in `PATH` when it is a bare name), the absolute paths among its
/// arguments, rein's support files and the system library directories, each only where `rootfs` lacks it.
fn language_deps(root: &Path, at: &Instance) -> (Vec<PathBuf>, Vec<(PathBuf, PathBuf)>) {
    let lent = resolve(at.program)
        .into_iter()
        .chain(
            at.arguments
                .iter()
                .map(PathBuf::from)
                .filter(|p| p.is_absolute()),
        )
        .chain(at.support.iter().cloned());
    let system = SYSTEM_DIRS.iter().map(PathBuf::from);
    let inside = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
    let missing = |p: &Path| p.exists() && std::fs::symlink_metadata(inside(p)).is_err();
    let mut binds: Vec<PathBuf> = Vec::new();
    let mut links = Vec::new();
    for p in system {
        if !missing(&p) {
            continue;
        }
        // A top-level link such as /lib -> usr/lib is recreated; its target is lent on its own.
        match std::fs::read_link(&p) {
            Ok(target) if target.is_relative() => links.push((p, target)),
            _ => binds.push(p),
        }
    }
    for p in lent {
        // Under a system directory already lent: nothing more to do.
        if missing(&p) && !binds.iter().any(|b| p.starts_with(b)) && !binds.contains(&p) {
            binds.push(p);
        }
    }
    (binds, links)
}

/// A bare program name as the shim's `execvp` would find it on the host.
fn resolve(program: &Path) -> Option<PathBuf> {
    if program.is_absolute() {
        return Some(program.to_owned());
    }
    if program.components().count() != 1 {
        return None;
    }
    let path =
        std::env::var_os("PATH").unwrap_or_else(|| crate::supervisor::spawn::DEFAULT_PATH.into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// A hostname from the app's name: at most 64 bytes of letters, digits, `-` and `.`.
fn hostname(app: &str) -> String {
    let name: String = app
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() {
        "app".to_owned()
    } else {
        name
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
