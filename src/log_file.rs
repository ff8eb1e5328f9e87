//! Log files rein appends to (its own `--log`, the access log): a file rein creates is 0640 whatever the
//! umask (the group may read it, others may not), one that exists keeps its mode; and each can be opened
//! again at its path (SIGUSR1) after logrotate renamed it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The mode of a log file rein creates.
pub(crate) const MODE: u32 = 0o640;

/// Opens `path` for appending; a file it creates gets [`MODE`] exactly.
pub(crate) fn open_append(path: &Path) -> io::Result<File> {
    let created = OpenOptions::new()
        .append(true)
        .create_new(true)
        .mode(MODE)
        .open(path);
    match created {
        Ok(file) => {
            file.set_permissions(std::fs::Permissions::from_mode(MODE))?;
            Ok(file)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            OpenOptions::new().append(true).open(path)
        }
        Err(e) => Err(e),
    }
}

/// A log file shared by its writers (clones), which [`Reopenable::reopen`] points at the file now at the
/// path. It is a `tracing_subscriber` writer.
#[derive(Clone)]
pub(crate) struct Reopenable {
    path: Arc<PathBuf>,
    file: Arc<Mutex<File>>,
}

impl Reopenable {
    pub(crate) fn open(path: &Path) -> io::Result<Reopenable> {
        Ok(Reopenable {
            path: Arc::new(path.to_owned()),
            file: Arc::new(Mutex::new(open_append(path)?)),
        })
    }

    /// Opens the path again; on failure the writers keep the file they had.
    pub(crate) fn reopen(&self) -> io::Result<()> {
        let fresh = open_append(&self.path)?;
        *self.lock() = fresh;
        Ok(())
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, File> {
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One log event's hold on the file: lines from threads never interleave.
pub(crate) struct Locked<'a>(MutexGuard<'a, File>);

impl Write for Locked<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Reopenable {
    type Writer = Locked<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        Locked(self.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn created_0640_and_reopened_at_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rein.log");
        let log = Reopenable::open(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, MODE);
        use tracing_subscriber::fmt::MakeWriter;
        writeln!(log.make_writer(), "one").unwrap();
        std::fs::rename(&path, dir.path().join("rein.log.1")).unwrap();
        writeln!(log.make_writer(), "two").unwrap();
        log.reopen().unwrap();
        writeln!(log.make_writer(), "three").unwrap();
        let rotated = std::fs::read_to_string(dir.path().join("rein.log.1")).unwrap();
        assert_eq!(rotated, "one\ntwo\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three\n");
    }
}
