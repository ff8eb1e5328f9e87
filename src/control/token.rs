//! The bearer token of the control API over TCP: a random secret in a file only rein's user can read.
//!
//! `rein run --control IP:PORT` creates `STATE/control.token` (or `--token-file`) at start, 0600, holding 32
//! random bytes as 64 hex digits, unless the file exists: then its content is the token, so a token survives
//! restarts until the file is removed (or replaced by one the operator writes). The CLI reads the same file.

use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file name in the state directory.
pub(crate) const FILE: &str = "control.token";

/// Random bytes in a new token.
const BYTES: usize = 32;

#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenError {
    #[error("cannot read the control token {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot create the control token {path}: {source}")]
    Create { path: PathBuf, source: io::Error },
    #[error("the control token {path} is empty or holds spaces or control characters")]
    Malformed { path: PathBuf },
    #[error(
        "the control token {path} may be read by others (mode {mode:o}) and cannot be narrowed to 0600: {source}"
    )]
    Exposed {
        path: PathBuf,
        mode: u32,
        source: io::Error,
    },
    #[error("no random bytes for the control token: {0}")]
    Random(io::Error),
}

/// The token in `path`, created first if there is none.
pub(crate) fn load_or_create(path: &Path) -> Result<String, TokenError> {
    match read(path)? {
        Some(token) => {
            narrow(path)?;
            Ok(token)
        }
        None => create(path),
    }
}

/// The token in `path`, or `None` if the file does not exist.
pub(crate) fn read(path: &Path) -> Result<Option<String>, TokenError> {
    let mut text = String::new();
    let read = std::fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text));
    match read {
        Ok(_) => parse(&text)
            .map(|t| Some(t.to_owned()))
            .ok_or_else(|| TokenError::Malformed {
                path: path.to_owned(),
            }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TokenError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// A token as written in a file or a variable: one word of visible ASCII, surrounding whitespace ignored.
pub(crate) fn parse(text: &str) -> Option<&str> {
    let token = text.trim();
    let visible = token.bytes().all(|b| b.is_ascii_graphic());
    (!token.is_empty() && visible).then_some(token)
}

fn create(path: &Path) -> Result<String, TokenError> {
    let token = random_hex(BYTES).map_err(TokenError::Random)?;
    let context = |source| TokenError::Create {
        path: path.to_owned(),
        source,
    };
    // O_EXCL: two rein starting at once never overwrite each other's token.
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(context)?;
    file.write_all(format!("{token}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(context)?;
    Ok(token)
}

/// A token file that others may read is no secret: narrowed to 0600, or refused if that is not possible.
fn narrow(path: &Path) -> Result<(), TokenError> {
    let meta = std::fs::metadata(path).map_err(|source| TokenError::Read {
        path: path.to_owned(),
        source,
    })?;
    let mode = meta.mode() & 0o777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|source| {
        TokenError::Exposed {
            path: path.to_owned(),
            mode,
            source,
        }
    })?;
    tracing::warn!(path = %path.display(), mode = format!("{mode:o}"), "the control token was readable by others: narrowed to 0600");
    Ok(())
}

/// `bytes` random bytes from the kernel, written as hex: a secret to hand out.
pub(crate) fn random_hex(bytes: usize) -> io::Result<String> {
    let mut buf = vec![0u8; bytes];
    fill_random(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

fn fill_random(buf: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        let rest = &mut buf[filled..];
        // SAFETY: the kernel writes at most `rest.len()` bytes into `rest`.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        match n {
            n if n > 0 => filled += n as usize,
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// Compares a presented token with the real one in time independent of where they differ.
pub(crate) fn matches(presented: &[u8], token: &[u8]) -> bool {
    if presented.len() != token.len() {
        return false;
    }
    presented
        .iter()
        .zip(token)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_private_random_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let token = load_or_create(&path).unwrap();
        assert_eq!(token.len(), 2 * BYTES);
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(load_or_create(&path).unwrap(), token);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(load_or_create(&other.path().join(FILE)).unwrap(), token);
    }

    #[test]
    fn an_operators_token_is_used_and_narrowed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        std::fs::write(&path, "  my-secret\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(load_or_create(&path).unwrap(), "my-secret");
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        std::fs::write(&path, "two words").unwrap();
        assert!(matches!(
            load_or_create(&path),
            Err(TokenError::Malformed { .. })
        ));
    }

    #[test]
    fn comparison() {
        assert!(matches(b"abc", b"abc"));
        assert!(!matches(b"abd", b"abc"));
        assert!(!matches(b"ab", b"abc"));
    }
}
