//! `"type": "external"`: any program serving HTTP on the socket rein passes it (systemd's `LISTEN_FDS`, and
//! `PORT` for a TCP socket), reached over HTTP. One that runs Node.js is [`super::node`]'s.

use std::path::{Path, PathBuf};

use super::{Kind, Launch, LaunchError, Launching};

/// The keys of an external application besides the common ones (`handoff` is refused unless it runs
/// Node.js).
pub const KEYS: &[&str] = &["executable", "arguments", "handoff"];

/// An external app has no options of its own beyond its program, which every app has.
#[derive(Debug, Clone, PartialEq)]
pub struct External;

impl Kind for External {
    fn launch(&self, at: &Launching<'_>) -> Result<Launch, LaunchError> {
        Ok(Launch::as_configured(at.conf))
    }
}

/// Unit takes an external app's `executable` "absolute or relative to `working_directory`", so a bare name
/// (`"app.js"`) that is a file there runs from there; other bare names are searched in `PATH` (`"node"`).
pub(super) fn unit_relative(executable: PathBuf, working_directory: Option<&Path>) -> PathBuf {
    let bare = executable.components().count() == 1 && executable.is_relative();
    match working_directory {
        Some(dir) if bare && dir.join(&executable).is_file() => PathBuf::from(".").join(executable),
        _ => executable,
    }
}
