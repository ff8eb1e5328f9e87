//! `isolation` as written → [`Isolation`], with Unit's rules: every error names its JSON path.

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::{Automount, CPU_PERIOD_US, Cgroup, IdMap, Isolation, Namespaces};
use crate::config::walk::{boolean, integer, known_keys, object, string};
use crate::config::{ConfigError, JsonPath};

const KEYS: &[&str] = &[
    "namespaces",
    "uidmap",
    "gidmap",
    "rootfs",
    "automount",
    "cgroup",
    "new_privs",
];

/// Compiles an application's `isolation` object found at `path`.
pub(crate) fn compile(v: &Value, path: &JsonPath) -> Result<Isolation, ConfigError> {
    let map = object(v, path)?;
    known_keys(map, KEYS, path)?;
    let mut iso = Isolation {
        new_privs: true,
        ..Isolation::default()
    };
    for (key, value) in map {
        let p = path.key(key);
        match key.as_str() {
            "namespaces" => iso.namespaces = namespaces(value, &p)?,
            "uidmap" => iso.uidmap = id_maps(value, &p)?,
            "gidmap" => iso.gidmap = id_maps(value, &p)?,
            "rootfs" => iso.rootfs = Some(rootfs(value, &p)?),
            "automount" => iso.automount = automount(value, &p)?,
            "cgroup" => iso.cgroup = Some(cgroup(value, &p)?),
            _ => iso.new_privs = boolean(value, &p)?,
        }
    }
    // Unit's rule: a map means nothing without the namespace it maps into.
    for (key, map) in [("uidmap", &iso.uidmap), ("gidmap", &iso.gidmap)] {
        if !map.is_empty() && !iso.namespaces.credential {
            return Err(path
                .key(key)
                .error("is set but \"isolation.namespaces.credential\" is false or unset"));
        }
    }
    Ok(iso)
}

fn namespaces(v: &Value, path: &JsonPath) -> Result<Namespaces, ConfigError> {
    let map = object(v, path)?;
    let names = ["credential", "pid", "network", "mount", "uname", "cgroup"];
    known_keys(map, &names, path)?;
    let on = |name: &str| -> Result<bool, ConfigError> {
        map.get(name)
            .map_or(Ok(false), |b| boolean(b, &path.key(name)))
    };
    Ok(Namespaces {
        credential: on("credential")?,
        pid: on("pid")?,
        network: on("network")?,
        mount: on("mount")?,
        uname: on("uname")?,
        cgroup: on("cgroup")?,
    })
}

fn id_maps(v: &Value, path: &JsonPath) -> Result<Vec<IdMap>, ConfigError> {
    let Value::Array(items) = v else {
        return Err(path.error("must be an array of {\"container\", \"host\", \"size\"} objects"));
    };
    let maps = items
        .iter()
        .enumerate()
        .map(|(i, item)| id_map(item, &path.index(i)))
        .collect::<Result<Vec<_>, _>>()?;
    // The kernel refuses overlapping ranges on either side; say which line.
    for (i, a) in maps.iter().enumerate() {
        for b in &maps[..i] {
            let overlap = |x: u32, y: u32| x < y + b.size && y < x + a.size;
            if overlap(a.container, b.container) || overlap(a.host, b.host) {
                return Err(path.index(i).error("overlaps an earlier line of the map"));
            }
        }
    }
    Ok(maps)
}

fn id_map(v: &Value, path: &JsonPath) -> Result<IdMap, ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["container", "host", "size"], path)?;
    let field = |name: &str| -> Result<u32, ConfigError> {
        let value = map
            .get(name)
            .ok_or_else(|| path.error(format!("needs \"{name}\"")))?;
        // u32::MAX is the kernel's "no id": never part of a map.
        Ok(integer(value, &path.key(name), u64::from(u32::MAX - 1))? as u32)
    };
    let m = IdMap {
        container: field("container")?,
        host: field("host")?,
        size: field("size")?,
    };
    if m.size == 0 {
        return Err(path.key("size").error("must be at least 1"));
    }
    let end = |start: u32| u64::from(start) + u64::from(m.size) > u64::from(u32::MAX);
    if end(m.container) || end(m.host) {
        return Err(path.key("size").error("runs past the last id (4294967294)"));
    }
    Ok(m)
}

