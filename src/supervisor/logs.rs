//! App logs: a child's stdout and stderr are pipes read by rein and written to size-rotated files (a device
//! or pipe named by the app's `stdout`/`stderr`, such as `/dev/stderr`, is written to but never rotated).
//!
//! Piping through rein (rather than handing the child the file itself) makes rotation exact: rein is the only
//! writer, so it renames `app.log` → `app.log.1` … at the moment the size limit is reached and the next byte
//! goes to a fresh `app.log`. Memory stays bounded: each stream is read one chunk ([`CHUNK`] bytes) at a time
//! and the next read waits until that chunk is on disk, so a slow disk blocks the child on its full pipe
//! (backpressure) instead of buffering in rein. A write error (disk full) drops that chunk with one warning
//! and keeps draining, so the app never hangs on a log.
//!
//! Each line is written with its time, instance and stream in front ([`super::logline`]), and rein adds its
//! own lines about an instance ([`Notices`]); the failure reason ([`Tail`]) is read from the unprefixed bytes.
//!
//! Every writer of one path in this process shares one [`LogFile`] (see [`shared`]): stdout and stderr may name
//! the same file, and a replacement process may start writing while its predecessor's grandchildren still hold
//! the old pipe open.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::logline::{self, Lines, Raw, Source};

/// The most bytes read from a pipe before they are written out.
pub const CHUNK: usize = 64 * 1024;

/// When to rotate an app log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// The size a log file never exceeds; 0 disables rotation.
    pub max_bytes: u64,
    /// Rotated files kept (`app.log.1` … `app.log.KEEP`); 0 truncates the file in place instead.
    pub keep: u32,
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation {
            max_bytes: 10 * 1024 * 1024,
            keep: 5,
        }
    }
}

/// An append-only log file that rotates itself by size.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    file: File,
    size: u64,
    rotation: Rotation,
}

impl LogFile {
    /// Opens (creates, mode 0640) `path` for appending. Only a regular file is rotated: a device or a pipe
    /// (an app's `"stderr": "/dev/stderr"`, a container's log) is written as it is and never renamed.
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<LogFile> {
        let file = open_append(path)?;
        let meta = file.metadata()?;
        let rotation = match meta.is_file() {
            true => rotation,
            false => Rotation {
                max_bytes: 0,
                ..rotation
            },
        };
        Ok(LogFile {
            path: path.to_owned(),
            file,
            size: meta.len(),
            rotation,
        })
    }

    /// Appends `data`, rotating first whenever it would not fit. `data` is split at its last newline that
    /// fits, so lines that arrive whole stay whole (unless one line alone is longer than `max_bytes`); a line
    /// the pipe delivered in pieces may straddle two files.
    pub fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        let max = self.rotation.max_bytes;
        while !data.is_empty() {
            if max == 0 || self.size + data.len() as u64 <= max {
                return self.append(data);
            }
            let room = max.saturating_sub(self.size) as usize;
            let fits = data[..room.min(data.len())]
                .iter()
                .rposition(|&b| b == b'\n')
                .map(|i| i + 1);
            let take = match fits {
                Some(n) => n,
                // Nothing whole fits: start a fresh file, unless this one is already empty (one huge line).
                None if self.size > 0 => {
                    self.rotate()?;
                    continue;
                }
                None => room,
            };
            self.append(&data[..take])?;
            data = &data[take..];
            if !data.is_empty() {
                self.rotate()?;
            }
        }
        Ok(())
    }

    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.file.write_all(data)?;
        self.size += data.len() as u64;
        Ok(())
    }

    /// `app.log.(keep-1)` → `app.log.keep` … `app.log` → `app.log.1`, then a new `app.log`.
    pub fn rotate(&mut self) -> io::Result<()> {
        let keep = self.rotation.keep;
        if keep == 0 {
            self.file.set_len(0)?;
        } else {
            ignore_missing(fs::remove_file(numbered(&self.path, keep)))?;
            for i in (1..keep).rev() {
                ignore_missing(fs::rename(
                    numbered(&self.path, i),
                    numbered(&self.path, i + 1),
                ))?;
            }
            ignore_missing(fs::rename(&self.path, numbered(&self.path, 1)))?;
            self.file = open_append(&self.path)?;
        }
        self.size = 0;
        Ok(())
    }
}

