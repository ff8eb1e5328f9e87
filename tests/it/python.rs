//! Python end to end: rein hosts WSGI and ASGI apps (`tests/apps/python/`) with its adapter over FastCGI.
//! PEP 3333's points (streamed input, `wsgi.errors`, iterables with `close()`, `start_response` with
//! `exc_info`, the legacy `write`), ASGI's `http` and `lifespan` scopes, `prefix` and `targets`, import
//! errors refused with their traceback, `home` and `environment`, and rolling reloads (WSGI and ASGI) under load.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::harness::{Conn, Rein, get, wait_for};
use crate::load::{Load, assert_no_failures};

fn apps() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/apps/python")
        .display()
        .to_string()
}

/// A Python app over `tests/apps/python`; `extra` overrides top-level keys (`path` included).
pub(crate) fn python_app(module: &str, extra: Value) -> Value {
    let mut app = json!({
        "type": "python",
        "path": apps(),
        "module": module,
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
        json!([{"action": {"pass": "applications/py"}}]),
        json!({"applications": {"py": app}}),
    )
}

fn json_of(r: &crate::harness::Response) -> Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.text()))
}

fn sha256(data: &[u8]) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum");
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().next().unwrap().to_owned()
}

#[test]
fn a_wsgi_app_gets_pep_3333() {
    let rein = Rein::start();
    let addr = serve_app(&rein, python_app("wsgi_app", json!({"threads": 2})));
    let mut conn = Conn::open(addr);

    assert_eq!(conn.get("/hello", &[]).text(), "Hello, world");
    let env = json_of(&conn.get("/env/caf%C3%A9?q=1", &[("X-Test", "yes")]));
    assert_eq!(env["REQUEST_METHOD"], "GET");
    assert_eq!(env["SCRIPT_NAME"], "");
    assert_eq!(env["PATH_INFO_decoded"], "/env/café");
    assert_eq!(env["QUERY_STRING"], "q=1");
    assert_eq!(env["HTTP_X_TEST"], "yes");
    assert_eq!(env["wsgi.url_scheme"], "http");
    assert_eq!(env["wsgi.multithread"], true);
    assert_eq!(env["native_strings"], true);

    // Input streamed: the first line comes back before the rest is read, then the total.
    let r = conn.request("POST", "/echo", &[], b"line one\nthe rest of it");
    assert_eq!(r.text(), "line one\nthe rest of it\n#total=23\n");

    // A 5 MB upload, read in 64 KiB pieces by the app.
    let upload: Vec<u8> = (0..5_000_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let r = conn.request("PUT", "/upload", &[], &upload);
    let got = json_of(&r);
    assert_eq!(got["bytes"], 5_000_000);
    assert_eq!(got["sha256"], sha256(&upload));

    // An iterable with close(): every chunk, and close() called.
    let r = conn.get("/stream", &[]);
    assert_eq!(r.text().lines().count(), 100);
    assert!(
        json_of(&conn.get("/closed", &[]))["closed"]
            .as_u64()
            .unwrap()
            >= 1
    );

    assert_eq!(
        conn.get("/write", &[]).text(),
        "written 1\nwritten 2\nreturned\n"
    );
    let r = conn.get("/exc_info", &[]);
    assert_eq!((r.status, r.header("x-exc-info")), (500, Some("yes")));
    // The field names go out as the application spelled them, as Unit sends them.
    assert!(r.headers.iter().any(|(n, _)| n == "X-Exc-Info"), "{r:?}");
    assert_eq!(r.text(), "custom error body\n");
    assert_eq!(conn.get("/error", &[]).status, 500);
    let r = conn.get("/status/201", &[]);
    assert_eq!((r.status, r.header("x-status")), (201, Some("201")));
    assert_eq!(conn.get("/errors", &[]).text(), "logged");
    wait_for("wsgi.errors in the app's log", || {
        std::fs::read_to_string(rein.dir.path().join("state/logs/py.log")).is_ok_and(|log| {
            log.contains("message to wsgi.errors") && log.contains("ZeroDivisionError")
        })
    });
}

#[test]
fn threads_bound_what_one_instance_runs_at_once() {
    let rein = Rein::start();
    let addr = serve_app(&rein, python_app("wsgi_app", json!({"threads": 2})));
    let _ = get(addr, "/maxconc");
    // POSTs with a body: none may queue on a busy connection to the adapter (a GET may, pipelined).
    let sleep = move || {
        let r = Conn::open(addr).request("POST", "/sleep?ms=400", &[], b"x");
        r.status
    };
    let clients: Vec<_> = (0..6).map(|_| std::thread::spawn(sleep)).collect();
    // The four beyond the instance's two threads wait in rein, and the status says so.
    let queued = || rein.api("GET", "/status/applications/py", None).1["queued"].clone();
    wait_for("requests queued in rein", || queued().as_u64() >= Some(1));
    for c in clients {
        assert_eq!(c.join().unwrap(), 200);
    }
    assert_eq!(json_of(&get(addr, "/maxconc"))["max"], 2);
    assert_eq!(queued(), 0);
}

#[test]
fn an_asgi_app_gets_lifespan_and_streams_both_ways() {
    let rein = Rein::start();
    let addr = serve_app(
        &rein,
        python_app("asgi_app", json!({"protocol": "asgi", "callable": "app"})),
    );
    let mut conn = Conn::open(addr);
    assert_eq!(conn.get("/hello", &[]).text(), "Hello, world");
    assert_eq!(json_of(&conn.get("/lifespan", &[]))["started"], true);
    let body = vec![b'q'; 300_000];
    let r = conn.request("POST", "/echo", &[], &body);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, body);
    assert_eq!(
        conn.get("/stream", &[]).text(),
        "event 0\nevent 1\nevent 2\nevent 3\nevent 4\ndone\n"
    );
    assert_eq!(conn.get("/error", &[]).status, 500);
    assert_eq!(conn.get("/hello", &[]).status, 200, "the app still serves");
}

