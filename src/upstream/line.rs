//! The line of requests waiting for their first server (every slot taken), kept in one lane per worker
//! thread.
//!
//! A freed slot wakes one request in line. Waking one on the thread that freed the slot spares a wake-up
//! across threads: an eventfd write to the other thread, often asleep, and for a FastCGI connection the move
//! of its socket to that thread's reactor (two `epoll_ctl`). With PHP-FPM behind `max_connections`, about
//! half of all hand-overs crossed threads, at about 9 µs of rein's CPU each (53.9 µs per request with two
//! worker threads against 44.5 with one).
//!
//! A thread must not hoard slots while another's requests wait, though. A freed slot goes to another lane
//! when that lane's requests in line, even with this slot, would hold fewer slots each (held by the lane's
//! requests) than this lane's without it; else it stays. Two equally busy threads keep their shares and hand
//! over locally (rein → PHP-FPM at 100 connections: 1 hand-over in 20 crossed threads, against 1 in 2 with a
//! single line); a thread whose line grows draws slots from the other; a lane with nobody
//! in line passes every slot on. Within a lane, requests are woken in the order they came.
//!
//! Each request in line holds a [`Ticket`] from the moment it joins until it leaves, and a wake-up is a mark
//! on one ticket: kept until its request takes it up, whatever that request is doing when it comes, and
//! handed to the next ticket if its request leaves without taking it up. So no wake-up is lost, and the
//! wake-ups on their way are counted exactly ([`Line::pending`]). A wake-up can still be spent without its
//! slot being taken (the woken request looked just before the slot freed, and another took the one it was
//! woken for); the lanes' rule never hands such a stray slot on by itself, so a request that leaves the line
//! with a slot wakes one more when more slots are free than wake-ups are on their way
//! ([`super::admission::Admission`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio::sync::futures::Notified;

use crate::workers;

/// Requests in line for an upstream's servers, per worker thread.
pub(super) struct Line {
    /// Requests in line, all lanes together.
    queued: AtomicU32,
    /// Wake-ups marked on tickets and not yet taken up: slots that requests are on their way to.
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
    /// The tickets of the lane's requests in line, oldest first.
    tickets: Mutex<VecDeque<Arc<Ticket>>>,
}

impl Lane {
    fn tickets(&self) -> MutexGuard<'_, VecDeque<Arc<Ticket>>> {
        self.tickets.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A request's place in line: marked when a slot is freed for it.
#[derive(Default)]
struct Ticket {
    woken: AtomicBool,
    /// Told when the ticket is marked; the mark, not this, is what counts.
    told: Notify,
}

/// A request in line on its lane, until dropped.
pub(super) struct InLine<'a> {
    line: &'a Line,
    lane: usize,
    ticket: Arc<Ticket>,
}

impl InLine<'_> {
    /// Resolves once a wake-up is marked on this request's ticket (at once if one is already). Enabled
    /// before the request looks for a server, a wake-up marked after the look is never missed.
    pub(super) fn told(&self) -> Notified<'_> {
        self.ticket.told.notified()
    }

    /// Takes up the wake-up marked on this request's ticket, if any: true if there was one.
    pub(super) fn take_wake_up(&self) -> bool {
        let taken = self.ticket.woken.swap(false, Ordering::SeqCst);
        if taken {
            self.line.pending.fetch_sub(1, Ordering::SeqCst);
        }
        taken
    }
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        let lane = &self.line.lanes[self.lane];
        {
            let mut tickets = lane.tickets();
            if let Some(at) = tickets.iter().position(|t| Arc::ptr_eq(t, &self.ticket)) {
                tickets.remove(at);
            }
            lane.queued.fetch_sub(1, Ordering::SeqCst);
            self.line.queued.fetch_sub(1, Ordering::SeqCst);
        }
        // Leaving with a wake-up not taken up (given up, or gone with a slot found otherwise): the slot it was
        // for goes to the next request in line.
        if self.take_wake_up() {
            self.line.wake_from(self.lane, false);
        }
    }
}

impl Line {
    /// A line with one lane per worker thread (at least one).
    pub(super) fn new(lanes: usize) -> Line {
        let lane = || Lane {
            queued: AtomicU32::new(0),
            held: AtomicU32::new(0),
            tickets: Mutex::new(VecDeque::new()),
        };
        Line {
            queued: AtomicU32::new(0),
            pending: AtomicU32::new(0),
            lanes: (0..lanes.max(1)).map(|_| lane()).collect(),
        }
    }

    /// Requests in line, all lanes together.
    pub(super) fn queued(&self) -> u32 {
        self.queued.load(Ordering::SeqCst)
    }

    /// The calling thread's lane. A line built before the workers started has one lane for all.
    fn here(&self) -> usize {
        workers::current().min(self.lanes.len() - 1)
    }

