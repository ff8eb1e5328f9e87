//! Application types: what each `"type"` is, one module each behind one interface ([`Kind`]).
//!
//! A type owns its options beside the common ones of [`super::conf`] and how they compile, how an instance
//! launches (program, arguments, environment), how rein knows it is ready, how it stops, what rein checks
//! before it accepts the configuration, and the transport the data plane reaches it by
//! ([`AppTransport`], compiled into the snapshot so that serving a request never reads the app's
//! configuration):
//!
//! | type | module | instances run | transport |
//! |---|---|---|---|
//! | `external` | [`external`] | the program | HTTP |
//! | `external` running Node.js | [`node`] | `node` with rein's preload | HTTP, or the client's connection handed over |
//! | `php` | [`php`] | a PHP-FPM master | FastCGI, PHP's script rules first |
//! | `python` | [`python`] | rein's adapter ([`adapter`]) | FastCGI |
//! | `ruby` | [`ruby`] | rein's Rack adapter ([`adapter`]) | FastCGI |

pub(crate) mod adapter;
pub mod external;
pub mod node;
pub mod php;
pub mod python;
pub mod ruby;

use std::path::{Path, PathBuf};

use nix::sys::signal::Signal;
use serde_json::{Map, Value};

use super::conf::AppConf;
use super::spawn::{AppSocket, SpawnSpec};
use crate::config::{ConfigError, JsonPath};
use crate::snapshot::AppTransport;

/// An application's type, with its own options.
#[derive(Debug, Clone, PartialEq)]
pub enum AppKind {
    External(external::External),
    Node(node::NodeApp),
    Php(php::PhpApp),
    Python(python::PythonApp),
    Ruby(ruby::RubyApp),
}

/// What each type of application answers for itself. The defaults are those of a program serving HTTP.
pub(crate) trait Kind {
    /// How the data plane reaches an instance.
    fn transport(&self) -> AppTransport {
        AppTransport::Http
    }

    /// Requests one instance takes at once, when it has a fixed capacity (more would only queue inside it;
    /// rein queues them instead, where they can still go to another instance).
    fn concurrency(&self) -> Option<u32> {
        None
    }

    /// How many requests without a body may queue behind the one in progress on a FastCGI connection to an
    /// instance (see [`crate::fastcgi::pipeline`]).
    fn pipelining(&self) -> u32 {
        0
    }

    /// Whether each of rein's worker threads keeps its own FastCGI connections to an instance.
    fn fastcgi_per_worker(&self) -> bool {
        false
    }

    /// The signal that stops an instance gracefully, unless the app's `stop.signal` says otherwise.
    fn stop_signal(&self) -> Signal {
        Signal::SIGTERM
    }

    /// The signal an instance gets if rein dies.
    fn death_signal(&self) -> Signal {
        Signal::SIGKILL
    }

    /// Whether `name` is one of the app's `targets`.
    fn has_target(&self, _name: &str) -> bool {
        false
    }

    /// The program the type runs (an interpreter, PHP-FPM), when it is not the app's `executable`.
    fn program(&self) -> Option<PathBuf> {
        None
    }

    /// The program, arguments and environment of one instance.
    fn launch(&self, at: &Launching<'_>) -> Result<Launch, LaunchError>;

    /// Whether the process starts as root when rein is root, switching its workers to the app's user
    /// itself.
    fn keeps_root(&self) -> bool {
        false
    }

    /// Removes what rein wrote for one instance, once it is gone.
    fn instance_gone(&self, _socket: &AppSocket, _dir: &Path) {}

    /// A file of rein's the app's processes read (the Node.js preload, an adapter): its user must reach it.
    fn support_file(&self, _files: &SupportFiles) -> Option<PathBuf> {
        None
    }

    /// What rein checks before it accepts the configuration: the program runs, and for an adapter, the app
    /// loads. The error names the key to blame.
    fn check(&self, check: &Check<'_>) -> Result<(), ConfigError> {
        check.executable(&check.conf.executable, "executable")
    }
}

/// Dispatches a call to the type's module.
macro_rules! each {
    ($kind:expr, $k:ident => $call:expr) => {
        match $kind {
            AppKind::External($k) => $call,
            AppKind::Node($k) => $call,
            AppKind::Php($k) => $call,
            AppKind::Python($k) => $call,
            AppKind::Ruby($k) => $call,
        }
    };
}

impl AppKind {
    /// The type named by `"type"` (Unit accepts a version after the language, `"php 8.2"`: the one installed
    /// runs), its options compiled, and the keys it takes beside the common ones. An external app is told
    /// apart as Node.js later ([`AppKind::settle`]), once its program is known.
    pub(super) fn compile(
        name: &str,
        map: &Map<String, Value>,
        path: &JsonPath,
    ) -> Result<(AppKind, &'static [&'static str]), ConfigError> {
        Ok(match name.split(' ').next() {
            Some("external") => (AppKind::External(external::External), external::KEYS),
            Some("php") => (AppKind::Php(php::compile(map, path)?), php::KEYS),
            Some("python") => (AppKind::Python(python::compile(map, path)?), python::KEYS),
            Some("ruby") => (AppKind::Ruby(ruby::compile(map, path)?), ruby::KEYS),
            _ => {
                return Err(path
                    .key("type")
                    .error("must be \"external\", \"php\", \"python\" or \"ruby\""));
            }
        })
    }

