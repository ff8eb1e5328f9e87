//! Descriptors kept in reserve for the control API. When clients hold every descriptor rein may open, the
//! data plane stops accepting, and without a reserve so would the control API: the operator could neither
//! look nor change anything. A few descriptors of `/dev/null` are held open; when an accept fails for want of
//! descriptors, one is closed to make room for the control connection, and opened again once it ends.

use std::fs::File;
use std::io;
use std::sync::{Arc, Mutex};

/// Descriptors held: each lets one more control connection in while the rest of rein is starved.
pub(super) const SPARES: usize = 4;

pub(super) struct Reserve {
    spares: Mutex<Vec<File>>,
}

/// A descriptor released for one connection; it goes back into the reserve when dropped, if it can.
pub(super) struct Released {
    reserve: Arc<Reserve>,
}

impl Reserve {
    pub(super) fn new() -> Arc<Reserve> {
        let reserve = Arc::new(Reserve {
            spares: Mutex::new(Vec::with_capacity(SPARES)),
        });
        reserve.refill();
        reserve
    }

    fn spares(&self) -> std::sync::MutexGuard<'_, Vec<File>> {
        self.spares.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes one spare descriptor for the caller to use, or `None` when the reserve is spent.
    pub(super) fn release(self: &Arc<Self>) -> Option<Released> {
        let spare = self.spares().pop()?;
        drop(spare);
        Some(Released {
            reserve: self.clone(),
        })
    }

    /// Opens spares up to [`SPARES`]; stops quietly at the first failure (the descriptors are still short).
    pub(super) fn refill(&self) {
        let mut spares = self.spares();
        while spares.len() < SPARES {
            match File::open("/dev/null") {
                Ok(f) => spares.push(f),
                Err(_) => break,
            }
        }
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.spares().len()
    }
}

impl Drop for Released {
    fn drop(&mut self) {
        self.reserve.refill();
    }
}

/// Whether an accept failed for want of descriptors (the process's or the system's).
pub(super) fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_spare_comes_back() {
        let reserve = Reserve::new();
        assert_eq!(reserve.held(), SPARES);
        let released: Vec<_> = std::iter::from_fn(|| reserve.release()).collect();
        assert_eq!(released.len(), SPARES);
        assert_eq!(reserve.held(), 0);
        drop(released);
        assert_eq!(reserve.held(), SPARES);
    }
}
