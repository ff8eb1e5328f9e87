//! A failed send on an upstream connection, for either transport (HTTP and FastCGI): what the retry loop
//! needs to know to try again, and how the proxy tells a timeout from a broken exchange.

use crate::body::Body;

/// The error of an exchange on either transport: a timeout is the proxy's 504, anything else a 502.
pub trait ExchangeError: std::error::Error + Send + Sync + 'static {
    /// The server was too slow.
    fn is_timeout(&self) -> bool;
}

/// A failed send: the connection is gone; the body comes back if none of it was read.
pub struct SendError<E> {
    pub error: E,
    /// The request body, untouched: it can go to another server.
    pub unsent: Option<Body>,
    /// Nothing came back and the connection could not even take the request (a write failed, or it was
    /// closed or reset at once): what a reused connection the server had closed looks like. Whether the
    /// connection was a reused one, and so whether to blame the server, is the caller's call.
    pub stale: bool,
}

impl<E: std::fmt::Debug> std::fmt::Debug for SendError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendError")
            .field("error", &self.error)
            .field("unsent", &self.unsent.is_some())
            .field("stale", &self.stale)
            .finish()
    }
}

impl<E: std::fmt::Display> std::fmt::Display for SendError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl<E: std::error::Error + 'static> std::error::Error for SendError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}
