//! The reverse proxy and load balancer against real backends: small Python (`http.server`) and Node (`http`)
//! servers in `tests/backends/`, started per test on port 0 or a Unix socket in the test's temp dir and killed
//! with it. Each prints its bound port on its first line; every answer names its backend in `X-Backend`.
//!
//! Covered: the `proxy` action over TCP and Unix sockets (target, body, status, headers, hop-by-hop fields,
//! `X-Forwarded-*`), weighted round-robin, least connections, ip_hash, passive and active health, retry rules,
//! waiting for a server (`queue_timeout`), 502/503/504, streaming of large bodies with bounded memory,
//! WebSocket tunnelling, live upstream changes under load and the `/status/upstreams` counters.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Conn, DEADLINE, Rein, Response, read_response, wait_for};

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

fn open(addr: SocketAddr) -> BufReader<TcpStream> {
    let s = TcpStream::connect(addr).expect("connect to rein");
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    BufReader::new(s)
}

/// A GET on a keep-alive connection that reports failures instead of panicking.
fn try_get(conn: &mut BufReader<TcpStream>, path: &str) -> Option<Response> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n");
    conn.get_mut().write_all(req.as_bytes()).ok()?;
    read_response(conn, false)
}

/// Keep-alive GET load on a few threads, counting answers per backend and every failure.
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    by_backend: Arc<Mutex<BTreeMap<String, u64>>>,
    failures: Arc<Mutex<Vec<String>>>,
    total: Arc<AtomicU64>,
}

