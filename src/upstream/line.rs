//! The line of requests waiting for their first server (every slot taken), kept in one lane per worker
//! thread.
//!
//! A freed slot wakes one request in line. Waking one on the thread that freed the slot spares a wake-up
//! across threads: an eventfd write to the other thread, often asleep, and for a FastCGI connection the move
//! of its socket to that thread's reactor (two `epoll_ctl`). With PHP-FPM behind `max_connections`, about
//! half of all hand-overs crossed threads, at about 9 µs of rein's CPU each (session 6: 53.9 µs per request
//! with two worker threads against 44.5 with one).
//!
//! A thread must not hoard slots while another's requests wait, though. A freed slot goes to another lane
//! when that lane's requests in line, even with this slot, would hold fewer slots each (held by the lane's
//! requests) than this lane's without it; else it stays. Two equally busy threads keep their shares and hand
//! over locally (rein → PHP-FPM at 100 connections: 1 hand-over in 20 crossed threads, against 1 in 2 with a
//! single line); a thread whose line grows draws slots from the other; a lane with nobody
//! in line passes every slot on. Within a lane, requests are woken in the order they came
//! (`Notify` wakes in order).
//!
//! A wake-up can be spent without its slot being taken (the woken request looked just before the slot
//! freed, and another took the one it was woken for). The lanes' rule never hands such a stray slot on by
//! itself, and one worker thread's requests then waited for seconds while the other thread served alone,
//! at half the rate. So the wake-ups on their way are counted ([`Line::pending`]), and a request that
//! leaves the line with a slot wakes one more when more slots are free than that
//! ([`super::Upstream::pass_on_room`]); and a request in line looks again every 100 ms whatever wakes it.

use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::Notify;
use tokio::sync::futures::Notified;

use crate::workers;

/// Requests in line for an upstream's servers, per worker thread.
pub struct Line {
    /// Requests in line, all lanes together.
    queued: AtomicU32,
    /// Wake-ups sent to requests in line that have not yet been taken up (see [`Line::woken`]).
    pending: AtomicU32,
    lanes: Box<[Lane]>,
}

/// One worker thread's share. Aligned to a cache line: each thread writes its own lane's counters at every
/// request, and should not invalidate the other's.
#[repr(align(64))]
struct Lane {
    queued: AtomicU32,
    /// Slots held by requests of this lane.
    held: AtomicU32,
    /// A slot was freed for a request of this lane.
    freed: Notify,
}

