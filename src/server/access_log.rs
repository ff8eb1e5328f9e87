//! The access log: lines rendered on the request path, written by a thread of their own.
//!
//! A bounded channel keeps a slow disk from slowing requests: when it is full, lines are dropped and counted
//! rather than blocking a response. A file rein creates is 0640 whatever the umask, one that exists keeps its
//! mode ([`crate::log_file`]). [`Sink::reopen`] (SIGUSR1) makes the writer open the path again, for
//! logrotate: the old file, renamed, gets the lines already queued, the new one everything after.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

use crate::log_file::open_append;

const QUEUE: usize = 8192;

/// A handle to one open access log; clones share the file and its writer thread.
#[derive(Clone)]
pub struct Sink {
    path: PathBuf,
    tx: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
}

impl Sink {
    /// Opens (creating) the file for appending and starts its writer.
    pub fn open(path: &Path) -> io::Result<Sink> {
        let file = open_append(path)?;
        let (tx, rx) = sync_channel(QUEUE);
        let writer_path = path.to_owned();
        std::thread::Builder::new()
            .name("rein-access-log".into())
            .spawn(move || write_lines(file, &writer_path, rx))?;
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
        if let Err(TrySendError::Full(_)) = self.tx.try_send(Message::Line(line)) {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed);
            if n.is_power_of_two() {
                tracing::warn!(path = %self.path.display(), dropped = n + 1, "access log queue full; lines dropped");
            }
        }
    }

    /// Asks the writer to open the path again once the lines queued so far are written. Waits for room in
    /// the queue rather than drop the request: the writer empties it quickly.
    pub fn reopen(&self) {
        let _ = self.tx.send(Message::Reopen);
    }
}

enum Message {
    Line(String),
    Reopen,
}

/// Writes lines as they come, flushing whenever the queue runs dry; ends when every sink is dropped.
fn write_lines(file: File, path: &Path, rx: Receiver<Message>) {
    let mut out = BufWriter::with_capacity(64 * 1024, file);
    while let Ok(first) = rx.recv() {
        let mut result = Ok(());
        for message in std::iter::once(first).chain(rx.try_iter()) {
            match message {
                Message::Line(line) => result = result.and_then(|()| writeln!(out, "{line}")),
                Message::Reopen => {
                    result = result.and_then(|()| out.flush());
                    match open_append(path) {
                        Ok(file) => out = BufWriter::with_capacity(64 * 1024, file),
                        Err(e) => {
                            tracing::error!(path = %path.display(), error = %e, "cannot reopen the access log; writing to the old file")
                        }
                    }
                }
            }
        }
        if let Err(e) = result.and_then(|()| out.flush()) {
            tracing::error!(error = %e, "cannot write the access log");
        }
    }
}