/// The scope rein builds for an ASGI app (sent ready-made, not as CGI variables): paths decoded and raw, the
/// prefix as `root_path`, each header value apart as received, both ends of the connection.
#[test]
fn an_asgi_app_gets_its_scope_from_rein() {
    let rein = Rein::start();
    let addr = serve_app(
        &rein,
        python_app(
            "asgi_app",
            json!({"protocol": "asgi", "callable": "app", "prefix": "/api"}),
        ),
    );
    let mut conn = Conn::open(addr);
    let headers = [("X-Two", "a"), ("x-two", "b"), ("Cookie", "c=1")];
    let r = conn.request("POST", "/api/scope/caf%C3%A9?q=%20&x", &headers, b"abc");
    let scope = json_of(&r);
    assert_eq!(scope["method"], "POST");
    assert_eq!(scope["http_version"], "1.1");
    assert_eq!(scope["scheme"], "http");
    assert_eq!(scope["path"], "/api/scope/caf\u{e9}");
    assert_eq!(scope["raw_path"], "/api/scope/caf%C3%A9");
    assert_eq!(scope["root_path"], "/api");
    assert_eq!(scope["query_string"], "q=%20&x");
    assert_eq!(scope["client"][0], "127.0.0.1");
    assert!(scope["client"][1].as_u64().unwrap() > 0);
    assert_eq!(
        scope["server"],
        json!(["test", addr.port()]),
        "the Host name, the listener's port"
    );
    assert_eq!(scope["state"], json!({"started": true}));
    let headers: Vec<(String, String)> = serde_json::from_value(scope["headers"].clone()).unwrap();
    let has = |n: &str, v: &str| headers.contains(&(n.to_owned(), v.to_owned()));
    assert!(has("x-two", "a") && has("x-two", "b"), "{headers:?}");
    assert!(
        has("cookie", "c=1") && has("content-length", "3"),
        "{headers:?}"
    );
    assert_eq!(headers.iter().filter(|(n, _)| n == "host").count(), 1);
}

