//! The supervisor's part of the state directory, and who may read what in it.
//!
//! An application with `user` runs as another user (rein being root), and must read rein's support files:
//! Node.js's preload and `unit-http` stand-in (through `NODE_OPTIONS`/`NODE_PATH`), Python's adapter (run as a
//! script). Everything else stays rein's own:
//!
//! | path | mode | why |
//! |---|---|---|
//! | `STATE/` | 0711 when rein creates it ([`crate::state`]) | others pass through, never list it |
//! | `STATE/run/` | 0711 | the same |
//! | `STATE/run/node/`, `STATE/run/python/` | 0755, files 0644 | read by the apps' users |
//! | `STATE/run/apps/NAME/` (a name longer than 32 bytes: its first 15 and a hash) | `apps/` 0700 | the instances' sockets (an app gets its own as fd 3, never needs the path; no one else may connect by path) and PHP-FPM's configurations (read by its master, which stays root) |
//! | `STATE/run/pids/` | 0700 | the running instances, for the next rein to stop if this one is killed ([`super::leftovers`]) |
//! | `STATE/logs/` | 0700 | written by rein through pipes; read by `rein logs` as rein's user |
//!
//! The modes are set on every start, whatever the umask and whatever an older rein left: these directories
//! are rein's. (The state directory itself keeps the mode of one that already exists: the user chose it.)

use std::ffi::CString;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::unistd::{Gid, Group, Uid, User};

/// Under `STATE/run/`: one directory per application, for its sockets.
pub const SOCKETS: &str = "apps";

/// The longest application name used as it is for its sockets' directory: a Unix socket's path is limited to
/// 107 bytes (`sun_path`), and the directory is followed by `/instance-N.sock`.
const SOCKETS_NAME_MAX: usize = 32;

/// The directory under [`SOCKETS`] of application `name`: its name, or for a long one its start and a hash of
/// the whole, so that the sockets' paths stay within `sun_path`.
pub fn sockets_dir_name(name: &str) -> String {
    if name.len() <= SOCKETS_NAME_MAX {
        return name.to_owned();
    }
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let cut = (0..=15)
        .rev()
        .find(|&i| name.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}-{hash:016x}", &name[..cut])
}

/// Traversable by all, listable by none but rein's user.
pub const TRAVERSABLE: u32 = 0o711;
/// Readable by all.
pub const READABLE: u32 = 0o755;
/// rein's user's only.
pub const PRIVATE: u32 = 0o700;

/// Creates `path` (and its parents) if needed, and gives it `mode`. A directory that has it already is not
/// touched, so a read-only state directory prepared by an earlier run passes.
pub fn dir(path: &Path, mode: u32) -> io::Result<()> {
    let context = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    std::fs::create_dir_all(path).map_err(context)?;
    let current = std::fs::metadata(path).map_err(context)?.mode() & 0o7777;
    if current == mode {
        return Ok(());
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(context)
}

/// Writes `text` to `path` atomically (a temporary file renamed over it), readable by all (0644). A file that
/// holds `text` with that mode already is left as it is (nothing to write on a read-only state directory).
pub fn write_readable(path: &Path, text: &str) -> io::Result<()> {
    let same = std::fs::metadata(path).is_ok_and(|m| m.mode() & 0o7777 == 0o644)
        && std::fs::read(path).is_ok_and(|t| t == text.as_bytes());
    if same {
        return Ok(());
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))?;
    std::fs::rename(&tmp, path)
}

/// The read bit of [`permits`].
pub const READ: u32 = 0o4;
/// The execute (for a directory: traverse) bit of [`permits`].
pub const EXECUTE: u32 = 0o1;

/// The permission bits' verdict on `bit` ([`READ`], [`EXECUTE`]) for a user other than root: the owner's
/// bits, else the group's, else the others' (no ACLs).
pub fn permits(meta: &std::fs::Metadata, uid: Uid, groups: &[Gid], bit: u32) -> bool {
    let mode = meta.mode();
    if meta.uid() == uid.as_raw() {
        mode & (bit << 6) != 0
    } else if groups.iter().any(|g| g.as_raw() == meta.gid()) {
        mode & (bit << 3) != 0
    } else {
        mode & bit != 0
    }
}

/// A file's mode and owner, as a refusal to use it shows them: `mode 700 (owner 0:0)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    mode: u32,
    uid: u32,
    gid: u32,
}

impl Owner {
    pub fn of(meta: &std::fs::Metadata) -> Owner {
        Owner {
            mode: meta.mode() & 0o7777,
            uid: meta.uid(),
            gid: meta.gid(),
        }
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "mode {:o} (owner {}:{})", self.mode, self.uid, self.gid)
    }
}

