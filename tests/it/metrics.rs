//! Prometheus metrics: `GET /metrics` and a listener's `metrics` action pass `promtool check metrics`, and a
//! real Prometheus scraping rein under load sees the request counts, status classes, an instance restarted
//! after `kill -9`, and a reload.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::harness::{Rein, get, wait_for};

fn node_hello() -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/hello.js");
    json!({
        "type": "external",
        "executable": "node",
        "arguments": [script.display().to_string()],
        "readiness": {"timeout": 5},
        "stop": {"timeout": 1},
        "restart": {"min_interval": 0.2, "backoff_max": 1, "stable_after": 0.5},
    })
}

/// A listener with `/metrics` for local clients only, `/missing` answered 404, the rest to the app `hello`.
fn serve(rein: &Rein) -> SocketAddr {
    rein.serve_with(
        json!([
            {"match": {"uri": "/metrics", "source": "127.0.0.1"}, "action": {"metrics": {}}},
            {"match": {"uri": "/missing"}, "action": {"return": 404}},
            {"action": {"pass": "applications/hello"}}
        ]),
        json!({"applications": {"hello": node_hello()}}),
    )
}

fn promtool_check(text: &[u8]) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package) is needed by the metrics tests");
    child.stdin.take().unwrap().write_all(text).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}\n--- metrics ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(text)
    );
}

#[test]
fn promtool_accepts_the_metrics_of_the_api_and_of_a_listener() {
    let rein = Rein::start();
    let addr = serve(&rein);
    wait_for("hello to answer", || get(addr, "/").status == 200);
    assert_eq!(get(addr, "/missing").status, 404);
    let (status, headers, api) = rein.api_raw("GET", "/metrics", None, &[]);
    assert_eq!(status, 200);
    let content_type = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"));
    assert!(
        content_type.is_some_and(|(_, v)| v.starts_with("text/plain; version=0.0.4")),
        "{headers:?}"
    );
    promtool_check(&api);
    let text = String::from_utf8(api).unwrap();
    assert!(
        text.contains("rein_target_requests_total{target=\"applications/hello\",code=\"2xx\"} ")
    );
    assert!(
        text.contains("rein_http_requests_total{listener=\"127.0.0.1:0\",code=\"4xx\"} 1\n"),
        "{text}"
    );
    let listener = get(addr, "/metrics");
    assert_eq!(listener.status, 200);
    promtool_check(&listener.body);
    assert_eq!(rein.api("POST", "/metrics", Some("")).0, 405);
}

#[test]
fn the_metrics_action_takes_no_options() {
    let rein = Rein::start();
    let routes = json!([{"action": {"metrics": {"token": "x"}}}]);
    let config = json!({"listeners": {"127.0.0.1:0": {"pass": "routes"}}, "routes": routes});
    let (status, body) = rein.api("PUT", "/config", Some(&config.to_string()));
    assert_eq!(status, 400, "{body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("routes/0/action/metrics/token"), "{body}");
}

/// A Prometheus server scraping one target every second, stopped when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: SocketAddr) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: rein\n    metrics_path: /metrics\n    static_configs:\n      - targets: ['{target}']\n"
        );
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap();
        // Prometheus takes no port 0: a port the system just gave out and took back is free.
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("prometheus (Debian's prometheus package) is needed by the metrics tests");
        Prometheus {
            child,
            addr,
            _dir: dir,
        }
    }

    /// The value of an instant query's one result, if it has exactly one.
    fn value(&self, query: &str) -> Option<f64> {
        let path = format!("/api/v1/query?query={}", percent_encode(query));
        // Not listening yet: no answer rather than the harness's panic.
        std::net::TcpStream::connect(self.addr).ok()?;
        let r = get(self.addr, &path);
        let doc: Value = serde_json::from_slice(&r.body).ok()?;
        match doc["data"]["result"].as_array()?.as_slice() {
            [one] => one["value"][1].as_str()?.parse().ok(),
            _ => None,
        }
    }

    /// Polls `query` until its value is `expected`.
    fn wait_for_value(&self, query: &str, expected: f64) {
        let mut last = None;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            last = self.value(query);
            if last == Some(expected) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        let log =
            std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default();
        panic!("{query}: {last:?}, not {expected}\n--- prometheus log ---\n{log}");
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn prometheus_sees_requests_status_classes_a_restart_and_a_reload() {
    let rein = Rein::start();
    let addr = serve(&rein);
    wait_for("hello to answer", || get(addr, "/").status == 200);
    let prometheus = Prometheus::start(addr);
    prometheus.wait_for_value("up{job=\"rein\"}", 1.0);
    // Load while Prometheus scrapes: 220 answered by the app (and the one that found it ready above), 10 by
    // a route's 404.
    let load = std::thread::spawn(move || {
        for i in 0..230 {
            let (path, want) = if i % 23 == 0 {
                ("/missing", 404)
            } else {
                ("/", 200)
            };
            let r = get(addr, path);
            assert_eq!(r.status, want, "{path}");
        }
    });
    load.join().unwrap();
    let app = "rein_target_requests_total{target=\"applications/hello\",code=\"2xx\"}";
    prometheus.wait_for_value(app, 221.0);
    let missing = "rein_http_requests_total{listener=\"127.0.0.1:0\",code=\"4xx\"}";
    prometheus.wait_for_value(missing, 10.0);
    prometheus.wait_for_value("rein_http_requests_total{code=\"5xx\"}", 0.0);

    let (_, status) = rein.api("GET", "/status/applications/hello/instances/0/pid", None);
    let pid = status.as_u64().expect("an instance's pid") as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    prometheus.wait_for_value(
        "rein_app_restarts_total{app=\"hello\",cause=\"exited\"}",
        1.0,
    );
    prometheus.wait_for_value("rein_app_instances{app=\"hello\",state=\"ready\"}", 1.0);

    let (code, body) = rein.api("GET", "/control/applications/hello/restart", None);
    assert_eq!(code, 200, "{body}");
    prometheus.wait_for_value("rein_app_reloads_total{app=\"hello\",outcome=\"ok\"}", 1.0);
    prometheus.wait_for_value("rein_app_reload_duration_seconds_count{app=\"hello\"}", 1.0);
    // The start-up document, then the test's: an application reload changes no configuration.
    prometheus.wait_for_value("rein_config_generation", 2.0);
}
