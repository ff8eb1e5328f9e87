//! Perl end to end: rein hosts PSGI apps (`tests/apps/perl/`) with its adapter over FastCGI. The PSGI
//! environment, request bodies buffered and seekable, array, filehandle, delayed and streamed responses,
//! `threads`, a Plack::Builder app, a `.psgi` that does not load refused with Perl's error, and rolling
//! reloads and `kill -9` under load without a failed request.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::harness::{Conn, Rein, get, wait_for};
use crate::load::{Load, assert_no_failures};

fn apps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/perl")
}

/// A Perl app running `script` from `tests/apps/perl`, with the tests' short timeouts; `extra` overrides
/// top-level keys.
fn perl_app(script: &str, extra: Value) -> Value {
    let mut app = json!({
        "type": "perl",
        "script": apps().join(script).display().to_string(),
        "stop": {"timeout": 2},
        "restart": {"min_interval": 0.2, "backoff_max": 1, "stable_after": 0.5},
    });
    if let Value::Object(more) = extra {
        app.as_object_mut().unwrap().extend(more);
    }
    app
}

fn serve_app(rein: &Rein, app: Value) -> SocketAddr {
    rein.serve_with(
        json!([{"action": {"pass": "applications/pl"}}]),
        json!({"applications": {"pl": app}}),
    )
}

fn json_of(r: &crate::harness::Response) -> Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.text()))
}

fn app_log(rein: &Rein) -> String {
    std::fs::read_to_string(rein.dir.path().join("state/logs/pl.log")).unwrap_or_default()
}

#[test]
fn a_psgi_app_gets_its_environment_and_every_kind_of_body() {
    let rein = Rein::start();
    let addr = serve_app(&rein, perl_app("app.psgi", json!({})));
    let mut conn = Conn::open(addr);

    assert_eq!(conn.get("/hello", &[]).text(), "Hello, world");
    let env = json_of(&conn.get("/env/caf%C3%A9?q=1", &[("X-Test", "yes")]));
    for (key, want) in [
        ("REQUEST_METHOD", json!("GET")),
        ("SCRIPT_NAME", json!("")),
        ("PATH_INFO", json!("/env/café")),
        ("REQUEST_URI", json!("/env/caf%C3%A9?q=1")),
        ("QUERY_STRING", json!("q=1")),
        ("SERVER_PROTOCOL", json!("HTTP/1.1")),
        ("SERVER_PORT", json!(addr.port().to_string())),
        ("REMOTE_ADDR", json!("127.0.0.1")),
        ("HTTP_X_TEST", json!("yes")),
        ("psgi.version", json!([1, 1])),
        ("psgi.url_scheme", json!("http")),
        ("psgi.multithread", json!("")),
        ("psgi.multiprocess", json!(1)),
        ("psgi.run_once", json!("")),
        ("psgi.nonblocking", json!("")),
        ("psgi.streaming", json!(1)),
        ("psgix.input.buffered", json!(1)),
        ("psgi.input.seekable", json!(1)),
        ("psgi.errors.is_stderr", json!(1)),
    ] {
        assert_eq!(env[key], want, "{key} in {env}");
    }
    assert!(env["SERVER_NAME"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(env.get("CONTENT_LENGTH").is_none(), "{env}");

    // 300 kB each way: the body read to its end, read again after a seek, and sent back.
    let body: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let r = conn.request("POST", "/echo", &[], &body);
    assert_eq!((r.status, r.body.len()), (200, body.len()));
    assert!(r.body == body, "the body came back changed");

    let r = conn.get("/stream", &[]);
    assert_eq!(r.text().lines().count(), 100);
    let r = conn.get("/delayed", &[]);
    assert_eq!(
        (r.status, r.header("x-delayed"), r.text().as_str()),
        (202, Some("yes"), "delayed answer\n")
    );
    let file = std::fs::read(apps().join("app.psgi")).unwrap();
    assert!(conn.get("/file", &[]).body == file, "a filehandle body");
    assert_eq!(conn.get("/object", &[]).text(), "one\ntwo\nthree\n");
    assert_eq!(conn.get("/status/201", &[]).status, 201);
    assert_eq!(conn.get("/error", &[]).status, 500);
    assert_eq!(conn.get("/errors", &[]).text(), "logged");
    wait_for("the app's errors in its log", || {
        let log = app_log(&rein);
        log.contains("a line on psgi.errors")
            && log.contains("this app fails on purpose")
            && log.contains("object body closed")
    });
}

/// A streamed response reaches the client chunk by chunk: the first arrives while the app still waits to
/// write the second, on a GET too (rein holds the start of an answer it could retry only until it pauses).
#[test]
fn a_streamed_response_goes_out_as_the_app_writes_it() {
    let rein = Rein::start();
    let addr = serve_app(&rein, perl_app("app.psgi", json!({})));
    let gate = rein.dir.path().join("gate");
    let mut conn = Conn::open(addr);
    let path = format!("/gated?file={}", gate.display());
    let head = format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n");
    conn.send_raw(head.as_bytes());
    let reader = conn.reader();
    let mut seen = String::new();
    while !seen.contains("first\n") {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "closed: {seen}");
        seen.push_str(&line);
    }
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(!seen.contains("second"), "{seen}");
    std::fs::write(&gate, "").unwrap();
    while !seen.contains("second\n") {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "closed: {seen}");
        seen.push_str(&line);
    }
}

