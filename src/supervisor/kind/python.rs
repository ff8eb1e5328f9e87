//! `"type": "python"` applications: Unit's schema (`path`, `home`, `module`, `callable`, `protocol`,
//! `threads`, `thread_stack_size`, `prefix`, `targets`), hosted by rein's adapter (`python/rein_adapter.py`,
//! standard library only), which serves the app's WSGI or ASGI callable over FastCGI on the socket rein
//! passes it.
//!
//! Before a configuration with a new or changed Python app is accepted, rein runs the adapter with
//! `--check` (import the module, find the callable): an import error, a syntax error or a missing callable
//! is refused with the Python traceback, and nothing changes.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{Check, Kind, Launch, LaunchError, Launching, SupportFiles, adapter};
use crate::config::walk::{integer, string, strings};
use crate::config::{ConfigError, JsonPath};
use crate::fastcgi::Cgi;
use crate::snapshot::{AppTransport, Targets};

/// The adapter, written to the state directory when rein starts.
pub(crate) const ADAPTER: adapter::Adapter = adapter::Adapter {
    dir: "python",
    file: "rein_adapter.py",
    source: include_str!("python/rein_adapter.py"),
};

/// The keys of a Python application besides the common ones.
pub const KEYS: &[&str] = &[
    "path",
    "home",
    "module",
    "callable",
    "protocol",
    "threads",
    "thread_stack_size",
    "prefix",
    "targets",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Wsgi,
    Asgi,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Callable {
    pub module: String,
    pub callable: String,
    /// `SCRIPT_NAME` (WSGI) or `root_path` (ASGI): the part of the path the app is mounted at.
    pub prefix: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PythonApp {
    /// Directories put first on `sys.path`.
    pub path: Vec<PathBuf>,
    /// A virtualenv: its interpreter runs the app.
    pub home: Option<PathBuf>,
    pub app: Callable,
    /// Unit's `targets`: other callables of the same code, by name.
    pub targets: std::collections::BTreeMap<String, Callable>,
    pub protocol: Protocol,
    pub threads: usize,
    /// Unit's `thread_stack_size`: bytes of stack for each thread the adapter starts.
    pub thread_stack_size: Option<u64>,
}

impl PythonApp {
    /// The interpreter: the virtualenv's, else `python3` from `PATH`.
    pub fn interpreter(&self) -> PathBuf {
        match &self.home {
            Some(home) => home.join("bin").join("python3"),
            None => PathBuf::from("python3"),
        }
    }

    /// The adapter's command line, after the interpreter.
    pub fn arguments(&self, adapter: &Path) -> Vec<String> {
        let mut args = vec![adapter.display().to_string()];
        let mut add = |k: &str, v: String| args.extend([k.to_owned(), v]);
        add("--module", self.app.module.clone());
        add("--callable", self.app.callable.clone());
        let protocol = match self.protocol {
            Protocol::Wsgi => "wsgi",
            Protocol::Asgi => "asgi",
        };
        add("--protocol", protocol.to_owned());
        add("--threads", self.threads.to_string());
        if let Some(bytes) = self.thread_stack_size {
            add("--thread-stack-size", bytes.to_string());
        }
        for p in &self.path {
            add("--path", p.display().to_string());
        }
        if !self.app.prefix.is_empty() {
            add("--prefix", self.app.prefix.clone());
        }
        for (name, t) in &self.targets {
            add(
                "--target",
                format!("{name}={}:{}:{}", t.module, t.callable, t.prefix),
            );
        }
        args
    }
}

impl Kind for PythonApp {
    fn transport(&self) -> AppTransport {
        let prefix = |c: &Callable| c.prefix.clone();
        AppTransport::Adapter {
            mounts: Targets {
                app: self.targets.is_empty().then(|| prefix(&self.app)),
                named: self
                    .targets
                    .iter()
                    .map(|(n, c)| (n.clone(), prefix(c)))
                    .collect(),
            },
            cgi: match self.protocol {
                Protocol::Wsgi => Cgi::Wsgi,
                Protocol::Asgi => Cgi::Asgi,
            },
        }
    }

    /// A WSGI app's `threads`; an ASGI app takes more requests at once anyway.
    fn concurrency(&self) -> Option<u32> {
        (self.protocol == Protocol::Wsgi).then_some(self.threads as u32)
    }

    /// The adapter's WSGI connections read each request exactly to its end; its ASGI connections refuse a
    /// second request while one is in progress.
    fn pipelining(&self) -> u32 {
        match self.protocol {
            Protocol::Wsgi => adapter::PIPELINING,
            Protocol::Asgi => 0,
        }
    }

    /// A WSGI app running one thread, which the adapter serves from one loop however many connections it
    /// has. A connection shared by rein's threads wakes the one whose reactor holds it for every read the
    /// other makes (WSGI hello, 2 instances, c=100: rein slept 0.9–1.3 times per request with shared
    /// connections, 0.4 with its own). The adapter running more threads gives each connection a thread:
    /// connections then stay as many as its threads.
    fn fastcgi_per_worker(&self) -> bool {
        self.protocol == Protocol::Wsgi && self.threads == 1
    }

    fn has_target(&self, name: &str) -> bool {
        self.targets.contains_key(name)
    }

    /// The virtualenv's interpreter, else `python3` from `PATH`.
    fn program(&self) -> Option<PathBuf> {
        Some(self.interpreter())
    }

    fn launch(&self, at: &Launching<'_>) -> Result<Launch, LaunchError> {
        Ok(ADAPTER.launch(at, |adapter| self.arguments(adapter)))
    }

    fn support_file(&self, files: &SupportFiles) -> Option<PathBuf> {
        Some(files.adapter(&ADAPTER))
    }

    /// The interpreter runs (blaming `home` when it is a virtualenv's), and the module imports.
    fn check(&self, check: &Check<'_>) -> Result<(), ConfigError> {
        let key = if self.home.is_some() { "home" } else { "type" };
        check.executable(&check.conf.executable, key)?;
        adapter::check_loads(check, "module")
    }
}

/// What a target (or the app itself, without targets) sets.
const TARGET_KEYS: &[&str] = &["module", "callable", "prefix"];

pub fn compile(map: &Map<String, Value>, path: &JsonPath) -> Result<PythonApp, ConfigError> {
    let paths = match map.get("path") {
        None => Vec::new(),
        Some(v) => strings(v, &path.key("path"))?
            .into_iter()
            .map(PathBuf::from)
            .collect(),
    };
    let protocol = match map.get("protocol") {
        None => Protocol::Wsgi,
        Some(v) => match string(v, &path.key("protocol"))? {
            "wsgi" => Protocol::Wsgi,
            "asgi" => Protocol::Asgi,
            _ => return Err(path.key("protocol").error("must be \"wsgi\" or \"asgi\"")),
        },
    };
    let threads = adapter::threads(map, path)?;
    let thread_stack_size = map
        .get("thread_stack_size")
        .map(|v| stack_size(v, &path.key("thread_stack_size")))
        .transpose()?;
    let (app, targets) = match super::super::conf::targets(map, path, TARGET_KEYS, callable)? {
        // The adapter imports the first target as its main app; requests name theirs.
        Some(targets) => {
            let (_, first) = targets
                .first_key_value()
                .expect("targets() refuses an empty object");
            (first.clone(), targets)
        }
        None => (callable(map, path)?, Default::default()),
    };
    Ok(PythonApp {
        path: paths,
        home: map
            .get("home")
            .map(|h| string(h, &path.key("home")).map(PathBuf::from))
            .transpose()?,
        app,
        targets,
        protocol,
        threads,
        thread_stack_size,
    })
}

/// A thread stack size Python accepts (`threading.stack_size`): at least 32 KiB, whole 4 KiB pages.
fn stack_size(v: &Value, path: &JsonPath) -> Result<u64, ConfigError> {
    match integer(v, path, 1 << 30)? {
        n if n >= 32 * 1024 && n % 4096 == 0 => Ok(n),
        _ => Err(path.error("must be at least 32768 bytes, in whole 4096-byte pages")),
    }
}

fn callable(map: &Map<String, Value>, path: &JsonPath) -> Result<Callable, ConfigError> {
    let module = string(
        map.get("module")
            .ok_or_else(|| path.error("needs a \"module\""))?,
        &path.key("module"),
    )?;
    let word = |s: &str| !s.is_empty() && s.split('.').all(is_identifier);
    if !word(module) {
        return Err(path.key("module").error("must be a Python module name"));
    }
    let callable = match map.get("callable") {
        None => "application",
        Some(c) => string(c, &path.key("callable"))?,
    };
    if !is_identifier(callable) {
        return Err(path.key("callable").error("must be a Python identifier"));
    }
    let prefix = adapter::prefix(map, path)?;
    Ok(Callable {
        module: module.to_owned(),
        callable: callable.to_owned(),
        prefix,
    })
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::super::conf::compile;
    use super::super::AppKind;
    use super::*;

    fn conf(extra: Value) -> Result<PythonApp, ConfigError> {
        let mut v = json!({"type": "python", "module": "app"});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        match compile(&v, &JsonPath::root().key("applications").key("py")) {
            Ok(c) => match c.kind {
                AppKind::Python(py) => Ok(py),
                other => panic!("not Python: {other:?}"),
            },
            Err(e) => Err(e),
        }
    }

    #[test]
    fn thread_stack_size_reaches_the_adapter_and_is_checked() {
        let py = conf(json!({"thread_stack_size": 262144})).unwrap();
        let args = py.arguments(Path::new("/a.py")).join(" ");
        assert!(args.contains("--thread-stack-size 262144"), "{args}");
        let none = conf(json!({}))
            .unwrap()
            .arguments(Path::new("/a.py"))
            .join(" ");
        assert!(!none.contains("stack"), "{none}");
        for bad in [json!(1000), json!(40000), json!("1M"), json!(-4096)] {
            let err = conf(json!({"thread_stack_size": bad})).unwrap_err();
            assert_eq!(
                err.path.as_str(),
                "applications/py/thread_stack_size",
                "{err}"
            );
        }
    }
}
