//! Failures of [`Machine`]'s instances: respawn with back-off (no sooner than `min_restart_interval` after
//! the last start, doubling delays after repeated crashes), the errored state after too many (still retried,
//! every `backoff_max`), and the fresh count after a stable run.

use std::time::{Duration, Instant};

use super::*;

impl Machine {
    pub(super) fn on_respawn_due(&mut self, now: Instant) {
        let (due, later): (Vec<Respawn>, Vec<Respawn>) =
            self.respawns.iter().partition(|r| r.due <= now);
        self.respawns = later;
        for r in due {
            self.spawn(self.generation, r.restarts, now);
        }
        if let Some(next) = self.respawns.iter().map(|r| r.due).min() {
            self.out.push(Effect::ArmRespawn { after: next - now });
        }
    }

    pub(super) fn on_failure(&mut self, inst: &Instance, why: String, now: Instant) {
        if self.shut_down {
            return;
        }
        let up = inst.started.map(|s| now.saturating_duration_since(s));
        if up.is_some_and(|up| up >= self.policy.stable_after) {
            self.failures = 0; // a stable run: this crash starts a fresh count
        } else {
            self.failures = self.failures.saturating_add(1);
        }
        let since_start = now.saturating_duration_since(inst.spawned_at);
        let min_gap = self.policy.min_restart_interval.saturating_sub(since_start);
        let mut delay = min_gap.max(self.backoff());
        if self.failures >= self.policy.max_failures {
            // Errored, but still retried, at the slowest pace: a cause outside the app (a mount, a database,
            // a file not there yet) heals without anyone asking. The reason always names the latest failure.
            let reason = format!("{} consecutive failures, last: {why}", self.failures);
            if self.errored.replace(reason.clone()).is_none() {
                self.out.push(Effect::Errored { reason });
            }
            delay = delay.max(self.policy.backoff_max);
        }
        if self.counted() >= self.policy.processes {
            return; // the slot is already filled (a replacement took it over)
        }
        self.schedule_respawn(delay, inst.restarts.saturating_add(1), now);
    }

    /// 0 after a stable run, then 1 s, 2 s, 4 s, … capped at `backoff_max`.
    pub(super) fn backoff(&self) -> Duration {
        self.backoff_after(self.failures)
    }

    pub(super) fn backoff_after(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let factor = 1u32.checked_shl(failures - 1).unwrap_or(u32::MAX);
        BACKOFF_BASE
            .saturating_mul(factor)
            .min(self.policy.backoff_max)
    }

    pub(super) fn schedule_respawn(&mut self, delay: Duration, restarts: u32, now: Instant) {
        if delay.is_zero() {
            self.spawn(self.generation, restarts, now);
            return;
        }
        let delay = delay.min(MAX_DELAY);
        let due = now + delay;
        let earliest = self.respawns.iter().map(|r| r.due).min();
        self.respawns.push(Respawn { due, restarts });
        if earliest.is_none_or(|e| due < e) {
            self.out.push(Effect::ArmRespawn { after: delay });
        }
    }

    /// Someone asked (a reload, a resize): the errored app's slow retries are dropped for a start now, with a
    /// fresh count. The caller fills the slots.
    pub(super) fn clear_errored(&mut self) {
        if self.errored.take().is_some() {
            self.failures = 0;
            self.respawns.clear();
        }
    }
}
