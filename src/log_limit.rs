//! Rate-limited warnings: a failure that repeats in a tight loop (accept without descriptors, a full disk) is
//! logged the first time, then at most once per [`INTERVAL`] with the number of repeats left unsaid.
//!
//! Without it, one client holding the last descriptor made an accept loop write hundreds of megabytes of the
//! same line in seconds. Each call site has its own limit ([`warn_limited!`] declares it in place), so one
//! noisy site never hides another's first warning.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The least time between two lines from one call site.
pub(crate) const INTERVAL: Duration = Duration::from_secs(10);

/// One call site's limit: when it last logged, and how many occurrences it has swallowed since.
pub(crate) struct LogLimit {
    state: Mutex<Option<(Instant, u64)>>,
}

impl LogLimit {
    pub(crate) const fn new() -> LogLimit {
        LogLimit {
            state: Mutex::new(None),
        }
    }

    /// `Some(n)` when this occurrence should be logged, `n` being the occurrences swallowed since the last
    /// line; `None` when it is to be counted and swallowed.
    pub(crate) fn admit(&self) -> Option<u64> {
        self.admit_at(Instant::now())
    }

    fn admit_at(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match state.as_mut() {
            Some((last, swallowed)) if now.saturating_duration_since(*last) < INTERVAL => {
                *swallowed += 1;
                None
            }
            Some((last, swallowed)) => {
                *last = now;
                Some(std::mem::take(swallowed))
            }
            None => {
                *state = Some((now, 0));
                Some(0)
            }
        }
    }
}

/// `tracing::warn!` limited to one line per [`INTERVAL`] at this call site; a line after a quiet stretch
/// carries `repeated`, the occurrences not logged since the previous one.
macro_rules! warn_limited {
    ($($arg:tt)+) => {{
        static LIMIT: $crate::log_limit::LogLimit = $crate::log_limit::LogLimit::new();
        if let Some(repeated) = LIMIT.admit() {
            tracing::warn!(repeated, $($arg)+);
        }
    }};
}
pub(crate) use warn_limited;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_the_first_then_once_per_interval_with_the_count() {
        let limit = LogLimit::new();
        let t0 = Instant::now();
        assert_eq!(limit.admit_at(t0), Some(0));
        for i in 1..=1000 {
            assert_eq!(limit.admit_at(t0 + Duration::from_millis(i)), None);
        }
        assert_eq!(limit.admit_at(t0 + INTERVAL), Some(1000));
        assert_eq!(limit.admit_at(t0 + INTERVAL), None);
        assert_eq!(limit.admit_at(t0 + INTERVAL * 3), Some(1));
    }
}