#[test]
fn a_prefix_becomes_script_name() {
    let rein = Rein::start();
    let addr = serve_app(&rein, python_app("wsgi_app", json!({"prefix": "/api/"})));
    let env = json_of(&get(addr, "/api/env/x"));
    assert_eq!(
        (env["SCRIPT_NAME"].as_str(), env["PATH_INFO"].as_str()),
        (Some("/api"), Some("/env/x"))
    );
}

#[test]
fn targets_pick_a_callable_per_route() {
    let rein = Rein::start();
    let addr = rein.serve_with(
        json!([
            {"match": {"uri": "/one/*"}, "action": {"pass": "applications/py/one"}},
            {"action": {"pass": "applications/py/two"}}
        ]),
        json!({"applications": {"py": {
            "type": "python",
            "path": apps(),
            "targets": {
                "one": {"module": "wsgi_targets", "callable": "first", "prefix": "/one"},
                "two": {"module": "wsgi_targets", "callable": "second"}
            }
        }}}),
    );
    assert_eq!(get(addr, "/one/x").text(), "first|/one|/x");
    assert_eq!(get(addr, "/other").text(), "second||/other");
}

#[test]
fn import_errors_are_refused_with_the_traceback_and_nothing_changes() {
    let rein = Rein::start();
    let addr = serve_app(&rein, python_app("wsgi_app", json!({})));
    for (module, expected) in [
        ("broken_syntax", "SyntaxError"),
        ("import_error", "ModuleNotFoundError"),
        ("no_callable", "has no callable 'application'"),
    ] {
        let config = json!({"applications": {"py": python_app(module, json!({}))}});
        let (code, body) = rein.api(
            "PUT",
            "/config/applications",
            Some(&config["applications"].to_string()),
        );
        assert_eq!(code, 400, "{module}: {body}");
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("applications/py"), "{detail}");
        assert!(detail.contains(expected), "{module}: {detail}");
    }
    assert_eq!(
        get(addr, "/hello").text(),
        "Hello, world",
        "the old app still serves"
    );
    let (_, apps) = rein.api("GET", "/config/applications/py/module", None);
    assert_eq!(apps, "wsgi_app");
}

/// A one-thread WSGI instance and eight clients: bodiless requests queue on its busy connection (pipelined,
/// as to PHP-FPM), streamed responses among them, and every request gets its own answer.
#[test]
fn wsgi_requests_pipeline_on_a_busy_connection() {
    let rein = Rein::start();
    let addr = serve_app(&rein, python_app("wsgi_app", json!({"threads": 1})));
    wait_for("the app to answer", || get(addr, "/hello").status == 200);
    let paths = ["/hello", "/stream", "/env", "/hello"];
    let load = Load::start(addr, &[paths, paths].concat());
    load.wait_more(400);
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
    let (_, status) = rein.api("GET", "/status/applications/py", None);
    let pipelined = status["instances"][0]["pipelined"].as_u64();
    assert!(pipelined.unwrap() > 0, "{status}");
}

/// A one-thread WSGI instance behind rein's two worker threads: each thread dials a connection of its own to
/// it (the adapter serves both from one loop) and pipelines its requests there; every request gets its answer.
#[test]
fn a_one_thread_wsgi_instance_gets_a_connection_from_each_worker_thread() {
    let rein = Rein::start_in(
        tempfile::tempdir().unwrap(),
        &["--config", "EMPTY", "--workers", "2"],
    );
    rein.wait_ready();
    let addr = serve_app(&rein, python_app("wsgi_app", json!({"threads": 1})));
    wait_for("the app to answer", || get(addr, "/hello").status == 200);
    // rein hands each new client connection to the worker thread serving the fewest: both get some.
    let load = Load::start(
        addr,
        &["/hello", "/env", "/hello", "/stream", "/hello", "/env"],
    );
    load.wait_more(400);
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
    let (_, status) = rein.api("GET", "/status/applications/py", None);
    let instance = &status["instances"][0];
    assert_eq!(instance["connections_opened"], 2, "{status}");
    assert!(instance["pipelined"].as_u64() > Some(0), "{status}");
}

