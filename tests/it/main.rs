//! rein's integration tests: one binary, each module a subsystem, every test against the real `rein`.

mod harness;
mod load;

mod apps;
mod bench;
mod bench_reload;
mod control;
mod exec_shim;
mod hostile;
mod http;
mod http2;
mod lifecycle;
mod php;
mod proxy;
mod python;
mod python_reload;
mod reload;
mod routing;
mod share;
mod tls;
mod unit_compat;
