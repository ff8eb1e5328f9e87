//! `"type": "php"` applications: Unit's schema (`root`, `script`, `index`, `targets`, `options`), run by a
//! private PHP-FPM master per instance.
//!
//! rein writes each instance a PHP-FPM configuration (one pool: `processes` become `pm.max_children`,
//! `limits` become `pm.max_requests` and `request_terminate_timeout`, `options` become `php_value` and
//! `php_admin_value`) and hands the master the listening socket it created, through PHP-FPM's own
//! inheritance variable `FPM_SOCKETS=ADDRESS=3`. The pool's `listen` names a placeholder path for Unix
//! sockets: PHP-FPM removes its socket file when it exits, and the real one must outlive the instance (the
//! slot's socket is reused by its next process). Static files under `root` never reach PHP: rein serves them
//! ([`crate::scripts`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use nix::sys::signal::Signal;

use super::super::conf::{AppConf, Scale};
use super::super::spawn::{AppSocket, Output};
use super::{Check, Kind, Launch, LaunchError, Launching};
use crate::compile::php_target;
use crate::config::walk::{known_keys, object, string};
use crate::config::{ConfigError, JsonPath};
use crate::scripts::PhpTarget;
use crate::snapshot::{AppTransport, Targets};

/// The keys of a PHP application besides the common ones.
pub const KEYS: &[&str] = &["root", "script", "index", "targets", "options"];

#[derive(Debug, Clone, PartialEq)]
pub struct PhpApp {
    /// The app's own `root`/`script`/`index`, when it has no `targets`.
    pub target: Option<PhpTarget>,
    pub targets: BTreeMap<String, PhpTarget>,
    /// `options.file`: a php.ini to use instead of the default one.
    pub ini: Option<PathBuf>,
    /// `options.admin` and `options.user`: `php_admin_value` and `php_value` settings.
    pub admin: Vec<(String, String)>,
    pub user: Vec<(String, String)>,
    pub workers: Workers,
    pub max_requests: Option<u64>,
}

impl Kind for PhpApp {
    fn transport(&self) -> AppTransport {
        AppTransport::Php(Targets {
            app: self.target.clone(),
            named: self.targets.clone(),
        })
    }

    /// One request per PHP-FPM worker, each on a kept-alive connection of its own; the rest wait in rein, in
    /// order. More would wait in PHP-FPM's accept queue on fresh connections, behind workers held by
    /// kept-alive ones, so that every connection would have to be closed after one request.
    fn concurrency(&self) -> Option<u32> {
        Some(match self.workers {
            Workers::Static(n) => n as u32,
            Workers::Dynamic(scale) => scale.max as u32,
        })
    }

    /// A PHP-FPM worker reads each request exactly to its end (see [`crate::fastcgi::pipeline`]).
    fn pipelining(&self) -> u32 {
        1
    }

    /// PHP-FPM's graceful stop: workers finish their requests.
    fn stop_signal(&self) -> Signal {
        Signal::SIGQUIT
    }

    /// PHP-FPM's master must stop its workers itself: killed outright, it would orphan them.
    fn death_signal(&self) -> Signal {
        Signal::SIGTERM
    }

    fn has_target(&self, name: &str) -> bool {
        self.targets.contains_key(name)
    }

    /// Found when an instance starts ([`find_fpm`]).
    fn program(&self) -> Option<PathBuf> {
        Some(PathBuf::from("php-fpm"))
    }

    /// PHP-FPM's master stays root when rein is: it reads its configuration from rein's private directory,
    /// and switches its workers to the pool's `user`/`group` itself (which are the app's).
    fn keeps_root(&self) -> bool {
        true
    }

    fn launch(&self, at: &Launching<'_>) -> Result<Launch, LaunchError> {
        launch(at.name, at.conf, self, at.socket, at.dir)
    }

    fn instance_gone(&self, socket: &AppSocket, dir: &Path) {
        let _ = std::fs::remove_file(config_file(socket, dir));
    }

