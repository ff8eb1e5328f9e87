//! cgroups: which hierarchy this machine has, one cgroup per instance below the app's `cgroup.path` with its
//! limits, its removal once the instance is gone, and whether the kernel's OOM killer struck in it.
//!
//! cgroup v2 (one hierarchy, `cgroup2` mounted at `/sys/fs/cgroup` on current distributions) is the one Unit
//! knows. A hybrid machine (v1 controllers, each its own hierarchy, beside a v2 mount without controllers)
//! gets the same limits through the v1 files: `memory.limit_in_bytes`, `cpu.cfs_quota_us`, `pids.max`.
//!
//! Each instance gets a cgroup of its own, `PATH/instance-N`, so that a limit applies to one instance (as
//! `memory_limit` does) and an OOM kill is told apart per instance; `PATH` holds all of them, so what a Unit
//! user set on `PATH` itself still applies to the app as a whole. A relative `PATH` is below rein's own
//! cgroup; on v2 that cgroup cannot both hold processes and hand controllers down, so rein first moves its own
//! processes into a leaf of it, `supervisor` (what systemd asks of a service with `Delegate=yes`).

use std::io;
use std::path::{Path, PathBuf};

use super::{CPU_PERIOD_US, Cgroup, Limits};

/// The controllers a limit needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Controller {
    Memory,
    Cpu,
    Pids,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Cpu => "cpu",
            Controller::Pids => "pids",
        }
    }
}

/// What `cgroup` needs of the machine.
fn needed(limits: &Limits) -> Vec<Controller> {
    [
        (limits.memory_max.is_some(), Controller::Memory),
        (limits.cpu_quota_us.is_some(), Controller::Cpu),
        (limits.pids_max.is_some(), Controller::Pids),
    ]
    .into_iter()
    .filter_map(|(on, c)| on.then_some(c))
    .collect()
}

/// One mounted hierarchy and rein's own cgroup in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mount {
    pub dir: PathBuf,
    /// rein's cgroup, relative to `dir` (empty at the root).
    pub own: String,
    /// v1: the controllers bound to it; v2: those its root offers (`cgroup.controllers`).
    pub controllers: Vec<String>,
    pub v2: bool,
}

/// The hierarchies seen in `/proc/self/mountinfo` and `/proc/self/cgroup`; `v2_controllers` reads a v2 mount's
/// `cgroup.controllers` (a parameter so that tests can pass a fake one).
pub(super) fn mounts(
    mountinfo: &str,
    self_cgroup: &str,
    v2_controllers: impl Fn(&Path) -> String,
) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            let (root, dir) = (*left.get(3)?, PathBuf::from(unescape(left.get(4)?)));
            let fstype = *right.first()?;
            let v2 = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            let controllers: Vec<String> = if v2 {
                v2_controllers(&dir)
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect()
            } else {
                right
                    .get(2)?
                    .split(',')
                    .filter(|o| !matches!(*o, "rw" | "ro") && !o.contains('='))
                    .map(str::to_owned)
                    .collect()
            };
            let own = own_cgroup(self_cgroup, v2, &controllers)?;
            let own = own.strip_prefix(root).unwrap_or(&own);
            Some(Mount {
                dir,
                own: own.trim_matches('/').to_owned(),
                controllers,
                v2,
            })
        })
        .collect()
}

/// rein's cgroup in the hierarchy with these controllers: `0::/path` for v2, `N:memory:/path` for v1.
fn own_cgroup(self_cgroup: &str, v2: bool, controllers: &[String]) -> Option<String> {
    self_cgroup.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, list, path) = (fields.next()?, fields.next()?, fields.next()?);
        let matches = match v2 {
            true => list.is_empty(),
            false => {
                !list.is_empty() && list.split(',').any(|c| controllers.iter().any(|x| x == c))
            }
        };
        matches.then(|| path.to_owned())
    })
}

/// mountinfo escapes spaces and the like as `\040`.
fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Where an app's cgroup goes, for the controllers it needs; an error names what this machine lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Layout {
    /// One per hierarchy used: v2, one; v1, one per controller needed.
    pub hierarchies: Vec<(Mount, Vec<Controller>)>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum CgroupError {
    #[error(
        "this machine has no cgroup hierarchy rein can use for the {0} controller (cgroup v2 with it enabled, or a v1 {0} hierarchy)"
    )]
    NoController(&'static str),
    #[error("this machine has no cgroup hierarchy mounted")]
    NoHierarchy,
    #[error("cannot write {path}: {error}")]
    Write { path: PathBuf, error: String },
    #[error("cannot create {path}: {error}")]
    Create { path: PathBuf, error: String },
}

