//! The proxy's connections to one server, for both transports, kept in the server's slot of its upstream
//! ([`crate::upstream::conns`]): idle HTTP and FastCGI connections (apart: a server may be reached both
//! ways), and what FastCGI needs to decide whether to keep a connection or to queue a request on a busy one.
//!
//! FastCGI connections are shared by all worker threads, or kept per worker ([`ServerConns::own_fastcgi`]):
//! then a request only ever uses connections dialled by its own thread, so their sockets wake no other thread,
//! and the seats behind them ([`Seats`]) are the thread's own too.

use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use super::pool::Pool;
use crate::fastcgi::pipeline::Seats;
use crate::upstream::ServerState;
use crate::upstream::conns::Conns;
use crate::workers;

pub(crate) struct ServerConns {
    /// Idle HTTP connections.
    pub(crate) http: Pool<crate::http1::Conn>,
    /// Idle FastCGI connections.
    pub(crate) fcgi: Pool<crate::fastcgi::Conn>,
    /// Requests waiting for an answer on a FastCGI connection they just opened.
    pub(crate) fcgi_waiting: AtomicU32,
    /// Whether every FastCGI connection to this server gets served at once: then a kept-alive connection
    /// never holds a worker that another request's connection waits for, and connections are always kept.
    /// True of rein's own apps: a PHP instance takes no more requests at once than it has workers, and the
    /// Python adapter serves every connection. Unknown (false) for a FastCGI server rein did not start,
    /// unless its upstream gives it a `max_connections` (see [`crate::upstream::Slot::limit`]).
    pub(crate) fcgi_serves_all: bool,
    /// Seats on busy FastCGI connections, when its upstream lets requests queue on them
    /// ([`crate::upstream::Member::pipelining`]): one set for all workers, or one per worker, each counting
    /// the connections of its worker against the server's `max_connections`.
    fcgi_seats: Box<[Arc<Seats>]>,
}

impl Default for ServerConns {
    fn default() -> Self {
        ServerConns {
            http: Pool::per_worker(),
            fcgi: Pool::shared(),
            fcgi_waiting: AtomicU32::new(0),
            fcgi_serves_all: false,
            fcgi_seats: Box::new([Arc::default()]),
        }
    }
}

impl ServerConns {
    /// The connections of a server of rein's own FastCGI app (see `fcgi_serves_all`). `per_worker`: each
    /// worker thread keeps connections of its own, up to the server's `max_connections` each, for a server
    /// that serves any number of connections at no cost (the Python adapter running one thread serves them
    /// all from one loop). A request then never waits on, nor wakes, another thread's connection.
    pub(crate) fn own_fastcgi(per_worker: bool) -> Self {
        let shards = if per_worker { workers::count() } else { 1 };
        ServerConns {
            fcgi_serves_all: true,
            fcgi: if per_worker {
                Pool::per_worker()
            } else {
                Pool::shared()
            },
            fcgi_seats: (0..shards).map(|_| Arc::default()).collect(),
            ..ServerConns::default()
        }
    }

    /// The seats (and count of connections) a request on the calling worker uses.
    pub(crate) fn seats(&self) -> &Arc<Seats> {
        self.seats_of(workers::current())
    }

    /// The seats of the connections dialled by `worker`.
    pub(crate) fn seats_of(&self, worker: usize) -> &Arc<Seats> {
        &self.fcgi_seats[worker % self.fcgi_seats.len()]
    }

    /// The proxy's connections to `server`, made at its first request.
    pub(crate) fn of(server: &ServerState) -> &ServerConns {
        server.conns.get_or_init(ServerConns::default)
    }
}

impl Conns for ServerConns {
    fn idle(&self) -> usize {
        self.http.idle_count() + self.fcgi.idle_count()
    }

    fn pipelined(&self) -> u64 {
        self.fcgi_seats.iter().map(|s| s.rides()).sum()
    }

    fn waiting(&self) -> u32 {
        self.fcgi_seats.iter().map(|s| s.waiting_now()).sum()
    }

    fn expire(&self, idle_timeout: Duration) {
        self.http.expire(idle_timeout);
        self.fcgi.expire(idle_timeout);
    }

    fn clear(&self) {
        self.http.clear();
        self.fcgi.clear();
    }
}
