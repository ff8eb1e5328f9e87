//! Replacing one instance of [`Machine`] (over its memory limit, or its request limit): a replacement of the
//! same generation starts beside it, is admitted when ready, then the old one drains and stops.

use std::time::Instant;

use super::*;

impl Machine {
    pub(super) fn begin_replace(&mut self, id: InstanceId, now: Instant) {
        if self.shut_down
            || self.reload.is_some()
            || self.errored.is_some()
            || self.replacement.is_some()
            || self.replace_not_before.is_some_and(|t| now < t)
        {
            return;
        }
        let Some(old) = self.instances.get(&id) else {
            return;
        };
        if old.state != InstanceState::Ready {
            return;
        }
        let (generation, restarts) = (old.generation, old.restarts);
        let new = self.spawn(generation, restarts, now);
        self.replacement = Some(Replacement { old: id, new });
    }

    /// The replacement did not become ready: the old instance keeps serving,
    /// and the next replacement waits the back-off.
    pub(super) fn replace_failed(&mut self, why: String, now: Instant) {
        let Some(r) = self.replacement.take() else {
            return;
        };
        self.replace_failures = self.replace_failures.saturating_add(1);
        let delay = self.backoff_after(self.replace_failures).min(MAX_DELAY);
        self.replace_not_before = Some(now + delay);
        self.out.push(Effect::ReplaceDone {
            old: r.old,
            new: r.new,
            ok: false,
            reason: Some(format!("new instance {} {why}", r.new)),
        });
    }

    /// Stops the replacement in flight, if any (not a failure: no back-off).
    pub(super) fn cancel_replacement(&mut self, why: &str) {
        let Some(r) = self.replacement.take() else {
            return;
        };
        if self.state_of(r.new) == Some(InstanceState::Starting) {
            self.stop(r.new);
        }
        self.out.push(Effect::ReplaceDone {
            old: r.old,
            new: r.new,
            ok: false,
            reason: Some(format!("cancelled: {why}")),
        });
    }

    pub(super) fn is_replacement(&self, id: InstanceId) -> bool {
        self.replacement.is_some_and(|r| r.new == id)
    }

    /// Started beside the counted instances: a reload candidate or a replacement.
    pub(super) fn is_extra(&self, id: InstanceId) -> bool {
        self.is_candidate(id) || self.is_replacement(id)
    }
}