/// Picks the hierarchies: v2 when it offers every controller needed, else the v1 hierarchies of each. With no
/// limit, the v2 mount when there is one (Unit's `cgroup.path` groups processes there), else v1's memory.
pub(super) fn layout(mounts: &[Mount], limits: &Limits) -> Result<Layout, CgroupError> {
    let needed = needed(limits);
    let has = |m: &Mount, c: &Controller| m.controllers.iter().any(|x| x == c.name());
    if let Some(v2) = mounts
        .iter()
        .find(|m| m.v2 && needed.iter().all(|c| has(m, c)))
    {
        return Ok(Layout {
            hierarchies: vec![(v2.clone(), needed)],
        });
    }
    if needed.is_empty() {
        return mounts
            .iter()
            .find(|m| !m.v2 && has(m, &Controller::Memory))
            .map(|m| Layout {
                hierarchies: vec![(m.clone(), Vec::new())],
            })
            .ok_or(CgroupError::NoHierarchy);
    }
    let hierarchies = needed
        .iter()
        .map(|c| {
            mounts
                .iter()
                .find(|m| !m.v2 && has(m, c))
                .map(|m| (m.clone(), vec![*c]))
                .ok_or(CgroupError::NoController(c.name()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Layout { hierarchies })
}

/// The app's cgroup directory in hierarchy `m`: `path` from the root when absolute, else below rein's own.
pub(super) fn app_dir(m: &Mount, path: &str) -> PathBuf {
    match path.strip_prefix('/') {
        Some(abs) => m.dir.join(abs),
        None if m.own.is_empty() => m.dir.join(path),
        None => m.dir.join(&m.own).join(path),
    }
}

/// The default `cgroup.path` of an app that gives only limits.
pub(super) fn default_path(app: &str) -> String {
    let safe: String = app
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("rein/{safe}")
}

/// The machine as it is now.
pub(super) fn current_mounts() -> Vec<Mount> {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    mounts(
        &read("/proc/self/mountinfo"),
        &read("/proc/self/cgroup"),
        |dir| std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default(),
    )
}

/// One instance's cgroup, created with its limits before the instance starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InstanceCgroup {
    /// One directory per hierarchy; the memory one (if any) first among v1's.
    dirs: Vec<PathBuf>,
    /// The file counting OOM kills: v2 `memory.events`, v1 `memory.oom_control`.
    oom_file: Option<PathBuf>,
}

impl InstanceCgroup {
    /// Creates `PATH/instance-N` in each hierarchy and writes the limits.
    pub(crate) fn create(app: &str, cg: &Cgroup, instance: u64) -> Result<Self, CgroupError> {
        Self::create_in(&current_mounts(), app, cg, instance)
    }

    /// [`InstanceCgroup::create`] on the hierarchies `mounts`.
    pub(super) fn create_in(
        mounts: &[Mount],
        app: &str,
        cg: &Cgroup,
        instance: u64,
    ) -> Result<Self, CgroupError> {
        let layout = layout(mounts, &cg.limits)?;
        let path = cg.path.clone().unwrap_or_else(|| default_path(app));
        let mut made = InstanceCgroup {
            dirs: Vec::new(),
            oom_file: None,
        };
        for (mount, controllers) in &layout.hierarchies {
            let base = app_dir(mount, &path);
            let dir = base.join(format!("instance-{instance}"));
            let result = match mount.v2 {
                true => create_v2(mount, &base, &dir, controllers, &cg.limits),
                false => create_v1(&dir, controllers, &cg.limits),
            };
            if let Err(e) = result {
                made.remove();
                return Err(e);
            }
            if controllers.contains(&Controller::Memory) {
                let file = if mount.v2 {
                    "memory.events"
                } else {
                    "memory.oom_control"
                };
                made.oom_file = Some(dir.join(file));
            }
            made.dirs.push(dir);
        }
        Ok(made)
    }

    /// The `cgroup.procs` files the instance's first process writes its pid to.
    pub(crate) fn procs(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// Whether the kernel's OOM killer killed a process of the instance (`oom_kill` above 0).
    pub(crate) fn oom_killed(&self) -> bool {
        self.oom_file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .is_some_and(|text| oom_kills(&text) > 0)
    }

    /// Removes the instance's cgroups, and the app's when it holds no other instance; false while one still
    /// holds a process (exiting processes leave it a moment after their parent has seen them exit).
    pub(crate) fn remove(&self) -> bool {
        let gone = self.dirs.iter().all(|d| match std::fs::remove_dir(d) {
            Ok(()) => true,
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        });
        if gone {
            for app in self.dirs.iter().filter_map(|d| d.parent()) {
                let _ = std::fs::remove_dir(app);
            }
        }
        gone
    }

    /// The instance's cgroup directories.
    #[cfg(test)]
    pub(crate) fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }
}

/// The `oom_kill N` count of `memory.events` (v2) or `memory.oom_control` (v1).
pub(super) fn oom_kills(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    std::fs::write(path, value).map_err(|e| CgroupError::Write {
        path: path.to_owned(),
        error: e.to_string(),
    })
}

fn mkdir(dir: &Path) -> Result<(), CgroupError> {
    std::fs::create_dir_all(dir).map_err(|e| CgroupError::Create {
        path: dir.to_owned(),
        error: e.to_string(),
    })
}

/// v2: controllers enabled in each `cgroup.subtree_control` from the root down to `base` (after moving rein
/// out of its own cgroup if `base` is below it), then the instance's cgroup and its limits.
fn create_v2(
    mount: &Mount,
    base: &Path,
    dir: &Path,
    controllers: &[Controller],
    limits: &Limits,
) -> Result<(), CgroupError> {
    mkdir(base)?;
    if !controllers.is_empty() {
        let own = mount.dir.join(&mount.own);
        if !mount.own.is_empty() && base.starts_with(&own) {
            leave_own_cgroup(&own)?;
        }
        let enable: String = controllers
            .iter()
            .map(|c| format!("+{} ", c.name()))
            .collect();
        let rel = base.strip_prefix(&mount.dir).unwrap_or(Path::new(""));
        let mut at = mount.dir.clone();
        write(&at.join("cgroup.subtree_control"), enable.trim_end())?;
        for part in rel.components() {
            at.push(part);
            write(&at.join("cgroup.subtree_control"), enable.trim_end())?;
        }
    }
    mkdir(dir)?;
    if let Some(max) = limits.memory_max {
        write(&dir.join("memory.max"), &max.to_string())?;
        // Hard means hard: no swapping instead of the OOM kill, and the instance killed whole.
        let _ = std::fs::write(dir.join("memory.swap.max"), "0");
        let _ = std::fs::write(dir.join("memory.oom.group"), "1");
    }
    if let Some(quota) = limits.cpu_quota_us {
        write(&dir.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}"))?;
    }
    if let Some(max) = limits.pids_max {
        write(&dir.join("pids.max"), &max.to_string())?;
    }
    Ok(())
}

/// The leaf rein's own processes move to, so that its cgroup may hand controllers down.
const SUPERVISOR_LEAF: &str = "supervisor";

/// Moves every process of `own` (rein, and instances started outside any cgroup) into `own/supervisor`.
fn leave_own_cgroup(own: &Path) -> Result<(), CgroupError> {
    let procs = std::fs::read_to_string(own.join("cgroup.procs")).unwrap_or_default();
    if procs.trim().is_empty() {
        return Ok(());
    }
    let leaf = own.join(SUPERVISOR_LEAF);
    mkdir(&leaf)?;
    for pid in procs.split_whitespace() {
        // One that has exited meanwhile is not an error.
        let _ = std::fs::write(leaf.join("cgroup.procs"), pid);
    }
    Ok(())
}

/// v1: the instance's cgroup in one controller's hierarchy, and that controller's limit.
fn create_v1(dir: &Path, controllers: &[Controller], limits: &Limits) -> Result<(), CgroupError> {
    mkdir(dir)?;
    for c in controllers {
        match c {
            Controller::Memory => {
                let max = limits.memory_max.unwrap_or(u64::MAX).to_string();
                write(&dir.join("memory.limit_in_bytes"), &max)?;
                let _ = std::fs::write(dir.join("memory.memsw.limit_in_bytes"), &max);
            }
            Controller::Cpu => {
                write(&dir.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
                let quota = limits.cpu_quota_us.unwrap_or(0).to_string();
                write(&dir.join("cpu.cfs_quota_us"), &quota)?;
            }
            Controller::Pids => {
                write(
                    &dir.join("pids.max"),
                    &limits.pids_max.unwrap_or(0).to_string(),
                )?;
            }
        }
    }
    Ok(())
}

/// At apply time, without creating anything: whether the hierarchy exists and the app's cgroup could be made
/// there (its nearest existing ancestor writable).
pub(super) fn can_create(app: &str, cg: &Cgroup) -> Result<(), CgroupError> {
    let layout = layout(&current_mounts(), &cg.limits)?;
    let path = cg.path.clone().unwrap_or_else(|| default_path(app));
    for (mount, _) in &layout.hierarchies {
        let base = app_dir(mount, &path);
        let existing = base.ancestors().find(|a| a.exists()).unwrap_or(&mount.dir);
        nix::unistd::access(existing, nix::unistd::AccessFlags::W_OK).map_err(|e| {
            CgroupError::Create {
                path: base.clone(),
                error: format!("{} is not writable ({e})", existing.display()),
            }
        })?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