    /// The php.ini the app names is a file, and PHP-FPM is installed and runs.
    fn check(&self, check: &Check<'_>) -> Result<(), ConfigError> {
        check_files(check.conf, self, check.at)?;
        match find_fpm() {
            Some(fpm) => check.executable(&fpm, "type"),
            None => Err(check
                .at
                .key("type")
                .error(LaunchError::NotInstalled.to_string())),
        }
    }
}

/// Checks what only the filesystem can tell: the `options.file` php.ini is a file. PHP-FPM given a `-c` that
/// names nothing runs silently with no php.ini at all, not even the system's. `at` is the app's path.
fn check_files(conf: &AppConf, app: &PhpApp, at: &JsonPath) -> Result<(), ConfigError> {
    match ini_file(conf, app) {
        Some(ini) if !ini.is_file() => Err(at
            .key("options")
            .key("file")
            .error(format!("{} is not a file", ini.display()))),
        _ => Ok(()),
    }
}

/// `options.file` as an absolute path: a relative one is resolved against the app's `working_directory`, else
/// rein's own working directory, as Unit resolves it against its own.
fn ini_file(conf: &AppConf, app: &PhpApp) -> Option<PathBuf> {
    let ini = app.ini.as_ref()?;
    if ini.is_absolute() {
        return Some(ini.clone());
    }
    let base = conf
        .working_directory
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    Some(base.join(ini))
}

/// PHP settings read only as PHP starts: a pool's `php_admin_value` cannot change them, so they go to the
/// master's command line (`-d`), which its workers inherit.
const STARTUP_ONLY: &[&str] = &["disable_functions", "disable_classes"];

/// What a target (or the app itself, without targets) sets.
const TARGET_KEYS: &[&str] = &["root", "script", "index"];

pub fn compile(map: &Map<String, Value>, path: &JsonPath) -> Result<PhpApp, ConfigError> {
    let (target, targets) = match super::super::conf::targets(map, path, TARGET_KEYS, php_target)? {
        Some(targets) => (None, targets),
        None => (Some(php_target(map, path)?), BTreeMap::new()),
    };
    let mut app = PhpApp {
        target,
        targets,
        ini: None,
        admin: Vec::new(),
        user: Vec::new(),
        workers: Workers::Static(1),
        max_requests: None,
    };
    if let Some(o) = map.get("options") {
        options(o, &path.key("options"), &mut app)?;
    }
    Ok(app)
}

fn options(v: &Value, path: &JsonPath, app: &mut PhpApp) -> Result<(), ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["file", "admin", "user"], path)?;
    if let Some(f) = map.get("file") {
        let at = path.key("file");
        let ini = string(f, &at)?;
        if ini.is_empty() {
            return Err(at.error("must name a php.ini file"));
        }
        app.ini = Some(PathBuf::from(ini));
    }
    let settings = |key: &str| -> Result<Vec<(String, String)>, ConfigError> {
        let Some(v) = map.get(key) else {
            return Ok(Vec::new());
        };
        let p = path.key(key);
        object(v, &p)?
            .iter()
            .map(|(k, v)| {
                let vp = p.key(k);
                let bad = |s: &str| s.contains(['\n', '\r', '\0']);
                let value = string(v, &vp)?;
                if k.is_empty() || bad(k) || k.contains([']', '=']) || bad(value) {
                    return Err(vp.error("is not a valid php.ini setting"));
                }
                Ok((k.clone(), value.to_owned()))
            })
            .collect()
    };
    app.admin = settings("admin")?;
    app.user = settings("user")?;
    Ok(())
}

/// The PHP-FPM binary: Debian's versioned `php-fpmX.Y` in `/usr/sbin`, or `php-fpm` anywhere on `PATH`.
pub fn find_fpm() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/sbin")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("php-fpm"))
        })
        .collect();
    // The newest version sorts last.
    found.sort();
    if let Some(p) = found.pop() {
        return Some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| super::super::spawn::DEFAULT_PATH.into());
    std::env::split_paths(&path)
        .map(|d| d.join("php-fpm"))
        .find(|p| p.is_file())
}