impl Load {
    fn start(addr: SocketAddr, path: &'static str, threads: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let by_backend = Arc::new(Mutex::new(BTreeMap::new()));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let total = Arc::new(AtomicU64::new(0));
        let threads = (0..threads)
            .map(|_| {
                let (stop, by_backend, failures, total) = (
                    stop.clone(),
                    by_backend.clone(),
                    failures.clone(),
                    total.clone(),
                );
                std::thread::spawn(move || {
                    let mut conn = open(addr);
                    while !stop.load(Ordering::Relaxed) {
                        match try_get(&mut conn, path) {
                            Some(r) if r.status == 200 => {
                                *by_backend
                                    .lock()
                                    .unwrap()
                                    .entry(backend_of(&r))
                                    .or_default() += 1;
                            }
                            Some(r) => {
                                failures
                                    .lock()
                                    .unwrap()
                                    .push(format!("{} {}", r.status, r.text()));
                            }
                            None => {
                                failures
                                    .lock()
                                    .unwrap()
                                    .push("connection closed without an answer".into());
                                conn = open(addr);
                            }
                        }
                        total.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        Load {
            stop,
            threads,
            by_backend,
            failures,
            total,
        }
    }

    fn count(&self, backend: &str) -> u64 {
        self.by_backend
            .lock()
            .unwrap()
            .get(backend)
            .copied()
            .unwrap_or(0)
    }

    fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Waits until `backend` answered `n` more requests than it had when called.
    fn wait_more(&self, backend: &str, n: u64) {
        let start = self.count(backend);
        wait_for(&format!("{n} more answers from {backend}"), || {
            self.count(backend) >= start + n
        });
    }

    /// Stops the load; returns the counts per backend and the failures.
    fn finish(self) -> (BTreeMap<String, u64>, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        let counts = self.by_backend.lock().unwrap().clone();
        let failures = self.failures.lock().unwrap().clone();
        (counts, failures)
    }
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

// ---------------------------------------------------------------------------------------------------------
// The proxy action

#[test]
fn proxy_action_over_tcp_forwards_requests_and_answers() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let addr = rein.serve(json!([{"action": {"proxy": format!("http://{}", a.addr())}}]));
    let mut c = Conn::open(addr);

    // The target as received: encoded path, query with an empty value and a bare key.
    let target = "/headers/a%20b/c%2Fd?x=1&y=%2F%20&empty=&flag";
    let mut req = format!("GET {target} HTTP/1.1\r\n");
    for (k, v) in [
        ("Host", "example.com:8080"),
        ("Connection", "keep-alive, X-Secret"),
        ("X-Secret", "1"),
        ("Keep-Alive", "timeout=5, max=100"),
        ("Proxy-Connection", "keep-alive"),
        ("TE", "trailers"),
        ("X-Forwarded-For", "10.0.0.1"),
        ("X-Custom-In", "kept"),
    ] {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    c.send_raw(req.as_bytes());
    let r = c.read().expect("an answer to GET /headers");
    let (doc, seen) = seen_headers(&r);
    assert_eq!(doc["method"], "GET");
    assert_eq!(
        doc["target"], target,
        "the target must be forwarded as received"
    );
    for hop in ["x-secret", "keep-alive", "proxy-connection", "te"] {
        assert!(
            header_values(&seen, hop).is_empty(),
            "hop-by-hop {hop} reached the backend: {seen:?}"
        );
    }
    for v in header_values(&seen, "connection") {
        assert!(
            !v.to_ascii_lowercase().contains("x-secret"),
            "Connection forwarded as is: {v}"
        );
    }
    assert_eq!(
        header_values(&seen, "x-forwarded-for"),
        ["10.0.0.1, 127.0.0.1"]
    );
    assert_eq!(header_values(&seen, "x-forwarded-proto"), ["http"]);
    assert_eq!(
        header_values(&seen, "x-forwarded-host"),
        ["example.com:8080"]
    );
    assert_eq!(header_values(&seen, "host"), ["example.com:8080"]);
    assert_eq!(header_values(&seen, "x-custom-in"), ["kept"]);

    // Without X-Forwarded-For, rein starts one.
    let r = c.get("/headers", &[]);
    let (_, seen) = seen_headers(&r);
    assert_eq!(header_values(&seen, "x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(header_values(&seen, "x-forwarded-host"), ["test"]);

    // A body with Content-Length, every byte value included.
    let body: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let r = c.request("POST", "/echo?len=70000", &[], &body);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, body, "the POST body must arrive unchanged");
    assert_eq!(r.header("x-backend"), Some("A"));

    // A chunked body, in several chunks.
    c.send_raw(
        b"POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nhello\r\n1\r\n \r\n10\r\nchunked world!!!\r\n0\r\n\r\n",
    );
    let r = c.read().expect("an answer to the chunked POST");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "hello chunked world!!!");

    // Status and headers come back; hop-by-hop fields of the answer (named by its Connection) do not.
    let r = c.get("/status?code=201", &[]);
    assert_eq!(r.status, 201);
    assert_eq!(r.text(), "status 201 from A");
    assert_eq!(r.header("x-custom"), Some("yes"));
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(
        r.header("x-resp-secret"),
        None,
        "a field named by the backend's Connection reached the client: {r:?}"
    );
    // An error status of the backend is passed through with its own body, not replaced by rein's page.
    let r = c.get("/status?code=404", &[]);
    assert_eq!(r.status, 404);
    assert_eq!(r.text(), "status 404 from A");
    let r = c.get("/status?code=503", &[]);
    assert_eq!(r.status, 503);
    assert_eq!(r.text(), "status 503 from A");
    // HEAD: no body, the head as for GET.
    let r = c.request("HEAD", "/whoami", &[], b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("1"));
    // The connection is still usable after all that.
    assert_eq!(c.get("/whoami", &[]).text(), "A");
}

#[test]
fn x_forwarded_for_appends_to_every_prior_field() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let addr = rein.serve(json!([{"action": {"proxy": format!("http://{}", a.addr())}}]));
    // Two X-Forwarded-For fields are one list (RFC 9110 §5.3): the client's address goes after both.
    let r = Conn::open(addr).get(
        "/headers",
        &[
            ("X-Forwarded-For", "10.0.0.1"),
            ("X-Forwarded-For", "10.0.0.2"),
        ],
    );
    let (_, seen) = seen_headers(&r);
    assert_eq!(
        header_values(&seen, "x-forwarded-for").join(", "),
        "10.0.0.1, 10.0.0.2, 127.0.0.1",
        "the second X-Forwarded-For field was lost"
    );
}

#[test]
fn proxy_action_over_a_unix_socket_to_node() {
    let rein = Rein::start();
    let sock = rein.dir.path().join("node.sock");
    let n = Backend::node("N", &format!("unix:{}", sock.display()));
    let addr = rein.serve(json!([
        {"action": {"proxy": format!("http://unix:{}", sock.display())}}
    ]));
    let mut c = Conn::open(addr);
    let r = c.get("/whoami", &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "N"));
    assert_eq!(r.header("x-backend"), Some(n.name.as_str()));

    let r = c.get(
        "/headers?q=a%26b&z",
        &[
            ("X-Forwarded-For", "192.0.2.7"),
            ("Connection", "X-Secret"),
            ("X-Secret", "1"),
        ],
    );
    let (doc, seen) = seen_headers(&r);
    assert_eq!(doc["target"], "/headers?q=a%26b&z");
    assert_eq!(
        header_values(&seen, "x-forwarded-for"),
        ["192.0.2.7, 127.0.0.1"]
    );
    assert_eq!(header_values(&seen, "x-forwarded-proto"), ["http"]);
    assert!(header_values(&seen, "x-secret").is_empty(), "{seen:?}");

    let body = vec![b'z'; 300_000];
    let r = c.request("POST", "/echo", &[], &body);
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), body.len());
    assert_eq!(r.body, body);

    c.send_raw(
        b"POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n\
          3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n",
    );
    let r = c.read().expect("an answer to the chunked POST");
    assert_eq!((r.status, r.text().as_str()), (200, "abcdefg"));

    let r = c.get("/status?code=418", &[]);
    assert_eq!(r.status, 418);
    assert_eq!(r.header("x-custom"), Some("yes"));
    assert_eq!(r.text(), "status 418 from N");
}

// ---------------------------------------------------------------------------------------------------------
// Balancing

#[test]
fn round_robin_follows_weights_and_status_counts_requests() {
    let rein = Rein::start();
    let bs = [
        Backend::python("A", "0", &[]),
        Backend::python("B", "0", &[]),
        Backend::python("C", "0", &[]),
    ];
    let addr = serve_upstream(
        &rein,
        json!({"servers": {
            bs[0].addr(): {"weight": 1},
            bs[1].addr(): {"weight": 2},
            bs[2].addr(): {"weight": 3},
        }}),
    );
    let mut c = Conn::open(addr);
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for _ in 0..600 {
        let r = c.get("/whoami", &[]);
        assert_eq!(r.status, 200);
        *counts.entry(r.text()).or_default() += 1;
    }
    for (b, expected) in bs.iter().zip([100u64, 200, 300]) {
        let got = counts.get(&b.name).copied().unwrap_or(0);
        assert!(
            got.abs_diff(expected) <= expected / 10,
            "{}: {got} requests, expected {expected} ± 10% ({counts:?})",
            b.name
        );
        // The status counters agree with what the backends answered.
        let st = server_status(&rein, &b.addr());
        assert_eq!(st["requests"], got, "{}: {st}", b.name);
        assert_eq!(st["failures"], 0);
        assert_eq!(st["state"], "healthy");
        assert_eq!(st["active"], 0);
        assert_eq!(b.count("path=/whoami"), got);
    }
}

#[test]
fn idle_pooled_connections_close_after_the_idle_timeout_without_traffic() {
    let rein = Rein::start();
    let b = Backend::python("A", "0", &["--delay-ms", "300"]);
    let addr = serve_upstream(
        &rein,
        json!({"servers": servers(&[&b]), "timeouts": {"idle": 0.5}}),
    );
    // Four requests at once: four connections, pooled once answered.
    let held: Vec<JoinHandle<Response>> = (0..4)
        .map(|_| std::thread::spawn(move || Conn::open(addr).get("/whoami", &[])))
        .collect();
    for h in held {
        assert_eq!(h.join().unwrap().status, 200);
    }
    let st = server_status(&rein, &b.addr());
    assert!(st["idle_connections"].as_u64().unwrap() >= 2, "{st}");
    // No request from now on: the pool empties by itself (the backend keeps its side open).
    wait_for("the idle connections closed", || {
        server_status(&rein, &b.addr())["idle_connections"] == 0
    });
}

#[test]
fn least_connections_sends_to_the_idle_server() {
    let rein = Rein::start();
    // A answers every request after 3 s: whatever lands on it stays in flight.
    let a = Backend::python("A", "0", &["--delay-ms", "3000"]);
    let b = Backend::python("B", "0", &[]);
    let addr = serve_upstream(
        &rein,
        json!({"servers": servers(&[&a, &b]), "balance": "least_connections"}),
    );
    // Hold requests on A: three concurrent ones; each lands on A or, when B is busier, on B (which is quick).
    let held: Vec<JoinHandle<Response>> = (0..3)
        .map(|_| std::thread::spawn(move || Conn::open(addr).get("/whoami", &[])))
        .collect();
    wait_for("requests held on A and none left on B", || {
        let (sa, sb) = (
            server_status(&rein, &a.addr()),
            server_status(&rein, &b.addr()),
        );
        let done_on_b = sb["requests"].as_u64().unwrap();
        sa["active"].as_u64().unwrap() >= 1
            && sb["active"] == 0
            && sa["active"].as_u64().unwrap() + done_on_b == 3
    });
    let held_on_a = server_status(&rein, &a.addr())["active"].as_u64().unwrap();
    // Every new request goes to B, the server with fewer requests in flight.
    let mut c = Conn::open(addr);
    for i in 0..20 {
        let r = c.get("/whoami", &[]);
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "B"),
            "request {i} while A holds {held_on_a}"
        );
    }
    // The premise held throughout: A still had its requests in flight.
    assert_eq!(
        server_status(&rein, &a.addr())["active"],
        held_on_a,
        "A's requests ended during the test"
    );
    let answers: Vec<String> = held.into_iter().map(|h| h.join().unwrap().text()).collect();
    assert_eq!(
        answers.iter().filter(|n| *n == "A").count() as u64,
        held_on_a,
        "{answers:?}"
    );
    wait_for("A to be idle again", || {
        server_status(&rein, &a.addr())["active"] == 0
    });
}