/// `app.log` + 3 → `app.log.3`.
pub fn numbered(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o640)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("log file {}: {e}", path.display())))
}

fn ignore_missing(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

impl LogFile {
    /// Opens the path again (an external rotation renamed the file): the next bytes go to the file now there,
    /// created if need be, and the size counts from its length.
    pub fn reopen(&mut self) -> io::Result<()> {
        let file = open_append(&self.path)?;
        self.size = file.metadata()?.len();
        self.file = file;
        Ok(())
    }
}

/// Every app log open in this process.
fn registry() -> &'static Mutex<HashMap<PathBuf, Weak<Mutex<LogFile>>>> {
    static OPEN: OnceLock<Mutex<HashMap<PathBuf, Weak<Mutex<LogFile>>>>> = OnceLock::new();
    OPEN.get_or_init(Default::default)
}

/// Opens every app log again at its path (SIGUSR1, after logrotate renamed them); returns the failures.
pub fn reopen_all() -> Vec<io::Error> {
    let open: Vec<Arc<Mutex<LogFile>>> = registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .filter_map(Weak::upgrade)
        .collect();
    open.iter()
        .filter_map(|log| log.lock().unwrap_or_else(|e| e.into_inner()).reopen().err())
        .collect()
}

/// The one [`LogFile`] of `path` in this process, opened on first use. The rotation of the first opener wins
/// until every user has dropped it.
pub fn shared(path: &Path, rotation: Rotation) -> io::Result<Arc<Mutex<LogFile>>> {
    let mut open = registry().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(log) = open.get(path).and_then(Weak::upgrade) {
        return Ok(log);
    }
    open.retain(|_, log| log.strong_count() > 0);
    let log = Arc::new(Mutex::new(LogFile::open(path, rotation)?));
    open.insert(path.to_owned(), Arc::downgrade(&log));
    Ok(log)
}

/// The last bytes one process wrote to a stream, kept in memory apart from the shared log file (where other
/// instances' lines mix in), so that a failure to start can say what the process said before it died.
#[derive(Debug, Default)]
pub struct Tail {
    bytes: std::collections::VecDeque<u8>,
}

impl Tail {
    /// Bytes kept: enough for the end of a Python traceback or a shell error.
    const KEEP: usize = 2048;

    pub fn push(&mut self, data: &[u8]) {
        let data = &data[data.len().saturating_sub(Self::KEEP)..];
        let over = (self.bytes.len() + data.len()).saturating_sub(Self::KEEP);
        self.bytes.drain(..over);
        self.bytes.extend(data);
    }
}

impl Tail {
    /// What the process said about its end, for a failure's reason: the error itself where the tail is a
    /// JavaScript stack (Node.js prints `Error: message` above its `    at …` frames and a `Node.js vX` line
    /// below) or a Python traceback (whose last line is the exception), else up to `n` last non-empty lines
    /// joined by " | " (one line fits a status field and a log line).
    pub fn reason(&self, n: usize) -> String {
        let bytes: Vec<u8> = self.bytes.iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes);
        let mut lines: Vec<&str> = text
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.is_empty())
            .collect();
        if lines.last().is_some_and(|l| l.starts_with("Node.js v")) {
            lines.pop();
        }
        let frames = lines.iter().rev().take_while(|l| is_js_frame(l)).count();
        if frames > 0 && frames < lines.len() {
            return lines[lines.len() - frames - 1].trim().to_owned();
        }
        if lines
            .iter()
            .any(|l| l.starts_with("Traceback (most recent call last)"))
        {
            return lines
                .last()
                .map_or_else(String::new, |l| l.trim().to_owned());
        }
        lines[lines.len().saturating_sub(n)..].join(" | ")
    }
}

/// A line of a JavaScript stack: `    at fn (file:line:col)`, or the `    ... N lines matching` Node.js folds.
fn is_js_frame(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("at ") || (line.starts_with("... ") && line.contains("matching"))
}

