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

use std::cell::Cell;
use std::sync::OnceLock;

use tokio::runtime::Handle;

static WORKERS: OnceLock<Vec<Handle>> = OnceLock::new();

thread_local! {
    static INDEX: Cell<usize> = const { Cell::new(0) };
}

/// Starts `n` worker threads (at least one). Only the first call starts any; later ones return at once.
pub fn start(n: usize) -> std::io::Result<()> {
    if WORKERS.get().is_some() {
        return Ok(());
    }
    let mut handles = Vec::with_capacity(n.max(1));
    for index in 0..n.max(1) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            // Large file bodies are read on blocking threads; a small pool bounds the threads (and their
            // malloc arenas) that many concurrent downloads can create.
            .max_blocking_threads(16)
            .build()?;
        handles.push(runtime.handle().clone());
        std::thread::Builder::new()
            .name(format!("rein-worker-{index}"))
            .spawn(move || {
                INDEX.set(index);
                runtime.block_on(std::future::pending::<()>())
            })?;
    }
    let _ = WORKERS.set(handles);
    Ok(())
}

/// The worker runtimes; empty when none were started (the data plane then runs on the caller's runtime,
/// as in unit tests).
pub fn handles() -> &'static [Handle] {
    WORKERS.get().map_or(&[], Vec::as_slice)
}

/// How many workers there are (1 when none were started): the number of per-worker shards to keep.
pub fn count() -> usize {
    handles().len().max(1)
}

/// The index of the worker running the caller, below [`count`]; 0 off the workers.
pub fn current() -> usize {
    INDEX.get()
}

/// The number of workers to start by default: one per core this process may run on.
pub fn default_count() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}