/// How PHP-FPM is started for one instance: the program, its arguments, and `FPM_SOCKETS`. Writes the
/// instance's configuration next to its socket.
fn launch(
    name: &str,
    conf: &AppConf,
    php: &PhpApp,
    socket: &AppSocket,
    dir: &Path,
) -> Result<Launch, LaunchError> {
    let fpm = find_fpm().ok_or(LaunchError::NotInstalled)?;
    let listen = match socket {
        // A placeholder: PHP-FPM removes its socket file when it exits, and the real one outlives it.
        AppSocket::Unix(_) => config_file(socket, dir)
            .with_extension("placeholder")
            .display()
            .to_string(),
        AppSocket::Tcp(addr) => addr.to_string(),
    };
    let file = config_file(socket, dir);
    std::fs::write(&file, fpm_config(name, conf, php, &listen)).map_err(|source| {
        LaunchError::Write {
            path: file.clone(),
            source,
        }
    })?;
    let mut args = vec![
        "--nodaemonize".to_owned(),
        "--fpm-config".to_owned(),
        file.display().to_string(),
    ];
    if let Some(ini) = ini_file(conf, php) {
        args.extend(["-c".to_owned(), ini.display().to_string()]);
    }
    for (k, v) in php
        .admin
        .iter()
        .filter(|(k, _)| STARTUP_ONLY.contains(&k.as_str()))
    {
        args.extend(["-d".to_owned(), format!("{k}={v}")]);
    }
    if nix::unistd::geteuid().is_root() {
        // As root, PHP-FPM insists on being told; its workers run as the pool's `user` (root unless set).
        args.push("--allow-to-run-as-root".to_owned());
    }
    let mut env = conf.environment.clone();
    env.push(("FPM_SOCKETS".to_owned(), format!("{listen}=3")));
    Ok(Launch {
        program: fpm,
        arguments: args,
        environment: env,
    })
}

/// The PHP-FPM configuration of the instance on `socket`, in the app's runtime directory (removed with the
/// instance).
fn config_file(socket: &AppSocket, dir: &Path) -> PathBuf {
    match socket {
        AppSocket::Unix(path) => {
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("fpm");
            dir.join(format!("{stem}.fpm.conf"))
        }
        AppSocket::Tcp(addr) => dir.join(format!("fpm-{}.conf", addr.port())),
    }
}

/// The configuration of one PHP-FPM master with one pool.
pub fn fpm_config(name: &str, conf: &AppConf, php: &PhpApp, listen: &str) -> String {
    let pool: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut out = String::from("[global]\n");
    let set = |out: &mut String, k: &str, v: &str| {
        let _ = writeln!(out, "{k} = {v}");
    };
    set(&mut out, "error_log", "/proc/self/fd/2");
    set(&mut out, "log_limit", "8192");
    set(&mut out, "daemonize", "no");
    let _ = writeln!(out, "[{pool}]");
    set(&mut out, "listen", listen);
    // Only a root master switches its workers to `user`: the app's, else root's own (rein was root).
    set(&mut out, "user", conf.user.as_deref().unwrap_or("root"));
    if let Some(g) = &conf.group {
        set(&mut out, "group", g);
    }
    match php.workers {
        Workers::Static(n) => {
            set(&mut out, "pm", "static");
            set(&mut out, "pm.max_children", &n.to_string());
        }
        Workers::Dynamic(Scale {
            max,
            spare,
            idle_timeout,
        }) => {
            set(&mut out, "pm", "dynamic");
            set(&mut out, "pm.max_children", &max.to_string());
            set(&mut out, "pm.start_servers", &spare.to_string());
            set(&mut out, "pm.min_spare_servers", &spare.to_string());
            set(&mut out, "pm.max_spare_servers", &max.to_string());
            let idle = format!("{}s", idle_timeout.as_secs().max(1));
            set(&mut out, "pm.process_idle_timeout", &idle);
        }
    }
    if let Some(n) = php.max_requests {
        set(&mut out, "pm.max_requests", &n.to_string());
    }
    if let Some(t) = conf.request_timeout {
        set(
            &mut out,
            "request_terminate_timeout",
            &format!("{}s", t.as_secs().max(1)),
        );
    }
    // The workers' output (`php://stderr`) reaches the app's stderr through the master, which PHP-FPM then
    // wakes after every request (a flush marker from the worker): 7-8 µs of its CPU per request. Not when that
    // output is discarded anyway.
    let catch = conf.stderr != Some(Output::Discard);
    set(
        &mut out,
        "catch_workers_output",
        if catch { "yes" } else { "no" },
    );
    set(&mut out, "decorate_workers_output", "no");
    // The app's `environment` reaches the scripts' getenv() and $_ENV.
    set(&mut out, "clear_env", "no");
    for (k, v) in php
        .admin
        .iter()
        .filter(|(k, _)| !STARTUP_ONLY.contains(&k.as_str()))
    {
        set(&mut out, &format!("php_admin_value[{k}]"), v);
    }
    for (k, v) in &php.user {
        set(&mut out, &format!("php_value[{k}]"), v);
    }
    out
}

