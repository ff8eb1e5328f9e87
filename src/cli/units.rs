//! How the CLI's views write durations and sizes, so that `rein status` and `rein top` read the same.

/// `3d 4h`, `5m 12s`, `42s`: the two largest units, as `pm2 ls` shows uptime.
pub(super) fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0) as u64;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// `21.3 MB`: decimal units, one decimal.
pub(super) fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "kB", "MB", "GB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    match unit {
        0 => format!("{n} B"),
        _ => format!("{value:.1} {}", UNITS[unit]),
    }
}

#[cfg(test)]
mod tests {
    use super::{bytes, duration};

    #[test]
    fn durations_and_sizes_read_at_a_glance() {
        assert_eq!(duration(42.9), "42s");
        assert_eq!(duration(125.0), "2m 5s");
        assert_eq!(duration(3.0 * 3600.0 + 61.0), "3h 1m");
        assert_eq!(duration(2.0 * 86_400.0 + 3600.0), "2d 1h");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(52_428_800), "52.4 MB");
        assert_eq!(bytes(1_500_000_000), "1.5 GB");
    }
}
