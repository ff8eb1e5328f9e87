//! A FastCGI 1.0 client, responder role: what talks to PHP-FPM and its kin.
//!
//! The layers, each usable alone:
//! - [`record`]: records without I/O: an encoder and a [`record::Decoder`] bytes are pushed into and records
//!   pulled out of, which never panics whatever the bytes;
//! - [`params`]: the name-value pairs of PARAMS and GET_VALUES;
//! - [`request_params()`]: the CGI/1.1 variables of a request, as PHP-FPM expects them, or for rein's
//!   Python adapter the ASGI scope (`asgi_scope`) or the WSGI environ (`wsgi_environ`) ready-made in one
//!   param;
//! - [`cgi`]: the CGI response head at the start of STDOUT (`Status:`, header lines, an empty line);
//! - [`Conn`]: one connection, one request at a time (request id 1, `FCGI_KEEP_CONN`, no multiplexing, which
//!   PHP-FPM does not do anyway), over a TCP or Unix socket (`socket`, which acknowledges TCP data at once);
//!   the request in flight on it is an `exchange` (what goes out, what comes back, whether the connection
//!   can be reused).
//!
//! [`Conn::send`] streams the request body as STDIN while it reads the answer, and returns at the end of the
//! CGI head; the [`ResponseBody`] then streams STDOUT with backpressure and a read timeout, logs STDERR line by
//! line, and at END_REQUEST hands the connection to whoever registered with [`ResponseBody::on_reuse`] —
//! only if the exchange ended cleanly, so a pooled connection is always one the server can take a new
//! request on. [`pipeline`]: on servers that allow it, a request without a body queued on a connection
//! behind the one in progress, and the connection handed over at its end.

mod asgi_scope;
pub mod cgi;
mod client;
mod exchange;
pub mod params;
pub mod pipeline;
pub mod record;
mod request_params;
mod wsgi_environ;

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod php_tests;

pub use client::{Conn, Error, ResponseBody, connect};
pub use exchange::encode_bodiless;
pub use params::Params;
pub use request_params::{Cgi, Script, request_params};