#[test]
fn threads_bound_what_one_instance_runs_at_once() {
    let rein = Rein::start();
    let conc = rein.dir.path().join("conc").display().to_string();
    let app = perl_app(
        "app.psgi",
        json!({"threads": 2, "environment": {"CONC_FILE": conc}}),
    );
    let addr = serve_app(&rein, app);
    assert_eq!(json_of(&get(addr, "/env"))["psgi.multithread"], 1);
    let _ = get(addr, "/maxconc");
    // POSTs with a body: none may queue on a busy connection to the adapter (a GET may, pipelined).
    let sleep = move || {
        let r = Conn::open(addr).request("POST", "/sleep?ms=400", &[], b"x");
        r.status
    };
    let clients: Vec<_> = (0..6).map(|_| std::thread::spawn(sleep)).collect();
    let queued = || rein.api("GET", "/status/applications/pl", None).1["queued"].clone();
    wait_for("requests queued in rein", || queued().as_u64() >= Some(1));
    for c in clients {
        assert_eq!(c.join().unwrap(), 200);
    }
    assert_eq!(get(addr, "/maxconc").text(), "2");
    assert_eq!(queued(), 0);
}

#[test]
fn a_plack_builder_app_runs_with_its_middleware() {
    let rein = Rein::start();
    let addr = serve_app(&rein, perl_app("plack_app.psgi", json!({})));
    let r = get(addr, "/hello/x?name=rein");
    assert_eq!(r.text(), "Hello, rein, from /hello\n");
    assert_eq!(r.header("x-plack"), Some("builder"));
    let r = Conn::open(addr).request("POST", "/echo", &[], b"abc");
    assert_eq!(r.text(), "posted: abc");
    assert_eq!(get(addr, "/nowhere").status, 404);
}

#[test]
fn a_psgi_that_does_not_load_is_refused_with_perls_error_and_nothing_changes() {
    let rein = Rein::start();
    let addr = serve_app(&rein, perl_app("app.psgi", json!({})));
    for (script, expected) in [
        ("broken.psgi", "cannot connect to the database at startup"),
        ("syntax_error.psgi", "syntax error at"),
        ("not_an_app.psgi", "does not return a PSGI app"),
        ("missing.psgi", "cannot read"),
    ] {
        let apps = json!({"pl": perl_app(script, json!({}))});
        let (code, body) = rein.api("PUT", "/config/applications", Some(&apps.to_string()));
        assert_eq!(code, 400, "{script}: {body}");
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("applications/pl/script"), "{detail}");
        assert!(detail.contains(expected), "{script}: {detail}");
    }
    assert_eq!(
        get(addr, "/hello").text(),
        "Hello, world",
        "the old app still serves"
    );
    let (_, script) = rein.api("GET", "/config/applications/pl/script", None);
    assert!(script.as_str().unwrap().ends_with("/app.psgi"), "{script}");
}

