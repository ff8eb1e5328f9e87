//! The descriptor limit: rein raises its soft `RLIMIT_NOFILE` to the hard limit at start, since every client
//! connection, upstream connection and open file is a descriptor, and the usual soft default (1024) is
//! reached by a few hundred clients. Applications get the soft limit rein started with, as they would have
//! without rein: a program may still use `select()`, which fails on descriptors above 1023.

use std::sync::OnceLock;

/// The soft limit before [`raise`], when it changed it.
static INHERITED: OnceLock<libc::rlim_t> = OnceLock::new();

/// Raises the soft limit to the hard one; returns `(before, after)`.
pub(crate) fn raise() -> std::io::Result<(u64, u64)> {
    let mut limit = current()?;
    let before = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: a plain system call on a value we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let _ = INHERITED.set(before);
    }
    Ok((before, limit.rlim_cur))
}

fn current() -> std::io::Result<libc::rlimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(limit)
}

/// The soft limit a child should get back, if rein raised its own (read before forking: the child only
/// applies it).
pub(crate) fn inherited() -> Option<libc::rlim_t> {
    INHERITED.get().copied()
}

/// In a child between fork and exec: puts the soft limit back to `soft` (async-signal-safe).
pub(crate) fn restore_in_child(soft: libc::rlim_t) -> std::io::Result<()> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on a value we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        limit.rlim_cur = soft.min(limit.rlim_max);
        if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
