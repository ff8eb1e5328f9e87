//! What rein's own adapters share: an adapter is one file of rein's, written into the state directory, that
//! runs an app of an interpreted language (Python's WSGI and ASGI, …) in the interpreter the app uses and
//! serves it over FastCGI on the socket rein passes (fd 3). Before a new or changed app is accepted, rein runs
//! the adapter with `--check`: it loads the app and exits, and an app that does not load is refused with the
//! interpreter's own error.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Map, Value};

use super::super::spawn::{self, SpawnSpec};
use super::{Check, Launch, Launching};
use crate::config::walk::{integer, string};
use crate::config::{ConfigError, JsonPath};
use crate::fastcgi::Cgi;
use crate::snapshot::{AppTransport, Targets};

/// One of rein's adapters: its source, embedded in rein, and where it is written under the state directory's
/// `run/` (a directory of its own, readable by the apps' users).
pub(crate) struct Adapter {
    pub dir: &'static str,
    pub file: &'static str,
    pub source: &'static str,
}

/// Requests without a body queued behind the one in progress on each connection to an adapter that reads each
/// request exactly to its end (WSGI, Rack, PSGI): enough that the adapter finds the next request already in its
/// socket when it finishes one, instead of sleeping until rein has passed the answer on and sent another (see
/// [`crate::fastcgi::pipeline`]). WSGI hello, 2 instances of 1 thread, c=100, whole stack's CPU per request:
/// 1 → 60-65 µs, 3 → 42-46 µs, 7 → 37-41 µs. A request never lines up behind one that has run for 10 ms, so a
/// slow request holds at most what queued in its first 10 ms.
pub(crate) const PIPELINING: u32 = 7;

impl Adapter {
    /// An instance of an app this adapter hosts: the interpreter (the app's program), the adapter given
    /// `arguments(its path)`, the app's environment.
    pub(crate) fn launch(
        &self,
        at: &Launching<'_>,
        arguments: impl FnOnce(&Path) -> Vec<String>,
    ) -> Launch {
        Launch {
            program: at.conf.executable.clone(),
            arguments: arguments(&at.files.adapter(self)),
            environment: at.conf.environment.clone(),
        }
    }
}

/// The transport of an app without Unit's `targets`, mounted at `prefix` (`SCRIPT_NAME` when the path is
/// under it; empty: the whole path is the app's), with the CGI variables its environment is built from.
pub(crate) fn mounted(prefix: &str) -> AppTransport {
    AppTransport::Adapter {
        mounts: Targets {
            app: Some(prefix.to_owned()),
            named: Default::default(),
        },
        cgi: Cgi::Lean,
    }
}

/// A `prefix` option: the path the app is mounted at, starting with `/`, without a trailing one (empty when
/// the option is absent).
pub(crate) fn prefix(map: &Map<String, Value>, path: &JsonPath) -> Result<String, ConfigError> {
    let prefix = match map.get("prefix") {
        None => "",
        Some(p) => string(p, &path.key("prefix"))?.trim_end_matches('/'),
    };
    if !prefix.is_empty() && !prefix.starts_with('/') {
        return Err(path.key("prefix").error("must start with \"/\""));
    }
    Ok(prefix.to_owned())
}

/// Unit's `threads`: requests one instance runs at once, 1 (the default) to 1024.
pub(crate) fn threads(map: &Map<String, Value>, path: &JsonPath) -> Result<usize, ConfigError> {
    match map.get("threads") {
        None => Ok(1),
        Some(t) => match integer(t, &path.key("threads"), 1024)? {
            0 => Err(path.key("threads").error("must be at least 1")),
            n => Ok(n as usize),
        },
    }
}

/// Refuses the app unless its adapter loads it, started as its instances are; `key` is blamed otherwise. An app
/// that runs unchanged already is not loaded again.
pub(crate) fn check_loads(check: &Check<'_>, key: &str) -> Result<(), ConfigError> {
    if check.unchanged {
        return Ok(());
    }
    let spec = (check.spec)().map_err(|e| check.at.key("type").error(e.to_string()))?;
    tokio::task::block_in_place(|| load_check(&spec))
        .map_err(|e| check.at.key(key).error(e.to_string()))
}

/// How long `--check` may take (loading a large app is slow; a hung load is an error).
const CHECK_TIMEOUT: Duration = Duration::from_secs(30);

/// Why an app hosted by an adapter failed to load in its check.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot run {}: {source}", .program.display())]
    Run {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot wait for the load check: {0}")]
    Wait(std::io::Error),
    #[error("loading the app took longer than {} s", CHECK_TIMEOUT.as_secs())]
    Timeout,
    /// What the adapter printed (the interpreter's error, its traceback).
    #[error("{0}")]
    Failed(String),
}

/// Loads the app (the adapter given `--check`) in a throwaway process started as its instances are (`spec`, the instance's: the same clean
/// environment, user, group and directory).
pub fn load_check(spec: &SpawnSpec) -> Result<(), LoadError> {
    let cannot = |source: std::io::Error| LoadError::Run {
        program: spec.executable.clone(),
        source,
    };
    let mut cmd = spawn::command_like(spec).map_err(cannot)?;
    cmd.arg("--check")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(cannot)?;
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut s) = stderr {
            let _ = std::io::Read::read_to_string(&mut s, &mut text);
        }
        text
    });
    // Waited for on a thread of its own, so that the deadline needs no polling.
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (done, exited) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait());
    });
    let status = match exited.recv_timeout(CHECK_TIMEOUT) {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => return Err(LoadError::Wait(e)),
        Err(_) => {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = exited.recv();
            return Err(LoadError::Timeout);
        }
    };
    let text = reader.join().unwrap_or_default();
    match status.success() {
        true => Ok(()),
        false => Err(LoadError::Failed(text.trim_end().to_owned())),
    }
}