    /// Puts the caller in line on its thread's lane, until the guard is dropped.
    pub(super) fn join(&self) -> InLine<'_> {
        self.join_at(self.here())
    }

    pub(super) fn join_at(&self, lane: usize) -> InLine<'_> {
        let ticket = Arc::new(Ticket::default());
        let at = &self.lanes[lane];
        at.tickets().push_back(ticket.clone());
        at.queued.fetch_add(1, Ordering::SeqCst);
        self.queued.fetch_add(1, Ordering::SeqCst);
        InLine {
            line: self,
            lane,
            ticket,
        }
    }

    /// Counts a slot as held on the calling thread's lane; returns the lane, to [`Line::release`] it on.
    pub(super) fn hold(&self) -> usize {
        let lane = self.here();
        self.lanes[lane].held.fetch_add(1, Ordering::Relaxed);
        lane
    }

    /// A slot held on `lane` was freed: if anyone waits, wakes one request in line, preferably on `lane`.
    pub(super) fn release(&self, lane: usize, anyone_waiting: bool) {
        self.lanes[lane].held.fetch_sub(1, Ordering::Relaxed);
        if anyone_waiting {
            self.wake_from(lane, true);
        }
    }

    /// Wake-ups marked and not yet taken up: slots that requests are on their way to.
    pub(super) fn pending(&self) -> u32 {
        self.pending.load(Ordering::SeqCst)
    }

    /// A slot is free that no wake-up is on its way for: wakes the request in line of the lane holding the
    /// fewest slots per request, this thread's on a tie.
    pub(super) fn wake_for_room(&self) {
        self.wake_from(self.here(), false);
    }

    /// `freed_here`: the slot was this lane's, so another lane must do better even with it to get it.
    fn wake_from(&self, here: usize, freed_here: bool) {
        let Some(best) = self.best_lane(here, freed_here) else {
            // Nobody in line: a request that failed its look joins the line before looking again, and so
            // sees the slot.
            return;
        };
        // The lane chosen may have every request in line already woken: then the next lane that has one
        // not yet woken gets it.
        let others = (0..self.lanes.len()).filter(|&i| i != best);
        for lane in std::iter::once(best).chain(others) {
            if self.mark_first_asleep(lane) {
                return;
            }
        }
        // Every request in line is woken already and will look again after this slot was freed.
    }

    /// The lane whose requests in line hold the fewest slots each, as [`Line::wake_from`] counts them.
    fn best_lane(&self, here: usize, freed_here: bool) -> Option<usize> {
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
        best.map(|(lane, _, _)| lane)
    }

    /// Marks a wake-up on the oldest ticket of `lane` not marked yet, if any.
    fn mark_first_asleep(&self, lane: usize) -> bool {
        // Counted before the mark: its request may take it up (and uncount it) as soon as it is made.
        self.pending.fetch_add(1, Ordering::SeqCst);
        let tickets = self.lanes[lane].tickets();
        let marked = tickets.iter().find(|t| {
            t.woken
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        });
        match marked {
            Some(ticket) => ticket.told.notify_one(),
            None => {
                self.pending.fetch_sub(1, Ordering::SeqCst);
            }
        }
        marked.is_some()
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    /// The lanes with a ticket marked, each taken up so that the next release starts clean.
    fn take_marks(line: &Line) -> Vec<usize> {
        let mut marked = Vec::new();
        for (i, lane) in line.lanes.iter().enumerate() {
            for ticket in lane.tickets().iter() {
                if ticket.woken.swap(false, Ordering::SeqCst) {
                    line.pending.fetch_sub(1, Ordering::SeqCst);
                    marked.push(i);
                }
            }
        }
        marked
    }

    /// Frees a slot held on `lane` with someone waiting; the lane whose request it woke.
    fn free_on(line: &Line, lane: usize) -> Option<usize> {
        line.lanes[lane].held.fetch_add(1, Ordering::Relaxed);
        line.release(lane, true);
        let marked = take_marks(line);
        assert!(marked.len() <= 1, "one slot woke {marked:?}");
        marked.first().copied()
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
    fn with_nobody_in_line_a_freed_slot_marks_nothing() {
        let line = Line::new(2);
        line.release(line.hold(), true);
        assert_eq!(line.pending(), 0);
        // A request joining later looks for itself: no wake-up waits for it.
        let b = line.join_at(1);
        assert!(!b.take_wake_up());
    }

    /// Two slots freed while the lane's two requests are between looks (not waiting on anything): each
    /// request keeps its wake-up. One `Notify` per lane kept only one of them (a `Notify` holds one permit),
    /// and the other request waited for a look that only a timer gave it.
    #[test]
    fn wake_ups_sent_while_requests_are_between_looks_are_kept() {
        let line = Line::new(1);
        let (a, b) = (line.join_at(0), line.join_at(0));
        hold_at(&line, 0, 2);
        line.release(0, true);
        line.release(0, true);
        assert_eq!(line.pending(), 2);
        assert!(a.told().now_or_never().is_some(), "the first is told");
        assert!(b.told().now_or_never().is_some(), "the second is told");
        assert!(a.take_wake_up() && b.take_wake_up());
        assert_eq!(line.pending(), 0);
    }

    #[test]
    fn a_request_leaving_with_its_wake_up_passes_it_on() {
        let line = Line::new(2);
        let (a, b) = (line.join_at(0), line.join_at(1));
        hold_at(&line, 0, 1);
        line.release(0, true);
        assert_eq!(line.pending(), 1);
        // The first gives up before taking its wake-up up: the slot goes to the next request in line.
        drop(a);
        assert_eq!(line.pending(), 1);
        assert!(b.told().now_or_never().is_some());
        assert!(b.take_wake_up());
        drop(b);
        assert_eq!(line.pending(), 0);
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
                .all(|l| l.queued.load(Ordering::SeqCst) == 0 && l.tickets().is_empty())
        );
    }
}
