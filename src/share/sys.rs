//! The few Linux system calls path resolution needs, as small safe wrappers over `libc`.
//!
//! Each wrapper takes an optional directory (`None` = the current directory, `AT_FDCWD`), returns an
//! [`OwnedFd`] so nothing leaks on an early return, and reports failures as `io::Error` with the errno intact:
//! the caller decides between 404 and 403 from it.

use std::ffi::{CStr, CString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Flags for opening the file that will be served: never a controlling tty, and never blocking on a FIFO
/// (it is rejected after `fstat` anyway).
pub const READ_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK;

/// `struct open_how` of `openat2(2)`. libc's is `non_exhaustive`, so it cannot be built with a literal.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

fn dir_fd(dir: Option<&OwnedFd>) -> libc::c_int {
    dir.map_or(libc::AT_FDCWD, AsRawFd::as_raw_fd)
}

fn owned(ret: libc::c_long) -> io::Result<OwnedFd> {
    match libc::c_int::try_from(ret) {
        Ok(fd) if fd >= 0 => {
            // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        }
        _ => Err(io::Error::last_os_error()),
    }
}

/// A path as the kernel wants it. A NUL byte cannot name any file: ENOENT.
pub fn c_path(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::from_raw_os_error(libc::ENOENT))
}

pub fn openat(dir: Option<&OwnedFd>, path: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `path` is NUL-terminated and outlives the call; the mode is ignored without O_CREAT.
    let fd = unsafe { libc::openat(dir_fd(dir), path.as_ptr(), flags, 0) };
    owned(fd.into())
}

pub fn openat2(
    dir: Option<&OwnedFd>,
    path: &CStr,
    flags: libc::c_int,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let how = OpenHow {
        // Open flags are a non-negative bit set; the kernel wants them widened to u64.
        flags: u64::from(flags.unsigned_abs()),
        mode: 0,
        resolve,
    };
    // SAFETY: `how` is a valid `struct open_how` of the size passed; `path` is NUL-terminated.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir_fd(dir),
            path.as_ptr(),
            &raw const how,
            std::mem::size_of::<OpenHow>(),
        )
    };
    owned(ret)
}

pub fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is large enough for a `struct stat` and is only read after success.
    match unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } {
        // SAFETY: fstat filled it in.
        0 => Ok(unsafe { st.assume_init() }),
        _ => Err(io::Error::last_os_error()),
    }
}

/// The target of the symlink `name` in `dir`. EINVAL (not a symlink) is passed through.
pub fn readlinkat(dir: &OwnedFd, name: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: `buf` is writable for its full length; `name` is NUL-terminated.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    match usize::try_from(n) {
        // A full buffer may be a truncated target: refuse rather than follow the wrong path.
        Ok(n) if n >= buf.len() => Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG)),
        Ok(n) => {
            buf.truncate(n);
            Ok(buf)
        }
        Err(_) => Err(io::Error::last_os_error()),
    }
}

pub fn is_kind(st: &libc::stat, kind: libc::mode_t) -> bool {
    st.st_mode & libc::S_IFMT == kind
}

pub fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}