/// Three rolling reloads under keep-alive load: no failed request, and the last reload's report says so.
fn reloads_under_load_fail_no_request(app: Value, paths: &[&'static str]) {
    let rein = Rein::start();
    let addr = serve_app(&rein, app);
    wait_for("the app to answer", || get(addr, "/hello").status == 200);
    let load = Load::start(addr, paths);
    for _ in 0..3 {
        load.wait_more(200);
        let (code, body) = rein.api("GET", "/control/applications/py/restart", None);
        assert_eq!(code, 200, "{body}");
    }
    load.wait_more(200);
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
    let (_, st) = rein.api("GET", "/status/applications/py", None);
    let last = &st["last_reload"];
    assert_eq!(last["ok"], true, "{st}");
    assert!(last["requests_served"].as_u64().unwrap_or(0) > 0, "{st}");
    assert_eq!(last["requests_failed"], 0, "{st}");
}

#[test]
fn rolling_reloads_under_load_fail_no_request() {
    reloads_under_load_fail_no_request(
        python_app("wsgi_app", json!({"processes": 2, "threads": 2})),
        &["/hello", "/hello", "/hello", "/env"],
    );
}

/// The same with instances of one thread: connections per worker thread, served by the adapter's one loop.
#[test]
fn one_thread_wsgi_rolling_reloads_under_load_fail_no_request() {
    reloads_under_load_fail_no_request(
        python_app("wsgi_app", json!({"processes": 2, "threads": 1})),
        &["/hello", "/hello", "/hello", "/env", "/stream"],
    );
}

#[test]
fn asgi_rolling_reloads_under_load_fail_no_request() {
    reloads_under_load_fail_no_request(
        python_app(
            "asgi_app",
            json!({"protocol": "asgi", "callable": "app", "processes": 2}),
        ),
        &["/hello", "/hello", "/scope"],
    );
}

/// The adapter's own protocol-level suite (`tests/apps/python/test_adapter.py`: FastCGI records, every PEP 3333
/// and ASGI point on a raw socket), run as part of rein's tests.
#[test]
fn the_adapter_passes_its_own_suite() {
    let out = Command::new("python3")
        .arg(Path::new(&apps()).join("test_adapter.py"))
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `home` names a virtualenv whose interpreter runs the adapter; `environment` reaches the process.
#[test]
fn home_picks_the_virtualenv_and_environment_reaches_the_app() {
    let rein = Rein::start();
    let venv = rein.dir.path().join("venv");
    let made = Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .expect("python3 -m venv");
    assert!(made.success(), "python3 -m venv --without-pip failed");
    let addr = serve_app(
        &rein,
        python_app(
            "wsgi_app",
            json!({"home": venv.display().to_string(), "environment": {"GREETING": "hi from rein"}}),
        ),
    );
    let runtime = json_of(&get(addr, "/runtime"));
    let prefix = Path::new(runtime["prefix"].as_str().expect("prefix"));
    assert_eq!(
        prefix.canonicalize().unwrap(),
        venv.canonicalize().unwrap(),
        "{runtime}"
    );
    assert_eq!(runtime["greeting"], "hi from rein", "{runtime}");
}

/// What Unit's WSGI host accepts: `start_response('200', …)` (no reason phrase), a body returned as one bare
/// `bytes` object (the whole body, not its bytes one by one), and a `Content-Length` that is not a number
/// (Unit passes the body on; rein drops the header and frames the body itself).
#[test]
fn wsgi_apps_written_for_unit_are_served_as_unit_serves_them() {
    let rein = Rein::start();
    let addr = serve_app(&rein, python_app("wsgi_unit_ways", json!({})));
    let r = get(addr, "/bare_status");
    assert_eq!((r.status, r.text().as_str()), (200, "bare status"), "{r:?}");
    let r = get(addr, "/bare_status_404");
    assert_eq!((r.status, r.text().as_str()), (404, "not here"), "{r:?}");
    let r = get(addr, "/bytes");
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "one bytes object, not an iterable of chunks"),
        "{r:?}"
    );
    let r = get(addr, "/bad_length");
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "framed by rein"),
        "{r:?}"
    );
    assert!(r.header("content-length") != Some("abc"), "{r:?}");
}
