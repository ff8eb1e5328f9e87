//! `applications` compiled: the options every type of application takes (Unit's `working_directory`,
//! `environment`, `user`, `processes`, `limits`…, and rein's readiness, stop, restart, socket and reload
//! options in the same object); each type's own options are its module's ([`super::kind`]).
//!
//! ```json
//! {"type": "external", "executable": "/usr/bin/node", "arguments": ["server.js"],
//!  "working_directory": "/srv/app", "environment": {"NODE_ENV": "production"},
//!  "user": "www-data", "group": "www-data", "processes": 2, "limits": {"timeout": 30},
//!  "readiness": {"http": "/health", "timeout": 10},
//!  "stop": {"signal": "SIGTERM", "timeout": 10},
//!  "restart": {"min_interval": 1, "backoff_max": 30, "max_failures": 5, "stable_after": 10},
//!  "socket": "unix", "memory_limit": "512M",
//!  "reload": {"strategy": "rolling", "batch": 1, "drain_timeout": 30}}
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{Map, Value};

pub use super::kind::AppKind;
use super::spawn::{Output, SocketKind};
use super::watch::{self, WatchConf};
use crate::config::walk::{boolean, integer, known_keys, object, seconds, string, strings};
use crate::config::{ConfigError, JsonPath};

#[derive(Debug, Clone, PartialEq)]
pub enum Readiness {
    /// Ready when the instance accepts a connection on its socket.
    Connect,
    /// Ready when `GET path` answers with a status below 500.
    Http(String),
    /// Ready when the FastCGI server answers `FCGI_GET_VALUES` (PHP-FPM, the Python adapter).
    FastCgi,
}

/// `reload.strategy`: how a reload replaces the instances (see the machine's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadStrategy {
    /// `batch` new instances at a time, each admitted once ready and retiring one old instance.
    Rolling { batch: usize },
    /// Blue/green: every new instance at once; traffic moves when all are ready, and not at all if one fails.
    Parallel,
}