#[test]
fn ip_hash_keeps_a_client_on_one_server() {
    let rein = Rein::start();
    let bs = [
        Backend::python("A", "0", &[]),
        Backend::python("B", "0", &[]),
        Backend::python("C", "0", &[]),
    ];
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes"}, "[::1]:0": {"pass": "routes"}},
        "routes": upstream_routes(),
        "upstreams": {"u": {"servers": servers(&[&bs[0], &bs[1], &bs[2]]), "balance": "ip_hash"}},
    }));
    let v4 = rein.bound("127.0.0.1:0");
    let v6 = rein.bound("[::1]:0");
    let names_from = |addr: SocketAddr, n: usize| -> BTreeSet<String> {
        (0..n)
            .map(|_| {
                // A fresh connection (a new source port) each time: the address decides.
                let r = Conn::open(addr).get("/whoami", &[]);
                assert_eq!(r.status, 200);
                r.text()
            })
            .collect()
    };
    let from_v4 = names_from(v4, 60);
    assert_eq!(from_v4.len(), 1, "127.0.0.1 was spread: {from_v4:?}");
    let from_v6 = names_from(v6, 60);
    assert_eq!(from_v6.len(), 1, "::1 was spread: {from_v6:?}");
    // One keep-alive connection: same server too.
    let mut c = Conn::open(v4);
    for _ in 0..40 {
        assert_eq!(&c.get("/whoami", &[]).text(), from_v4.first().unwrap());
    }

    // When that server goes away, the client moves, to one server again, with no failed request.
    let chosen = from_v4.first().unwrap().clone();
    let mut bs = bs;
    bs.iter_mut().find(|b| b.name == chosen).unwrap().kill();
    let moved = names_from(v4, 30);
    assert_eq!(moved.len(), 1, "after {chosen} died: {moved:?}");
    assert!(!moved.contains(&chosen));
}

