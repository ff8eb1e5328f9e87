//! Safe opening of the file a share path names, under the action's `chroot`, `follow_symlinks` and
//! `traverse_mounts` rules.
//!
//! The file is opened once and everything afterwards (type, size, mtime, the bytes sent) comes from that
//! descriptor, so there is no window between checking a path and reading it. The rules are enforced by the
//! kernel through `openat2(2)`: `RESOLVE_IN_ROOT` in the chroot directory, as Unit does (a `..` or a symlink
//! is resolved as if the chroot were `/`: `..` at the top stays there and an absolute symlink's target is
//! looked up inside the chroot, so a link to `/etc/passwd` is the chroot's own `etc/passwd`, most often a
//! 404), `RESOLVE_NO_SYMLINKS` and `RESOLVE_NO_XDEV`. Where `openat2` is missing (ENOSYS) the [`super::walk`]
//! fallback enforces the same rules with one `openat` per component; the first ENOSYS is remembered, and an
//! EPERM (how some seccomp filters refuse unknown syscalls) is retried through the walk.
//!
//! Errors are classified here, once, as Unit does: missing => [`OpenError::NotFound`] (ENXIO too: opening a
//! Unix socket), refused => [`OpenError::Forbidden`] (EACCES, EPERM, and ELOOP/EXDEV which is how the rules
//! report a violation; a genuine symlink loop is therefore a 403 too), anything else => [`OpenError::Io`].

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::ShareOptions;
use super::sys;
use super::walk::{self, Rules};

/// Set once `openat2` answered ENOSYS: every later open goes straight to the walk.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// `openat2` answers EAGAIN when a rename or mount raced a `RESOLVE_IN_ROOT` lookup; retrying is the
/// documented remedy, a bounded number of times.
const EAGAIN_RETRIES: usize = 8;

#[derive(Debug)]
pub enum OpenError {
    NotFound,
    Forbidden,
    Io(io::Error),
}

impl From<io::Error> for OpenError {
    fn from(e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(
                libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG | libc::ENXIO | libc::EOPNOTSUPP,
            ) => OpenError::NotFound,
            Some(libc::EACCES | libc::EPERM | libc::ELOOP | libc::EXDEV) => OpenError::Forbidden,
            _ => OpenError::Io(e),
        }
    }
}

/// How paths are opened for one share action.
#[derive(Debug, Clone)]
pub struct Resolver {
    pub chroot: Option<PathBuf>,
    pub follow_symlinks: bool,
    pub traverse_mounts: bool,
    /// Tests set this to exercise the walk on kernels that have `openat2`.
    pub force_walk: bool,
}

impl Resolver {
    pub fn new(opts: &ShareOptions) -> Self {
        Resolver {
            chroot: opts.chroot.clone(),
            follow_symlinks: opts.follow_symlinks,
            traverse_mounts: opts.traverse_mounts,
            force_walk: false,
        }
    }

    /// Opens `path` for reading if the rules allow it.
    pub fn open(&self, path: &Path) -> Result<File, OpenError> {
        let fd = match &self.chroot {
            Some(root) => {
                // Component-wise, so "/srv/www2" is not inside "/srv/www".
                let rel = path.strip_prefix(root).map_err(|_| OpenError::Forbidden)?;
                let start = open_dir(root.as_os_str().as_bytes())?;
                self.open_below(start, rel.as_os_str().as_bytes(), true)?
            }
            None => self.open_absolute(path)?,
        };
        Ok(File::from(fd))
    }

    fn open_absolute(&self, path: &Path) -> Result<OwnedFd, OpenError> {
        let absolute;
        let path = if path.is_absolute() {
            path
        } else {
            absolute = std::env::current_dir()?.join(path);
            &absolute
        };
        let bytes = path.as_os_str().as_bytes();
        if self.resolve_flags() == 0 {
            // Nothing to enforce: a plain open follows the path as the kernel does.
            let c_path = sys::c_path(bytes)?;
            return Ok(sys::openat(None, &c_path, sys::READ_FLAGS)?);
        }
        let start = open_dir(b"/")?;
        self.open_below(start, relative(bytes), false)
    }

    fn open_below(&self, start: OwnedFd, rel: &[u8], in_root: bool) -> Result<OwnedFd, OpenError> {
        let mut resolve = self.resolve_flags();
        if in_root {
            resolve |= libc::RESOLVE_IN_ROOT;
        }
        if !self.force_walk && !NO_OPENAT2.load(Ordering::Relaxed) {
            // An empty path means the start directory itself.
            let c_rel = sys::c_path(if rel.is_empty() { b"." } else { rel })?;
            match with_openat2(&start, &c_rel, resolve) {
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                }
                // Older seccomp profiles answer EPERM to syscalls they do not know. Not remembered: a genuine
                // EPERM is simply reproduced by the walk below.
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
                other => return Ok(other?),
            }
        }
        let rules = Rules {
            no_symlinks: !self.follow_symlinks,
            no_xdev: !self.traverse_mounts,
        };
        Ok(walk::open(start, rel, rules)?)
    }

    fn resolve_flags(&self) -> u64 {
        let mut flags = 0;
        if !self.follow_symlinks {
            flags |= libc::RESOLVE_NO_SYMLINKS;
        }
        if !self.traverse_mounts {
            flags |= libc::RESOLVE_NO_XDEV;
        }
        flags
    }
}

fn with_openat2(start: &OwnedFd, rel: &std::ffi::CStr, resolve: u64) -> io::Result<OwnedFd> {
    let mut tries = 0;
    loop {
        match sys::openat2(Some(start), rel, sys::READ_FLAGS, resolve) {
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && tries < EAGAIN_RETRIES => {
                tries += 1;
            }
            other => return other,
        }
    }
}

/// The start directory of a lookup. The chroot path itself is the administrator's and may contain symlinks.
fn open_dir(path: &[u8]) -> Result<OwnedFd, OpenError> {
    let c_path = sys::c_path(path)?;
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
    Ok(sys::openat(None, &c_path, flags)?)
}

/// `/a/b` => `a/b`: the walk starts at a descriptor for `/`.
fn relative(path: &[u8]) -> &[u8] {
    let start = path.iter().position(|&b| b != b'/').unwrap_or(path.len());
    &path[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(code: i32) -> &'static str {
        match OpenError::from(io::Error::from_raw_os_error(code)) {
            OpenError::NotFound => "404",
            OpenError::Forbidden => "403",
            OpenError::Io(_) => "io",
        }
    }

    #[test]
    fn errno_classes() {
        for code in [libc::ENOENT, libc::ENOTDIR, libc::ENAMETOOLONG, libc::ENXIO] {
            assert_eq!(class(code), "404", "{code}");
        }
        for code in [libc::EACCES, libc::EPERM, libc::ELOOP, libc::EXDEV] {
            assert_eq!(class(code), "403", "{code}");
        }
        assert_eq!(class(libc::EIO), "io");
        assert_eq!(class(libc::EMFILE), "io");
    }

    #[test]
    fn nul_bytes_and_relative_paths() {
        let r = Resolver::new(&ShareOptions::default());
        assert!(matches!(
            r.open(Path::new("/tmp/a\0b")),
            Err(OpenError::NotFound)
        ));
        let strict = Resolver {
            follow_symlinks: false,
            ..Resolver::new(&ShareOptions::default())
        };
        assert!(matches!(
            strict.open(Path::new("no/such/file")),
            Err(OpenError::NotFound)
        ));
        assert_eq!(relative(b"//a/b"), b"a/b");
        assert_eq!(relative(b"/"), b"");
    }
}
