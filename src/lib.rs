//! rein: a web application server configured live as one JSON document.
//!
//! The pipeline, in the order a change travels: [`control`] receives a document, [`compile`] turns it into a
//! [`snapshot::Snapshot`] (pure, every error with its JSON path), [`server`] publishes it and serves requests
//! through [`route`] and the actions ([`share`] for static files).

pub(crate) mod acme;
pub(crate) mod ascii;
pub(crate) mod bench;
pub(crate) mod body;
pub mod cli;
pub(crate) mod compile;
pub(crate) mod config;
pub(crate) mod control;
pub(crate) mod engine;
pub(crate) mod fastcgi;
pub(crate) mod fd_limit;
pub(crate) mod fleet;
pub(crate) mod forwarded;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
#[cfg(test)]
mod fuzz_rng;
pub(crate) mod handoff;
pub(crate) mod history;
pub(crate) mod http1;
pub(crate) mod link;
pub(crate) mod log_file;
pub(crate) mod log_limit;
pub(crate) mod proxy;
pub(crate) mod request;
pub(crate) mod rewind;
pub(crate) mod route;
pub(crate) mod scripts;
pub(crate) mod server;
pub(crate) mod share;
pub(crate) mod snapshot;
pub(crate) mod state;
pub(crate) mod stats;
pub(crate) mod supervisor;
pub(crate) mod tls;
pub(crate) mod upstream;
pub(crate) mod uri_escape;
pub(crate) mod vars;
pub(crate) mod workers;
