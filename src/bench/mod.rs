//! `rein bench`: load generators that measure a server from the outside.
//!
//! [`http`] drives N keep-alive HTTP/1.1 connections against one target, closed loop (each connection sends as
//! soon as its previous answer is in) or open loop at a fixed rate, and returns a [`report::Report`]: requests,
//! errors by kind, latency percentiles from an HDR histogram, and the longest window without a successful
//! response ([`gap`]). [`config`] parses targets and holds the run's parameters; [`output`] formats a report for
//! people or as JSON. The CLI is a thin layer over [`http::run_with_progress`].
//! [`reload`] measures an application behind a running rein through a rolling reload or the kill of one
//! instance, phase by phase (before, during, after).

pub mod config;
pub mod gap;
pub mod http;
pub mod output;
pub mod reload;
pub mod report;