impl Default for ReloadStrategy {
    fn default() -> Self {
        ReloadStrategy::Rolling { batch: 1 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    pub max: usize,
    pub spare: usize,
    pub idle_timeout: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AppConf {
    pub kind: AppKind,
    /// The program (for PHP, `php-fpm`, found when it starts; for Python, the interpreter).
    pub executable: PathBuf,
    pub arguments: Vec<String>,
    pub working_directory: Option<PathBuf>,
    pub environment: Vec<(String, String)>,
    pub user: Option<String>,
    pub group: Option<String>,
    /// Instances to start with (Unit's number, or `spare` of the object form).
    pub processes: usize,
    /// Unit's `{"max", "spare", "idle_timeout"}`: grow towards `max` while every instance is busy; retire an
    /// instance above `spare` once it has served nothing for `idle_timeout`.
    pub scale: Option<Scale>,
    /// An instance whose resident memory exceeds this many bytes is replaced by a rolling restart.
    pub memory_limit: Option<u64>,
    /// Files whose changes trigger a rolling reload.
    pub watch: Option<WatchConf>,
    /// Unit's `limits.timeout`: how long a request may take.
    pub request_timeout: Option<Duration>,
    /// Unit's `limits.requests`: an instance that has served this many requests is replaced.
    pub max_requests: Option<u64>,
    pub readiness: Readiness,
    pub ready_timeout: Duration,
    pub stop_signal: Signal,
    pub stop_timeout: Duration,
    pub min_restart_interval: Duration,
    pub backoff_max: Duration,
    pub max_failures: u32,
    pub stable_after: Duration,
    pub socket: SocketKind,
    /// `reload.strategy` and `reload.batch`.
    pub reload: ReloadStrategy,
    /// `reload.drain_timeout`: how long a withdrawn instance's requests in flight may take before it is stopped.
    pub drain_timeout: Duration,
    /// Unit's `stdout` and `stderr`: a file instead of the app's log in rein's log directory, or `/dev/null`.
    pub stdout: Option<Output>,
    pub stderr: Option<Output>,
    /// Unit's `isolation`: namespaces, `rootfs`, a cgroup with limits (see [`super::isolation`]).
    pub isolation: Option<super::isolation::Isolation>,
}

/// Keys every kind of application takes.
const KEYS: &[&str] = &[
    "type",
    "working_directory",
    "environment",
    "user",
    "group",
    "processes",
    "memory_limit",
    "watch",
    "limits",
    "readiness",
    "stop",
    "restart",
    "socket",
    "reload",
    "stdout",
    "stderr",
    "isolation",
];

pub fn compile(v: &Value, path: &JsonPath) -> Result<AppConf, ConfigError> {
    let map = object(v, path)?;
    let kind = map
        .get("type")
        .ok_or_else(|| path.error("an application needs a \"type\""))?;
    let (kind, own_keys) = AppKind::compile(string(kind, &path.key("type"))?, map, path)?;
    let keys: Vec<&str> = KEYS.iter().chain(own_keys).copied().collect();
    known_keys(map, &keys, path)?;
    let executable = match kind.program() {
        Some(program) => program,
        None => PathBuf::from(string(
            map.get("executable")
                .ok_or_else(|| path.error("an external application needs an \"executable\""))?,
            &path.key("executable"),
        )?),
    };
    let fastcgi = kind.speaks_fastcgi();
    let stop_signal = kind.stop_signal();
    let mut conf = AppConf {
        kind,
        executable,
        arguments: Vec::new(),
        working_directory: None,
        environment: Vec::new(),
        user: None,
        group: None,
        processes: 1,
        scale: None,
        memory_limit: None,
        watch: None,
        request_timeout: None,
        max_requests: None,
        readiness: if fastcgi {
            Readiness::FastCgi
        } else {
            Readiness::Connect
        },
        ready_timeout: Duration::from_secs(30),
        stop_signal,
        stop_timeout: Duration::from_secs(10),
        min_restart_interval: Duration::from_secs(1),
        backoff_max: Duration::from_secs(30),
        max_failures: 5,
        stable_after: Duration::from_secs(10),
        socket: SocketKind::Unix,
        reload: ReloadStrategy::default(),
        drain_timeout: Duration::from_secs(30),
        stdout: None,
        stderr: None,
        isolation: None,
    };
    for (key, value) in map {
        let p = path.key(key);
        match key.as_str() {
            "arguments" => conf.arguments = arguments(value, &p)?,
            "working_directory" => conf.working_directory = Some(PathBuf::from(string(value, &p)?)),
            "environment" => conf.environment = environment(value, &p)?,
            "user" => conf.user = Some(string(value, &p)?.to_owned()),
            "group" => conf.group = Some(string(value, &p)?.to_owned()),
            "processes" => (conf.processes, conf.scale) = processes(value, &p)?,
            "memory_limit" => conf.memory_limit = Some(bytes(value, &p)?),
            "limits" => (conf.request_timeout, conf.max_requests) = limits(value, &p)?,
            "readiness" if fastcgi => {
                return Err(p.error("is not needed: rein asks the FastCGI server itself"));
            }
            "readiness" => readiness(value, &p, &mut conf)?,
            "stop" => stop(value, &p, &mut conf)?,
            "restart" => restart(value, &p, &mut conf)?,
            "reload" => reload(value, &p, &mut conf)?,
            "stdout" => conf.stdout = Some(output(value, &p)?),
            "stderr" => conf.stderr = Some(output(value, &p)?),
            "isolation" => conf.isolation = Some(super::isolation::compile(value, &p)?),
            "socket" => {
                conf.socket = match string(value, &p)? {
                    "unix" => SocketKind::Unix,
                    "tcp" => SocketKind::Tcp,
                    _ => return Err(p.error("must be \"unix\" or \"tcp\"")),
                }
            }
            _ => {}
        }
    }
    conf.hand_workers_to_fpm();
    AppKind::settle(&mut conf, map, path)?;
    // After the loop: relative watch paths resolve against the working directory, wherever it was written.
    if let Some(w) = map.get("watch") {
        conf.watch = Some(watch::compile(
            w,
            &path.key("watch"),
            conf.working_directory.as_deref(),
        )?);
    }
    Ok(conf)
}

/// Unit's `targets` of a PHP or Python app: `{"NAME": {KEYS...}}`, each compiled by `compile`; the same keys
/// at the app's level are then an error. `None` when the app has no `targets`.
pub(super) fn targets<T>(
    map: &Map<String, Value>,
    path: &JsonPath,
    keys: &[&str],
    compile: impl Fn(&Map<String, Value>, &JsonPath) -> Result<T, ConfigError>,
) -> Result<Option<std::collections::BTreeMap<String, T>>, ConfigError> {
    let Some(t) = map.get("targets") else {
        return Ok(None);
    };
    if let Some(k) = keys.iter().find(|k| map.contains_key(**k)) {
        return Err(path
            .key(k)
            .error("goes inside each of \"targets\" when there are targets"));
    }
    let tpath = path.key("targets");
    let targets = object(t, &tpath)?
        .iter()
        .map(|(name, t)| {
            let p = tpath.key(name);
            if name.is_empty() || name.contains(['=', ':', '/']) {
                return Err(p.error("a target name cannot be empty or contain '=', ':' or '/'"));
            }
            let t = object(t, &p)?;
            known_keys(t, keys, &p)?;
            Ok((name.clone(), compile(t, &p)?))
        })
        .collect::<Result<std::collections::BTreeMap<_, _>, ConfigError>>()?;
    if targets.is_empty() {
        return Err(tpath.error("needs at least one target"));
    }
    Ok(Some(targets))
}

fn arguments(v: &Value, path: &JsonPath) -> Result<Vec<String>, ConfigError> {
    match v {
        Value::Array(items) if items.is_empty() => Ok(Vec::new()),
        _ => Ok(strings(v, path)?.into_iter().map(str::to_owned).collect()),
    }
}

fn environment(v: &Value, path: &JsonPath) -> Result<Vec<(String, String)>, ConfigError> {
    object(v, path)?
        .iter()
        .map(|(k, val)| {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                return Err(path
                    .key(k)
                    .error("is not a valid environment variable name"));
            }
            Ok((k.clone(), string(val, &path.key(k))?.to_owned()))
        })
        .collect()
}

/// Unit's `stdout` / `stderr`: an absolute file name; `/dev/null` discards the stream.
fn output(v: &Value, path: &JsonPath) -> Result<Output, ConfigError> {
    match string(v, path)? {
        "/dev/null" => Ok(Output::Discard),
        file if Path::new(file).is_absolute() => Ok(Output::Log(PathBuf::from(file))),
        _ => Err(path.error("must be an absolute file name (or \"/dev/null\")")),
    }
}

/// A number, or Unit's `{"max", "spare", "idle_timeout"}` (dynamic scaling between `spare` and `max`).
fn processes(v: &Value, path: &JsonPath) -> Result<(usize, Option<Scale>), ConfigError> {
    let Value::Object(map) = v else {
        return match integer(v, path, 256)? {
            0 => Err(path.error("must be at least 1")),
            n => Ok((n as usize, None)),
        };
    };
    known_keys(map, &["max", "spare", "idle_timeout"], path)?;
    let spare = map
        .get("spare")
        .map_or(Ok(0), |s| integer(s, &path.key("spare"), 256))? as usize;
    let max = match map.get("max") {
        Some(m) => integer(m, &path.key("max"), 256)? as usize,
        None => spare.max(1),
    };
    if max == 0 || max < spare {
        return Err(path
            .key("max")
            .error("must be at least 1 and not less than \"spare\""));
    }
    let idle_timeout = match map.get("idle_timeout") {
        Some(t) => seconds(t, &path.key("idle_timeout"))?,
        None => Duration::from_secs(15),
    };
    // At least one instance always runs, so a first request never waits for a cold start.
    let start = spare.max(1);
    Ok((
        start,
        Some(Scale {
            max,
            spare: start,
            idle_timeout,
        }),
    ))
}

/// Bytes: a number, or a string with a `K`, `M` or `G` suffix (powers of 1024).
pub(super) fn bytes(v: &Value, path: &JsonPath) -> Result<u64, ConfigError> {
    if let Some(n) = v.as_u64() {
        return Ok(n);
    }
    let bad = || path.error("must be a number of bytes, or a string such as \"512M\" or \"2G\"");
    let s = v.as_str().ok_or_else(bad)?.trim();
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let factor = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => return Err(bad()),
    };
    n.checked_mul(factor).ok_or_else(bad)
}

fn limits(v: &Value, path: &JsonPath) -> Result<(Option<Duration>, Option<u64>), ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["timeout", "requests"], path)?;
    let timeout = map
        .get("timeout")
        .map(|t| seconds(t, &path.key("timeout")))
        .transpose()?;
    let requests = match map.get("requests") {
        Some(r) => match integer(r, &path.key("requests"), u64::MAX)? {
            0 => return Err(path.key("requests").error("must be at least 1")),
            n => Some(n),
        },
        None => None,
    };
    Ok((timeout, requests))
}