// ---------------------------------------------------------------------------------------------------------
// Health

#[test]
fn passive_health_fails_over_without_errors_and_recovers() {
    let rein = Rein::start();
    let mut a = Backend::python("A", "0", &[]);
    let b = Backend::python("B", "0", &[]);
    let a_port = a.port;
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": servers(&[&a, &b]),
            "health": {"passive": {"failures": 1, "timeout": 0.5}},
            "queue_timeout": 2,
        }),
    );
    let load = Load::start(addr, "/whoami", 4);
    load.wait_more("A", 20);
    load.wait_more("B", 20);

    a.kill();
    wait_for("A to be marked failed", || {
        server_status(&rein, &a.addr())["state"] == "failed"
    });
    // Let A's passive time-out run out and be renewed a few times, under load.
    wait_for("A to be tried again after its time-outs", || {
        server_status(&rein, &a.addr())["failures"]
            .as_u64()
            .unwrap()
            >= 3
    });
    let before = load.count("A");
    load.wait_more("B", 50);
    assert_eq!(load.count("A"), before, "a dead A answered?");

    let _a = restart_on("A", a_port);
    load.wait_more("A", 20);
    let total = load.total();
    let (counts, failures) = load.finish();
    assert!(
        failures.is_empty(),
        "{} of {total} requests failed while A died and came back: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    let st = server_status(&rein, &format!("127.0.0.1:{a_port}"));
    assert_eq!(st["state"], "healthy", "{st}");
    assert!(counts["A"] > 0 && counts["B"] > 0, "{counts:?}");
}

