//! The exec shim's side of isolation (`rein __exec --isolate PLAN -- PROG ARGS`): a single-threaded process
//! in rein's namespaces, as rein's user, that confines itself or a child and ends by executing the app.
//!
//! - The shim joins the instance's cgroups first (its pid into each `cgroup.procs`), so that everything the
//!   app starts is counted from its first byte.
//! - With no user or PID namespace, the shim unshares the others itself, sets up the mounts and becomes the app.
//! - A user namespace's maps must be written by a process outside it, and a new PID namespace holds only the
//!   children of the process that unshares it: the shim forks a child that unshares (and, for a user
//!   namespace, waits until the shim has written its `uid_map`/`gid_map`). For a PID namespace that child forks
//!   the namespace's init, which sets up the mounts (its `/proc` shows the new namespace) and forks the app, then
//!   reaps until the app exits and reports its wait status through a pipe.
//! - The shim stays, as the pid rein tracks, and mirrors the app's end: the same exit code, or the same signal.
//!   rein signals an instance's whole process group, which the app shares, so the shim and the namespace's
//!   init block the catchable signals and the app gets them as without isolation; the app unblocks them
//!   before its exec.
//! - Every process sets `PR_SET_PDEATHSIG` (SIGKILL, the app the instance's death signal) after its last
//!   credential change, so rein's death still takes the whole chain down.

use std::ffi::{CString, OsString};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::ExitCode;

use super::Plan;

/// Runs the plan and then `program`; returns only on failure (after printing why), with code 127, or with
/// the app's exit code when the shim waited for it.
pub(crate) fn run(plan: &Plan, program: OsString, args: Vec<OsString>) -> ExitCode {
    match confine(plan, &program, args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "rein: cannot isolate {}: {e}",
                Path::new(&program).display()
            );
            ExitCode::from(127)
        }
    }
}

fn confine(plan: &Plan, program: &OsString, args: Vec<OsString>) -> io::Result<ExitCode> {
    let pid = std::process::id().to_string();
    for procs in &plan.cgroup_procs {
        std::fs::write(procs, &pid)
            .map_err(|e| io::Error::new(e.kind(), format!("joining {}: {e}", procs.display())))?;
    }
    if !plan.has(libc::CLONE_NEWUSER) && !plan.has(libc::CLONE_NEWPID) {
        unshare(plan.flags)?;
        setup_fs(plan)?;
        return Err(exec_app(plan, program, args));
    }
    block_signals(libc::SIG_BLOCK)?;
    let (ready_r, ready_w) = pipe()?;
    let (go_r, go_w) = pipe()?;
    let (status_r, status_w) = pipe()?;
    // SAFETY: the shim is single-threaded apart from the allocator's, which fork handlers keep consistent.
    let child = check(unsafe { libc::fork() })?;
    if child == 0 {
        drop((ready_r, go_w, status_r));
        let e = in_child(plan, program, args, ready_w, go_r, status_w);
        eprintln!("rein: cannot isolate {}: {e}", Path::new(program).display());
        // SAFETY: leaving the forked child without running the parent's exit handlers.
        unsafe { libc::_exit(127) }
    }
    drop((ready_w, go_r, status_w));
    if plan.has(libc::CLONE_NEWUSER) {
        let mapped = wait_byte(ready_r).and_then(|()| write_maps(plan, child));
        if let Err(e) = mapped {
            // SAFETY: plain system call on our own child.
            unsafe { libc::kill(child, libc::SIGKILL) };
            return Err(e);
        }
        let mut go = std::fs::File::from(go_w);
        go.write_all(b"g")?;
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    while unsafe { libc::waitpid(child, &mut status, 0) } == -1 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let mut reported = [0u8; 4];
    let mut r = std::fs::File::from(status_r);
    if r.read_exact(&mut reported).is_ok() {
        status = i32::from_ne_bytes(reported);
    }
    Ok(mirror(status))
}

/// In the forked child: the namespaces, then (PID namespace) the init and the app, or itself the app.
fn in_child(
    plan: &Plan,
    program: &OsString,
    args: Vec<OsString>,
    ready: OwnedFd,
    go: OwnedFd,
    status: OwnedFd,
) -> io::Error {
    let run = || -> io::Result<io::Error> {
        death_signal(libc::SIGKILL)?;
        unshare(plan.flags)?;
        if plan.has(libc::CLONE_NEWUSER) {
            std::fs::File::from(ready).write_all(b"r")?;
            wait_byte(go)?;
        }
        if !plan.has(libc::CLONE_NEWPID) {
            setup_fs(plan)?;
            return Ok(exec_app(plan, program, args));
        }
        // SAFETY: as above; this child is single-threaded.
        let init = check(unsafe { libc::fork() })?;
        if init == 0 {
            let e = namespace_init(plan, program, args, status);
            eprintln!("rein: cannot isolate {}: {e}", Path::new(program).display());
            // SAFETY: leaving the forked child.
            unsafe { libc::_exit(127) }
        }
        drop(status);
        let mut st = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(init, &mut st, 0) };
        // SAFETY: leaving the forked child; the shim reads the app's status from the pipe.
        unsafe {
            libc::_exit(if libc::WIFEXITED(st) {
                libc::WEXITSTATUS(st)
            } else {
                127
            })
        }
    };
    run().unwrap_or_else(|e| e)
}