fn readiness(v: &Value, path: &JsonPath, conf: &mut AppConf) -> Result<(), ConfigError> {
    let map: &Map<String, Value> = object(v, path)?;
    known_keys(map, &["http", "connect", "timeout"], path)?;
    match (map.get("http"), map.get("connect")) {
        (Some(_), Some(_)) => return Err(path.error("has both \"http\" and \"connect\"")),
        (Some(h), None) => {
            let p = string(h, &path.key("http"))?;
            if !p.starts_with('/') {
                return Err(path.key("http").error("must be a path starting with \"/\""));
            }
            conf.readiness = Readiness::Http(p.to_owned());
        }
        (None, Some(c)) => {
            // Only `true` means something: with rein owning the socket, "no check at all" is not on offer.
            if !boolean(c, &path.key("connect"))? {
                return Err(path
                    .key("connect")
                    .error("must be true (omit \"readiness\" for the default)"));
            }
            conf.readiness = Readiness::Connect;
        }
        (None, None) => conf.readiness = Readiness::Connect,
    }
    if let Some(t) = map.get("timeout") {
        conf.ready_timeout = seconds(t, &path.key("timeout"))?;
    }
    Ok(())
}

fn stop(v: &Value, path: &JsonPath, conf: &mut AppConf) -> Result<(), ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["signal", "timeout"], path)?;
    if let Some(s) = map.get("signal") {
        let p = path.key("signal");
        let name = string(s, &p)?;
        let full = if name.starts_with("SIG") {
            name.to_owned()
        } else {
            format!("SIG{name}")
        };
        conf.stop_signal = full.parse::<Signal>().map_err(|_| {
            p.error(format!(
                "\"{name}\" is not a signal name (such as \"SIGTERM\" or \"SIGINT\")"
            ))
        })?;
    }
    if let Some(t) = map.get("timeout") {
        conf.stop_timeout = seconds(t, &path.key("timeout"))?;
    }
    Ok(())
}

