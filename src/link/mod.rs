//! The link to one upstream server, shared by both transports (HTTP/1.1 in [`crate::http1`], FastCGI in
//! [`crate::fastcgi`]) and by the upstreams that pick servers: where a server listens, the socket dialled to it
//! (TCP, Unix, TLS), the read and send timeouts of an exchange on it, and a failed send.
//!
//! A leaf: it imports nothing of the transports, the upstreams or the proxy, so each of them can build on it
//! without depending on another.

pub mod addr;
pub mod send_error;
pub mod socket;
pub mod stall;
pub mod tls;

pub use addr::ServerAddr;
pub use send_error::{ExchangeError, SendError};