#[test]
fn active_health_takes_a_server_out_and_back() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let b = Backend::python("B", "0", &[]);
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": servers(&[&a, &b]),
            "health": {"active": {"path": "/health", "interval": 0.1, "timeout": 1, "rise": 2, "fall": 2}},
        }),
    );
    wait_for("probes to reach A", || a.count("path=/health") >= 1);
    let mut c = Conn::open(addr);
    let names: BTreeSet<String> = (0..10).map(|_| c.get("/whoami", &[]).text()).collect();
    assert_eq!(names.len(), 2, "{names:?}");

    assert_eq!(a.direct("/health/down").status, 200);
    let probes = a.count("path=/health");
    wait_for("A to be unhealthy", || {
        server_status(&rein, &a.addr())["state"] == "unhealthy"
    });
    assert!(
        a.count("path=/health") >= probes + 2,
        "unhealthy before `fall` (2) failed probes"
    );
    let whoami_on_a = a.count("path=/whoami");
    for _ in 0..30 {
        let r = c.get("/whoami", &[]);
        assert_eq!((r.status, r.text().as_str()), (200, "B"));
    }
    assert_eq!(a.count("path=/whoami"), whoami_on_a, "A got traffic");

    assert_eq!(a.direct("/health/up").status, 200);
    let probes = a.count("path=/health");
    wait_for("A to be healthy again", || {
        server_status(&rein, &a.addr())["state"] == "healthy"
    });
    assert!(
        a.count("path=/health") >= probes + 2,
        "healthy before `rise` (2) good probes"
    );
    let names: Vec<String> = (0..10).map(|_| c.get("/whoami", &[]).text()).collect();
    assert!(names.iter().any(|n| n == "A"), "{names:?}");
    assert!(a.count("path=/whoami") > whoami_on_a);
}

// ---------------------------------------------------------------------------------------------------------
// Retries, waiting, errors