/// How long an incomplete line waits for the rest before it is written as a piece (a prompt, a progress bar):
/// a reader sees it without the app having to end it.
const QUIET: Duration = Duration::from_millis(500);

/// Copies `src` (a child's stdout or stderr pipe) into `log` until end of file, one [`CHUNK`] at a time, as
/// lines prefixed by `lines` (see [`super::logline`]), and its last bytes, unprefixed, into `tail`. Returns
/// the bytes read. Write errors are reported once (until a write succeeds again) and the data dropped.
///
/// Memory is bounded: one chunk read, an incomplete line of at most [`Lines::MAX`] bytes held, and the
/// prefixed lines of one chunk while they are written (at worst a 30-byte prefix per byte read, for a chunk
/// of empty lines).
pub async fn pump<R: AsyncRead + Unpin>(
    mut src: R,
    log: Arc<Mutex<LogFile>>,
    app: String,
    tail: Option<Arc<Mutex<Tail>>>,
    lines: Lines,
) -> io::Result<u64> {
    let mut stream = Stream {
        buf: vec![0u8; CHUNK],
        out: Vec::with_capacity(CHUNK),
        lines,
    };
    let mut total = 0u64;
    let mut failing = false;
    loop {
        let read = match stream.lines.has_partial() {
            true => tokio::time::timeout(QUIET, src.read(&mut stream.buf))
                .await
                .ok(),
            false => Some(src.read(&mut stream.buf).await),
        };
        let step = match read.transpose()? {
            None => Step::Quiet,
            Some(0) => Step::End,
            Some(n) => Step::Data(n),
        };
        if let Step::Data(n) = step {
            total += n as u64;
            if let Some(tail) = &tail {
                tail.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(&stream.buf[..n]);
            }
        }
        let result;
        (stream, result) = stream.write(&log, step).await?;
        match result {
            Ok(()) => failing = false,
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(app = %app, "app log write failed, dropping output: {e}");
            }
            Err(_) => {}
        }
        if step == Step::End {
            return Ok(total);
        }
    }
}

/// What one read of a pipe gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// This many bytes, at the start of the buffer.
    Data(usize),
    /// Nothing for [`QUIET`], with an incomplete line held.
    Quiet,
    /// End of file.
    End,
}

/// One stream's pump: its read buffer, the lines waiting to be written, and its line splitter. Handed to a
/// blocking thread for each write and back.
struct Stream {
    buf: Vec<u8>,
    out: Vec<u8>,
    lines: Lines,
}

impl Stream {
    /// Turns `step` into lines and writes them, off the async threads (a slow disk blocks this stream's
    /// pump, and so the child on its full pipe, never the runtime). The lines are timed under the log's
    /// lock, so the times in a file shared by several streams (and rein's notices) never go backwards.
    async fn write(
        mut self,
        log: &Arc<Mutex<LogFile>>,
        step: Step,
    ) -> io::Result<(Stream, io::Result<()>)> {
        let log = log.clone();
        tokio::task::spawn_blocking(move || {
            let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
            let time = logline::timestamp(std::time::SystemTime::now());
            match step {
                Step::Data(n) => self.lines.push(&self.buf[..n], &time, &mut self.out),
                Step::Quiet => self.lines.flush(&time, &mut self.out),
                Step::End => self.lines.finish(&time, &mut self.out),
            }
            let result = match self.out.is_empty() {
                true => Ok(()),
                false => log.write_all(&self.out),
            };
            self.out.clear();
            // A chunk of short lines grows the buffer to many times the chunk (a prefix per line): not kept.
            self.out.shrink_to(CHUNK);
            (self, result)
        })
        .await
        .map_err(io::Error::other)
    }
}

/// rein's own lines about one instance in the app's log (`[ID rein]`), beside the instance's output: started,
/// ready, stopping, exited. Written at once (a line appended to a local file), never failing the caller: a
/// notice that cannot be written is left out.
#[derive(Debug, Clone)]
pub(crate) struct Notices {
    log: Option<Arc<Mutex<LogFile>>>,
    instance: u64,
}

