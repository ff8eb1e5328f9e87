//! Readiness for a service manager: the `sd_notify` datagrams `rein run` sends to `$NOTIFY_SOCKET` when
//! systemd starts it as a `Type=notify` service (`READY=1` once it serves, `RELOADING=1` … `READY=1` around a
//! SIGHUP, `STOPPING=1` when it stops). Without `$NOTIFY_SOCKET` every call does nothing.
//!
//! The protocol is one datagram on a Unix socket (a path, or an abstract name spelled `@name`), so it is
//! written here with std's `UnixDatagram` rather than through a crate: the whole of it is a dozen lines, and a
//! failure is only logged, never fatal (the manager then times the start out, which says more than rein could).

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// What rein tells its service manager.
pub(super) enum Status {
    /// Listeners bound, applications started, the control API open.
    Ready,
    /// A SIGHUP's re-read started; `Ready` follows when it is done.
    Reloading,
    /// Stopping gracefully.
    Stopping,
}

/// Sends `status` to `$NOTIFY_SOCKET`, if the environment names one. Errors are logged.
pub(super) fn notify(status: Status) {
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET").filter(|s| !s.is_empty()) else {
        return;
    };
    let message = match status {
        Status::Ready => "READY=1\nSTATUS=serving".to_owned(),
        // systemd ≥ 253 wants the monotonic time of the reload's start beside RELOADING=1.
        Status::Reloading => format!("RELOADING=1\nMONOTONIC_USEC={}", monotonic_usec()),
        Status::Stopping => "STOPPING=1".to_owned(),
    };
    if let Err(e) = send(&socket, message.as_bytes()) {
        crate::log_limit::warn_limited!(error = %e, socket = ?socket, "cannot notify the service manager");
    }
}

fn send(socket: &std::ffi::OsStr, message: &[u8]) -> io::Result<()> {
    let addr = address(socket)?;
    let sock = UnixDatagram::unbound()?;
    sock.send_to_addr(message, &addr).map(drop)
}

/// `@name` is an abstract socket; anything else a path.
fn address(socket: &std::ffi::OsStr) -> io::Result<SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::ffi::OsStrExt;
    match socket.as_bytes().strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name),
        None => SocketAddr::from_pathname(socket),
    }
}

/// `CLOCK_MONOTONIC` in microseconds, the clock systemd compares reload times on.
fn monotonic_usec() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the one timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64) * 1_000_000 + (t.tv_nsec as u64) / 1_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_reaches_a_path_and_an_abstract_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let server = UnixDatagram::bind(&path).unwrap();
        send(path.as_os_str(), b"READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        let name = format!("rein-notify-test-{}", std::process::id());
        use std::os::linux::net::SocketAddrExt;
        let server =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        send(std::ffi::OsStr::new(&format!("@{name}")), b"STOPPING=1").unwrap();
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
    }
}