/// Why a user cannot read a file ([`check_readable`]).
#[derive(Debug, thiserror::Error)]
pub enum ReadableError {
    #[error("no such user {0:?}")]
    NoSuchUser(String),
    #[error("no such group {0:?}")]
    NoSuchGroup(String),
    #[error("user {name:?}: {source}")]
    UserLookup { name: String, source: nix::Error },
    #[error("group {name:?}: {source}")]
    GroupLookup { name: String, source: nix::Error },
    #[error("{}: {source}", .path.display())]
    Stat { path: PathBuf, source: io::Error },
    /// `at` (the file, or a directory above it) stops the user.
    #[error("user {user:?} cannot read {}: {} is {owner}", .file.display(), .at.display())]
    Closed {
        user: String,
        file: PathBuf,
        at: PathBuf,
        owner: Owner,
    },
}

impl ReadableError {
    /// Whether the app's `group` is to blame (else its `user`, or the file's place).
    pub fn is_about_the_group(&self) -> bool {
        matches!(self, Self::NoSuchGroup(_) | Self::GroupLookup { .. })
    }
}

/// Whether `user` (with primary group `group`, else its own, and its supplementary groups) can read the
/// file `path`: every directory on the way traversable, the file readable. For rein's support files, which
/// live in the state directory: a directory above it may be closed to the app's user (root's `~`, where the
/// default state directory is). The error names the directory or file that stops it.
pub fn check_readable(path: &Path, user: &str, group: Option<&str>) -> Result<(), ReadableError> {
    let u = User::from_name(user)
        .map_err(|source| ReadableError::UserLookup {
            name: user.to_owned(),
            source,
        })?
        .ok_or_else(|| ReadableError::NoSuchUser(user.to_owned()))?;
    if u.uid.is_root() {
        return Ok(());
    }
    let gid = match group {
        Some(name) => {
            Group::from_name(name)
                .map_err(|source| ReadableError::GroupLookup {
                    name: name.to_owned(),
                    source,
                })?
                .ok_or_else(|| ReadableError::NoSuchGroup(name.to_owned()))?
                .gid
        }
        None => u.gid,
    };
    let mut groups = CString::new(u.name.as_bytes())
        .ok()
        .and_then(|c| nix::unistd::getgrouplist(&c, gid).ok())
        .unwrap_or_default();
    groups.push(gid);
    let full = std::fs::canonicalize(path).map_err(|e| stat_error(path, e))?;
    let stop = |at: &Path, meta: &std::fs::Metadata| ReadableError::Closed {
        user: user.to_owned(),
        file: full.clone(),
        at: at.to_owned(),
        owner: Owner::of(meta),
    };
    let mut dirs: Vec<&Path> = full.ancestors().skip(1).collect();
    dirs.reverse();
    for dir in dirs {
        let meta = std::fs::metadata(dir).map_err(|e| stat_error(dir, e))?;
        if !permits(&meta, u.uid, &groups, EXECUTE) {
            return Err(stop(dir, &meta));
        }
    }
    let meta = std::fs::metadata(&full).map_err(|e| stat_error(&full, e))?;
    if !permits(&meta, u.uid, &groups, READ) {
        return Err(stop(&full, &meta));
    }
    Ok(())
}

fn stat_error(path: &Path, source: io::Error) -> ReadableError {
    ReadableError::Stat {
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_set_whatever_was_there() {
        let parent = tempfile::tempdir().unwrap();
        let d = parent.path().join("a/b");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        dir(&d, PRIVATE).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&d), 0o700);
        let f = d.join("f.py");
        std::fs::write(&f, "old").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_readable(&f, "new").unwrap();
        assert_eq!(mode(&f), 0o644);
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "new");
    }

    #[test]
    fn check_readable_names_what_stops_the_user() {
        if User::from_name("nobody").ok().flatten().is_none() {
            eprintln!("skipped: no user nobody");
            return;
        }
        let closed = tempfile::tempdir().unwrap();
        std::fs::set_permissions(closed.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let open = closed.path().join("open");
        dir(&open, TRAVERSABLE).unwrap();
        let file = open.join("adapter.py");
        write_readable(&file, "").unwrap();
        let err = check_readable(&file, "nobody", None)
            .unwrap_err()
            .to_string();
        let top = std::fs::canonicalize(closed.path()).unwrap();
        assert!(
            err.contains(&format!("{} is mode 700", top.display())),
            "{err}"
        );
        std::fs::set_permissions(closed.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        assert!(check_readable(&file, "nobody", None).is_ok());
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = check_readable(&file, "nobody", None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("adapter.py is mode 600"), "{err}");
        assert!(check_readable(&file, "root", None).is_ok());
    }
}
