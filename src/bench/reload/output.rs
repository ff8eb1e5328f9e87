//! The reload and crash reports as people read them (`human`) and as machines do (`json`).

use super::*;

/// The report as aligned lines, ending with a newline.
pub fn human(r: &Report) -> String {
    use crate::bench::output::micros as us;
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut line = |label: &str, value: String| {
        let _ = writeln!(out, "  {label:<13} {value}");
    };
    line("app", format!("{} ({} bench)", r.app, r.bench));
    line(
        "target",
        format!("{} ({} connections)", r.target, r.connections),
    );
    line(
        "duration",
        format!(
            "{:.2}s, {} at {:.3}s",
            r.duration_s, r.bench, r.trigger_at_s
        ),
    );
    line(
        "requests",
        format!("{}  ({:.1} successful/s)", r.requests, r.rps),
    );
    line("failed", crate::bench::output::errors(&r.errors));
    let l = &r.latency_us;
    line(
        "latency",
        format!("p50 {}  p99 {}  max {}", us(l.p50), us(l.p99), us(l.max)),
    );
    line(
        "longest gap",
        format!(
            "{} with no successful response, from {:.3}s",
            us(r.longest_gap_us),
            r.longest_gap_start_s
        ),
    );
    if let Some(o) = &r.reload {
        let generations = match (o.generation_before, o.generation_after) {
            (Some(a), Some(b)) => format!(", generation {a} -> {b}"),
            _ => String::new(),
        };
        line(
            "reload",
            match &o.reason {
                None => format!("ok in {:.3}s{generations}", o.seconds),
                Some(why) => format!("FAILED after {:.3}s{generations}: {why}", o.seconds),
            },
        );
    }
    if let Some(o) = &r.crash {
        let killed = o.killed_pid.map_or_else(
            || "nothing killed".to_owned(),
            |p| format!("killed pid {p}"),
        );
        line(
            "crash",
            match (&o.reason, o.time_to_capacity_s) {
                (None, Some(t)) => format!(
                    "{killed}; {} instances ready again after {t:.3}s",
                    o.ready_before
                ),
                (reason, _) => format!("{killed}; {}", reason.as_deref().unwrap_or("?")),
            },
        );
    }
    line(
        "phases",
        format!(
            "{:>8} {:>7} {:>9} {:>9} {:>9}   {}",
            "requests", "failed", "p50", "p99", "max", "from / for"
        ),
    );
    for (name, p) in [
        ("before", &r.phases.before),
        ("during", &r.phases.during),
        ("after", &r.phases.after),
    ] {
        line(
            &format!("  {name}"),
            format!(
                "{:>8} {:>7} {:>9} {:>9} {:>9}   {:.3}s / {:.3}s",
                p.requests,
                p.failed,
                us(p.p50_us),
                us(p.p99_us),
                us(p.max_us),
                p.start_s,
                p.duration_s
            ),
        );
    }
    out
}

/// The report as one line of JSON.
pub fn json(r: &Report) -> String {
    serde_json::to_string(r).expect("a report always serializes")
}
