//! The access log: lines rendered on the request path, written by a thread of their own.
//!
//! A bounded channel keeps a slow disk from slowing requests: when it is full, lines are dropped and counted
//! rather than blocking a response.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

const QUEUE: usize = 8192;

/// A handle to one open access log; clones share the file and its writer thread.
#[derive(Clone)]
pub struct Sink {
    path: PathBuf,
    tx: SyncSender<String>,
    dropped: Arc<AtomicU64>,
}

impl Sink {
    /// Opens (creating) the file for appending and starts its writer.
    pub fn open(path: &Path) -> io::Result<Sink> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let (tx, rx) = sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("rein-access-log".into())
            .spawn(move || write_lines(file, rx))?;
        Ok(Sink {
            path: path.to_owned(),
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn log(&self, line: String) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(line) {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed);
            if n.is_power_of_two() {
                tracing::warn!(path = %self.path.display(), dropped = n + 1, "access log queue full; lines dropped");
            }
        }
    }
}

/// Writes lines as they come, flushing whenever the queue runs dry; ends when every sink is dropped.
fn write_lines(file: File, rx: Receiver<String>) {
    let mut out = BufWriter::with_capacity(64 * 1024, file);
    while let Ok(line) = rx.recv() {
        let mut result = writeln!(out, "{line}");
        while let Ok(more) = rx.try_recv() {
            result = result.and_then(|()| writeln!(out, "{more}"));
        }
        if let Err(e) = result.and_then(|()| out.flush()) {
            tracing::error!(error = %e, "cannot write the access log");
        }
    }
}