#[test]
fn a_sent_body_is_not_retried_but_an_idempotent_get_is() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let b = Backend::python("B", "0", &[]);
    // Passive health off, so that A keeps being chosen in turn.
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": servers(&[&a, &b]),
            "health": {"passive": {"failures": 0}},
            "queue_timeout": 0,
        }),
    );
    // POSTs with a body to /die?who=A: A reads the body and closes without answering.
    let mut refused = 0;
    for i in 0..6 {
        let tag = format!("post{i}");
        let mut c = Conn::open(addr);
        let r = if i % 2 == 0 {
            c.request(
                "POST",
                &format!("/die?who=A&tag={tag}"),
                &[],
                b"a body that must not be sent twice",
            )
        } else {
            c.send_raw(
                format!(
                    "POST /die?who=A&tag={tag} HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n\
                     4\r\nbody\r\n0\r\n\r\n"
                )
                .as_bytes(),
            );
            c.read().expect("an answer to the chunked POST")
        };
        let (on_a, on_b) = (
            a.count(&format!("tag={tag}")),
            b.count(&format!("tag={tag}")),
        );
        match r.status {
            502 => {
                refused += 1;
                assert_eq!(
                    (on_a, on_b),
                    (1, 0),
                    "{tag}: a POST that A took must go nowhere else"
                );
            }
            200 => {
                assert_eq!(r.text(), "B");
                assert_eq!((on_a, on_b), (0, 1), "{tag}");
            }
            other => panic!("{tag}: {other} {r:?}"),
        }
    }
    assert!(refused >= 2, "A was never tried first ({refused} 502s)");

    // GETs to the same endpoint: when A dies on one, it is tried again on B, which answers.
    let mut retried = 0;
    let mut c = Conn::open(addr);
    for i in 0..6 {
        let tag = format!("get{i}");
        let r = c.get(&format!("/die?who=A&tag={tag}"), &[]);
        assert_eq!((r.status, r.text().as_str()), (200, "B"), "{tag}");
        assert_eq!(b.count(&format!("tag={tag}")), 1);
        retried += a.count(&format!("tag={tag}"));
    }
    assert!(retried >= 2, "A was never tried first for a GET");
    let st = server_status(&rein, &a.addr());
    assert_eq!(st["failures"], refused + retried, "{st}");
    assert_eq!(server_status(&rein, &b.addr())["failures"], 0);
}

#[test]
fn a_waiting_request_gets_a_server_that_comes_up() {
    let rein = Rein::start();
    let port = free_port();
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": {format!("127.0.0.1:{port}"): {}},
            "health": {"active": {"path": "/health", "interval": 0.1, "timeout": 0.5, "rise": 1, "fall": 1}},
            "queue_timeout": 3,
        }),
    );
    let key = format!("127.0.0.1:{port}");
    wait_for("the dead server to be unhealthy", || {
        server_status(&rein, &key)["state"] == "unhealthy"
    });
    let mut c = Conn::open(addr);
    let sent = Instant::now();
    c.send_raw(b"GET /whoami HTTP/1.1\r\nHost: test\r\n\r\n");
    // The request is in rein, with no server: bring one up on the same port.
    let up = std::thread::spawn(move || {
        let b = restart_on("late", port);
        (b, sent.elapsed())
    });
    let r = c.read().expect("an answer");
    let waited = sent.elapsed();
    let (_late, came_up_after) = up.join().unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "late"), "{r:?}");
    assert!(
        waited >= came_up_after && waited < Duration::from_secs(3),
        "answered after {waited:?}; the server came up after {came_up_after:?}"
    );
}

#[test]
fn with_no_server_coming_back_the_wait_ends_in_503() {
    let rein = Rein::start();
    let port = free_port();
    let key = format!("127.0.0.1:{port}");
    // Passive health only: the first request finds the server refusing (502) and puts it out for 10 s.
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": {&key: {}},
            "health": {"passive": {"failures": 1, "timeout": 10}},
            "queue_timeout": 0.3,
        }),
    );
    let r = Conn::open(addr).get("/whoami", &[]);
    assert_eq!(r.status, 502, "{r:?}");
    assert_eq!(server_status(&rein, &key)["state"], "failed");
    // Now no server is available: the request waits queue_timeout, then 503.
    let t = Instant::now();
    let r = Conn::open(addr).get("/whoami", &[]);
    let waited = t.elapsed();
    assert_eq!(r.status, 503, "{r:?}");
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
        "503 after {waited:?}"
    );
    let st = server_status(&rein, &key);
    assert_eq!(
        st["failures"], 1,
        "the waiting request must not have tried: {st}"
    );
}

