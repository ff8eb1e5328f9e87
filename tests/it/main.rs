//! rein's integration tests: one binary, each module a subsystem, every test against the real `rein`.

mod browser;
mod harness;
mod load;

mod access_log;
mod apps;
mod bench;
mod bench_reload;
mod cli;
mod control;
mod control_access;
mod examples;
mod exec_shim;
mod fleet;
mod history;
mod hostile;
mod http;
mod http2;
mod isolation;
mod lifecycle;
mod metrics;
mod perl;
mod php;
mod process;
mod proxy;
mod python;
mod python_reload;
mod reload;
mod routing;
mod ruby;
mod service;
mod share;
mod tls;
mod unit_compat;
mod unit_http;
mod unit_routing;
