//! rein: a web application server configured live as one JSON document.
//!
//! The pipeline, in the order a change travels: [`control`] receives a document, [`compile`] turns it into a
//! [`snapshot::Snapshot`] (pure, every error with its JSON path), [`server`] publishes it and serves requests
//! through [`route`] and the actions ([`share`] for static files).

pub mod acme;
pub mod ascii;
pub mod bench;
pub mod body;
pub mod cli;
pub mod compile;
pub mod config;
pub mod control;
pub mod engine;
pub mod fastcgi;
pub(crate) mod fd_limit;
pub mod forwarded;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
#[cfg(test)]
mod fuzz_rng;
pub mod http1;
pub(crate) mod log_file;
pub(crate) mod log_limit;
pub mod proxy;
pub mod request;
pub mod route;
pub mod scripts;
pub mod server;
pub mod share;
pub mod snapshot;
pub mod state;
pub mod supervisor;
pub mod tls;
pub mod upstream;
pub(crate) mod uri_escape;
pub mod vars;
pub mod workers;