/// Edited on disk to die while it loads (no configuration change, so no load check), then reloaded: the reload
/// is abandoned with Perl's error, and the old instance still serves.
#[test]
fn a_reload_onto_a_psgi_that_dies_is_abandoned_with_perls_error() {
    let rein = Rein::start();
    let script = rein.dir.path().join("edited.psgi");
    std::fs::write(&script, "sub { [200, [], ['hello']] };\n").unwrap();
    let app = perl_app("unused", json!({"script": script.display().to_string()}));
    let addr = serve_app(&rein, app);
    wait_for("the app to answer", || get(addr, "/").status == 200);

    std::fs::write(&script, "die \"the cache directory is gone\\n\";\n").unwrap();
    let (code, body) = rein.api("GET", "/control/applications/pl/restart", None);
    assert_eq!(code, 500, "{body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("the cache directory is gone"), "{body}");
    assert_eq!(
        get(addr, "/").text(),
        "hello",
        "the old instance still serves"
    );
}

/// Three rolling reloads under keep-alive load: no failed request.
fn reloads_under_load_fail_no_request(app: Value) {
    let rein = Rein::start();
    let addr = serve_app(&rein, app);
    wait_for("the app to answer", || get(addr, "/hello").status == 200);
    let load = Load::start(addr, &["/hello", "/hello", "/stream", "/env"]);
    for _ in 0..3 {
        load.wait_more(200);
        let (code, body) = rein.api("GET", "/control/applications/pl/restart", None);
        assert_eq!(code, 200, "{body}");
    }
    load.wait_more(200);
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
    let (_, st) = rein.api("GET", "/status/applications/pl", None);
    assert_eq!(st["last_reload"]["ok"], true, "{st}");
    assert_eq!(st["last_reload"]["requests_failed"], 0, "{st}");
}

#[test]
fn rolling_reloads_under_load_fail_no_request() {
    reloads_under_load_fail_no_request(perl_app("app.psgi", json!({"processes": 2})));
}

#[test]
fn threaded_rolling_reloads_under_load_fail_no_request() {
    reloads_under_load_fail_no_request(perl_app("app.psgi", json!({"processes": 2, "threads": 2})));
}

fn ready_pids(rein: &Rein) -> Vec<i64> {
    let (_, st) = rein.api("GET", "/status/applications/pl", None);
    st["instances"]
        .as_array()
        .map(|i| {
            i.iter()
                .filter(|i| i["state"] == "ready")
                .filter_map(|i| i["pid"].as_i64())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn killing_an_instance_under_load_fails_no_request() {
    let rein = Rein::start();
    let addr = serve_app(&rein, perl_app("app.psgi", json!({"processes": 2})));
    wait_for("two instances", || ready_pids(&rein).len() == 2);
    let load = Load::start(addr, &["/hello", "/hello", "/env", "/stream"]);
    for _ in 0..2 {
        load.wait_more(200);
        let victim = ready_pids(&rein)[0];
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(victim as i32), Signal::SIGKILL).unwrap();
        wait_for("a replacement", || {
            let pids = ready_pids(&rein);
            pids.len() == 2 && !pids.contains(&victim)
        });
    }
    load.wait_more(200);
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
}

/// The adapter's own protocol-level suite (`tests/apps/perl/test_adapter.py`: FastCGI records, aborts,
/// pipelining, threads, SIGTERM, `--check`), run as part of rein's tests.
#[test]
fn the_adapter_passes_its_own_suite() {
    let out = Command::new("python3")
        .arg(apps().join("test_adapter.py"))
        .output()
        .expect("python3");
    let mut err = std::io::stderr();
    let _ = err.write_all(&out.stderr);
    assert!(out.status.success(), "the adapter's suite failed");
}
