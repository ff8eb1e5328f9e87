//! `applications` compiled: Unit's schema for `"type": "external"`, `"php"` ([`super::php`]) and `"python"`
//! ([`super::python`]), plus rein's readiness, stop, restart and socket options in the same object.
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

/// What runs: any program serving HTTP, or PHP and Python apps that rein runs over FastCGI.
#[derive(Debug, Clone, PartialEq)]
pub enum AppKind {
    External,
    Php(super::php::PhpApp),
    Python(super::python::PythonApp),
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
    /// rein's `handoff`: a Node.js app's instances take client connections themselves, passed by rein over
    /// Node's IPC channel, on listeners that pass straight to the app (see [`crate::handoff`]).
    pub handoff: bool,
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
    let tpath = path.key("type");
    // Unit accepts a version after the language ("php 8.2", "python 3"): the one installed runs.
    let (kind, own_keys): (AppKind, &[&str]) = match string(kind, &tpath)?.split(' ').next() {
        Some("external") => (AppKind::External, &["executable", "arguments", "handoff"]),
        Some("php") => (
            AppKind::Php(super::php::compile(map, path)?),
            super::php::KEYS,
        ),
        Some("python") => (
            AppKind::Python(super::python::compile(map, path)?),
            super::python::KEYS,
        ),
        _ => {
            return Err(tpath.error("must be \"external\", \"php\" or \"python\""));
        }
    };
    let keys: Vec<&str> = KEYS.iter().chain(own_keys).copied().collect();
    known_keys(map, &keys, path)?;
    let executable = match &kind {
        AppKind::External => PathBuf::from(string(
            map.get("executable")
                .ok_or_else(|| path.error("an external application needs an \"executable\""))?,
            &path.key("executable"),
        )?),
        AppKind::Php(_) => PathBuf::from("php-fpm"),
        AppKind::Python(py) => py.interpreter(),
    };
    let fastcgi = !matches!(kind, AppKind::External);
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
        stop_signal: Signal::SIGTERM,
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
        handoff: false,
        isolation: None,
    };
    if let AppKind::Php(_) = conf.kind {
        // PHP-FPM's graceful stop: workers finish their requests.
        conf.stop_signal = Signal::SIGQUIT;
    }
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
            "handoff" => conf.handoff = boolean(value, &p)?,
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
    if let AppKind::External = conf.kind {
        conf.executable = unit_relative(conf.executable, conf.working_directory.as_deref());
    }
    let node = || {
        super::launch::is_node(
            &conf.executable,
            &conf.arguments,
            conf.working_directory.as_deref(),
        )
    };
    if conf.handoff && !node() {
        return Err(path.key("handoff").error(
            "needs a Node.js app (\"executable\": \"node\", or a script run by node): its instances \
             take connections through rein's preload",
        ));
    }
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

/// Unit takes an external app's `executable` "absolute or relative to `working_directory`", so a bare name
/// (`"app.js"`) that is a file there runs from there; other bare names are searched in `PATH` (`"node"`).
fn unit_relative(executable: PathBuf, working_directory: Option<&std::path::Path>) -> PathBuf {
    let bare = executable.components().count() == 1 && executable.is_relative();
    match working_directory {
        Some(dir) if bare && dir.join(&executable).is_file() => PathBuf::from(".").join(executable),
        _ => executable,
    }
}

/// Requests queued behind the one in progress on each connection to a WSGI instance: enough that the adapter
/// finds the next request already in its socket when it finishes one, instead of sleeping until rein has
/// passed the answer on and sent another (see [`crate::fastcgi::pipeline`]). WSGI hello, 2 instances of 1
/// thread, c=100, whole stack's CPU per request: 1 → 60-65 µs, 3 → 42-46 µs, 7 → 37-41 µs. A request never
/// lines up behind one that has run for 10 ms, so a slow request holds at most what queued in its first 10 ms.
const WSGI_PIPELINING: u32 = 7;

impl AppConf {
    /// Whether `name` is one of the application's `targets`.
    pub fn has_target(&self, name: &str) -> bool {
        match &self.kind {
            AppKind::Php(php) => php.targets.contains_key(name),
            AppKind::Python(py) => py.targets.contains_key(name),
            AppKind::External => false,
        }
    }

    /// Requests one instance takes at once, when it has a fixed capacity: a WSGI app's `threads`, a PHP
    /// app's workers (more would only queue inside it; rein queues them instead, where they can still go to
    /// another instance).
    pub fn concurrency(&self) -> Option<u32> {
        match &self.kind {
            AppKind::Python(py) if py.protocol == super::python::Protocol::Wsgi => {
                Some(py.threads as u32)
            }
            // One request per PHP-FPM worker, each on a kept-alive connection of its own; the rest wait in
            // rein, in order. More would wait in PHP-FPM's accept queue on fresh connections, behind workers
            // held by kept-alive ones, so that every connection would have to be closed after one request.
            AppKind::Php(php) => Some(match php.workers {
                super::php::Workers::Static(n) => n as u32,
                super::php::Workers::Dynamic(scale) => scale.max as u32,
            }),
            _ => None,
        }
    }

    /// How many requests without a body may queue behind the one in progress on a FastCGI connection to an
    /// instance: PHP-FPM and the Python adapter's WSGI connections read each request exactly to its end (see
    /// [`crate::fastcgi::pipeline`]). Its ASGI connections refuse a second request while one is in progress;
    /// an ASGI app takes more requests at once anyway.
    pub fn pipelining(&self) -> u32 {
        match &self.kind {
            AppKind::Php(_) => 1,
            AppKind::Python(py) if py.protocol == super::python::Protocol::Wsgi => WSGI_PIPELINING,
            AppKind::Python(_) | AppKind::External => 0,
        }
    }

    /// Whether each of rein's worker threads keeps its own FastCGI connections to an instance (up to
    /// [`AppConf::concurrency`] each) rather than sharing them: a WSGI app running one thread, which the
    /// adapter serves from one loop however many connections it has. A connection shared by the threads
    /// wakes the one whose reactor holds it for every read the other makes (WSGI hello, 2 instances, c=100:
    /// rein slept 0.9–1.3 times per request with shared connections, 0.4 with its own). PHP-FPM gives each
    /// connection a worker of its own until it closes, and the adapter running more threads gives each a
    /// thread: their connections stay as many as their workers.
    pub fn fastcgi_per_worker(&self) -> bool {
        matches!(&self.kind, AppKind::Python(py)
            if py.protocol == super::python::Protocol::Wsgi && py.threads == 1)
    }

    /// Whether rein speaks FastCGI to its instances.
    pub fn is_fastcgi(&self) -> bool {
        !matches!(self.kind, AppKind::External)
    }
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
