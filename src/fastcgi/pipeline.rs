//! Pipelining on kept-alive connections to PHP-FPM (and to rein's Python adapter serving WSGI, which reads
//! requests the same way): one request queued on a connection while the server is still answering the one
//! before it.
//!
//! A PHP-FPM worker serves one kept-alive connection, one request at a time, and reads each request's records
//! exactly up to their end. If the next request is already in the socket when the worker finishes, it starts
//! at once, instead of sleeping until rein has read the answer, passed it on and woken the request waiting
//! for a worker. nginx gets that effect from PHP-FPM's accept queue, at the price of requests stuck there for
//! seconds behind kept-alive connections; here each connection takes at most one request behind the one in
//! progress, and only a request without a body, which may be sent again if the connection dies under it; and
//! never behind a request that has been running for a while (a slow script holds whoever queues behind it).
//!
//! An exchange whose request is fully written offers a [`Seat`] ([`Seats::offer`]). A rider leaves its
//! encoded records there ([`Seats::ride`]); the exchange writes them after its own, and at its END_REQUEST
//! hands the connection over ([`Handover`]) with the records read past its end and whatever of the rider's
//! was not written yet. An exchange that fails, or ends without a clean END_REQUEST, drops the seat: the
//! rider learns it and goes elsewhere.
//!
//! A connection may take more than one request queued behind the one in progress (its depth, see
//! [`Seats::reserve`]): once a rider's records are taken, the exchange offers the next seat, and the riders
//! form a line; at its end the first of them gets the connection with the seats behind it. rein's Python
//! adapter serving WSGI takes seven: with one, the adapter found the socket empty after nearly every answer,
//! and it and rein each slept and woke once per request (0.9 context switches a request each, against 0.05
//! for ASGI, whose app takes many requests at once).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Duration;

use bytes::BytesMut;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::client::Conn;
use super::record::Decoder;

/// A seat is not taken behind an exchange that has been going on for this long: its request is a slow one, and
/// a request queued behind it would wait for its end while other workers come free. (Queueing saves tens of
/// microseconds per request: nothing next to a request that takes this long.)
const MAX_SEAT_AGE: Duration = Duration::from_millis(10);

/// The seats offered on one server's busy connections, and what a request waiting for one needs to know.
#[derive(Default)]
pub struct Seats {
    free: Mutex<Vec<Arc<Seat>>>,
    /// Connections open to the server that take part (see [`Counted`]): at most its `max_connections`.
    open: AtomicU32,
    /// Requests that cannot ride (a body, or a method not to be sent twice) waiting for a connection: while
    /// there are any, no seat is offered, so that connections come back free rather than passing from rider
    /// to rider.
    waiting_alone: AtomicU32,
    /// A seat was offered, or a connection came free or closed: told only while `waiters` > 0, so that the
    /// exchanges of a server nobody waits on do not take the notifier's lock twice per request.
    changed: Notify,
    /// Requests waiting on `changed` (see [`Seats::waiting`]).
    waiters: AtomicU32,
    /// Requests that rode (for the status).
    rides: AtomicU64,
}

/// A connection to hand over once its exchange ends cleanly: the records already read past that end (the
/// start of the rider's answer), what of the rider's request (and of those taken behind it) is still to be
/// written, and the seats behind the rider.
pub struct Handover {
    pub conn: Conn,
    pub decoder: Decoder,
    pub unwritten: BytesMut,
    pub behind: Line,
}

/// The seats offered behind an exchange, in the order their riders' records go out.
#[derive(Default)]
pub struct Line {
    seats: VecDeque<Offered>,
    /// Of `seats`, the first this many had their rider's records taken to be written.
    taken: usize,
    /// Since when the request at the head of the line has been in progress: every seat offered behind it
    /// carries this age ([`MAX_SEAT_AGE`]), so that no request lines up behind a slow one.
    since: Option<Instant>,
}

impl Line {
    /// The next rider's records to write, once every earlier rider's were taken; when every seat's were,
    /// offers one more if fewer than `depth` are in line. `waker` is told when a rider comes.
    pub fn next_records(
        &mut self,
        seats: &Arc<Seats>,
        depth: u32,
        waker: &Waker,
    ) -> Option<BytesMut> {
        loop {
            if let Some(next) = self.seats.get(self.taken) {
                // No rider yet, or its rider left before its records were taken: nothing more goes out.
                let records = next.seat().take_request(waker)?;
                self.taken += 1;
                return Some(records);
            }
            if self.seats.len() >= depth as usize {
                return None;
            }
            let since = *self.since.get_or_insert_with(Instant::now);
            self.seats.push_back(Offered::new(seats, since)?);
        }
    }

