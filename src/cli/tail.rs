//! The end of an application's log file, for the views that show it (`rein top`, `rein dashboard`).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// How much of the end of a log file is read.
const TAIL: u64 = 16 * 1024;

/// The last lines of a log file (its last `TAIL` bytes); none when it cannot be read.
pub(super) fn lines(path: &Path) -> Vec<String> {
    let Ok(mut file) = std::fs::File::open(path) else {
        return vec![format!("(no log at {})", path.display())];
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let start = len.saturating_sub(TAIL);
    let mut buf = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut buf).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    // A tail that starts mid-file starts mid-line: drop the partial first line.
    if start > 0 && !lines.is_empty() {
        lines.remove(0);
    }
    lines
}

/// The last lines of application `app`'s log in the state directory (`STATE/logs/NAME.log`).
pub(super) fn app_lines(state: &Path, app: &str) -> Vec<String> {
    lines(&state.join("logs").join(format!("{app}.log")))
}
