//! Instances a previous rein left behind. Every instance is the leader of its own process group, and rein
//! records each one while it runs: `STATE/run/pids/PID` holds the boot it started in and its start time. An
//! instance dies with rein (`PR_SET_PDEATHSIG`), but what it started in its group need not (a shell's
//! background job, a master's workers), and a rein killed outright (`kill -9`, the OOM killer) never stops
//! them: the next rein on the same state directory does, before it starts any application, so that a crash
//! loop does not pile up copies.
//!
//! A record proves a group is the instance's only while the recorded leader, same boot and same start time,
//! still leads it, or, the leader gone, while every member started after it: a pid the kernel has given to an
//! unrelated process since is left alone.

use std::io;
use std::path::{Path, PathBuf};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// The directory of records, under `STATE/run/`.
pub(crate) const DIR: &str = "pids";

/// What `/proc/PID/stat` says of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    state: char,
    group: i32,
    /// Clock ticks after boot.
    start: u64,
}

/// One record: the boot and the start time of a group's leader.
#[derive(Debug, PartialEq, Eq)]
struct Record {
    boot: String,
    start: u64,
}

/// Records instance `pid` (a process group leader) as running. A record that cannot be written is logged:
/// the instance runs unrecorded, as it would have without this.
pub(crate) fn record(dir: &Path, pid: u32) {
    let written = stat(pid)
        .ok_or_else(|| io::Error::other("the process is already gone"))
        .and_then(|s| {
            let text = format!("{} {}\n", boot_id()?, s.start);
            std::fs::write(dir.join(pid.to_string()), text)
        });
    if let Err(e) = written {
        tracing::debug!(pid, dir = %dir.display(), error = %e, "cannot record the instance");
    }
}

/// Forgets instance `pid`: it exited and its group was stopped.
pub(crate) fn forget(dir: &Path, pid: u32) {
    let _ = std::fs::remove_file(dir.join(pid.to_string()));
}

/// Stops (SIGKILL) the process groups recorded in `dir` that are still what was recorded, and removes every
/// record. Returns the groups stopped.
pub(crate) fn stop_all(dir: &Path) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let records: Vec<(i32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
        .collect();
    if records.is_empty() {
        return Vec::new();
    }
    let processes = all_processes();
    let boot = boot_id().unwrap_or_default();
    let mut stopped = Vec::new();
    for (group, path) in records {
        let record = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| parse_record(&t));
        if let Some(record) = record.filter(|r| r.boot == boot)
            && is_leftover(group, &record, &processes)
            && group > 1
            && nix::sys::signal::killpg(Pid::from_raw(group), Signal::SIGKILL).is_ok()
        {
            stopped.push(group);
        }
        let _ = std::fs::remove_file(&path);
    }
    stopped
}

/// Whether the live members of `group` are the recorded instance's: led by it, or started after it.
fn is_leftover(group: i32, record: &Record, processes: &[(i32, Stat)]) -> bool {
    let members: Vec<&(i32, Stat)> = processes
        .iter()
        .filter(|(_, s)| s.group == group && s.state != 'Z')
        .collect();
    if members.is_empty() {
        return false;
    }
    match members.iter().find(|(pid, _)| *pid == group) {
        Some((_, leader)) => leader.start == record.start,
        None => members.iter().all(|(_, s)| s.start >= record.start),
    }
}

fn parse_record(text: &str) -> Option<Record> {
    let (boot, start) = text.trim().split_once(' ')?;
    Some(Record {
        boot: boot.to_owned(),
        start: start.parse().ok()?,
    })
}

fn all_processes() -> Vec<(i32, Stat)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((i32::try_from(pid).ok()?, stat(pid)?)))
        .collect()
}

fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Fields 3 (state), 5 (process group) and 22 (start time) of `/proc/PID/stat`; the command name (field 2)
/// may hold spaces and parentheses, so fields are counted from its last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = text.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        group: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// This boot's identity: start times count from boot, so a record from another boot proves nothing.
fn boot_id() -> io::Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?
        .trim()
        .to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    fn sleeper() -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("1000")
            .process_group(0)
            .spawn()
            .unwrap()
    }

    fn alive(pid: u32) -> bool {
        stat(pid).is_some_and(|s| s.state != 'Z')
    }

    #[test]
    fn stops_a_recorded_group_and_spares_a_reused_pid() {
        let dir = tempfile::tempdir().unwrap();
        let mut left = sleeper();
        let mut other = sleeper();
        record(dir.path(), left.id());
        // A record of `other`'s pid from an earlier process: another start time.
        let start = stat(other.id()).unwrap().start;
        let stale = format!("{} {}\n", boot_id().unwrap(), start.saturating_sub(1));
        std::fs::write(dir.path().join(other.id().to_string()), stale).unwrap();

        let stopped = stop_all(dir.path());
        assert_eq!(stopped, vec![left.id() as i32]);
        left.wait().unwrap();
        assert!(
            alive(other.id()),
            "a pid that is no longer the instance's is spared"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        other.kill().unwrap();
        other.wait().unwrap();
    }

    #[test]
    fn forgotten_instances_are_not_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = sleeper();
        record(dir.path(), child.id());
        forget(dir.path(), child.id());
        assert!(stop_all(dir.path()).is_empty());
        assert!(alive(child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn stat_fields_after_a_name_with_spaces_and_parentheses() {
        let text = "42 (a) b (c)) S 1 40 40 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 9876 1 1";
        let s = parse_stat(text).unwrap();
        assert_eq!(
            s,
            Stat {
                state: 'S',
                group: 40,
                start: 9876
            }
        );
    }
}