/// PID 1 of the new namespace: the mounts (a `/proc` of this namespace), then the app as its child; reaps
/// every orphan until the app exits, and reports the app's wait status.
fn namespace_init(
    plan: &Plan,
    program: &OsString,
    args: Vec<OsString>,
    status: OwnedFd,
) -> io::Error {
    let run = || -> io::Result<io::Error> {
        death_signal(libc::SIGKILL)?;
        setup_fs(plan)?;
        // SAFETY: single-threaded child.
        let app = check(unsafe { libc::fork() })?;
        if app == 0 {
            drop(status);
            return Ok(exec_app(plan, program, args));
        }
        let mut out = std::fs::File::from(status);
        loop {
            let mut st = 0;
            // SAFETY: reaping any child of this namespace's init.
            let pid = unsafe { libc::waitpid(-1, &mut st, 0) };
            if pid == app {
                let _ = out.write_all(&st.to_ne_bytes());
                // SAFETY: leaving the namespace's init; everything left in it is killed by the kernel.
                unsafe { libc::_exit(0) }
            }
            if pid == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
                unsafe { libc::_exit(127) }
            }
        }
    };
    run().unwrap_or_else(|e| e)
}

/// The app's last steps: its ids, its directory, `no_new_privs`, the death signal, the signal mask back,
/// then the exec (`LISTEN_PID` is its pid as it sees it). Returns only the failure.
fn exec_app(plan: &Plan, program: &OsString, args: Vec<OsString>) -> io::Error {
    let run = || -> io::Result<io::Error> {
        // SAFETY: plain system calls on plain values.
        unsafe {
            if let Some(groups) = &plan.groups {
                check(libc::setgroups(groups.len(), groups.as_ptr()))?;
            }
            if let Some(gid) = plan.gid {
                check(libc::setgid(gid))?;
            }
            if let Some(uid) = plan.uid {
                check(libc::setuid(uid))?;
            }
        }
        if let Some(dir) = &plan.cwd {
            std::env::set_current_dir(dir).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("working directory {}: {e}", dir.display()),
                )
            })?;
        }
        if plan.no_new_privs {
            // SAFETY: plain system call.
            check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
        }
        death_signal(plan.death_signal)?;
        block_signals(libc::SIG_UNBLOCK)?;
        Ok(std::process::Command::new(program)
            .args(args)
            .env("LISTEN_PID", std::process::id().to_string())
            .exec())
    };
    let e = run().unwrap_or_else(|e| e);
    io::Error::new(
        e.kind(),
        format!("cannot run {}: {e}", Path::new(program).display()),
    )
}

/// The mounts of a mount namespace (nothing propagates back to the host), the hostname of a uname one.
fn setup_fs(plan: &Plan) -> io::Result<()> {
    if plan.has(libc::CLONE_NEWNS) {
        mount(
            None,
            Path::new("/"),
            None,
            libc::MS_REC | libc::MS_SLAVE,
            None,
        )?;
        match &plan.rootfs {
            Some(root) => enter_rootfs(plan, root)?,
            None if plan.has(libc::CLONE_NEWPID) => proc_at(Path::new("/proc"))?,
            None => {}
        }
    }
    if let Some(name) = &plan.hostname {
        // SAFETY: a valid buffer and its length.
        check(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) })?;
    }
    Ok(())
}

/// `rootfs` with its automounts, then `pivot_root` into it (the old root detached).
fn enter_rootfs(plan: &Plan, root: &Path) -> io::Result<()> {
    mount(Some(root), root, None, libc::MS_BIND | libc::MS_REC, None)?;
    let inside = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
    if plan.tmpfs {
        let tmp = root.join("tmp");
        std::fs::create_dir_all(&tmp)?;
        let flags = libc::MS_NOSUID | libc::MS_NODEV;
        mount(
            Some(Path::new("tmpfs")),
            &tmp,
            Some("tmpfs"),
            flags,
            Some("mode=1777"),
        )?;
    }
    for (link, target) in &plan.links {
        let at = inside(link);
        if std::fs::symlink_metadata(&at).is_err() {
            std::os::unix::fs::symlink(target, &at)?;
        }
    }
    for source in &plan.binds {
        bind_read_only(source, &inside(source))?;
    }
    if plan.procfs {
        proc_at(&root.join("proc"))?;
    }
    std::env::set_current_dir(root)?;
    let dot = CString::new(".").map_err(io::Error::other)?;
    // SAFETY: pivot_root(".", ".") stacks the old root under the new one, detached just after.
    unsafe {
        check(libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) as libc::c_int)?;
        check(libc::umount2(dot.as_ptr(), libc::MNT_DETACH))?;
    }
    std::env::set_current_dir("/")
}

