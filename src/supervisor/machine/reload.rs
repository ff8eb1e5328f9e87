//! The rolling reload of [`Machine`]: candidates of the new generation started beside the old instances
//! (one at a time, in batches, or all at once for `parallel`), admitted when ready, each retiring an old one;
//! abandoned when a candidate fails. The model is in the parent module's header.

use std::time::Instant;

use super::*;

impl Machine {
    pub(super) fn begin_reload(&mut self, now: Instant) {
        if self.shut_down {
            return;
        }
        if self.reload.is_some() {
            self.reload_queued = true;
            return;
        }
        self.clear_errored();
        // The reload replaces every instance anyway.
        self.cancel_replacement("a reload started");
        self.last_generation += 1;
        self.reload = Some(Reload {
            generation: self.last_generation,
            started: now,
            strategy: self.policy.reload,
            candidates: BTreeSet::new(),
        });
        self.advance_reload(now);
    }

    /// Finishes the reload if the new generation is fully serving, otherwise
    /// starts (or, after a resize down, stops) candidates as the strategy says.
    pub(super) fn advance_reload(&mut self, now: Instant) {
        let Some(r) = &self.reload else { return };
        let target = r.generation;
        let strategy = r.strategy;
        let in_flight = r.candidates.len();
        let new_ready = self
            .instances
            .values()
            .filter(|i| i.state == InstanceState::Ready && i.generation == target)
            .count();
        // New instances still needed beside those already serving.
        let needed = self.policy.processes.saturating_sub(new_ready);
        if strategy == ReloadStrategy::Parallel {
            self.resize_candidates(needed, target, now);
            let r = self.reload.as_ref().expect("checked");
            if r.candidates.iter().all(|c| self.instances[c].held) {
                self.switch(now);
            }
            return;
        }
        let old_left = self
            .instances
            .values()
            .any(|i| i.live() && i.generation != target);
        if in_flight == 0 && self.respawns.is_empty() && !old_left && needed == 0 {
            self.finish_reload(now);
        } else {
            // At least one candidate, so the reload always moves on.
            let ReloadStrategy::Rolling { batch } = strategy else {
                unreachable!("parallel handled above")
            };
            self.resize_candidates(needed.min(batch).max(1), target, now);
        }
    }

    /// Starts candidates, or stops the newest ones (not yet ready first), until
    /// `want` are in flight.
    pub(super) fn resize_candidates(&mut self, want: usize, target: u64, now: Instant) {
        loop {
            let candidates = &self.reload.as_ref().expect("reloading").candidates;
            if candidates.len() < want {
                let id = self.spawn(target, 0, now);
                let r = self.reload.as_mut().expect("reloading");
                r.candidates.insert(id);
            } else if candidates.len() > want {
                let surplus = candidates
                    .iter()
                    .max_by_key(|c| (!self.instances[*c].held, **c))
                    .copied()
                    .expect("not empty");
                self.reload
                    .as_mut()
                    .expect("reloading")
                    .candidates
                    .remove(&surplus);
                self.stop(surplus);
            } else {
                return;
            }
        }
    }

    /// The parallel reload's switch: every held candidate admitted, then
    /// every old instance retired.
    pub(super) fn switch(&mut self, now: Instant) {
        let candidates = std::mem::take(&mut self.reload.as_mut().expect("reloading").candidates);
        for id in candidates {
            let inst = self.instances.get_mut(&id).expect("candidates exist");
            inst.held = false;
            inst.state = InstanceState::Ready;
            self.out.push(Effect::Admit { id });
        }
        self.trim();
        self.finish_reload(now);
    }

    pub(super) fn finish_reload(&mut self, now: Instant) {
        let r = self.reload.take().expect("reloading");
        self.generation = r.generation;
        self.errored = None;
        self.failures = 0;
        self.replace_failures = 0;
        self.replace_not_before = None;
        self.report_reload(r, true, None, now);
        self.after_reload(now);
    }

    pub(super) fn abandon_reload(&mut self, reason: String, now: Instant) {
        let Some(r) = self.reload.take() else { return };
        for &c in &r.candidates {
            if self.state_of(c) == Some(InstanceState::Starting) {
                self.stop(c);
            }
        }
        self.report_reload(r, false, Some(reason), now);
        self.after_reload(now);
    }

    pub(super) fn report_reload(
        &mut self,
        r: Reload,
        ok: bool,
        reason: Option<String>,
        now: Instant,
    ) {
        let report = ReloadReport {
            ok,
            generation: r.generation,
            took: now.saturating_duration_since(r.started),
            reason,
        };
        self.last_reload = Some(report.clone());
        self.out.push(Effect::ReloadDone(report));
    }

    pub(super) fn after_reload(&mut self, now: Instant) {
        self.fill(now);
        if std::mem::take(&mut self.reload_queued) {
            self.begin_reload(now);
        }
    }

    pub(super) fn is_candidate(&self, id: InstanceId) -> bool {
        self.reload
            .as_ref()
            .is_some_and(|r| r.candidates.contains(&id))
    }
}
