//! Admission to an upstream's servers: a slot on a server for a request, now or as soon as one can take it,
//! behind one [`Admission::acquire`]. It owns everything waiting requests need: the line of requests waiting
//! for their first server ([`super::line`]), the count of every request waiting (first or retry), and the
//! signals that wake them.
//!
//! A request waits up to its upstream's `queue_timeout` (and, when retrying, to the end of its time budget),
//! in line: a newcomer queues behind requests already waiting instead of taking the slot one of them was
//! woken for. What may let a waiting request in wakes it, and no wake-up can be lost:
//! - a freed slot marks a wake-up on one ticket in line ([`super::line`]), kept until taken up; and tells
//!   every retrying request (whose excluded servers make it unlike the others), each of which registered
//!   before its last look;
//! - a change of servers (members, an errored application, a server back from a failure) tells every
//!   waiting request, each registered before its last look;
//! - a server out on a passive time-out is looked at again when it comes back, by the clock.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::Notify;

use super::line::{InLine, Line};
use super::{ServerState, Slot, Upstream};

pub(crate) struct Admission {
    /// Requests waiting for their first server.
    line: Line,
    /// Requests waiting for a server, first or retry: a freed slot wakes someone only if there is one.
    waiting: AtomicU32,
    /// A slot was freed: wakes every request waiting for a server to retry on.
    retrying: Notify,
    /// A server may have become available (members changed, a server came back), or an application errored.
    changed: Notify,
}

/// What a request waits for: the moment it may wait until and the servers that already failed it.
pub(crate) struct Wanted<'a> {
    pub(crate) client: Option<IpAddr>,
    /// Servers this request already failed on: not candidates.
    pub(crate) excluded: &'a [Arc<ServerState>],
    /// The end of a retrying request's time budget, if sooner than the queue timeout.
    pub(crate) limit: Option<tokio::time::Instant>,
}

impl Admission {
    /// With one lane of the line per `lanes` worker threads.
    pub(super) fn new(lanes: usize) -> Admission {
        Admission {
            line: Line::new(lanes),
            waiting: AtomicU32::new(0),
            retrying: Notify::new(),
            changed: Notify::new(),
        }
    }

    /// Requests waiting for their first server now.
    pub(crate) fn queued(&self) -> u32 {
        self.line.queued()
    }

    /// Counts a slot as held on the calling thread's lane, for [`Admission::release`].
    pub(super) fn hold(&self) -> usize {
        self.line.hold()
    }

    /// A slot held on `lane` was freed (its `active` count already lowered): one request in line may go
    /// (preferably on this thread: waking them all for one slot would cost a pick per waiter per request),
    /// and every retry. Nobody waiting, nothing to wake: a waiter counts itself before it looks for a server,
    /// so either it sees this slot free or this sees it waiting (both sides are sequentially consistent).
    pub(super) fn release(&self, lane: usize) {
        let waiting = self.waiting.load(Ordering::SeqCst) > 0;
        self.line.release(lane, waiting);
        if waiting {
            self.retrying.notify_waiters();
        }
    }

    /// A server may have become available, or the upstream may have none left to wait for: every waiting
    /// request looks again.
    pub(super) fn changed(&self) {
        self.changed.notify_waiters();
    }

    /// A slot on a server of `upstream`: one available now, or the first to become available within its
    /// `queue_timeout` (and before `wanted.limit`). `None` when none did, or none is left to wait for:
    /// fixed servers that all failed this request, an errored application without an instance.
    pub(crate) async fn acquire(
        &self,
        upstream: &Arc<Upstream>,
        wanted: Wanted<'_>,
    ) -> Option<Slot> {
        if upstream.exhausted(wanted.excluded) {
            return None;
        }
        let first_try = wanted.excluded.is_empty();
        // The common case: nobody in line and a server free. Nothing to register for, no clock to read.
        let behind = first_try && self.queued() > 0;
        if !behind && let Some(found) = upstream.pick(wanted.client, wanted.excluded) {
            return Some(found);
        }
        let _waiting = Waiting::count(self);
        let queued_until = tokio::time::Instant::now() + upstream.conf.queue_timeout;
        let deadline = wanted.limit.map_or(queued_until, |l| l.min(queued_until));
        // A request waiting for its first server is in line from before its next look, so that a slot freed
        // after that look marks its ticket or another's. A newcomer does not take the slot a waiting request
        // was woken for: behind others, it waits for its own wake-up before it looks.
        let in_line = first_try.then(|| self.line.join());
        let mut look = !behind;
        loop {
            let step = self.look_or_wait(upstream, &wanted, deadline, in_line.as_ref(), look);
            match step.await {
                Step::Found(slot) => {
                    if let Some(in_line) = in_line {
                        // A wake-up marked since it was taken up goes on with the ticket's drop.
                        drop(in_line);
                        self.pass_on_room(upstream);
                    }
                    return Some(slot);
                }
                Step::None => return None,
                Step::Again => look = true,
            }
        }
    }