    /// What depends on the common options: an external app that runs Node.js becomes [`AppKind::Node`], with
    /// its `handoff`.
    pub(super) fn settle(
        conf: &mut AppConf,
        map: &Map<String, Value>,
        path: &JsonPath,
    ) -> Result<(), ConfigError> {
        if let AppKind::External(_) = conf.kind {
            conf.executable = external::unit_relative(
                std::mem::take(&mut conf.executable),
                conf.working_directory.as_deref(),
            );
            let dir = conf.working_directory.as_deref();
            if node::is_node(&conf.executable, &conf.arguments, dir) {
                conf.kind = AppKind::Node(node::NodeApp::compile(map, path)?);
            }
        }
        if let Some(v) = map.get("handoff") {
            let handoff = crate::config::walk::boolean(v, &path.key("handoff"))?;
            if handoff && !matches!(conf.kind, AppKind::Node(_)) {
                return Err(path.key("handoff").error(
                    "needs a Node.js app (\"executable\": \"node\", or a script run by node): its \
                     instances take connections through rein's preload",
                ));
            }
        }
        Ok(())
    }

    /// The type's interface.
    fn kind(&self) -> &dyn Kind {
        each!(self, k => k)
    }

    pub fn transport(&self) -> AppTransport {
        self.kind().transport()
    }

    /// Whether rein speaks FastCGI to the instances.
    pub fn speaks_fastcgi(&self) -> bool {
        !matches!(self.transport(), AppTransport::Http)
    }

    pub fn concurrency(&self) -> Option<u32> {
        self.kind().concurrency()
    }

    pub fn pipelining(&self) -> u32 {
        self.kind().pipelining()
    }

    pub fn fastcgi_per_worker(&self) -> bool {
        self.kind().fastcgi_per_worker()
    }

    pub fn stop_signal(&self) -> Signal {
        self.kind().stop_signal()
    }

    pub fn death_signal(&self) -> Signal {
        self.kind().death_signal()
    }

    pub fn has_target(&self, name: &str) -> bool {
        self.kind().has_target(name)
    }

    /// A Node.js app whose instances take client connections themselves ([`crate::handoff`]).
    pub fn hands_off(&self) -> bool {
        matches!(self, AppKind::Node(n) if n.handoff)
    }

    pub(super) fn program(&self) -> Option<PathBuf> {
        self.kind().program()
    }

    pub(super) fn launch(&self, at: &Launching<'_>) -> Result<Launch, LaunchError> {
        self.kind().launch(at)
    }

    pub(super) fn keeps_root(&self) -> bool {
        self.kind().keeps_root()
    }

    pub(super) fn instance_gone(&self, socket: &AppSocket, dir: &Path) {
        self.kind().instance_gone(socket, dir)
    }

    /// Node.js: rein's preload and `NODE_PATH` dir, for the spawn's environment.
    pub(super) fn node_support(&self, files: &SupportFiles) -> Option<(PathBuf, PathBuf)> {
        match self {
            AppKind::Node(_) => files.node.clone(),
            _ => None,
        }
    }

    pub(super) fn support_file(&self, files: &SupportFiles) -> Option<PathBuf> {
        self.kind().support_file(files)
    }

    pub(super) fn check(&self, check: &Check<'_>) -> Result<(), ConfigError> {
        self.kind().check(check)
    }
}

/// What an instance is launched with, besides its type's options.
pub(crate) struct Launching<'a> {
    pub name: &'a str,
    pub conf: &'a AppConf,
    pub socket: &'a AppSocket,
    /// The app's directory for sockets and per-instance files.
    pub dir: &'a Path,
    pub files: &'a SupportFiles,
}

/// How an instance starts: its program, arguments and environment.
pub(crate) struct Launch {
    pub program: PathBuf,
    pub arguments: Vec<String>,
    pub environment: Vec<(String, String)>,
}

impl Launch {
    /// The app's own `executable`, `arguments` and `environment`.
    fn as_configured(conf: &AppConf) -> Launch {
        Launch {
            program: conf.executable.clone(),
            arguments: conf.arguments.clone(),
            environment: conf.environment.clone(),
        }
    }
}

/// Why an instance cannot be launched.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("PHP-FPM is not installed (Debian: apt-get install php-fpm)")]
    NotInstalled,
    #[error("cannot write its configuration {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The files rein writes into its state directory for the apps to read.
#[derive(Debug, Clone, Default)]
pub struct SupportFiles {
    /// Node.js: `(preload.js, NODE_PATH dir)`, when they could be written.
    pub node: Option<(PathBuf, PathBuf)>,
    /// The state directory's `run/`, which holds the adapters ([`ADAPTERS`]).
    pub run: PathBuf,
}

impl SupportFiles {
    /// Where `adapter` is written.
    pub fn adapter(&self, adapter: &adapter::Adapter) -> PathBuf {
        self.run.join(adapter.dir).join(adapter.file)
    }
}

/// rein's adapters, written into the state directory when rein starts.
pub(crate) const ADAPTERS: &[&adapter::Adapter] = &[&python::ADAPTER, &ruby::ADAPTER];

/// An application about to be accepted, and how to check its program.
pub(crate) struct Check<'a> {
    pub conf: &'a AppConf,
    pub at: &'a JsonPath,
    /// Whether the app runs unchanged already (an adapter's load check is then skipped).
    pub unchanged: bool,
    /// The spec of a throwaway instance, started as the app's would be, on a socket it never uses.
    pub spec: &'a dyn Fn() -> Result<SpawnSpec, LaunchError>,
}

impl Check<'_> {
    /// Whether `program` exists and the app's user may run it; `key` is blamed otherwise.
    pub fn executable(&self, program: &Path, key: &str) -> Result<(), ConfigError> {
        let dir = self.conf.working_directory.as_deref();
        let user = self.conf.user.as_deref();
        super::executable::check_executable(program, dir, user)
            .map(drop)
            .map_err(|e| {
                let key = if e.is_about_the_user() { "user" } else { key };
                self.at.key(key).error(e.to_string())
            })
    }
}
