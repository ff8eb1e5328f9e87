//! The proxy's HTTP/1.1 client: connections to upstream servers, pooled by the upstream layer.
//!
//! rein's own rather than hyper's client, for what a proxy does with it: hyper drives each connection
//! from a task of its own and hands requests and responses over channels, so every exchange crossed tasks
//! twice and every idle pooled connection kept its buffers and channel blocks (about 34 KB). Here the
//! request's own task drives its connection (as in [`crate::fastcgi`]), a request head is encoded once
//! however often it is tried, and an idle connection is a socket. Parsing stays with `httparse`, hyper's
//! parser; the framing rules are RFC 9112's.

pub(crate) mod chunked;
mod client;
mod fields;
pub(crate) mod head;
pub(crate) mod spelling;

#[cfg(test)]
mod fuzz_tests;

pub use client::{Conn, ResponseBody, Upgraded, connect};
pub use fields::Fields;
pub use head::{HeadWriter, RequestHead, connection_lists};
