//! Why `rein run` could not start: each names the file, directory, address or option at fault.

use std::io;
use std::path::PathBuf;

use crate::control::{BindError, ControlAddr};
use crate::engine::ChangeError;
use crate::state::StateError;

#[derive(Debug, thiserror::Error)]
pub(super) enum RunError {
    #[error("cannot start the runtime: {0}")]
    Runtime(io::Error),
    #[error("cannot install signal handlers: {0}")]
    Signals(io::Error),
    #[error("cannot use the state directory {}: {source}", .path.display())]
    StateDir { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Saved(#[from] StateError),
    #[error("cannot write the welcome page into {}: {source}", .path.display())]
    Welcome { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Config(#[from] ConfigFileError),
    #[error("cannot listen for the control API on {addr}: {source}")]
    Control {
        addr: ControlAddr,
        source: BindError,
    },
    #[error("--user {name:?}: no such user")]
    NoSuchUser { name: String },
    #[error("--user {name:?}: {source}")]
    UserLookup { name: String, source: nix::Error },
    #[error("cannot start with this configuration: {0}")]
    Start(ChangeError),
    #[error(
        "cannot listen on {addr}, the default configuration's address: {detail}; choose another with `rein run --listen ADDR` (e.g. --listen 127.0.0.1:8081)"
    )]
    DefaultListener { addr: String, detail: String },
    #[error("cannot write the pid file {}: {source}", .path.display())]
    PidFile { path: PathBuf, source: io::Error },
}

/// Why `--config` could not be read, at start or on SIGHUP.
#[derive(Debug, thiserror::Error)]
pub(super) enum ConfigFileError {
    #[error("cannot read {}: {source}", .path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("{} is not valid JSON: {source}", .path.display())]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
}
