//! How variable values are spelled: protocol versions, durations, CLF timestamps, request ids, and values
//! escaped for a log line.
//!
//! Kept apart from the template machinery because these are pure formatting with no Unit-specific parsing.

use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::Version;

pub(super) fn version_name(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

/// `1.234`: seconds with milliseconds, as Unit formats `$request_time`.
pub(super) fn seconds_millis(d: Duration) -> String {
    format!("{}.{:03}", d.as_secs(), d.subsec_millis())
}

/// 32 hex digits identifying request number `id`: the same for every use within one request, different across
/// requests and restarts. std's `RandomState` is seeded from the OS once per process, which is enough for an
/// identifier that only has to be unique, not secret.
pub(super) fn request_id(id: u64) -> String {
    static KEY: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    let key = KEY.get_or_init(Default::default);
    let mut out = String::with_capacity(32);
    for half in 0..2u8 {
        let mut h = key.build_hasher();
        h.write_u64(id);
        h.write_u8(half);
        let _ = write!(out, "{:016x}", h.finish());
    }
    out
}

/// Common Log Format time in UTC: `22/Nov/2026:06:10:28 +0000`.
pub(super) fn clf_time(t: SystemTime) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let (days, day_secs) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{day:02}/{}/{year}:{:02}:{:02}:{:02} +0000",
        MONTHS[(month - 1) as usize],
        day_secs / 3600,
        day_secs / 60 % 60,
        day_secs % 60
    )
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31); Howard Hinnant's `civil_from_days`.
pub(crate) fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Appends `value` escaped as nginx's access log escapes it: `"`, `\`, control characters and every byte
/// outside printable ASCII become `\xHH`, so a value can neither end the line (`%0a` in a path) nor the
/// quoted field it sits in, nor carry terminal escapes to whoever reads the log.
pub(super) fn log_escape_into(out: &mut String, value: &str) {
    for b in value.bytes() {
        if matches!(b, b' '..=b'~') && b != b'"' && b != b'\\' {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "\\x{b:02X}");
        }
    }
}

/// Appends `value` as a JSON string, quotes included (RFC 8259 §7): `"`, `\` and control characters escaped,
/// the rest as it is, so a value never ends the line or the string it sits in.
pub(crate) fn json_string_into(out: &mut String, value: &str) {
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
