//! What `/proc` says of a process: resident memory and CPU time (an application's instance, or rein itself),
//! and for rein its threads, open descriptors and start time.

use std::sync::OnceLock;

/// A process's resident memory and CPU time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Usage {
    pub rss_bytes: u64,
    /// User and system time.
    pub cpu_seconds: f64,
    pub threads: u64,
    /// When it started, in clock ticks after boot.
    start_ticks: u64,
}

/// rein's own process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct OwnProcess {
    pub usage: Usage,
    pub open_fds: u64,
    pub max_fds: Option<u64>,
    /// When it started, in seconds since the epoch.
    pub start_time: Option<f64>,
}

/// The usage of process `pid`; `None` once it is gone.
pub(crate) fn usage(pid: u32) -> Option<Usage> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The usage of an application's instance whose process is `pid`: that process's, or, when it is rein's exec
/// shim staying in front of an isolated app (a user or PID namespace: see `supervisor::isolation`), that of the
/// processes below it that are not rein's (the app and what it started), summed, so that the instance's memory
/// and its `memory_limit` are the app's. `None` once it is gone.
pub(crate) fn instance_usage(pid: u32) -> Option<Usage> {
    let own = usage(pid)?;
    if !is_rein(pid) {
        return Some(own);
    }
    let mut sum = Usage {
        start_ticks: own.start_ticks,
        ..Usage::default()
    };
    let mut below = children(pid);
    while let Some(child) = below.pop() {
        below.extend(children(child));
        if is_rein(child) {
            continue;
        }
        if let Some(u) = usage(child) {
            sum.rss_bytes += u.rss_bytes;
            sum.cpu_seconds += u.cpu_seconds;
            sum.threads += u.threads;
        }
    }
    Some(sum)
}

/// Whether process `pid` runs rein's own binary (the exec shim, or its init in a PID namespace).
fn is_rein(pid: u32) -> bool {
    static OWN: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    let own = OWN.get_or_init(|| std::fs::read_link("/proc/self/exe").ok());
    own.as_ref().is_some_and(|own| {
        std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| &exe == own)
    })
}

/// The children of process `pid`, from each of its threads' `children` file.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// rein's own usage, descriptors and start time.
pub(crate) fn own() -> OwnProcess {
    let usage = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| parse_stat(&s))
        .unwrap_or_default();
    let open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
    let boot = boot_time();
    OwnProcess {
        usage,
        open_fds,
        max_fds: max_fds(),
        start_time: boot.map(|b| b + usage.start_ticks as f64 / ticks_per_second()),
    }
}

/// Reads `/proc/PID/stat`: the fields after the command name (which may hold spaces and parentheses, so the
/// last `)` ends it). Field numbers as in proc(5): utime 14, stime 15, num_threads 20, starttime 22, rss 24.
fn parse_stat(stat: &str) -> Option<Usage> {
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `fields[0]` is field 3 (state).
    let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
    let ticks = ticks_per_second();
    Some(Usage {
        cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
        threads: field(20)?,
        start_ticks: field(22)?,
        rss_bytes: field(24)?.saturating_mul(page_size()),
    })
}

fn ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    // SAFETY: sysconf reads a constant of the system; no memory is handed over.
    *TICKS.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        n if n > 0 => n as f64,
        _ => 100.0,
    })
}

fn page_size() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    // SAFETY: as above.
    *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as u64,
        _ => 4096,
    })
}

/// The boot time, in seconds since the epoch (`btime` of `/proc/stat`).
fn boot_time() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("btime "))?;
    line[6..].trim().parse().ok()
}

/// The soft limit on open descriptors.
fn max_fds() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given, which lives for the call.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_spaces_and_parentheses_is_skipped() {
        let line = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1234 1000 7 18446744073709551615";
        let u = parse_stat(line).expect("parses");
        assert_eq!(u.threads, 3);
        assert_eq!(u.start_ticks, 1234);
        assert_eq!(u.rss_bytes, 7 * page_size());
        assert!((u.cpu_seconds - 300.0 / ticks_per_second()).abs() < 1e-9);
    }

    #[test]
    fn rein_reads_its_own_process() {
        let own = own();
        assert!(own.usage.rss_bytes > 0 && own.usage.threads >= 1 && own.open_fds > 0);
        assert!(own.start_time.is_some());
    }
}