fn restart(v: &Value, path: &JsonPath, conf: &mut AppConf) -> Result<(), ConfigError> {
    let map = object(v, path)?;
    known_keys(
        map,
        &[
            "min_interval",
            "backoff_max",
            "max_failures",
            "stable_after",
        ],
        path,
    )?;
    for (key, value) in map {
        let p = path.key(key);
        match key.as_str() {
            "min_interval" => conf.min_restart_interval = seconds(value, &p)?,
            "backoff_max" => conf.backoff_max = seconds(value, &p)?,
            "stable_after" => conf.stable_after = seconds(value, &p)?,
            _ => conf.max_failures = integer(value, &p, 1_000_000)?.max(1) as u32,
        }
    }
    Ok(())
}

/// `{"strategy": "rolling" | "parallel", "batch": N, "drain_timeout": S}`; `batch` (1 to 256) is for `rolling`.
fn reload(v: &Value, path: &JsonPath, conf: &mut AppConf) -> Result<(), ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["strategy", "batch", "drain_timeout"], path)?;
    let batch = match map.get("batch") {
        Some(b) => match integer(b, &path.key("batch"), 256)? {
            0 => return Err(path.key("batch").error("must be at least 1")),
            n => Some(n as usize),
        },
        None => None,
    };
    conf.reload = match map.get("strategy") {
        None => ReloadStrategy::Rolling {
            batch: batch.unwrap_or(1),
        },
        Some(s) => match string(s, &path.key("strategy"))? {
            "rolling" => ReloadStrategy::Rolling {
                batch: batch.unwrap_or(1),
            },
            "parallel" if batch.is_some() => {
                return Err(path.key("batch").error(
                    "only applies to \"strategy\": \"rolling\" (\"parallel\" starts every instance at once)",
                ));
            }
            "parallel" => ReloadStrategy::Parallel,
            _ => {
                return Err(path
                    .key("strategy")
                    .error("must be \"rolling\" or \"parallel\""));
            }
        },
    };
    if let Some(t) = map.get("drain_timeout") {
        conf.drain_timeout = seconds(t, &path.key("drain_timeout"))?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "conf_tests.rs"]
mod tests;
