//! Path resolution one component at a time, for kernels without `openat2(2)` (before Linux 5.6, or behind a
//! seccomp filter that answers ENOSYS).
//!
//! It keeps the same promises as `openat2` with `RESOLVE_IN_ROOT` / `RESOLVE_NO_SYMLINKS` / `RESOLVE_NO_XDEV`,
//! and reports violations with the same errnos (EXDEV, ELOOP) so the caller maps both paths alike. The start
//! directory is the root of the walk: `..` there stays there, and an absolute symlink starts again from it
//! (for a start of `/`, that is the kernel's own rule). Every step is an `openat` relative to the descriptor of
//! the directory reached so far, with `O_NOFOLLOW`, so a rename racing the walk cannot move it outside the
//! start directory. Symlinks are expanded by hand (`readlinkat`), which is what keeps `..` and absolute
//! targets inside the start directory.
//!
//! Known difference: mount crossings are detected by `st_dev`, so a bind mount of the same filesystem is not
//! seen as a crossing (openat2 compares mount ids).

use std::collections::VecDeque;
use std::io;
use std::os::fd::OwnedFd;

use super::sys::{self, errno};

/// The kernel's own limit on symlinks followed in one lookup.
const MAX_SYMLINKS: u32 = 40;

/// What the walk must refuse.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rules {
    /// Refuse any symlink (ELOOP).
    pub no_symlinks: bool,
    /// Refuse any component on another device than its parent (EXDEV).
    pub no_xdev: bool,
}

struct Walk {
    rules: Rules,
    /// The directories entered so far; `stack[0]` is the start directory and is never popped.
    stack: Vec<OwnedFd>,
    todo: VecDeque<Vec<u8>>,
    links: u32,
}

/// Opens `rel` (relative, slash-separated bytes) below `start` for reading.
pub fn open(start: OwnedFd, rel: &[u8], rules: Rules) -> io::Result<OwnedFd> {
    let mut walk = Walk {
        rules,
        stack: vec![start],
        todo: VecDeque::new(),
        links: 0,
    };
    walk.prepend(rel);
    walk.run()
}

impl Walk {
    fn run(&mut self) -> io::Result<OwnedFd> {
        while let Some(name) = self.todo.pop_front() {
            match name.as_slice() {
                b"." => {}
                b".." => self.up()?,
                _ if self.todo.is_empty() => {
                    if let Some(fd) = self.last(&name)? {
                        return Ok(fd);
                    }
                }
                _ => self.enter(&name)?,
            }
        }
        // The path ended in `.` or `..`: the result is the directory reached.
        sys::openat(Some(self.top()), c".", sys::READ_FLAGS | libc::O_DIRECTORY)
    }

    fn top(&self) -> &OwnedFd {
        // The start directory is never popped, so the stack is never empty.
        &self.stack[self.stack.len() - 1]
    }

    /// `..`: the start directory is the root, and its `..` is itself.
    fn up(&mut self) -> io::Result<()> {
        if self.stack.len() > 1 {
            self.stack.pop();
        }
        Ok(())
    }

    /// An intermediate component: a directory to descend into, or a symlink to expand.
    fn enter(&mut self, name: &[u8]) -> io::Result<()> {
        let c_name = sys::c_path(name)?;
        let fd = sys::openat(
            Some(self.top()),
            &c_name,
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )?;
        let st = sys::fstat(&fd)?;
        if sys::is_kind(&st, libc::S_IFLNK) {
            return self.expand(&c_name);
        }
        self.check_device(&st)?;
        if !sys::is_kind(&st, libc::S_IFDIR) {
            return Err(errno(libc::ENOTDIR));
        }
        self.stack.push(fd);
        Ok(())
    }

    /// The final component, opened for reading. `None` when it was a symlink whose target was queued.
    fn last(&mut self, name: &[u8]) -> io::Result<Option<OwnedFd>> {
        let c_name = sys::c_path(name)?;
        let flags = sys::READ_FLAGS | libc::O_NOFOLLOW;
        match sys::openat(Some(self.top()), &c_name, flags) {
            Ok(fd) => {
                self.check_device(&sys::fstat(&fd)?)?;
                Ok(Some(fd))
            }
            // O_NOFOLLOW reports a symlink as ELOOP.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                self.expand(&c_name)?;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn expand(&mut self, c_name: &std::ffi::CStr) -> io::Result<()> {
        self.links += 1;
        if self.rules.no_symlinks || self.links > MAX_SYMLINKS {
            return Err(errno(libc::ELOOP));
        }
        let target = match sys::readlinkat(self.top(), c_name) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Err(errno(libc::ELOOP)),
            other => other?,
        };
        if target.first() == Some(&b'/') {
            self.stack.truncate(1);
        }
        self.prepend(&target);
        Ok(())
    }

    fn check_device(&self, st: &libc::stat) -> io::Result<()> {
        if self.rules.no_xdev && sys::fstat(self.top())?.st_dev != st.st_dev {
            return Err(errno(libc::EXDEV));
        }
        Ok(())
    }

    /// Queues the components of `path` before what remains. A trailing slash becomes a trailing `.`, so
    /// `file/` fails with ENOTDIR as the kernel's lookup would.
    fn prepend(&mut self, path: &[u8]) {
        let mut parts: Vec<Vec<u8>> = path
            .split(|&b| b == b'/')
            .filter(|part| !part.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        if path.len() > 1 && path.ends_with(b"/") {
            parts.push(b".".to_vec());
        }
        for part in parts.into_iter().rev() {
            self.todo.push_front(part);
        }
    }
}