#[test]
fn refused_is_502_and_a_slow_answer_is_504() {
    let rein = Rein::start();
    let dead = format!("127.0.0.1:{}", free_port());
    let slow = Backend::python("S", "0", &[]);
    rein.serve_with(
        json!([
            {"match": {"uri": "/dead/*"}, "action": {"pass": "upstreams/dead"}},
            {"action": {"pass": "upstreams/u"}}
        ]),
        json!({"upstreams": {
            "dead": {"servers": {&dead: {}}, "queue_timeout": 0, "health": {"passive": {"failures": 0}}},
            "u": {"servers": servers(&[&slow]), "timeouts": {"read": 0.3}, "queue_timeout": 0,
                  "health": {"passive": {"failures": 0}}},
        }}),
    );
    let addr = rein.bound("127.0.0.1:0");
    let mut c = Conn::open(addr);
    for _ in 0..3 {
        let t = Instant::now();
        let r = c.get("/dead/x", &[]);
        assert_eq!(r.status, 502, "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }
    let (_, st) = rein.api(
        "GET",
        &format!("/status/upstreams/dead/servers/{dead}"),
        None,
    );
    assert_eq!(
        (st["requests"].as_u64(), st["failures"].as_u64()),
        (Some(3), Some(3)),
        "3 requests, one refused attempt each (requests, failures): {st}"
    );

    let t = Instant::now();
    let r = c.get("/slow?ms=1500", &[]);
    let took = t.elapsed();
    assert_eq!(r.status, 504, "{r:?}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(1400),
        "504 after {took:?}"
    );
    // The server itself is fine: a quick request goes through.
    let r = Conn::open(addr).get("/whoami", &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "S"));
    let st = server_status(&rein, &slow.addr());
    assert_eq!(st["failures"], 1, "{st}");
}

// ---------------------------------------------------------------------------------------------------------
// Large bodies, WebSocket

/// Bound on rein's resident memory while 200 MB go down and 100 MB go up. A proxy that streams holds a few
/// buffers per connection (hyper reads at most ~400 kB ahead, and socket buffers are kernel memory, not RSS),
/// so rein stays near its idle size (~10-20 MB in a debug build). One that buffered either body would need at
/// least 100 MB more. 100 MB in all, and at most 60 MB above the idle size, tells the two apart.
const RSS_LIMIT_KB: u64 = 100 * 1024;
const RSS_GROWTH_KB: u64 = 60 * 1024;

#[test]
fn large_bodies_stream_both_ways_in_bounded_memory() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let addr = rein.serve_with(
        json!([{"action": {"proxy": format!("http://{}", a.addr())}}]),
        json!({"settings": {"http": {"max_body_size": 200 * 1024 * 1024}}}),
    );
    let idle = rss_kb(rein.pid());

    // 200 MB down, read as it comes.
    let sampler = RssSampler::start(rein.pid());
    let mut conn = open(addr);
    conn.get_mut()
        .write_all(b"GET /big?mb=200 HTTP/1.1\r\nHost: test\r\n\r\n")
        .unwrap();
    let mut line = String::new();
    conn.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    let mut length = None;
    loop {
        line.clear();
        conn.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse::<u64>().ok();
        }
    }
    assert_eq!(length, Some(200 << 20));
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    while got < 200 << 20 {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "download cut after {got} bytes");
        got += n as u64;
    }
    assert_eq!(got, 200 << 20);
    let peak_down = sampler.peak();

    // 100 MB up, counted by the backend.
    let sampler = RssSampler::start(rein.pid());
    let total = 100u64 << 20;
    conn.get_mut()
        .write_all(
            format!("POST /count-upload HTTP/1.1\r\nHost: test\r\nContent-Length: {total}\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
    let chunk = vec![b'u'; 1 << 20];
    for _ in 0..100 {
        conn.get_mut().write_all(&chunk).unwrap();
    }
    let r = read_response(&mut conn, false).expect("an answer to the upload");
    let peak_up = sampler.peak();
    assert_eq!((r.status, r.text()), (200, total.to_string()));

    eprintln!("rein RSS: idle {idle} kB, peak {peak_down} kB down, {peak_up} kB up");
    for (what, peak) in [("download", peak_down), ("upload", peak_up)] {
        assert!(
            peak < RSS_LIMIT_KB && peak < idle + RSS_GROWTH_KB,
            "{what}: rein's RSS peaked at {peak} kB (idle {idle} kB)"
        );
    }
}

#[test]
fn websocket_is_tunnelled() {
    let rein = Rein::start();
    let ws = Backend::websocket();
    let addr = rein.serve(json!([{"action": {"proxy": format!("http://{}", ws.addr())}}]));
    let mut c = Conn::open(addr);
    // RFC 6455's example key, whose accept value is known.
    c.send_raw(
        b"GET /chat HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    );
    let r = c.read_head_only().expect("an answer to the handshake");
    assert_eq!(r.status, 101, "{r:?}");
    assert_eq!(
        r.header("sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    assert!(
        r.header("upgrade")
            .is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
    );
    assert!(
        r.header("connection")
            .is_some_and(|u| u.eq_ignore_ascii_case("upgrade"))
    );

    let mask = [0x37u8, 0xfa, 0x21, 0x3d];
    let frame = |opcode: u8, payload: &[u8]| -> Vec<u8> {
        let mut f = vec![0x80 | opcode];
        if payload.len() < 126 {
            f.push(0x80 | payload.len() as u8);
        } else {
            f.push(0x80 | 126);
            f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        }
        f.extend_from_slice(&mask);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        f
    };
    let read_frame = |c: &mut Conn| -> (u8, Vec<u8>) {
        let r = c.reader();
        let mut head = [0u8; 2];
        r.read_exact(&mut head).unwrap();
        assert_eq!(head[1] & 0x80, 0, "server frames are not masked");
        let n = match head[1] & 0x7f {
            126 => {
                let mut l = [0u8; 2];
                r.read_exact(&mut l).unwrap();
                u16::from_be_bytes(l) as usize
            }
            n => n as usize,
        };
        let mut payload = vec![0u8; n];
        r.read_exact(&mut payload).unwrap();
        (head[0], payload)
    };

    c.send_raw(&frame(0x1, b"hello through rein"));
    assert_eq!(read_frame(&mut c), (0x81, b"hello through rein".to_vec()));
    let long = "é".repeat(200);
    c.send_raw(&frame(0x1, long.as_bytes()));
    assert_eq!(read_frame(&mut c), (0x81, long.as_bytes().to_vec()));
    c.send_raw(&frame(0x9, b"ping"));
    assert_eq!(read_frame(&mut c), (0x8a, b"ping".to_vec()));
    c.send_raw(&frame(0x8, &1000u16.to_be_bytes()));
    assert_eq!(read_frame(&mut c), (0x88, 1000u16.to_be_bytes().to_vec()));
    assert!(
        c.is_closed(),
        "the tunnel stays open after the server closed"
    );
}

// ---------------------------------------------------------------------------------------------------------
// Live changes

#[test]
fn upstream_servers_change_under_load_without_errors() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let b = Backend::python("B", "0", &[]);
    let c = Backend::python("C", "0", &[]);
    let addr = serve_upstream(&rein, json!({"servers": servers(&[&a, &b])}));
    let load = Load::start(addr, "/whoami", 4);
    load.wait_more("A", 20);
    load.wait_more("B", 20);

    let set = |to: &[&Backend]| {
        let (status, body) = rein.api(
            "PUT",
            "/config/upstreams/u/servers",
            Some(&servers(to).to_string()),
        );
        assert_eq!(status, 200, "{body}");
    };
    // Checks that, once `now` answered a few, `gone` answer no more.
    let settled = |now: &str, gone: &[&str]| {
        load.wait_more(now, 20);
        let before: Vec<u64> = gone.iter().map(|g| load.count(g)).collect();
        load.wait_more(now, 50);
        let after: Vec<u64> = gone.iter().map(|g| load.count(g)).collect();
        assert_eq!(before, after, "{gone:?} still got requests");
    };

    set(&[&b, &c]);
    settled("C", &["A"]);
    load.wait_more("B", 10);
    set(&[&c]);
    settled("C", &["A", "B"]);
    set(&[&a, &c]);
    load.wait_more("A", 20);
    settled("C", &["B"]);
    set(&[&b]);
    settled("B", &["A", "C"]);

    let total = load.total();
    let (counts, failures) = load.finish();
    assert!(
        failures.is_empty(),
        "{} of {total} failed across the changes: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(counts["C"] >= 100, "{counts:?}");
    let st = server_status(&rein, &b.addr());
    assert_eq!(st["failures"], 0, "{st}");
}