    /// One look for a server (unless `look` is false: a newcomer behind others waits first), then, if none
    /// was found, the wait until something may have changed, at most until `deadline`.
    async fn look_or_wait(
        &self,
        upstream: &Arc<Upstream>,
        wanted: &Wanted<'_>,
        deadline: tokio::time::Instant,
        in_line: Option<&InLine<'_>>,
        look: bool,
    ) -> Step {
        // Registered before looking, so a change between the look and the wait is not missed.
        let mut changed = std::pin::pin!(self.changed.notified());
        let mut retrying = std::pin::pin!(self.retrying.notified());
        let mut told = std::pin::pin!(in_line.map(InLine::told));
        changed.as_mut().enable();
        retrying.as_mut().enable();
        if let Some(told) = told.as_mut().as_pin_mut() {
            told.enable();
        }
        // A wake-up marked on its ticket is taken up by this look: it is no longer on its way.
        if let Some(in_line) = in_line {
            in_line.take_wake_up();
        }
        if look && let Some(found) = upstream.pick(wanted.client, wanted.excluded) {
            return Step::Found(found);
        }
        if upstream.exhausted(wanted.excluded) {
            return Step::None;
        }
        if tokio::time::Instant::now() >= deadline {
            return Step::None;
        }
        let wake = upstream
            .next_return()
            .map(tokio::time::Instant::from_std)
            .map_or(deadline, |t| t.min(deadline));
        let told = async {
            match told.as_mut().as_pin_mut() {
                Some(told) => told.await,
                None => std::future::pending().await,
            }
        };
        // A request in line is woken through its ticket; a retry by any freed slot.
        let retrying = async {
            match in_line {
                Some(_) => std::future::pending().await,
                None => retrying.as_mut().await,
            }
        };
        tokio::select! {
            _ = changed.as_mut() => {}
            _ = told => {}
            _ = retrying => {}
            _ = tokio::time::sleep_until(wake) => {}
        }
        Step::Again
    }

    /// Called by a request that left the line with a slot: if more slots are free than wake-ups are on their
    /// way to, and requests are still in line, wakes one more.
    ///
    /// Each freed slot wakes one request, but a wake-up can be spent without the slot being taken: the woken
    /// request can look just before a slot frees, while another takes the one it was woken for. Under load
    /// with two worker threads (a WSGI app, `threads: 1`, behind 100 connections) that left one slot free for
    /// seconds while one thread's lane was never woken, at half the rate; a test with two threads playing
    /// workers (`slots_tests::every_lane_is_served_while_both_wait`) starved one lane in two runs out of eight.
    /// Counting the wake-ups on their way keeps this from waking a request for a slot another is already
    /// going to: that extra request would race for it, and the loser would go back to the end of its line
    /// (PHP-FPM behind rein: p99 12–15 → 21–25 ms when every free slot woke one more).
    pub(super) fn pass_on_room(&self, upstream: &Upstream) {
        if self.line.queued() > 0 && upstream.free_slots() > self.line.pending() {
            self.line.wake_for_room();
        }
    }

    #[cfg(test)]
    pub(super) fn line(&self) -> &Line {
        &self.line
    }

    #[cfg(test)]
    pub(super) fn count_waiting(&self) -> impl Drop + '_ {
        Waiting::count(self)
    }
}

/// What one look (and the wait after it) came to.
enum Step {
    Found(Slot),
    /// Nothing to wait for any more, or the wait is over.
    None,
    Again,
}

/// A request counted as waiting for a server, until dropped.
struct Waiting<'a>(&'a Admission);

impl<'a> Waiting<'a> {
    /// Counted from before its first look that may fail, so that no slot freed meanwhile goes without a
    /// wake-up.
    fn count(admission: &'a Admission) -> Self {
        admission.waiting.fetch_add(1, Ordering::SeqCst);
        Waiting(admission)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}
