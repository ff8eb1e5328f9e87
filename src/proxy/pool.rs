//! Keep-alive connections to one server, kept idle for reuse up to the upstream's idle timeout and dropped
//! when the server closes them. One pool per transport and server: HTTP connections ([`crate::http1`]) and
//! FastCGI ones ([`crate::fastcgi`]), both in the server's [`super::conns::ServerConns`].

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::workers;

/// Idle connections kept per server and worker, at most (nginx's `keepalive` is a per-worker 64 in common
/// setups; a larger pool spares new connections under bursts, each idle one costs a few KB).
const MAX_IDLE: usize = 256;

/// A connection that can wait in a pool.
pub trait Pooled {
    /// Whether the server closed it (then it is not worth handing out). Asked when it is handed out.
    fn is_closed(&mut self) -> bool;

    /// Whether a connection whose exchange just ended is worth keeping. By default, whether it is still open;
    /// a connection whose check costs a system call may skip it, since [`Pool::take`] checks again anyway.
    fn worth_keeping(&mut self) -> bool {
        !self.is_closed()
    }

    /// The worker whose reactor the connection is registered with, if it can be used from another (at a
    /// cost): a shared pool hands out the calling worker's own connections first.
    fn home(&self) -> Option<usize> {
        None
    }
}

impl Pooled for crate::http1::Conn {
    fn is_closed(&mut self) -> bool {
        crate::http1::Conn::is_closed(self)
    }

    /// Put back only after a clean exchange: checked when next taken.
    fn worth_keeping(&mut self) -> bool {
        true
    }
}

/// An idle connection and the moment it became idle.
struct Idle<C> {
    sender: C,
    since: Instant,
}

/// Idle connections, oldest first: one list per worker thread, or one for all.
pub struct Pool<C> {
    shards: Box<[Mutex<VecDeque<Idle<C>>>]>,
}

impl<C> Pool<C> {
    /// A list per worker, each taking only the connections it made. For HTTP, and for the FastCGI
    /// connections of a server whose connections are kept per worker ([`super::conns::ServerConns::own_fastcgi`]):
    /// a connection's socket is registered with its worker's reactor, so one used from another worker would
    /// wake across threads on every read. nginx keeps its `keepalive` connections per worker process for the
    /// same reason.
    pub fn per_worker() -> Self {
        Self::with_shards(workers::count())
    }

    /// One list for all workers. For FastCGI: PHP-FPM gives each connection a worker of its own, so
    /// connections are few, and one idle on another thread is worth moving (see
    /// [`crate::fastcgi::Conn::into_this_worker`]) rather than dialling a new one.
    pub fn shared() -> Self {
        Self::with_shards(1)
    }

    fn with_shards(n: usize) -> Self {
        Pool {
            shards: (0..n.max(1)).map(|_| Mutex::new(VecDeque::new())).collect(),
        }
    }
}

impl<C: Pooled> Pool<C> {
    fn shard(&self) -> std::sync::MutexGuard<'_, VecDeque<Idle<C>>> {
        let shard = &self.shards[workers::current() % self.shards.len()];
        shard.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The most recently used idle connection (of the calling worker's, when kept per worker) still open and
    /// within `idle_timeout`. It may need a moment to be ready (its last exchange just ended): the caller
    /// awaits `ready()`.
    pub fn take(&self, idle_timeout: Duration) -> Option<C> {
        let mut idle = self.shard();
        drop_expired(&mut idle, idle_timeout);
        let here = workers::current();
        while let Some(newest) = idle.back() {
            // The most recent of this worker's own, or else the most recent. Only a connection with a home
            // on another worker is worth a search (per-worker pools never hold one).
            let own = match newest.sender.home() {
                Some(home) if home != here => {
                    idle.iter().rposition(|i| i.sender.home() == Some(here))
                }
                _ => None,
            };
            let mut i = own
                .and_then(|at| idle.remove(at))
                .or_else(|| idle.pop_back())?;
            if !i.sender.is_closed() {
                return Some(i.sender);
            }
        }
        None
    }

    /// Returns a connection whose exchange is complete, for reuse.
    pub fn put(&self, mut sender: C) {
        if !sender.worth_keeping() {
            return;
        }
        let mut idle = self.shard();
        if idle.len() >= MAX_IDLE {
            idle.pop_front();
        }
        idle.push_back(Idle {
            sender,
            since: Instant::now(),
        });
    }

    /// Closes the connections idle for `idle_timeout` or longer, on every worker: a quiet server would
    /// otherwise keep them, and their buffers, until its next request.
    pub fn expire(&self, idle_timeout: Duration) {
        for shard in &self.shards {
            drop_expired(
                &mut shard.lock().unwrap_or_else(|e| e.into_inner()),
                idle_timeout,
            );
        }
    }

    /// Closes every idle connection, on every worker.
    pub fn clear(&self) {
        for shard in &self.shards {
            let drained = std::mem::take(&mut *shard.lock().unwrap_or_else(|e| e.into_inner()));
            drop(drained);
        }
    }

    pub fn idle_count(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map(|i| i.len()).unwrap_or(0))
            .sum()
    }
}

/// Drops the connections idle for `idle_timeout` or longer. They gather at the front (oldest first), so
/// dropping them there is cheap.
fn drop_expired<C>(idle: &mut VecDeque<Idle<C>>, idle_timeout: Duration) {
    let now = Instant::now();
    while idle
        .front()
        .is_some_and(|i| now.duration_since(i.since) >= idle_timeout)
    {
        idle.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A connection that says where it lives and whether it is closed, and counts the checks.
    struct Fake {
        name: &'static str,
        home: usize,
        closed: bool,
        checks: Cell<u32>,
    }

    impl Pooled for Fake {
        fn is_closed(&mut self) -> bool {
            self.checks.set(self.checks.get() + 1);
            self.closed
        }
        fn home(&self) -> Option<usize> {
            Some(self.home)
        }
    }

    fn fake(name: &'static str, home: usize, closed: bool) -> Fake {
        Fake {
            name,
            home,
            closed,
            checks: Cell::new(0),
        }
    }

    fn names(pool: &Pool<Fake>) -> Vec<&'static str> {
        std::iter::from_fn(|| pool.take(Duration::from_secs(60)))
            .map(|c| c.name)
            .collect()
    }

    #[test]
    fn a_shared_pool_hands_out_this_workers_connections_first_newest_first() {
        // Unit tests run outside the workers: the calling thread counts as worker 0.
        assert_eq!(workers::current(), 0);
        let pool = Pool::shared();
        for (name, home) in [("a1", 1), ("b0", 0), ("c1", 1), ("d0", 0), ("e1", 1)] {
            pool.put(fake(name, home, false));
        }
        assert_eq!(names(&pool), ["d0", "b0", "e1", "c1", "a1"]);
    }

    #[test]
    fn closed_connections_are_dropped_when_taken_and_checked_once_each() {
        let pool = Pool::shared();
        pool.put(fake("open1", 1, false));
        pool.put(fake("closed0", 0, true));
        let taken = pool.take(Duration::from_secs(60)).expect("one is open");
        assert_eq!(taken.name, "open1");
        // Checked once when taken; `put`'s default check counts too.
        assert_eq!(taken.checks.get(), 2);
        assert!(pool.take(Duration::from_secs(60)).is_none());
        assert_eq!(pool.idle_count(), 0);
    }
}
