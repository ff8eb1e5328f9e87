//! The reverse proxy and load balancer against real backends: small Python (`http.server`) and Node (`http`)
//! servers in `tests/backends/`, started per test on port 0 or a Unix socket in the test's temp dir and killed
//! with it. Each prints its bound port on its first line; every answer names its backend in `X-Backend`.
//!
//! Covered: the `proxy` action over TCP and Unix sockets (target, body, status, headers, hop-by-hop fields,
//! `X-Forwarded-*`), weighted round-robin, least connections, ip_hash, passive and active health, retry rules
//! and limits (`retries`), waiting for a server (`queue_timeout`), `max_connections` on HTTP servers, `unix:`
//! servers in an upstream, 502/503/504 with their log lines (refused, read, connect and send timeouts),
//! streaming of large bodies with bounded memory, WebSocket tunnelling, live upstream changes, the
//! `/status/upstreams` counters, and HTTPS upstreams (`tls.rs`). Tests live
//! in one submodule per topic; the backends and helpers they share are here.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Conn, DEADLINE, Rein, Response, read_response, wait_for};
use crate::load::{Load, open};

mod action;
mod balance;
mod health;
mod limits;
mod live;
mod retries;
mod streaming;
mod tls;

const BACKENDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/backends");

// ---------------------------------------------------------------------------------------------------------
// Backends

/// A backend process, killed when dropped.
struct Backend {
    child: Child,
    name: String,
    /// The TCP port, 0 for a Unix socket.
    port: u16,
}

impl Backend {
    /// `tests/backends/http_backend.py NAME LISTEN [extra...]`; LISTEN is a port ("0") or `unix:/path`.
    fn python(name: &str, listen: &str, extra: &[&str]) -> Backend {
        Backend::try_python(name, listen, extra)
            .unwrap_or_else(|| panic!("backend {name} did not start on {listen}"))
    }

    fn try_python(name: &str, listen: &str, extra: &[&str]) -> Option<Backend> {
        let mut cmd = Command::new("python3");
        cmd.arg(format!("{BACKENDS}/http_backend.py"))
            .arg(name)
            .arg(listen)
            .args(extra);
        Backend::spawn(name, cmd)
    }

    fn node(name: &str, listen: &str) -> Backend {
        let mut cmd = Command::new("node");
        cmd.arg(format!("{BACKENDS}/http_backend.js"))
            .arg(name)
            .arg(listen);
        Backend::spawn(name, cmd).unwrap_or_else(|| panic!("node backend {name} did not start"))
    }

    fn websocket() -> Backend {
        let mut cmd = Command::new("python3");
        cmd.arg(format!("{BACKENDS}/ws_echo.py")).arg("0");
        Backend::spawn("ws", cmd).expect("ws_echo.py did not start")
    }

    /// Starts the program and reads its first line (the port), or `None` if it exited first (port taken).
    fn spawn(name: &str, mut cmd: Command) -> Option<Backend> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn backend");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(DEADLINE).unwrap_or_default();
        let line = line.trim();
        if line.is_empty() {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        Some(Backend {
            child,
            name: name.to_owned(),
            port: line.parse().unwrap_or(0),
        })
    }

    /// `127.0.0.1:PORT`, as an upstream server key.
    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn sockaddr(&self) -> SocketAddr {
        self.addr().parse().unwrap()
    }

    /// A request straight to the backend (not through rein).
    fn direct(&self, path: &str) -> Response {
        Conn::open(self.sockaddr()).get(path, &[])
    }

    /// How many requests for `path` (or, with `tag=`, carrying that tag) this backend received.
    fn count(&self, query: &str) -> u64 {
        let r = self.direct(&format!("/count?{query}"));
        assert_eq!(r.status, 200);
        r.text().parse().unwrap()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Restarts backend `name` on `port` (just freed, so a few tries may be needed).
fn restart_on(name: &str, port: u16) -> Backend {
    let mut started = None;
    wait_for(&format!("{name} to listen again on {port}"), || {
        started = Backend::try_python(name, &port.to_string(), &[]);
        started.is_some()
    });
    started.unwrap()
}

/// A TCP port nothing listens on (bound, then released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A loopback address where connections are refused, for as long as the value lives: a socket bound there but
/// not listening. A port merely found free may be handed to the next socket bound, even the test's own backend.
struct Refusing {
    _socket: socket2::Socket,
    addr: String,
}

impl Refusing {
    fn new() -> Refusing {
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        socket.bind(&any.into()).unwrap();
        let addr = socket.local_addr().unwrap().as_socket().unwrap();
        Refusing {
            _socket: socket,
            addr: addr.to_string(),
        }
    }

    fn addr(&self) -> &str {
        &self.addr
    }
}

// ---------------------------------------------------------------------------------------------------------
// Helpers

fn upstream_routes() -> Value {
    json!([{"action": {"pass": "upstreams/u"}}])
}

/// A listener passing every request to upstream `u` configured as `u`.
fn serve_upstream(rein: &Rein, u: Value) -> SocketAddr {
    rein.serve_with(upstream_routes(), json!({"upstreams": {"u": u}}))
}

/// `{"ADDR": {}, ...}` for these backends.
fn servers(backends: &[&Backend]) -> Value {
    let map: serde_json::Map<String, Value> =
        backends.iter().map(|b| (b.addr(), json!({}))).collect();
    Value::Object(map)
}

/// `/status/upstreams/u/servers/ADDR`.
fn server_status(rein: &Rein, addr: &str) -> Value {
    let (status, body) = rein.api("GET", &format!("/status/upstreams/u/servers/{addr}"), None);
    assert_eq!(status, 200, "status of {addr}: {body}");
    body
}

fn backend_of(r: &Response) -> String {
    r.header("x-backend")
        .unwrap_or_else(|| panic!("no X-Backend in {r:?}"))
        .to_owned()
}

/// The headers a backend's `/headers` saw, lower-cased names, in order.
fn seen_headers(r: &Response) -> (Value, Vec<(String, String)>) {
    assert_eq!(r.status, 200, "{r:?}");
    let doc: Value = serde_json::from_slice(&r.body).expect("JSON from /headers");
    let pairs = doc["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_str().unwrap().to_ascii_lowercase(),
                p[1].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (doc, pairs)
}

fn header_values<'a>(pairs: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    pairs
        .iter()
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// rein's resident memory, in kB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Samples rein's RSS every few milliseconds until dropped; `peak()` is the largest seen.
struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(rss_kb(pid)));
        let (s, p) = (stop.clone(), peak.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(rss_kb(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        RssSampler {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    fn peak(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        self.peak.load(Ordering::Relaxed)
    }
}