    /// Whether some rider's records were taken: the connection then carries a request that is not ours.
    pub fn carried(&self) -> bool {
        self.taken > 0
    }

    /// At a clean end: the first rider, to hand the connection to, with the records of its not yet taken
    /// (to be written first) and the line behind it. `None` when nobody sits in the first seat.
    pub fn close(mut self) -> Option<(oneshot::Sender<Handover>, Option<BytesMut>, Line)> {
        let (to, untaken) = self.seats.pop_front()?.close()?;
        self.taken = self.taken.saturating_sub(1);
        // The rider's request is at the head now: in progress from the end of ours.
        self.since = Some(Instant::now());
        Some((to, untaken, self))
    }
}

/// One place behind a request in progress.
pub struct Seat {
    inner: Mutex<Inner>,
    /// Since when the request at the head of its line has been in progress.
    since: Instant,
}

struct Inner {
    state: State,
    /// The exchange's waker, to tell it when a rider's records come.
    owner: Option<Waker>,
}

enum State {
    Free,
    Taken {
        /// The rider's records, until the exchange takes them to write.
        request: Option<BytesMut>,
        to: oneshot::Sender<Handover>,
    },
    Closed,
}

/// A rider's place: the handover when the exchange ahead ends cleanly.
pub struct Ride {
    seat: Arc<Seat>,
    pub handover: oneshot::Receiver<Handover>,
}

impl Ride {
    /// Whether the exchange ahead took the records to write.
    #[cfg(test)]
    pub fn taken(&self) -> bool {
        matches!(self.seat.lock().state, State::Taken { request: None, .. })
    }

    /// Gives up the seat. The request is returned if it was not taken to be written: nothing reached the
    /// server, and it may go elsewhere.
    pub fn cancel(self) -> Option<BytesMut> {
        self.leave()
    }

    fn leave(&self) -> Option<BytesMut> {
        let mut inner = self.seat.lock();
        match std::mem::replace(&mut inner.state, State::Closed) {
            State::Taken { request, .. } => request,
            other => {
                inner.state = other;
                None
            }
        }
    }
}

impl Drop for Ride {
    /// A rider dropped (its client left) before its records were taken: the exchange ahead will not write
    /// them, and keeps its connection for the pool.
    fn drop(&mut self) {
        self.leave();
    }
}

impl Seats {
    /// Counts a connection about to be dialled, if that leaves no more than `max` open; `depth` requests may
    /// queue behind the one in progress on it.
    pub fn reserve(self: &Arc<Self>, max: u32, depth: u32) -> Option<Counted> {
        let before = self.open.fetch_add(1, Ordering::SeqCst);
        if before >= max {
            self.open.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(Counted {
            seats: self.clone(),
            depth,
        })
    }

    /// A seat behind an exchange whose request is fully written (the request in progress on its connection
    /// since `since`), or `None` while a request that cannot ride is waiting for a connection.
    pub fn offer(&self, since: Instant) -> Option<Arc<Seat>> {
        if self.waiting_alone.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let seat = Arc::new(Seat {
            inner: Mutex::new(Inner {
                state: State::Free,
                owner: None,
            }),
            since,
        });
        lock(&self.free).push(seat.clone());
        self.tell();
        Some(seat)
    }

    /// Takes a free seat for `request` (its encoded records), the most recently offered first. Seats behind
    /// exchanges older than [`MAX_SEAT_AGE`] are taken off offer.
    pub fn ride(&self, request: BytesMut) -> Result<Ride, BytesMut> {
        let mut free = lock(&self.free);
        if free.is_empty() {
            return Err(request);
        }
        let now = Instant::now();
        free.retain(|seat| now.duration_since(seat.since) < MAX_SEAT_AGE);
        while let Some(seat) = free.pop() {
            let mut inner = seat.lock();
            if !matches!(inner.state, State::Free) {
                continue;
            }
            let (to, handover) = oneshot::channel();
            inner.state = State::Taken {
                request: Some(request),
                to,
            };
            let owner = inner.owner.take();
            drop(inner);
            if let Some(waker) = owner {
                waker.wake();
            }
            self.rides.fetch_add(1, Ordering::Relaxed);
            return Ok(Ride { seat, handover });
        }
        Err(request)
    }

    /// Requests that took a seat so far.
    pub fn rides(&self) -> u64 {
        self.rides.load(Ordering::Relaxed)
    }

    /// Requests waiting now for a seat or a connection to come free.
    pub fn waiting_now(&self) -> u32 {
        self.waiters.load(Ordering::Relaxed)
    }

    /// Removes a seat no longer on offer.
    fn withdraw(&self, seat: &Arc<Seat>) {
        let mut free = lock(&self.free);
        if let Some(at) = free.iter().position(|s| Arc::ptr_eq(s, seat)) {
            free.swap_remove(at);
        }
    }

    /// Tells waiting requests that a connection came free (back in the pool, or closed).
    pub fn freed(&self) {
        self.tell();
    }

    fn tell(&self) {
        // Sequentially consistent with `waiting`: either a waiter that counted itself is told, or it looks
        // after this change and sees it.
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.changed.notify_waiters();
        }
    }