/// `source` at `target`, read-only, keeping the flags the kernel locks (nosuid, nodev, noexec) in a user
/// namespace.
fn bind_read_only(source: &Path, target: &Path) -> io::Result<()> {
    if source.is_dir() {
        std::fs::create_dir_all(target)?;
    } else {
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(target)?;
    }
    mount(
        Some(source),
        target,
        None,
        libc::MS_BIND | libc::MS_REC,
        None,
    )?;
    let locked = nix::sys::statvfs::statvfs(source)
        .map(|s| {
            use nix::sys::statvfs::FsFlags;
            let f = s.flags();
            [
                (FsFlags::ST_NOSUID, libc::MS_NOSUID),
                (FsFlags::ST_NODEV, libc::MS_NODEV),
                (FsFlags::ST_NOEXEC, libc::MS_NOEXEC),
            ]
            .iter()
            .filter(|(st, _)| f.contains(*st))
            .fold(0, |acc, (_, ms)| acc | ms)
        })
        .unwrap_or(0);
    let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | locked;
    mount(None, target, None, flags, None)
}

fn proc_at(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    mount(Some(Path::new("proc")), dir, Some("proc"), flags, None)
}

fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let c = |b: &[u8]| CString::new(b).map_err(io::Error::other);
    let source = source.map(|s| c(s.as_os_str().as_bytes())).transpose()?;
    let target_c = c(target.as_os_str().as_bytes())?;
    let fstype = fstype.map(|f| c(f.as_bytes())).transpose()?;
    let data = data.map(|d| c(d.as_bytes())).transpose()?;
    let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: NUL-terminated strings (or null) that outlive the call.
    let r = unsafe {
        libc::mount(
            ptr(&source),
            target_c.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    };
    check(r)
        .map(drop)
        .map_err(|e| io::Error::new(e.kind(), format!("mount on {}: {e}", target.display())))
}

/// Writes the child's `setgroups` (denied when rein is not root), `uid_map` and `gid_map`.
fn write_maps(plan: &Plan, child: libc::pid_t) -> io::Result<()> {
    let file = |name: &str| format!("/proc/{child}/{name}");
    let put = |name: &str, text: &str| {
        std::fs::write(file(name), text)
            .map_err(|e| io::Error::new(e.kind(), format!("writing {name} ({}): {e}", text.trim())))
    };
    if let Some(map) = &plan.uid_map {
        put("uid_map", map)?;
    }
    if plan.deny_setgroups {
        put("setgroups", "deny")?;
    }
    if let Some(map) = &plan.gid_map {
        put("gid_map", map)?;
    }
    Ok(())
}

/// The wait status `status` reproduced as this process's own end.
fn mirror(status: libc::c_int) -> ExitCode {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        let _ = block_signals(libc::SIG_UNBLOCK);
        // SAFETY: restoring the default action and raising the same signal at ourselves.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        return ExitCode::from(128u8.wrapping_add(sig as u8));
    }
    ExitCode::from(libc::WEXITSTATUS(status) as u8)
}

fn unshare(flags: libc::c_int) -> io::Result<()> {
    if flags == 0 {
        return Ok(());
    }
    // SAFETY: plain system call.
    check(unsafe { libc::unshare(flags) })
        .map(drop)
        .map_err(|e| io::Error::new(e.kind(), format!("unshare: {e}")))
}

fn death_signal(sig: libc::c_int) -> io::Result<()> {
    // SAFETY: plain system call.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) }).map(drop)
}

/// Blocks (or unblocks) every signal that can be blocked.
fn block_signals(how: libc::c_int) -> io::Result<()> {
    // SAFETY: a zeroed sigset filled by sigfillset, used by sigprocmask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        check(libc::sigprocmask(how, &set, std::ptr::null_mut())).map(drop)
    }
}

/// A close-on-exec pipe: `(read, write)`.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: a two-element array for pipe2.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: two fresh fds owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Waits for one byte; the other end closing first is an error (that process failed).
fn wait_byte(fd: OwnedFd) -> io::Result<()> {
    let mut b = [0u8; 1];
    let raw = fd.as_raw_fd();
    let mut f = std::fs::File::from(fd);
    match f.read(&mut b) {
        Ok(1) => Ok(()),
        Ok(_) => Err(io::Error::other(format!(
            "the other side of fd {raw} gave up"
        ))),
        Err(e) => Err(e),
    }
}

fn check<T: PartialEq + From<i8>>(r: T) -> io::Result<T> {
    if r == T::from(-1) {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}
