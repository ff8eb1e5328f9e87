//! A running application's upkeep, once a second: an instance over its memory or request limit replaced, and
//! the instances scaled between `spare` and `max` as traffic asks.

use std::time::Instant;

use super::super::conf::Scale;
use super::super::machine::{Event, InstanceState, InstanceStatus};
use super::Runner;
use crate::stats::counters::RestartCause;

impl Runner {
    /// Once a second: replaces an instance over its memory or request limit (that instance only, by a
    /// replacement started beside it), and scales between `spare` and `max`.
    pub(super) fn tick(&mut self) {
        let now = Instant::now();
        let status = self.machine.status(now);
        if status.reloading || status.errored.is_some() {
            return;
        }
        let ready: Vec<&InstanceStatus> = status
            .instances
            .iter()
            .filter(|i| i.state == InstanceState::Ready)
            .collect();
        for i in &ready {
            let rss = self.conf.memory_limit.and_then(|limit| {
                i.pid
                    .and_then(super::super::rss_bytes)
                    .filter(|r| *r > limit)
                    .map(|r| (r, limit))
            });
            let requests = self.conf.max_requests.and_then(|limit| {
                self.instances
                    .get(&i.id)
                    .map(|inst| (inst.server.requests(), limit))
                    .filter(|(n, limit)| n >= limit)
            });
            if rss.is_none() && requests.is_none() {
                continue;
            }
            // The machine takes one replacement at a time (and none during its back-off): only a Replace it
            // acts on is logged, so an instance waiting its turn is not reported every second.
            let effects = self.machine.handle(Event::Replace { id: i.id }, now);
            if effects.is_empty() {
                continue;
            }
            let cause = match rss {
                Some(_) => RestartCause::MemoryLimit,
                None => RestartCause::RequestLimit,
            };
            self.stats.restarted(cause);
            if let Some((rss, limit)) = rss {
                tracing::warn!(app = %self.name, instance = i.id, pid = i.pid, rss, limit, "memory limit exceeded: replacing the instance");
            } else if let Some((requests, limit)) = requests {
                tracing::info!(app = %self.name, instance = i.id, pid = i.pid, requests, limit, "request limit reached: replacing the instance");
            }
            self.carry_out(effects);
            return;
        }
        if let Some(scale) = self.conf.scale {
            self.scale(scale, &ready, now);
        }
    }

    /// One step at a time: up while every ready instance has a request in flight; down when the newest ready
    /// instance (the one a resize retires) has served nothing for `idle_timeout`, as Unit reaps an idle
    /// process above `spare`. Requests go to the oldest instances first ([`upstream_conf`]'s packing), so
    /// under light traffic the newest fall idle even while the app as a whole is never idle.
    ///
    /// [`upstream_conf`]: super::super::upstream_conf
    fn scale(&mut self, scale: Scale, ready: &[&InstanceStatus], now: Instant) {
        let mut all_busy = !ready.is_empty();
        for status in ready {
            let Some(instance) = self.instances.get_mut(&status.id) else {
                continue;
            };
            let (active, requests) = (instance.server.active(), instance.server.requests());
            if active > 0 || requests != instance.requests_seen {
                instance.busy_at = now;
                instance.requests_seen = requests;
            }
            all_busy &= active > 0;
        }
        let newest_idle = ready
            .iter()
            .map(|status| status.id)
            .max()
            .and_then(|id| self.instances.get(&id))
            .is_some_and(|i| now.duration_since(i.busy_at) >= scale.idle_timeout);
        let wanted = if all_busy && self.target < scale.max {
            self.target + 1
        } else if self.target > scale.spare
            && newest_idle
            && now.duration_since(self.scaled_at) >= scale.idle_timeout
        {
            self.target - 1
        } else {
            return;
        };
        tracing::info!(app = %self.name, from = self.target, to = wanted, "scaling");
        self.target = wanted;
        self.scaled_at = now;
        let effects = self
            .machine
            .handle(Event::Resize { processes: wanted }, now);
        self.carry_out(effects);
    }
}