/// PHP's worker processes: `processes` as a number or Unit's `{max, spare, idle_timeout}`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workers {
    Static(usize),
    Dynamic(Scale),
}

impl AppConf {
    /// For PHP: `processes` and `limits.requests` describe PHP-FPM's workers, which PHP-FPM manages itself;
    /// rein supervises one master.
    pub(in super::super) fn hand_workers_to_fpm(&mut self) {
        if let super::AppKind::Php(php) = &mut self.kind {
            php.workers = match self.scale.take() {
                Some(scale) => Workers::Dynamic(scale),
                None => Workers::Static(self.processes),
            };
            php.max_requests = self.max_requests.take();
            self.processes = 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::super::conf::compile;
    use super::super::AppKind;
    use super::*;

    fn app(v: serde_json::Value) -> (AppConf, PhpApp) {
        let conf = compile(&v, &JsonPath::root().key("applications").key("blog")).unwrap();
        match &conf.kind {
            AppKind::Php(php) => (conf.clone(), php.clone()),
            other => panic!("not PHP: {other:?}"),
        }
    }

    #[test]
    fn the_pool_gets_workers_limits_and_options() {
        let (conf, php) = app(json!({
            "type": "php 8.2", "root": "/srv/blog", "processes": 3,
            "limits": {"requests": 500, "timeout": 20},
            "options": {"admin": {"memory_limit": "64M"}, "user": {"display_errors": "0"}}
        }));
        assert_eq!(conf.processes, 1, "rein supervises one master");
        let text = fpm_config("my-blog", &conf, &php, "/run/x.placeholder");
        for line in [
            "[global]",
            "error_log = /proc/self/fd/2",
            "[my_blog]",
            "listen = /run/x.placeholder",
            "pm = static",
            "pm.max_children = 3",
            "pm.max_requests = 500",
            "request_terminate_timeout = 20s",
            "clear_env = no",
            "php_admin_value[memory_limit] = 64M",
            "php_value[display_errors] = 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} not in:\n{text}");
        }
    }

    #[test]
    fn dynamic_processes_become_a_dynamic_pool() {
        let (conf, php) = app(json!({
            "type": "php", "root": "/srv", "processes": {"max": 8, "spare": 2, "idle_timeout": 30}
        }));
        let text = fpm_config("a", &conf, &php, "127.0.0.1:9000");
        for line in [
            "pm = dynamic",
            "pm.max_children = 8",
            "pm.start_servers = 2",
            "pm.process_idle_timeout = 30s",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} not in:\n{text}");
        }
        assert_eq!(conf.kind.concurrency(), Some(8), "one request per worker");
    }

    #[test]
    fn the_workers_output_is_caught_unless_stderr_is_discarded() {
        let line = |stderr: serde_json::Value| {
            let (conf, php) = app(json!({"type": "php", "root": "/srv", "stderr": stderr}));
            let text = fpm_config("a", &conf, &php, "/run/x");
            text.lines()
                .find(|l| l.starts_with("catch_workers_output"))
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            line(json!("/var/log/blog.err")),
            "catch_workers_output = yes"
        );
        assert_eq!(line(json!("/dev/null")), "catch_workers_output = no");
        let (conf, php) = app(json!({"type": "php", "root": "/srv"}));
        assert!(fpm_config("a", &conf, &php, "/run/x").contains("catch_workers_output = yes"));
    }
}
