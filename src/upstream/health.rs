//! A server's health: passive (from real requests) and active (from probes).
//!
//! Pure logic, no I/O and no clock: every method that depends on time takes
//! `now`. A [`Health`] starts healthy and is available for new requests unless
//! active probes have marked it down or a passive time-out is running.
//!
//! **Passive rule** (like nginx's `max_fails` / `fail_timeout`, but counting
//! consecutive failures rather than failures within a window):
//! - every failed request adds one to the consecutive-failure count, and a
//!   succeeded request sets it back to 0;
//! - when a failure brings the count to `failures` (or beyond) and no
//!   time-out is running, the server is out for `timeout` from that moment;
//!   failures while the time-out runs (requests already in flight) count but
//!   do not extend it;
//! - the count is *not* reset when the time-out ends: the server is tried
//!   again, and if the next request fails too it is out again at once. Only a
//!   success resets the count;
//! - a success also ends a running time-out early (a request did get an
//!   answer from the server) and clears the time-out record;
//! - `failures == 0` disables passive health: failures are still counted (for
//!   status) but never put the server out. A zero `timeout` likewise never
//!   puts it out.
//!
//! **Active rule**: while up, `fall` consecutive failed probes mark the server
//! down; while down, `rise` consecutive good probes bring it back. A probe
//! result that agrees with the current state resets the opposite streak.
//! `rise` or `fall` of 0 act as 1. Active and passive state are independent:
//! probes do not touch the failure count or time-out, requests do not touch
//! the probe streak.

use std::time::{Duration, Instant};

/// Passive health: `failures` consecutive failed requests put the server out
/// for `timeout`. `failures == 0` disables passive health.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PassiveRules {
    pub failures: u32,
    pub timeout: Duration,
}

/// Active health: consecutive probe results needed to come back (`rise`) or
/// to go down (`fall`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActiveRules {
    pub rise: u32,
    pub fall: u32,
}

/// A server's health as rein tracks it. Starts healthy.
#[derive(Debug, Clone, Default)]
pub struct Health {
    /// Consecutive failed requests since the last success.
    failures: u32,
    /// End of the last passive time-out, until a success clears it (it may be
    /// in the past).
    out_until: Option<Instant>,
    /// Marked down by active probes.
    down: bool,
    /// Consecutive probe results against the current active state.
    streak: u32,
}

/// What a report did to the server's availability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    None,
    WentDown,
    CameUp,
}

impl Health {
    /// A healthy server.
    pub fn new() -> Self {
        Self::default()
    }

    fn passive_out(&self, now: Instant) -> bool {
        self.out_until.is_some_and(|t| now < t)
    }

    /// Usable for new requests at `now`: not marked down by active probes, and
    /// not inside a passive time-out (which ends exactly at [`out_until`](Self::out_until)).
    pub fn is_available(&self, now: Instant) -> bool {
        !self.down && !self.passive_out(now)
    }

    /// Nothing is held against the server: no failure since the last success, no passive time-out
    /// recorded, not marked down. Such a server is available, and a success changes nothing.
    pub fn is_clean(&self) -> bool {
        self.failures == 0 && self.out_until.is_none() && !self.down
    }

    /// A request to this server failed (connect refused/reset/timeout...).
    ///
    /// Returns [`Change::WentDown`] when this failure starts a passive
    /// time-out and the server was available just before; [`Change::None`]
    /// otherwise (including when it starts a time-out on a server that active
    /// probes already hold down).
    pub fn request_failed(&mut self, rules: &PassiveRules, now: Instant) -> Change {
        self.failures = self.failures.saturating_add(1);
        if rules.failures == 0 || self.failures < rules.failures || self.passive_out(now) {
            return Change::None;
        }
        // A time-out too long for the clock is capped at a year.
        let Some(until) = now
            .checked_add(rules.timeout)
            .or_else(|| now.checked_add(Duration::from_secs(365 * 24 * 3600)))
        else {
            return Change::None;
        };
        if until <= now {
            return Change::None;
        }
        let was_available = !self.down;
        self.out_until = Some(until);
        if was_available {
            Change::WentDown
        } else {
            Change::None
        }
    }