impl Notices {
    /// Notices of `instance` into `log`; none when the app's output is discarded.
    pub(crate) fn new(log: Option<Arc<Mutex<LogFile>>>, instance: u64) -> Notices {
        Notices { log, instance }
    }

    pub(crate) fn write(&self, text: &str) {
        let Some(log) = &self.log else {
            return;
        };
        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
        let mut line = Vec::new();
        let time = logline::timestamp(std::time::SystemTime::now());
        logline::write_line(
            &mut line,
            &time,
            self.instance,
            Source::Rein,
            false,
            &[text.as_bytes()],
        );
        let written = log.write_all(&line);
        if let Err(e) = written {
            tracing::debug!(instance = self.instance, %e, "notice not written to the app log");
        }
    }
}

/// `rein logs NAME [-f] [--raw]`: prints `path` to standard output; with `follow`, keeps printing what is
/// appended, across rotations (it finishes the rotated file, then opens the new one) and truncation. With
/// `raw`, the lines are the apps' own output (see [`Raw`]): no prefixes, no notices of rein's.
pub fn follow(path: &Path, follow: bool, raw: bool) -> io::Result<()> {
    let stdout = io::stdout().lock();
    if !raw {
        let mut out = stdout;
        return follow_into(path, follow, &mut out, &|| false);
    }
    let mut out = Raw::new(stdout);
    follow_into(path, follow, &mut out, &|| false)?;
    out.finish()
}

/// [`follow`] into any writer; returns when `stop()` is true (checked between polls).
pub fn follow_into(
    path: &Path,
    follow: bool,
    out: &mut dyn Write,
    stop: &dyn Fn() -> bool,
) -> io::Result<()> {
    const POLL: Duration = Duration::from_millis(200);
    let context = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let mut file = loop {
        match File::open(path) {
            Ok(f) => break f,
            Err(e) if follow && e.kind() == io::ErrorKind::NotFound && !stop() => {
                std::thread::sleep(POLL)
            }
            Err(e) => return Err(context(e)),
        }
    };
    loop {
        copy_available(&mut file, out)?;
        if !follow || stop() {
            return Ok(());
        }
        std::thread::sleep(POLL);
        let Ok(now) = fs::metadata(path) else {
            continue; // between rename and re-create
        };
        let ours = file.metadata()?;
        if now.ino() != ours.ino() || now.dev() != ours.dev() {
            copy_available(&mut file, out)?; // the rest of the rotated file
            if let Ok(f) = File::open(path) {
                file = f;
            }
        } else if now.len() < file.stream_position()? {
            file.seek(SeekFrom::Start(0))?; // truncated in place
        }
    }
}

