//! A report for people (aligned lines) or machines (one JSON object), and the live progress line.

use std::fmt::Write as _;
use std::time::Duration;

use super::http::Progress;
use super::report::{Errors, Report};

/// The report as aligned lines, ending with a newline.
pub fn human(r: &Report) -> String {
    let mut out = String::new();
    let mode = match r.rate {
        Some(rate) => format!("{} connections, {rate} requests/s scheduled", r.connections),
        None => format!("{} connections", r.connections),
    };
    let mut line = |label: &str, value: String| {
        let _ = writeln!(out, "  {label:<13} {value}");
    };
    line("target", format!("{} ({mode})", r.target));
    line("duration", format!("{:.2}s", r.duration_s));
    line("requests", r.requests.to_string());
    line("successes", format!("{}  ({:.1}/s)", r.successes, r.rps));
    line("errors", errors(&r.errors));
    let l = &r.latency_us;
    line(
        "latency",
        format!(
            "p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
            micros(l.p50),
            micros(l.p90),
            micros(l.p99),
            micros(l.p99_9),
            micros(l.max)
        ),
    );
    line("read", bytes(r.bytes_read));
    line(
        "longest gap",
        format!(
            "{} with no successful response, from {:.3}s",
            micros(r.longest_gap_us),
            r.longest_gap_start_s
        ),
    );
    out
}

/// The report as one line of JSON.
pub fn json(r: &Report) -> String {
    serde_json::to_string(r).expect("a report always serializes")
}

/// One progress line (no newline): elapsed, requests, rate so far, errors.
pub fn progress(p: &Progress) -> String {
    let secs = p.elapsed.as_secs_f64();
    let rps = if secs > 0.0 {
        p.successes as f64 / secs
    } else {
        0.0
    };
    format!(
        "rein bench: {secs:.1}s  {} requests  {rps:.0}/s  {} errors  {} read",
        p.requests,
        p.errors,
        bytes(p.bytes_read)
    )
}

/// `850µs`, `12.3ms`, `1.50s`.
pub fn micros(us: u64) -> String {
    let d = Duration::from_micros(us);
    if us < 1_000 {
        format!("{us}µs")
    } else if us < 1_000_000 {
        format!("{:.2}ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.2}s", d.as_secs_f64())
    }
}

/// `512 B`, `1.5 KiB`, `3.2 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut x = n as f64 / 1024.0;
    let mut unit = 0;
    while x >= 1024.0 && unit < UNITS.len() - 1 {
        x /= 1024.0;
        unit += 1;
    }
    format!("{x:.1} {}", UNITS[unit])
}

/// `0`, or `12  (reset 10, status 502: 2)`: the total, then each kind that occurred.
pub(super) fn errors(e: &Errors) -> String {
    let mut kinds = Vec::new();
    for (name, n) in [
        ("connect", e.connect),
        ("reset", e.reset),
        ("timeout", e.timeout),
        ("other", e.other),
    ] {
        if n > 0 {
            kinds.push(format!("{name} {n}"));
        }
    }
    for (code, n) in &e.status {
        kinds.push(format!("status {code}: {n}"));
    }
    if kinds.is_empty() {
        "0".to_owned()
    } else {
        format!("{}  ({})", e.total, kinds.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::{Failure, Recorder};

    #[test]
    fn units() {
        assert_eq!(micros(850), "850µs");
        assert_eq!(micros(12_345), "12.35ms");
        assert_eq!(micros(1_500_000), "1.50s");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 * 1024 * 1024), "3.0 MiB");
    }

    #[test]
    fn human_lines_are_aligned_and_name_every_error() {
        let mut rec = Recorder::default();
        rec.response(200, Duration::from_micros(900), 1_000);
        rec.response(503, Duration::from_micros(1_200), 2_000);
        rec.failure(Failure::Reset);
        let text = human(&rec.report(
            "http://127.0.0.1:1/".into(),
            2,
            Some(100.0),
            Duration::from_secs(1),
            2048,
        ));
        for line in text.lines() {
            assert_eq!(line.find(|c: char| c != ' '), Some(2), "{line}");
            assert!(line.len() > 16 && line.as_bytes()[15] == b' ', "{line}");
        }
        assert!(text.contains("2  (reset 1, status 503: 1)"), "{text}");
        assert!(text.contains("100 requests/s scheduled"), "{text}");
        assert!(text.contains("2.0 KiB"), "{text}");
        let one_line = json(&rec.report("t".into(), 1, None, Duration::from_secs(1), 0));
        assert!(!one_line.contains('\n'));
    }
}
