//! When to renew, and how long to wait after a failure: pure arithmetic on seconds since the epoch.

use std::time::Duration;

/// The renewal window when `renew_before` is not given is a third of the lifetime, but never more than this.
const DEFAULT_WINDOW_MAX: i64 = 30 * 86_400;

/// The first retry after a failure; each further failure doubles it.
const FIRST_RETRY: i64 = 60;

/// The longest wait between two attempts after failures.
const LONGEST_RETRY: i64 = 6 * 3600;

/// When a certificate valid from `not_before` to `not_after` is to be renewed: `renew_before` ahead of its
/// expiry, or by default a third of its lifetime (at most 30 days) ahead. Never before half its lifetime, so
/// a window longer than the CA's lifetimes does not renew again the moment a certificate arrives.
pub fn renewal_due(not_before: i64, not_after: i64, renew_before: Option<Duration>) -> i64 {
    let lifetime = (not_after - not_before).max(0);
    let window = match renew_before {
        Some(w) => i64::try_from(w.as_secs()).unwrap_or(i64::MAX),
        None => (lifetime / 3).min(DEFAULT_WINDOW_MAX),
    };
    let window = window.min(lifetime / 2);
    not_after - window
}

/// How long to wait after the `failures`-th failure in a row (1 for the first).
pub fn retry_after(failures: u32) -> i64 {
    let doublings = failures.saturating_sub(1).min(20);
    (FIRST_RETRY << doublings).min(LONGEST_RETRY)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400;

    #[test]
    fn default_window_is_a_third_at_most_thirty_days() {
        // Let's Encrypt's 90 days: 30 days ahead.
        assert_eq!(renewal_due(0, 90 * DAY, None), 60 * DAY);
        // Six days: two ahead.
        assert_eq!(renewal_due(0, 6 * DAY, None), 4 * DAY);
        // A year: still 30 days ahead.
        assert_eq!(renewal_due(0, 365 * DAY, None), 335 * DAY);
    }

    #[test]
    fn configured_window_is_kept_within_half_the_lifetime() {
        let ten_days = Some(Duration::from_secs(10 * DAY as u64));
        assert_eq!(renewal_due(0, 90 * DAY, ten_days), 80 * DAY);
        let long = Some(Duration::from_secs(400 * DAY as u64));
        assert_eq!(renewal_due(0, 90 * DAY, long), 45 * DAY);
    }

    #[test]
    fn retries_double_from_a_minute_to_six_hours() {
        assert_eq!(retry_after(1), 60);
        assert_eq!(retry_after(2), 120);
        assert_eq!(retry_after(4), 480);
        assert_eq!(retry_after(9), 15_360);
        assert_eq!(retry_after(10), 6 * 3600);
        assert_eq!(retry_after(u32::MAX), 6 * 3600);
    }
}
