//! rein's integration tests: one binary, each module a subsystem, every test against the real `rein`.

mod harness;

mod apps;
mod bench;
mod bench_reload;
mod control;
mod exec_shim;
mod http;
mod lifecycle;
mod proxy;
mod reload;
mod routing;
mod share;