    /// A request succeeded: resets the consecutive-failure count and clears
    /// any passive time-out, ending it early if it is still running.
    ///
    /// Returns [`Change::CameUp`] when a passive time-out had been recorded
    /// (running or already expired: there is no `now` here to tell) and
    /// active probes do not hold the server down, i.e. the server has now
    /// proved it recovered from passive failure; [`Change::None`] otherwise.
    pub fn request_succeeded(&mut self) -> Change {
        self.failures = 0;
        if self.out_until.take().is_some() && !self.down {
            Change::CameUp
        } else {
            Change::None
        }
    }

    /// An active probe result. While up, `fall` consecutive failures mark the
    /// server down ([`Change::WentDown`]); while down, `rise` consecutive
    /// successes bring it up ([`Change::CameUp`]).
    ///
    /// The change is that of the active state only: a server that comes up
    /// here may still be inside a passive time-out (see
    /// [`is_available`](Self::is_available)).
    pub fn probe(&mut self, rules: &ActiveRules, ok: bool) -> Change {
        if ok != self.down {
            // Agrees with the current state: the opposite streak is broken.
            self.streak = 0;
            return Change::None;
        }
        self.streak = self.streak.saturating_add(1);
        let needed = if self.down { rules.rise } else { rules.fall }.max(1);
        if self.streak < needed {
            return Change::None;
        }
        self.streak = 0;
        self.down = !self.down;
        if self.down {
            Change::WentDown
        } else {
            Change::CameUp
        }
    }

    /// Active checks were turned off: what they held against the server goes with them, since no probe
    /// would ever bring it back.
    pub fn forget_probes(&mut self) {
        self.down = false;
        self.streak = 0;
    }

    /// When the passive time-out ends (so a waiter can be woken), if one has
    /// been started and not cleared by a success since. The instant may be in
    /// the past: the time-out is running only while `now < out_until`.
    pub fn out_until(&self) -> Option<Instant> {
        self.out_until
    }