/// A request counted in line on its lane, until dropped.
pub struct InLine<'a> {
    line: &'a Line,
    lane: usize,
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        self.line.lanes[self.lane]
            .queued
            .fetch_sub(1, Ordering::SeqCst);
        self.line.queued.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Line {
    /// A line with one lane per worker thread (at least one).
    pub fn new(lanes: usize) -> Line {
        let lane = || Lane {
            queued: AtomicU32::new(0),
            held: AtomicU32::new(0),
            freed: Notify::new(),
        };
        Line {
            queued: AtomicU32::new(0),
            pending: AtomicU32::new(0),
            lanes: (0..lanes.max(1)).map(|_| lane()).collect(),
        }
    }

    /// Requests in line, all lanes together.
    pub fn queued(&self) -> u32 {
        self.queued.load(Ordering::SeqCst)
    }

    /// The calling thread's lane. A line built before the workers started has one lane for all.
    fn here(&self) -> usize {
        workers::current().min(self.lanes.len() - 1)
    }

    /// Resolves when a slot is freed for a request of the calling thread's lane.
    pub fn freed(&self) -> Notified<'_> {
        self.freed_at(self.here())
    }

    #[cfg(test)]
    pub fn freed_at_for_test(&self, lane: usize) -> Notified<'_> {
        self.freed_at(lane)
    }

    #[cfg(test)]
    pub fn join_at_for_test(&self, lane: usize) -> InLine<'_> {
        self.join_at(lane)
    }

    fn freed_at(&self, lane: usize) -> Notified<'_> {
        self.lanes[lane].freed.notified()
    }

    /// Counts the caller in line on its thread's lane, until the guard is dropped.
    pub fn join(&self) -> InLine<'_> {
        self.join_at(self.here())
    }

    fn join_at(&self, lane: usize) -> InLine<'_> {
        self.queued.fetch_add(1, Ordering::SeqCst);
        self.lanes[lane].queued.fetch_add(1, Ordering::SeqCst);
        InLine { line: self, lane }
    }

    /// Counts a slot as held on the calling thread's lane; returns the lane, to [`Line::release`] it on.
    pub fn hold(&self) -> usize {
        let lane = self.here();
        self.lanes[lane].held.fetch_add(1, Ordering::Relaxed);
        lane
    }

    /// A slot held on `lane` was freed: if anyone waits, wakes one request in line, preferably on `lane`.
    pub fn release(&self, lane: usize, anyone_waiting: bool) {
        self.lanes[lane].held.fetch_sub(1, Ordering::Relaxed);
        if anyone_waiting {
            self.wake_from(lane, true);
        }
    }

    /// A request in line was woken by a freed slot and is about to look for it.
    pub fn woken(&self) {
        let _ = self
            .pending
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// Wake-ups sent and not yet taken up: slots that requests are on their way to.
    pub fn pending(&self) -> u32 {
        self.pending.load(Ordering::SeqCst)
    }

    /// A slot is free that no wake-up is on its way for (see [`Upstream::pass_on_room`]): wakes the request
    /// in line of the lane holding the fewest slots per request, this thread's on a tie.
    ///
    /// [`Upstream::pass_on_room`]: super::Upstream::pass_on_room
    pub fn wake_for_room(&self) {
        self.wake_from(self.here(), false);
    }

    /// `freed_here`: the slot was this lane's, so another lane must do better even with it to get it.
    fn wake_from(&self, here: usize, freed_here: bool) {
        // Slots held per request in line, compared crosswise: this lane as it is, another lane as it would be
        // with this slot. The slot stays on this thread unless passing it on still leaves the other lane with
        // fewer slots per request than this one: no slot bounces between two lanes that are about even.
        let mut best: Option<(usize, u64, u64)> = None;
        for (i, lane) in self.lanes.iter().enumerate() {
            let queued = u64::from(lane.queued.load(Ordering::SeqCst));
            if queued == 0 {
                continue;
            }
            let held =
                u64::from(lane.held.load(Ordering::Relaxed)) + u64::from(freed_here && i != here);
            let better = best.is_none_or(|(_, best_held, best_queued)| {
                let (mine, theirs) = (held * best_queued, best_held * queued);
                mine < theirs || (mine == theirs && i == here)
            });
            if better {
                best = Some((i, held, queued));
            }
        }
        match best {
            Some((lane, _, _)) => {
                self.pending.fetch_add(1, Ordering::SeqCst);
                self.lanes[lane].freed.notify_one();
            }
            // Nobody counted in line, yet someone waits: a request between its failed look and joining the
            // line, on a lane unknown. A permit on every lane reaches it; elsewhere it costs one look.
            None => self.lanes.iter().for_each(|lane| lane.freed.notify_one()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use futures_util::FutureExt;

    use super::*;

    /// Which lanes' waiters were woken, each polled once.
    fn woken(waiters: &mut [std::pin::Pin<&mut Notified<'_>>]) -> Vec<bool> {
        waiters
            .iter_mut()
            .map(|w| w.as_mut().now_or_never().is_some())
            .collect()
    }

    /// Frees a slot held on `lane` with someone waiting; the lane whose waiter it woke.
    fn free_on(line: &Line, lane: usize) -> Option<usize> {
        let mut on0 = pin!(line.freed_at(0));
        let mut on1 = pin!(line.freed_at(1));
        on0.as_mut().enable();
        on1.as_mut().enable();
        line.lanes[lane].held.fetch_add(1, Ordering::Relaxed);
        line.release(lane, true);
        woken(&mut [on0, on1]).iter().position(|&w| w)
    }

    fn hold_at(line: &Line, lane: usize, n: u32) {
        line.lanes[lane].held.fetch_add(n, Ordering::Relaxed);
    }

    #[test]
    fn equal_shares_hand_a_slot_over_on_the_thread_that_freed_it() {
        let line = Line::new(2);
        let (_a, _b) = (line.join_at(0), line.join_at(1));
        hold_at(&line, 0, 1);
        hold_at(&line, 1, 1);
        assert_eq!(free_on(&line, 1), Some(1));
        assert_eq!(free_on(&line, 0), Some(0));
    }

    #[test]
    fn a_slot_goes_to_another_lane_only_if_that_evens_the_shares_out() {
        let line = Line::new(2);
        let _a = line.join_at(0);
        let _b: Vec<_> = (0..3).map(|_| line.join_at(1)).collect();
        // Lane 0 holds 2 slots for its 1 request in line; lane 1, given this slot, would hold 2 for 3.
        hold_at(&line, 0, 2);
        hold_at(&line, 1, 1);
        assert_eq!(free_on(&line, 0), Some(1));
        // Lane 0 holds 1 for 1; lane 1 would hold 3 for 3: no better off, so the slot stays.
        let line = Line::new(2);
        let _a = line.join_at(0);
        let _b: Vec<_> = (0..3).map(|_| line.join_at(1)).collect();
        hold_at(&line, 0, 1);
        hold_at(&line, 1, 2);
        assert_eq!(free_on(&line, 0), Some(0));
        // One slot more on one side of two even lines: passing it on would only turn the difference around.
        let line = Line::new(2);
        let (_a, _b) = (line.join_at(0), line.join_at(1));
        hold_at(&line, 0, 2);
        hold_at(&line, 1, 1);
        assert_eq!(free_on(&line, 0), Some(0));
        // A lane holding nothing draws a slot from one that holds them all.
        let line = Line::new(2);
        let (_a, _b) = (line.join_at(0), line.join_at(1));
        hold_at(&line, 0, 3);
        assert_eq!(free_on(&line, 0), Some(1));
    }

    #[test]
    fn a_lane_with_nobody_in_line_passes_the_slot_on() {
        let line = Line::new(2);
        let _b = line.join_at(1);
        assert_eq!(free_on(&line, 0), Some(1));
    }

    #[test]
    fn with_nobody_counted_in_line_every_lane_gets_a_permit() {
        let line = Line::new(2);
        line.release(line.hold(), true);
        // A request that looked before the slot was freed and joins the line after: its wait ends at once.
        let _b = line.join_at(1);
        assert!(line.freed_at(1).now_or_never().is_some());
        assert!(line.freed_at(0).now_or_never().is_some());
    }

    #[test]
    fn leaving_the_line_uncounts_the_request() {
        let line = Line::new(2);
        let a = line.join_at(0);
        let b = line.join_at(1);
        assert_eq!(line.queued(), 2);
        drop(a);
        drop(b);
        assert_eq!(line.queued(), 0);
        assert!(
            line.lanes
                .iter()
                .all(|l| l.queued.load(Ordering::SeqCst) == 0)
        );
    }
}