    /// Counts a request as waiting on [`Seats::changed`], until the guard is dropped. Taken before a last
    /// look at the connections and seats, so that a change after that look is told to it.
    pub fn waiting(self: &Arc<Self>) -> Waiting {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        Waiting(self.clone())
    }

    /// Resolves when a seat is offered or a connection comes free, for a request counted by
    /// [`Seats::waiting`]. Create it before looking, so that a change in between is not missed.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Counts a request that cannot ride as waiting for a connection, until the guard is dropped.
    pub fn waiting_alone(self: &Arc<Self>) -> WaitingAlone {
        self.waiting_alone.fetch_add(1, Ordering::SeqCst);
        WaitingAlone(self.clone())
    }

    #[cfg(test)]
    pub fn offered(&self) -> usize {
        lock(&self.free).len()
    }
}

impl Seat {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// For the exchange ahead, each time it is polled: the rider's records to write, if they just came.
    /// Otherwise `waker` is told when they come.
    pub fn take_request(&self, waker: &Waker) -> Option<BytesMut> {
        let mut inner = self.lock();
        match &mut inner.state {
            State::Taken { request, .. } if request.is_some() => request.take(),
            State::Free => {
                if !inner.owner.as_ref().is_some_and(|w| w.will_wake(waker)) {
                    inner.owner = Some(waker.clone());
                }
                None
            }
            _ => None,
        }
    }
}

/// The exchange ahead's side of a seat: closed when it ends, handing over or not.
pub struct Offered {
    seat: Arc<Seat>,
    seats: Arc<Seats>,
}

impl Offered {
    pub fn new(seats: &Arc<Seats>, since: Instant) -> Option<Offered> {
        Some(Offered {
            seat: seats.offer(since)?,
            seats: seats.clone(),
        })
    }

    pub fn seat(&self) -> &Seat {
        &self.seat
    }

    /// Closes the seat at a clean end: who to hand the connection to, with the rider's records not yet taken
    /// (to be written first), if a rider sits there.
    pub fn close(self) -> Option<(oneshot::Sender<Handover>, Option<BytesMut>)> {
        let taken = std::mem::replace(&mut self.seat.lock().state, State::Closed);
        match taken {
            State::Taken { to, request, .. } => Some((to, request)),
            _ => None,
        }
        // Dropped here: withdrawn from the free seats.
    }
}

impl Drop for Offered {
    /// A seat left without a clean end: its rider, if any, is told (the sender is dropped).
    fn drop(&mut self) {
        self.seat.lock().state = State::Closed;
        self.seats.withdraw(&self.seat);
    }
}

/// A connection counted in [`Seats::reserve`], until dropped with it.
pub struct Counted {
    seats: Arc<Seats>,
    /// Requests that may queue behind the one in progress.
    depth: u32,
}

impl Counted {
    pub fn seats(&self) -> &Arc<Seats> {
        &self.seats
    }

    pub fn depth(&self) -> u32 {
        self.depth
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.seats.open.fetch_sub(1, Ordering::SeqCst);
        self.seats.freed();
    }
}

/// A request counted as waiting on [`Seats::changed`].
pub struct Waiting(Arc<Seats>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A request counted as waiting for a connection of its own (see [`Seats::waiting_alone`]).
pub struct WaitingAlone(Arc<Seats>);

impl Drop for WaitingAlone {
    fn drop(&mut self) {
        self.0.waiting_alone.fetch_sub(1, Ordering::SeqCst);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;