    /// For status at `now`: `"unhealthy"` (down by active probes, which takes
    /// precedence), `"failed"` (inside a passive time-out) or `"healthy"`.
    pub fn state_name(&self, now: Instant) -> &'static str {
        if self.down {
            "unhealthy"
        } else if self.passive_out(now) {
            "failed"
        } else {
            "healthy"
        }
    }

    /// Failed requests since the last succeeded one.
    #[cfg(test)]
    pub fn consecutive_failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    fn passive(failures: u32, secs: u64) -> PassiveRules {
        PassiveRules {
            failures,
            timeout: Duration::from_secs(secs),
        }
    }

    #[test]
    fn starts_healthy() {
        let now = Instant::now();
        let h = Health::new();
        assert!(h.is_available(now));
        assert_eq!(h.state_name(now), "healthy");
        assert_eq!(h.consecutive_failures(), 0);
        assert_eq!(h.out_until(), None);
        assert!(Health::default().is_available(now));
    }

    #[test]
    fn passive_goes_out_after_n_failures_and_comes_back() {
        let t0 = Instant::now();
        let rules = passive(3, 10);
        let mut h = Health::new();
        assert_eq!(h.request_failed(&rules, t0), Change::None);
        assert_eq!(h.request_failed(&rules, t0 + SEC), Change::None);
        assert!(h.is_available(t0 + SEC));
        assert_eq!(h.consecutive_failures(), 2);
        assert_eq!(h.request_failed(&rules, t0 + 2 * SEC), Change::WentDown);
        assert_eq!(h.consecutive_failures(), 3);
        assert_eq!(h.out_until(), Some(t0 + 12 * SEC));
        assert!(!h.is_available(t0 + 2 * SEC));
        assert!(!h.is_available(t0 + 12 * SEC - Duration::from_nanos(1)));
        assert_eq!(h.state_name(t0 + 5 * SEC), "failed");

        // In-flight failures during the time-out count, but do not extend it.
        assert_eq!(h.request_failed(&rules, t0 + 5 * SEC), Change::None);
        assert_eq!(h.consecutive_failures(), 4);
        assert_eq!(h.out_until(), Some(t0 + 12 * SEC));

        // Expiry: available again, exactly at the end.
        assert!(h.is_available(t0 + 12 * SEC));
        assert_eq!(h.state_name(t0 + 12 * SEC), "healthy");
        assert_eq!(h.out_until(), Some(t0 + 12 * SEC));
    }

    #[test]
    fn refailure_after_expiry_is_out_at_once() {
        let t0 = Instant::now();
        let rules = passive(3, 10);
        let mut h = Health::new();
        for i in 0..3 {
            h.request_failed(&rules, t0 + i * SEC);
        }
        assert!(!h.is_available(t0 + 5 * SEC));
        let t1 = t0 + 20 * SEC;
        assert!(h.is_available(t1));
        assert_eq!(h.request_failed(&rules, t1), Change::WentDown);
        assert_eq!(h.out_until(), Some(t1 + 10 * SEC));
        assert!(!h.is_available(t1 + 9 * SEC));
        assert!(h.is_available(t1 + 10 * SEC));
        assert_eq!(h.consecutive_failures(), 4);
    }

    #[test]
    fn success_resets_count_and_time_out() {
        let t0 = Instant::now();
        let rules = passive(2, 10);
        let mut h = Health::new();
        h.request_failed(&rules, t0);
        assert_eq!(h.request_succeeded(), Change::None);
        assert_eq!(h.consecutive_failures(), 0);
        // The streak starts over: one failure is not enough.
        assert_eq!(h.request_failed(&rules, t0 + SEC), Change::None);
        assert_eq!(h.request_failed(&rules, t0 + 2 * SEC), Change::WentDown);
        assert!(!h.is_available(t0 + 3 * SEC));
        // A late success during the time-out ends it.
        assert_eq!(h.request_succeeded(), Change::CameUp);
        assert!(h.is_available(t0 + 3 * SEC));
        assert_eq!(h.out_until(), None);
        assert_eq!(h.consecutive_failures(), 0);
        assert_eq!(h.request_succeeded(), Change::None);

        // After a natural expiry, the first success confirms the recovery,
        // and the next failure does not put it out at once.
        h.request_failed(&rules, t0 + 4 * SEC);
        h.request_failed(&rules, t0 + 4 * SEC);
        assert!(!h.is_available(t0 + 5 * SEC));
        assert_eq!(h.request_succeeded(), Change::CameUp);
        assert_eq!(h.request_failed(&rules, t0 + 30 * SEC), Change::None);
        assert!(h.is_available(t0 + 30 * SEC));
    }

    #[test]
    fn one_failure_rule() {
        let t0 = Instant::now();
        let rules = passive(1, 5);
        let mut h = Health::new();
        assert_eq!(h.request_failed(&rules, t0), Change::WentDown);
        assert_eq!(h.out_until(), Some(t0 + 5 * SEC));
        assert_eq!(h.request_failed(&rules, t0 + 5 * SEC), Change::WentDown);
        assert_eq!(h.out_until(), Some(t0 + 10 * SEC));
    }

    #[test]
    fn failures_zero_disables_passive() {
        let t0 = Instant::now();
        let rules = passive(0, 10);
        let mut h = Health::new();
        for i in 0..100 {
            assert_eq!(h.request_failed(&rules, t0 + i * SEC), Change::None);
        }
        assert!(h.is_available(t0 + 100 * SEC));
        assert_eq!(h.out_until(), None);
        assert_eq!(h.state_name(t0), "healthy");
        assert_eq!(h.consecutive_failures(), 100);
    }

    #[test]
    fn zero_or_huge_timeout() {
        let t0 = Instant::now();
        let mut h = Health::new();
        assert_eq!(h.request_failed(&passive(1, 0), t0), Change::None);
        assert!(h.is_available(t0));
        assert_eq!(h.out_until(), None);
        let huge = PassiveRules {
            failures: 1,
            timeout: Duration::MAX,
        };
        assert_eq!(h.request_failed(&huge, t0), Change::WentDown);
        assert!(!h.is_available(t0 + 1000 * SEC));
    }

    #[test]
    fn active_fall_and_rise() {
        let rules = ActiveRules { rise: 2, fall: 3 };
        let now = Instant::now();
        let mut h = Health::new();
        assert_eq!(h.probe(&rules, false), Change::None);
        assert_eq!(h.probe(&rules, false), Change::None);
        assert!(h.is_available(now));
        assert_eq!(h.probe(&rules, false), Change::WentDown);
        assert!(!h.is_available(now));
        assert_eq!(h.state_name(now), "unhealthy");
        // More failures while down change nothing.
        assert_eq!(h.probe(&rules, false), Change::None);
        assert_eq!(h.probe(&rules, true), Change::None);
        assert!(!h.is_available(now));
        assert_eq!(h.probe(&rules, true), Change::CameUp);
        assert!(h.is_available(now));
        assert_eq!(h.state_name(now), "healthy");
        assert_eq!(h.probe(&rules, true), Change::None);
    }

    #[test]
    fn interleaved_results_reset_streaks() {
        let rules = ActiveRules { rise: 2, fall: 2 };
        let now = Instant::now();
        let mut h = Health::new();
        // f s f s ... never two failures in a row: stays up.
        for _ in 0..10 {
            assert_eq!(h.probe(&rules, false), Change::None);
            assert_eq!(h.probe(&rules, true), Change::None);
        }
        assert!(h.is_available(now));
        assert_eq!(h.probe(&rules, false), Change::None);
        assert_eq!(h.probe(&rules, false), Change::WentDown);
        // s f s f ... never two successes in a row: stays down.
        for _ in 0..10 {
            assert_eq!(h.probe(&rules, true), Change::None);
            assert_eq!(h.probe(&rules, false), Change::None);
        }
        assert!(!h.is_available(now));
        assert_eq!(h.probe(&rules, true), Change::None);
        assert_eq!(h.probe(&rules, true), Change::CameUp);
    }

    #[test]
    fn rise_fall_zero_act_as_one() {
        let rules = ActiveRules { rise: 0, fall: 0 };
        let mut h = Health::new();
        assert_eq!(h.probe(&rules, false), Change::WentDown);
        assert_eq!(h.probe(&rules, true), Change::CameUp);
    }

    #[test]
    fn probe_while_passive_out() {
        let t0 = Instant::now();
        let active = ActiveRules { rise: 1, fall: 1 };
        let mut h = Health::new();
        assert_eq!(h.request_failed(&passive(1, 10), t0), Change::WentDown);
        assert_eq!(h.state_name(t0), "failed");
        // Good probes do not end the passive time-out.
        assert_eq!(h.probe(&active, true), Change::None);
        assert!(!h.is_available(t0 + SEC));
        assert_eq!(h.out_until(), Some(t0 + 10 * SEC));
        // Going down actively while passively out: active wins the name.
        assert_eq!(h.probe(&active, false), Change::WentDown);
        assert_eq!(h.state_name(t0 + SEC), "unhealthy");
        // Passive expiry does not bring it back while actively down.
        assert!(!h.is_available(t0 + 20 * SEC));
        assert_eq!(h.state_name(t0 + 20 * SEC), "unhealthy");
        // Coming up actively: available once the time-out has passed too.
        assert_eq!(h.probe(&active, true), Change::CameUp);
        assert!(!h.is_available(t0 + 5 * SEC));
        assert_eq!(h.state_name(t0 + 5 * SEC), "failed");
        assert!(h.is_available(t0 + 10 * SEC));
        assert_eq!(h.consecutive_failures(), 1);
    }

    #[test]
    fn passive_failure_while_actively_down() {
        let t0 = Instant::now();
        let mut h = Health::new();
        h.probe(&ActiveRules { rise: 1, fall: 1 }, false);
        // Already unavailable: the time-out starts but it is no change.
        assert_eq!(h.request_failed(&passive(1, 10), t0), Change::None);
        assert_eq!(h.out_until(), Some(t0 + 10 * SEC));
        // A success clears it, but the server stays down: no change either.
        assert_eq!(h.request_succeeded(), Change::None);
        assert_eq!(h.out_until(), None);
        assert!(!h.is_available(t0));
    }
}
