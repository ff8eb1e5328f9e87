//! Unit's `isolation` object for every application, and rein's cgroup limits: what an app's instances are
//! confined to (namespaces, a root file system, a cgroup) and how.
//!
//! ```json
//! "isolation": {
//!   "namespaces": {"credential": true, "pid": true, "mount": true, "uname": true, "network": false, "cgroup": true},
//!   "uidmap": [{"container": 0, "host": 65534, "size": 1}],
//!   "gidmap": [{"container": 0, "host": 65534, "size": 1}],
//!   "rootfs": "/srv/jail",
//!   "automount": {"language_deps": true, "procfs": true, "tmpfs": true},
//!   "cgroup": {"path": "rein/app", "memory_max": "256M", "cpu_max": 1.5, "pids_max": 100},
//!   "new_privs": false
//! }
//! ```
//!
//! - [`compile`]: the JSON value → [`Isolation`], every error with its path (pure).
//! - [`check`]: at apply time, whether this machine can do what the app asks (user namespaces, a cgroup
//!   hierarchy with the controllers the limits need, the uid/gid maps covering the app's user); a refusal names
//!   the JSON path and nothing changes.
//! - [`plan`]: for one instance, what the exec shim is told (credentials inside, the mounts, the cgroup to
//!   join), resolved in rein before the fork.
//! - [`child`]: the shim's side: namespaces, maps, mounts, `pivot_root`, hostname, credentials,
//!   `PR_SET_NO_NEW_PRIVS`, then the app.
//! - [`cgroup`]: the hierarchy (v2, or the v1 controllers of a hybrid machine), one cgroup per instance with
//!   its limits, its removal, and whether the kernel's OOM killer struck in it.

mod cgroup;
mod check;
mod child;
mod compile;
mod plan;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub(crate) use cgroup::InstanceCgroup;
pub(crate) use child::run as run_shim;
pub(crate) use compile::compile;
pub(crate) use plan::{HostIds, Instance, Plan, plan};

use crate::config::{ConfigError, JsonPath};

/// The apply-time check of app `name` (at `at`): its `isolation`, if any, against this machine and its user.
pub(crate) fn check_app(
    name: &str,
    conf: &super::conf::AppConf,
    at: &JsonPath,
) -> Result<(), ConfigError> {
    let Some(iso) = &conf.isolation else {
        return Ok(());
    };
    let host = super::spawn::host_ids(conf.user.as_deref(), conf.group.as_deref())
        .map_err(|e| at.key("user").error(e.to_string()))?;
    check::check(name, iso, &host, at)
}

/// One application's `isolation`, compiled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Isolation {
    pub namespaces: Namespaces,
    /// `uidmap` / `gidmap`: empty when not given (the app's own ids are then mapped to themselves).
    pub uidmap: Vec<IdMap>,
    pub gidmap: Vec<IdMap>,
    /// The new root directory (absolute, not `/`, no trailing slash).
    pub rootfs: Option<PathBuf>,
    pub automount: Automount,
    pub cgroup: Option<Cgroup>,
    /// Unit's `new_privs` (default true): `false` sets `PR_SET_NO_NEW_PRIVS`, so that no setuid binary or file
    /// capability raises the app's privileges.
    pub new_privs: bool,
}

/// Unit's `namespaces`: each `true` gives every instance a new namespace of that kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespaces {
    pub credential: bool,
    pub pid: bool,
    pub network: bool,
    pub mount: bool,
    pub uname: bool,
    pub cgroup: bool,
}

impl Namespaces {
    /// The `unshare` flags.
    fn flags(&self) -> libc::c_int {
        [
            (self.credential, libc::CLONE_NEWUSER),
            (self.pid, libc::CLONE_NEWPID),
            (self.network, libc::CLONE_NEWNET),
            (self.mount, libc::CLONE_NEWNS),
            (self.uname, libc::CLONE_NEWUTS),
            (self.cgroup, libc::CLONE_NEWCGROUP),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |flags, (_, flag)| flags | flag)
    }
}

/// One line of `uidmap` / `gidmap`: ids `container..container+size` inside are `host..host+size` outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdMap {
    pub container: u32,
    pub host: u32,
    pub size: u32,
}

impl IdMap {
    /// The id inside for host id `id`, if this line maps it.
    fn inside(&self, id: u32) -> Option<u32> {
        let offset = id.checked_sub(self.host)?;
        (offset < self.size).then(|| self.container + offset)
    }
}

/// Unit's `automount`: what rein mounts inside `rootfs` (all true by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Automount {
    /// The app type's runtime: rein's support files and the program's interpreter, read-only.
    pub language_deps: bool,
    /// A new `proc` at `/proc`.
    pub procfs: bool,
    /// A new `tmpfs` at `/tmp`.
    pub tmpfs: bool,
}

impl Default for Automount {
    fn default() -> Self {
        Automount {
            language_deps: true,
            procfs: true,
            tmpfs: true,
        }
    }
}

/// `cgroup`: Unit's `path`, and rein's limits, applied to each instance's own cgroup below it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cgroup {
    /// Absolute (from the hierarchy's root) or relative to rein's own cgroup; `rein/<app>` relative when only
    /// limits are given.
    pub path: Option<String>,
    pub limits: Limits,
}

/// The kernel's limits on one instance (its process and everything it starts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// `memory.max` (v1: `memory.limit_in_bytes`), bytes.
    pub memory_max: Option<u64>,
    /// `cpu.max` (v1: `cpu.cfs_quota_us`): microseconds of CPU per [`CPU_PERIOD_US`].
    pub cpu_quota_us: Option<u64>,
    /// `pids.max`.
    pub pids_max: Option<u64>,
}

/// The period `cpu_max` is measured over: the kernel's default, 100 ms.
pub const CPU_PERIOD_US: u64 = 100_000;

impl Limits {
    fn any(&self) -> bool {
        self.memory_max.is_some() || self.cpu_quota_us.is_some() || self.pids_max.is_some()
    }
}

#[cfg(test)]
#[path = "compile_tests.rs"]
mod compile_tests;
