//! rein's own HTTP/1.1 server connection (hyper serves HTTP/2 and `h2c` listeners).
//!
//! Written for what a front server does with each request: the head is parsed with `httparse` where it was
//! read and its field values are slices of those bytes; a body is read by the request straight from the
//! socket; an answer's head and a small body leave in one write; an idle connection holds no buffer; field
//! names go out in canonical case or as their producer spelled them. It keeps what the server promises:
//! pipelining, `Expect: 100-continue`, chunked coding both ways, upgrades, Unit's limits and timeouts, and a
//! graceful end.

mod body;
mod conn;
mod encode;
mod parse;

pub(crate) use body::{Body, BodyReadError, BoxIo};
pub(crate) use conn::PendingUpgrade;
pub(super) use conn::run;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use parse::{Framing, parse};
