//! The control API's Unix socket file: created 0600 without a moment of a wider mode, never over anything but
//! a stale socket, and removed at the end only while it is still the file rein created.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

/// A listening control socket and the identity of the file it was bound to; dropping it removes that file
/// unless something else has taken the path meanwhile.
pub(super) struct OwnedSocket {
    pub(super) listener: UnixListener,
    path: PathBuf,
    identity: Option<(u64, u64)>,
}

impl OwnedSocket {
    /// Binds `path`, which must be free or hold a stale socket (one nobody accepts on). A live socket, or any
    /// other kind of file, is left alone and refused: a mistyped `--control unix:` must never destroy data.
    pub(super) fn bind(path: &Path) -> io::Result<OwnedSocket> {
        check_free(path)?;
        let listener = bind_private(path)?;
        let identity = identity(path);
        Ok(OwnedSocket {
            listener,
            path: path.to_owned(),
            identity,
        })
    }
}

impl Drop for OwnedSocket {
    fn drop(&mut self) {
        if self.identity.is_some() && identity(&self.path) == self.identity {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The device and inode of the socket file at `path`, or `None` if there is no socket there.
fn identity(path: &Path) -> Option<(u64, u64)> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    meta.file_type()
        .is_socket()
        .then(|| (meta.dev(), meta.ino()))
}

fn check_free(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} exists and is not a socket; rein replaces only a socket it left behind",
                path.display()
            ),
        ));
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("another process already serves {}", path.display()),
        ));
    }
    Ok(())
}

/// Binds a Unix socket at `path` that never exists with a mode wider than 0600.
///
/// `bind` creates the file with the process's umask, so a bind then chmod would leave a moment in which others
/// may connect. A temporary umask would close it but is process-wide: another thread creating a file meanwhile
/// would get the narrowed mode. Instead the socket is bound inside a fresh 0700 directory beside `path` (no one
/// else can reach it there), made 0600, and renamed into place, which is atomic, keeps the mode and replaces a
/// stale socket file left by a rein that did not stop cleanly.
fn bind_private(path: &Path) -> io::Result<UnixListener> {
    use std::os::unix::fs::DirBuilderExt;
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // Short, so that the staged path fits a socket address (108 bytes) about as well as `path` itself.
    let private = parent.join(format!(".rein.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new().mode(0o700).create(&private)?;
    let staged = private.join("s");
    let bound = UnixListener::bind(&staged).and_then(|listener| {
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&staged, path)?;
        Ok(listener)
    });
    let _ = std::fs::remove_dir_all(&private);
    bound
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_regular_file_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, "precious").unwrap();
        let err = OwnedSocket::bind(&path).err().expect("refused");
        assert!(err.to_string().contains("is not a socket"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
    }

    #[tokio::test]
    async fn a_stale_socket_is_replaced_and_removed_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let socket = OwnedSocket::bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        drop(socket);
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn a_file_put_in_its_place_is_not_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let socket = OwnedSocket::bind(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "someone else's").unwrap();
        drop(socket);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "someone else's");
    }
}
