//! The data plane's threads: one single-threaded runtime per core, each accepting on every listener.
//!
//! This is nginx's shape. A connection lives its whole life on the thread that accepted it, and so do the
//! upstream connections its requests use (pools are kept per worker, see [`current`]): a request never
//! crosses threads and a task wakes where it sleeps. On the 2-core benchmark machine tokio's work-stealing
//! runtime spent more moving small requests between cores than serving them (static 1 KB: 0.72 × nginx
//! before, about 1 × after).
//!
//! The control API, the supervisor and health checks stay on the runtime that called [`start`]; they are
//! not on the request path.
//!
//! Every worker accepts on every listener, but a connection is not always served where it was accepted:
//! the worker that is awake accepts first, so left alone one busy worker took 3 of 4 connections under
//! load while the other slept. [`place`] hands a new connection to the worker serving the fewest.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::Handle;

static WORKERS: OnceLock<Vec<Worker>> = OnceLock::new();

/// A worker: its runtime, and how many connections it is serving.
struct Worker {
    handle: Handle,
    connections: AtomicUsize,
}

thread_local! {
    static INDEX: Cell<usize> = const { Cell::new(0) };
}

/// Starts `n` worker threads (at least one). Only the first call starts any; later ones return at once.
pub fn start(n: usize) -> std::io::Result<()> {
    if WORKERS.get().is_some() {
        return Ok(());
    }
    let mut workers = Vec::with_capacity(n.max(1));
    for index in 0..n.max(1) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            // Large file bodies are read on blocking threads; a small pool bounds the threads (and their
            // malloc arenas) that many concurrent downloads can create.
            .max_blocking_threads(16)
            .build()?;
        workers.push(Worker {
            handle: runtime.handle().clone(),
            connections: AtomicUsize::new(0),
        });
        std::thread::Builder::new()
            .name(format!("rein-worker-{index}"))
            .spawn(move || {
                INDEX.set(index);
                runtime.block_on(std::future::pending::<()>())
            })?;
    }
    let _ = WORKERS.set(workers);
    Ok(())
}

fn all() -> &'static [Worker] {
    WORKERS.get().map_or(&[], Vec::as_slice)
}

/// The runtime of worker `index`; `None` when no workers were started (the data plane then runs on the
/// caller's runtime, as in unit tests).
pub fn handle(index: usize) -> Option<&'static Handle> {
    all().get(index).map(|w| &w.handle)
}

/// How many workers there are (1 when none were started): the number of per-worker shards to keep.
pub fn count() -> usize {
    all().len().max(1)
}

/// A connection counted against the worker serving it, until dropped.
pub struct Placed {
    index: usize,
}

impl Placed {
    /// The worker to serve it.
    pub fn worker(&self) -> usize {
        self.index
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        if let Some(w) = all().get(self.index) {
            w.connections.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Where a connection accepted by the calling worker should be served: here, unless another worker serves
/// fewer connections than this one (then the one serving the fewest). Counted at once, so a burst of
/// accepts spreads rather than piling onto the first idle worker.
pub fn place() -> Placed {
    let workers = all();
    let here = current();
    let Some(mine) = workers.get(here) else {
        return Placed { index: 0 };
    };
    let mut best = (here, mine.connections.load(Ordering::Relaxed));
    for (i, w) in workers.iter().enumerate() {
        let n = w.connections.load(Ordering::Relaxed);
        if n < best.1 {
            best = (i, n);
        }
    }
    workers[best.0].connections.fetch_add(1, Ordering::Relaxed);
    Placed { index: best.0 }
}

/// The index of the worker running the caller, below [`count`]; 0 off the workers.
pub fn current() -> usize {
    INDEX.get()
}

/// Makes the calling thread count as worker `index` (tests that play several workers on plain threads).
#[cfg(test)]
pub fn pretend_current(index: usize) {
    INDEX.set(index);
}

/// The number of workers to start by default: one per core this process may run on.
pub fn default_count() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}
