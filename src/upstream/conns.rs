//! A server's connections as its upstream keeps them: a slot that the proxy fills with its transports' pools
//! and the upstream stores without knowing what is in it. It lives as long as the server's state, which a
//! configuration change keeps for an unchanged server, so no idle connection to it is dropped; the upstream
//! asks of it only what its status, its sweep and a stopping app instance need.

use std::any::Any;
use std::sync::OnceLock;
use std::time::Duration;

/// What the upstream may ask of the connections it stores.
pub(crate) trait Conns: Any + Send + Sync {
    /// Idle connections kept, for the status.
    fn idle(&self) -> usize;

    /// Requests queued on a busy connection so far, for the status.
    fn pipelined(&self) -> u64;

    /// Requests holding one of the server's slots that wait for a connection to it or a seat on one, for
    /// the status.
    fn waiting(&self) -> u32;

    /// Closes the connections idle for `idle_timeout` or longer.
    fn expire(&self, idle_timeout: Duration);

    /// Closes every idle connection.
    fn clear(&self);
}

/// The slot: empty until the proxy first reaches the server (or filled when the server is made, for a
/// server whose connections are known to be special, see [`ConnSlot::filled`]).
#[derive(Default)]
pub(crate) struct ConnSlot(OnceLock<Box<dyn Conns>>);

impl ConnSlot {
    /// A slot holding `conns` from the start.
    pub(crate) fn filled(conns: impl Conns) -> ConnSlot {
        ConnSlot(OnceLock::from(Box::new(conns) as Box<dyn Conns>))
    }

    /// The connections stored, made by `make` if the slot is empty.
    ///
    /// # Panics
    /// If the slot holds another type: only one type is ever stored, the proxy's.
    pub(crate) fn get_or_init<C: Conns>(&self, make: impl FnOnce() -> C) -> &C {
        let conns: &dyn Any = &**self.0.get_or_init(|| Box::new(make()));
        conns
            .downcast_ref()
            .expect("a server's connections are of one type only")
    }

    /// The connections stored, if any.
    pub(crate) fn get(&self) -> Option<&dyn Conns> {
        self.0.get().map(|c| &**c)
    }
}