fn rootfs(v: &Value, path: &JsonPath) -> Result<PathBuf, ConfigError> {
    let s = string(v, path)?;
    let trimmed = s.trim_end_matches('/');
    if !s.starts_with('/') || trimmed.is_empty() {
        return Err(path.error(format!(
            "requires an absolute path other than \"/\" but given \"{s}\""
        )));
    }
    if s.contains('\0') || trimmed.split('/').any(|seg| seg == "..") {
        return Err(path.error("must not contain a NUL byte or a \"..\" segment"));
    }
    Ok(PathBuf::from(trimmed))
}

fn automount(v: &Value, path: &JsonPath) -> Result<Automount, ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["language_deps", "procfs", "tmpfs"], path)?;
    let on = |name: &str| -> Result<bool, ConfigError> {
        map.get(name)
            .map_or(Ok(true), |b| boolean(b, &path.key(name)))
    };
    Ok(Automount {
        language_deps: on("language_deps")?,
        procfs: on("procfs")?,
        tmpfs: on("tmpfs")?,
    })
}

fn cgroup(v: &Value, path: &JsonPath) -> Result<Cgroup, ConfigError> {
    let map: &Map<String, Value> = object(v, path)?;
    known_keys(map, &["path", "memory_max", "cpu_max", "pids_max"], path)?;
    let mut cg = Cgroup::default();
    for (key, value) in map {
        let p = path.key(key);
        match key.as_str() {
            "path" => cg.path = Some(cgroup_path(value, &p)?),
            "memory_max" => cg.limits.memory_max = Some(memory(value, &p)?),
            "cpu_max" => cg.limits.cpu_quota_us = Some(cpus(value, &p)?),
            _ => match integer(value, &p, u32::MAX.into())? {
                0 => return Err(p.error("must be at least 1")),
                n => cg.limits.pids_max = Some(n),
            },
        }
    }
    if cg.path.is_none() && !cg.limits.any() {
        return Err(
            path.error("needs \"path\", or a limit (\"memory_max\", \"cpu_max\", \"pids_max\")")
        );
    }
    Ok(cg)
}

/// Unit's rule: not empty, no `..` segment; rein adds: no NUL, and a length the kernel takes.
fn cgroup_path(v: &Value, path: &JsonPath) -> Result<String, ConfigError> {
    let s = string(v, path)?;
    let trimmed = s.trim_end_matches('/');
    let bad = trimmed.trim_start_matches('/').is_empty()
        || s.contains('\0')
        || trimmed.split('/').any(|seg| seg == "..");
    if bad {
        return Err(path.error(format!("the cgroup path \"{s}\" is invalid")));
    }
    if s.len() > 3000 {
        return Err(path.error(format!("the cgroup path \"{s}\" is too long")));
    }
    Ok(trimmed.to_owned())
}

/// Bytes as `memory_limit` takes them; at least 1 MiB, below which the app could not even start.
fn memory(v: &Value, path: &JsonPath) -> Result<u64, ConfigError> {
    let n = super::super::conf::bytes(v, path)?;
    if n < 1 << 20 {
        return Err(path.error("must be at least 1M"));
    }
    Ok(n)
}

/// A number of CPUs (`0.5`, `2`): the quota per [`CPU_PERIOD_US`].
fn cpus(v: &Value, path: &JsonPath) -> Result<u64, ConfigError> {
    match v.as_f64() {
        Some(n) if n.is_finite() && (0.01..=1024.0).contains(&n) => {
            Ok((n * CPU_PERIOD_US as f64).round() as u64)
        }
        _ => Err(path.error("must be a number of CPUs between 0.01 and 1024 (such as 0.5 or 2)")),
    }
}
