//! Whether an application's program can be run by the user it runs as, checked when a configuration is
//! applied so that a typo or a missing permission is refused with the path, not found by a failing start.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::unistd::{Gid, Uid, User};

use super::layout;
use super::spawn::DEFAULT_PATH;

/// Why an app's executable cannot be run, found at configuration time. Each names the path or the user.
#[derive(Debug, thiserror::Error)]
pub enum ExecutableError {
    #[error("no such user {0:?}")]
    NoSuchUser(String),
    #[error("user {name:?}: {source}")]
    UserLookup { name: String, source: nix::Error },
    #[error("the executable is empty")]
    Empty,
    #[error("executable {:?} not found in PATH ({search})", .name.display().to_string())]
    NotInPath { name: PathBuf, search: String },
    #[error("executable {} does not exist", .0.display())]
    Missing(PathBuf),
    #[error("executable {}: {source}", .path.display())]
    Unreadable { path: PathBuf, source: io::Error },
    #[error("executable {} is a directory, not a program", .0.display())]
    Directory(PathBuf),
    #[error("executable {} is not a regular file", .0.display())]
    NotRegular(PathBuf),
    #[error("executable {} is not executable by {whom} ({owner})", .path.display())]
    NotExecutable {
        path: PathBuf,
        /// `rein's user` or `user "NAME"`.
        whom: String,
        owner: layout::Owner,
    },
}

impl ExecutableError {
    /// Whether the app's `user` is to blame rather than the program.
    pub fn is_about_the_user(&self) -> bool {
        matches!(self, Self::NoSuchUser(_) | Self::UserLookup { .. })
    }
}

/// Validates an app's executable at configuration time and returns the path that will be run: a bare name
/// is searched in [`DEFAULT_PATH`]-style `PATH` (rein's), a relative path is taken from `working_directory`.
/// It must exist, be a regular file and be executable by `user` (rein's user when `None`).
pub fn check_executable(
    path: &Path,
    working_directory: Option<&Path>,
    user: Option<&str>,
) -> Result<PathBuf, ExecutableError> {
    let who = match user {
        Some(name) => match User::from_name(name) {
            Ok(Some(u)) => Some(u),
            Ok(None) => return Err(ExecutableError::NoSuchUser(name.to_owned())),
            Err(source) => {
                return Err(ExecutableError::UserLookup {
                    name: name.to_owned(),
                    source,
                });
            }
        },
        None => None,
    };
    let bytes = path.as_os_str().as_bytes();
    if bytes.is_empty() {
        return Err(ExecutableError::Empty);
    }
    if !bytes.contains(&b'/') {
        let search = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
        let mut last = None;
        for dir in std::env::split_paths(&search) {
            let candidate = dir.join(path);
            match check_file(&candidate, who.as_ref()) {
                Ok(()) => return Ok(candidate),
                Err(e) if candidate.exists() => last = Some(e),
                Err(_) => {}
            }
        }
        return Err(last.unwrap_or_else(|| ExecutableError::NotInPath {
            name: path.to_owned(),
            search: search.to_string_lossy().into_owned(),
        }));
    }
    let full = match working_directory {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path.to_owned(),
    };
    check_file(&full, who.as_ref()).map(|()| full)
}

fn check_file(path: &Path, user: Option<&User>) -> Result<(), ExecutableError> {
    let meta = std::fs::metadata(path).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => ExecutableError::Missing(path.to_owned()),
        _ => ExecutableError::Unreadable {
            path: path.to_owned(),
            source,
        },
    })?;
    if meta.is_dir() {
        return Err(ExecutableError::Directory(path.to_owned()));
    }
    if !meta.is_file() {
        return Err(ExecutableError::NotRegular(path.to_owned()));
    }
    let allowed = match user {
        Some(u) => {
            let groups = CString::new(u.name.as_bytes())
                .ok()
                .and_then(|c| nix::unistd::getgrouplist(&c, u.gid).ok())
                .unwrap_or_else(|| vec![u.gid]);
            may_execute(&meta, u.uid, &groups)
        }
        None => nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_ok(),
    };
    if !allowed {
        return Err(ExecutableError::NotExecutable {
            path: path.to_owned(),
            whom: user.map_or_else(
                || "rein's user".to_owned(),
                |u| format!("user {:?}", u.name),
            ),
            owner: layout::Owner::of(&meta),
        });
    }
    Ok(())
}

/// The permission bits' verdict for `uid`/`groups` (root needs any x bit). Directory permissions on the
/// way are not checked.
fn may_execute(meta: &std::fs::Metadata, uid: Uid, groups: &[Gid]) -> bool {
    if uid.is_root() {
        return meta.mode() & 0o111 != 0;
    }
    layout::permits(meta, uid, groups, layout::EXECUTE)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn check_executable_messages() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let err = check_executable(&missing, None, None)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!("executable {} does not exist", missing.display())
        );

        let err = check_executable(dir.path(), None, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a directory"), "{err}");

        let script = dir.path().join("app.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = check_executable(&script, None, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is not executable by") && err.contains("mode 644"),
            "{err}"
        );

        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(check_executable(&script, None, None).unwrap(), script);
        // Relative to the working directory.
        assert_eq!(
            check_executable(Path::new("./app.sh"), Some(dir.path()), None).unwrap(),
            dir.path().join("./app.sh")
        );
        // Owner-only: not executable by another user.
        if Uid::effective().is_root() && User::from_name("nobody").ok().flatten().is_some() {
            let err = check_executable(&script, None, Some("nobody"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("not executable by user \"nobody\""), "{err}");
        }
        // Bare names are searched in PATH.
        assert!(
            check_executable(Path::new("sh"), None, None)
                .unwrap()
                .ends_with("sh")
        );
        let err = check_executable(Path::new("no-such-program-rein"), None, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"no-such-program-rein\" not found in PATH"),
            "{err}"
        );
    }
}
