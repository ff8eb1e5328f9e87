//! What rein's own adapters share: an adapter is one file of rein's, written into the state directory, that
//! runs an app of an interpreted language (Python's WSGI and ASGI, …) in the interpreter the app uses and
//! serves it over FastCGI on the socket rein passes (fd 3). Before a new or changed app is accepted, rein runs
//! the adapter with `--check`: it loads the app and exits, and an app that does not load is refused with the
//! interpreter's own error.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use super::super::spawn::{self, SpawnSpec};
use super::Check;
use crate::config::ConfigError;

/// One of rein's adapters: its source, embedded in rein, and where it is written under the state directory's
/// `run/` (a directory of its own, readable by the apps' users).
pub(crate) struct Adapter {
    pub dir: &'static str,
    pub file: &'static str,
    pub source: &'static str,
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