fn copy_available(file: &mut File, out: &mut dyn Write) -> io::Result<()> {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return out.flush();
        }
        out.write_all(&buf[..n])?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn sizes(path: &Path, keep: u32) -> Vec<Option<u64>> {
        std::iter::once(path.to_owned())
            .chain((1..=keep + 1).map(|i| numbered(path, i)))
            .map(|p| fs::metadata(p).ok().map(|m| m.len()))
            .collect()
    }

    #[test]
    fn rotates_at_line_boundaries_and_keeps_n() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        let mut log = LogFile::open(
            &path,
            Rotation {
                max_bytes: 100,
                keep: 2,
            },
        )
        .unwrap();
        for i in 0..40 {
            log.write_all(format!("line {i:04}\n").as_bytes()).unwrap(); // 10 bytes each
        }
        let s = sizes(&path, 2);
        assert_eq!(s[0], Some(100), "{s:?}");
        assert_eq!(s[1], Some(100));
        assert_eq!(s[2], Some(100));
        assert_eq!(s[3], None, "only 2 rotated files kept");
        let last = fs::read_to_string(&path).unwrap();
        assert!(last.ends_with("line 0039\n") && last.starts_with("line 0030\n"));
        // A line longer than the limit is split hard; nothing exceeds max_bytes.
        log.write_all(&[b'x'; 250]).unwrap();
        for size in sizes(&path, 2).into_iter().flatten() {
            assert!(size <= 100);
        }
    }

    #[test]
    fn keep_zero_truncates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        let rotation = Rotation {
            max_bytes: 10,
            keep: 0,
        };
        let mut log = LogFile::open(&path, rotation).unwrap();
        log.write_all(b"12345\n12345\nabc\n").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "12345\nabc\n");
        assert!(!numbered(&path, 1).exists());
    }

    #[test]
    fn a_pipe_or_device_is_never_rotated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // A reader first, so that opening the FIFO for writing does not wait for one.
        let mut reader = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .unwrap();
        let tiny = Rotation {
            max_bytes: 10,
            keep: 2,
        };
        let mut log = LogFile::open(&path, tiny).unwrap();
        log.write_all(b"12345\n12345\n12345\n").unwrap();
        assert!(!numbered(&path, 1).exists(), "nothing renamed");
        assert!(fs::metadata(&path).unwrap().file_type().is_fifo());
        let mut got = String::new();
        reader.read_to_string(&mut got).ok();
        assert_eq!(got, "12345\n12345\n12345\n");
    }

    #[test]
    fn a_tail_keeps_the_last_lines_within_its_bound() {
        let mut tail = Tail::default();
        assert_eq!(tail.reason(3), "");
        tail.push(b"one\ntwo\n\nthr");
        tail.push(b"ee\n");
        assert_eq!(tail.reason(2), "two | three");
        assert_eq!(tail.reason(9), "one | two | three");
        tail.push(&[b'x'; 5000]);
        tail.push(b"\nlast");
        assert_eq!(tail.bytes.len(), Tail::KEEP);
        assert_eq!(tail.reason(1), "last");
    }

    #[test]
    fn a_reason_is_the_error_not_the_last_stack_frames() {
        let node = "/srv/app.js:3\nthrow new Error('database unreachable');\n^\n\n\
            Error: database unreachable\n    at Object.<anonymous> (/srv/app.js:3:7)\n\
            at Module._compile (node:internal/modules/cjs/loader:1256:14)\n\
            at node:internal/main/run_main_module:23:47\n\nNode.js v18.19.0\n";
        let mut tail = Tail::default();
        tail.push(node.as_bytes());
        assert_eq!(tail.reason(5), "Error: database unreachable");

        let python = "Traceback (most recent call last):\n  File \"app.py\", line 1, in <module>\n\
            import nope\nModuleNotFoundError: No module named 'nope'\n";
        let mut tail = Tail::default();
        tail.push(python.as_bytes());
        assert_eq!(
            tail.reason(5),
            "ModuleNotFoundError: No module named 'nope'"
        );

        let mut tail = Tail::default();
        tail.push(b"sh: 1: nope: not found\nexiting\n");
        assert_eq!(tail.reason(5), "sh: 1: nope: not found | exiting");
    }

    #[tokio::test]
    async fn pipe_pump_rotates_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.log");
        let rotation = Rotation {
            max_bytes: 4096,
            keep: 3,
        };
        let log = shared(&path, rotation).unwrap();
        let same = shared(&path, rotation).unwrap();
        assert!(Arc::ptr_eq(&log, &same), "one writer per path");
        let (mut tx, rx) = tokio::io::duplex(1024);
        let lines = Lines::new(1, Source::Out);
        let pump = tokio::spawn(pump(rx, log, "t".into(), None, lines));
        let line = "0123456789012345678901234567890123456789012345678901234567890123\n"; // 65 bytes
        for _ in 0..1000 {
            tokio::io::AsyncWriteExt::write_all(&mut tx, line.as_bytes())
                .await
                .unwrap();
        }
        drop(tx);
        assert_eq!(pump.await.unwrap().unwrap(), 65_000);
        let s = sizes(&path, 3);
        assert_eq!(s[4], None, "{s:?}");
        // Nothing lost or reordered within what is kept: .3 .2 .1 current is a suffix of the stream, every
        // line whole and prefixed, and every rotated file is full to within one line.
        let mut kept = Vec::new();
        for p in [3, 2, 1].map(|i| numbered(&path, i)).iter().chain([&path]) {
            let text = fs::read_to_string(p).unwrap();
            assert!(text.len() <= 4096, "{s:?}");
            assert!(text.lines().all(|l| l.contains(" [1] 0123")), "{text}");
            kept.extend_from_slice(text.as_bytes());
        }
        let mut raw = Raw::new(Vec::new());
        raw.write_all(&kept).unwrap();
        raw.finish().unwrap();
        let raw = String::from_utf8(raw.into_inner()).unwrap();
        assert!(!raw.is_empty() && line.repeat(1000).ends_with(&raw));
        let prefixed = "2026-11-26T09:30:01.123Z [1] ".len() + line.len();
        for size in &s[1..4] {
            assert!(size.unwrap() > (4096 - prefixed) as u64, "{s:?}");
        }
    }

    #[tokio::test]
    async fn pump_writes_a_quiet_partial_line_and_the_last_line_at_eof() {
        use tokio::io::AsyncWriteExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.log");
        let log = shared(&path, Rotation::default()).unwrap();
        let (mut tx, rx) = tokio::io::duplex(1024);
        let tail = Arc::new(Mutex::new(Tail::default()));
        let lines = Lines::new(7, Source::Err);
        let pump = tokio::spawn(pump(rx, log, "t".into(), Some(tail.clone()), lines));
        tx.write_all(b"Password: ").await.unwrap();
        // Written once the pipe has been quiet a while, without waiting for the newline.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !fs::read_to_string(&path)
            .unwrap_or_default()
            .contains("[7 err+] Password: \n")
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the partial line never came"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tx.write_all(b"ok\nlast words").await.unwrap();
        drop(tx);
        assert_eq!(pump.await.unwrap().unwrap(), 23);
        let text = fs::read_to_string(&path).unwrap();
        let marks: Vec<&str> = text.lines().map(|l| &l[25..]).collect();
        assert_eq!(
            marks,
            ["[7 err+] Password: ", "[7 err] ok", "[7 err] last words"]
        );
        // The reason reads the app's bytes, never the prefixes.
        assert_eq!(tail.lock().unwrap().reason(5), "Password: ok | last words");
    }

    #[test]
    fn follow_prints_and_tracks_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        fs::write(&path, "first\n").unwrap();
        let mut out = Vec::new();
        follow_into(&path, false, &mut out, &|| false).unwrap();
        assert_eq!(out, b"first\n");

        // The follower stops once it has printed "third" (or at a deadline); no fixed sleeps.
        #[derive(Clone, Default)]
        struct Shared(Arc<Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let seen = Shared::default();
        let started = Arc::new(AtomicBool::new(false));
        let reader = {
            let (path, seen, started) = (path.clone(), seen.clone(), started.clone());
            std::thread::spawn(move || {
                let deadline = std::time::Instant::now() + Duration::from_secs(10);
                let stop = || {
                    started.store(true, Ordering::SeqCst);
                    let text = seen.0.lock().unwrap();
                    text.ends_with(b"third\n") || std::time::Instant::now() > deadline
                };
                follow_into(&path, true, &mut seen.clone(), &stop).unwrap();
            })
        };
        while !started.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let rotation = Rotation {
            max_bytes: 14,
            keep: 1,
        };
        let mut log = LogFile::open(&path, rotation).unwrap();
        log.write_all(b"second\n").unwrap(); // 13 bytes: fits
        log.write_all(b"third\n").unwrap(); // rotates first
        assert_eq!(
            fs::read_to_string(numbered(&path, 1)).unwrap(),
            "first\nsecond\n"
        );
        reader.join().unwrap();
        let seen = String::from_utf8(seen.0.lock().unwrap().clone()).unwrap();
        assert_eq!(seen, "first\nsecond\nthird\n");
    }

    #[test]
    fn follow_missing_file_names_path() {
        let err = follow_into(
            Path::new("/nonexistent/x.log"),
            false,
            &mut Vec::new(),
            &|| false,
        )
        .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/x.log"));
    }
}
