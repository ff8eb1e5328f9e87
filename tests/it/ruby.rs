//! Ruby end to end: rein hosts Rack apps (`tests/apps/ruby/`) with its adapter over FastCGI. The Rack
//! environment (checked by `Rack::Lint` in the app), bodies both ways, Unit's hooks, `threads`, a Sinatra app,
//! Bundler, apps that cannot boot refused with Ruby's error, and reloads and `kill -9` under load.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::harness::{Conn, DEADLINE, Rein, get, wait_for};
use crate::load::{Load, assert_no_failures};

fn apps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/ruby")
}

/// A Ruby app running `script` of `tests/apps/ruby`; `extra` overrides top-level keys.
fn ruby_app(script: &str, extra: Value) -> Value {
    let mut app = json!({
        "type": "ruby",
        "script": apps().join(script).display().to_string(),
        "stop": {"timeout": 2},
        "restart": {"min_interval": 0.2, "backoff_max": 1, "max_failures": 100, "stable_after": 0.5},
    });
    if let Value::Object(more) = extra {
        app.as_object_mut().unwrap().extend(more);
    }
    app
}

fn serve_app(rein: &Rein, app: Value) -> SocketAddr {
    let addr = rein.serve_with(
        json!([{"action": {"pass": "applications/rb"}}]),
        json!({"applications": {"rb": app}}),
    );
    wait_for("the Ruby app to answer", || get(addr, "/pid").status == 200);
    addr
}

fn json_of(r: &crate::harness::Response) -> Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.text()))
}

fn status(rein: &Rein) -> Value {
    rein.api("GET", "/status/applications/rb", None).1
}

fn ready_pids(rein: &Rein) -> Vec<u64> {
    let st = status(rein);
    let all = st["instances"].as_array().cloned().unwrap_or_default();
    all.iter()
        .filter(|i| i["state"] == "ready")
        .filter_map(|i| i["pid"].as_u64())
        .collect()
}

#[test]
fn a_rack_app_gets_its_environment_and_bodies_both_ways() {
    let rein = Rein::start();
    let addr = serve_app(&rein, ruby_app("app.ru", json!({"threads": 2})));
    let mut conn = Conn::open(addr);

    let env = json_of(&conn.get("/env?a=1&b=%20", &[("X-Test", "yes"), ("Cookie", "c=1")]));
    assert_eq!(env["REQUEST_METHOD"], "GET");
    assert_eq!(env["SCRIPT_NAME"], "");
    assert_eq!(env["PATH_INFO"], "/env");
    assert_eq!(env["QUERY_STRING"], "a=1&b=%20");
    assert_eq!(env["REQUEST_URI"], "/env?a=1&b=%20");
    assert_eq!(env["SERVER_PORT"], addr.port().to_string());
    assert_eq!(env["SERVER_PROTOCOL"], "HTTP/1.1");
    assert_eq!(env["REMOTE_ADDR"], "127.0.0.1");
    assert_eq!(env["HTTP_HOST"], "test");
    assert_eq!(env["HTTP_X_TEST"], "yes");
    assert_eq!(env["HTTP_COOKIE"], "c=1");
    assert_eq!(env["rack.url_scheme"], "http");
    assert_eq!(env["rack.version"], json!([1, 3]));
    assert_eq!(env["rack.multithread"], true);
    assert_eq!(env["rack.multiprocess"], true);
    assert_eq!(env["rack.run_once"], false);
    assert_eq!(env["rack.hijack?"], false);
    assert_eq!(env["test.input_encoding"], "ASCII-8BIT");
    assert!(env.get("CONTENT_LENGTH").is_none(), "{env}");
    assert!(env.get("LISTEN_FDS").is_none(), "{env}");

    // A 300 kB POST comes back whole, from a rewindable temporary file.
    let upload: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let r = conn.request("POST", "/echo", &[], &upload);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-length"), Some("300000"));
    assert_eq!(r.header("x-rewound"), Some("true"));
    assert_eq!(r.header("x-input"), Some("Tempfile"));
    assert!(r.body == upload, "the body echoed");
    let r = conn.request("POST", "/echo", &[], b"small");
    assert_eq!(
        (r.text(), r.header("x-input")),
        ("small".into(), Some("StringIO"))
    );

    // A body read from the file its to_path names, one through a Rack 3 stream, multi-line header values.
    let source = std::fs::read(apps().join("app.ru")).unwrap();
    assert!(conn.get("/file", &[]).body == source);
    assert_eq!(conn.get("/call", &[]).text(), "called\ntwice\n");
    let r = conn.get("/headers", &[]);
    let cookies: Vec<_> = r
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
        .collect();
    assert_eq!(cookies.len(), 2, "{r:?}");

    // rack.after_reply runs once the response is out.
    let marker = rein.dir.path().join("after_reply");
    let r = conn.get(&format!("/after_reply?path={}", marker.display()), &[]);
    assert_eq!(r.text(), "replied\n");
    wait_for("the after_reply callable", || marker.exists());

    // An exception is a 500, logged with the app's backtrace in the app's log; the app goes on.
    assert_eq!(conn.get("/raise", &[]).status, 500);
    wait_for("the error in the app's log", || {
        std::fs::read_to_string(rein.state.join("logs/rb.log")).is_ok_and(|log| {
            log.contains("the app failed on purpose (RuntimeError)") && log.contains("app.ru:")
        })
    });
    assert_eq!(conn.get("/pid", &[]).status, 200);
}

/// Each chunk of a streamed body reaches the client as the app yields it, on a GET too: rein holds the start
/// of an answer to a request it could send again only until the answer pauses.
/// A `prefix`: the path the app is mounted at is its `SCRIPT_NAME`, the rest its `PATH_INFO`, as Rack's URL
/// builders expect of an app under a path.
#[test]
fn a_prefix_is_the_apps_script_name() {
    let rein = Rein::start();
    let addr = serve_app(&rein, ruby_app("app.ru", json!({"prefix": "/shop/"})));
    let env = json_of(&get(addr, "/shop/env"));
    assert_eq!(
        (&env["SCRIPT_NAME"], &env["PATH_INFO"]),
        (&json!("/shop"), &json!("/env"))
    );
    let (code, body) = rein.api("PUT", "/config/applications/rb/prefix", Some("\"shop\""));
    assert_eq!(code, 400, "{body}");
    assert!(body["detail"].to_string().contains("prefix"), "{body}");
}

#[test]
fn a_streamed_body_goes_out_as_it_comes() {
    let rein = Rein::start();
    let addr = serve_app(&rein, ruby_app("app.ru", json!({})));
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let request = format!(
        "GET /stream?n=3&gate={} HTTP/1.1\r\nHost: test\r\n\r\n",
        gate.display()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut read_until = |got: &mut Vec<u8>, text: &str| {
        while !String::from_utf8_lossy(got).contains(text) {
            let n = stream.read(&mut buf).expect("the streamed response");
            assert!(
                n > 0,
                "closed before {text:?}: {}",
                String::from_utf8_lossy(got)
            );
            got.extend_from_slice(&buf[..n]);
        }
    };
    read_until(&mut got, "chunk 1\n");
    assert!(!String::from_utf8_lossy(&got).contains("last"));
    std::fs::write(&gate, "").unwrap();
    read_until(&mut got, "last\n");
}

/// `threads` bound the requests an instance runs at once; rein queues the rest.
#[test]
fn threads_bound_what_one_instance_runs_at_once() {
    let rein = Rein::start();
    let addr = serve_app(&rein, ruby_app("app.ru", json!({"threads": 2})));
    // POSTs with a body: none may queue on a busy connection to the adapter.
    let sleep = move || json_of(&Conn::open(addr).request("POST", "/sleep?ms=400", &[], b"x"));
    let clients: Vec<_> = (0..6).map(|_| std::thread::spawn(sleep)).collect();
    let queued = || status(&rein)["queued"].clone();
    wait_for("requests queued in rein", || queued().as_u64() >= Some(1));
    let answers: Vec<Value> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    assert_eq!(
        answers.iter().map(|a| a["most"].as_u64().unwrap()).max(),
        Some(2)
    );
    assert_eq!(queued(), 0);
}

/// Unit's hooks: on_worker_boot once per instance (before the app loads), on_thread_boot in each of its threads,
/// and at a graceful stop on_thread_shutdown in each, then on_worker_shutdown.
#[test]
fn hooks_run_as_unit_runs_them() {
    let rein = Rein::start();
    let log = rein.dir.path().join("hooks.log");
    let app = ruby_app(
        "app.ru",
        json!({"processes": 2, "threads": 3, "hooks": apps().join("hooks.rb").display().to_string(),
               "environment": {"HOOKS_LOG": log.display().to_string()}}),
    );
    let addr = serve_app(&rein, app);
    wait_for("two ready instances", || ready_pids(&rein).len() == 2);
    let thread = json_of(&get(addr, "/thread"));
    assert_eq!(
        (&thread["thread_booted"], &thread["worker_booted"]),
        (&json!(true), &json!(true))
    );
    let pids = ready_pids(&rein);
    let events = || -> Vec<(String, u64)> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let mut w = l.split_whitespace();
                (
                    w.next().unwrap().to_owned(),
                    w.next().unwrap().parse().unwrap(),
                )
            })
            .collect()
    };
    let count = |evs: &[(String, u64)], name: &str, pid: u64| {
        evs.iter().filter(|(e, p)| e == name && *p == pid).count()
    };
    wait_for("every thread booted", || {
        let evs = events();
        pids.iter().all(|&p| count(&evs, "thread_boot", p) == 3)
    });
    let evs = events();
    for &pid in &pids {
        assert_eq!(count(&evs, "worker_boot", pid), 1, "{evs:?}");
        assert_eq!(count(&evs, "thread_shutdown", pid), 0, "{evs:?}");
    }
    // The check run before the configuration was accepted called no hook: only the instances are in the log.
    assert!(
        evs.iter().all(|(_, p)| pids.contains(p)),
        "{evs:?} {pids:?}"
    );

    let (code, body) = rein.api("DELETE", "/config/applications/rb", None);
    assert_eq!(code, 400, "the route still passes to it: {body}");
    let (code, body) = rein.api("PUT", "/config/routes", Some("[]"));
    assert_eq!(code, 200, "{body}");
    let (code, body) = rein.api("DELETE", "/config/applications/rb", None);
    assert_eq!(code, 200, "{body}");
    wait_for("the shutdown hooks", || {
        let evs = events();
        pids.iter().all(|&p| {
            count(&evs, "worker_shutdown", p) == 1 && count(&evs, "thread_shutdown", p) == 3
        })
    });
    for &pid in &pids {
        let last = events().into_iter().rfind(|(_, p)| *p == pid).unwrap();
        assert_eq!(last.0, "worker_shutdown");
    }
}

#[test]
fn a_sinatra_app_runs_from_its_config_ru() {
    let rein = Rein::start();
    let addr = rein.serve_with(
        json!([{"action": {"pass": "applications/rb"}}]),
        json!({"applications": {"rb": ruby_app("sinatra.ru", json!({}))}}),
    );
    wait_for("Sinatra to answer", || get(addr, "/hi/ann").status == 200);
    assert_eq!(get(addr, "/hi/bob").text(), "hi bob from /hi/bob\n");
    let r = Conn::open(addr).request(
        "POST",
        "/form",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"a=1&b=two",
    );
    assert_eq!(r.text(), "got 1 and two\n");
}

/// `script` relative to `working_directory`; a Gemfile beside it is set up by Bundler before the app loads, and a
/// gem it names that is not installed refuses the app with Bundler's error.
#[test]
fn bundler_and_a_script_relative_to_the_working_directory() {
    let rein = Rein::start();
    let dir = rein.dir.path().join("bundled");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("Gemfile"), "gem \"rack\"\n").unwrap();
    std::fs::write(
        dir.join("config.ru"),
        "run ->(env) { [200, {\"Content-Type\" => \"text/plain\"}, \
         [\"#{defined?(Bundler) ? Bundler.root : 'no bundler'}|#{Dir.pwd}\\n\"]] }\n",
    )
    .unwrap();
    let app = |script: &str| {
        json!({"type": "ruby", "script": script, "working_directory": dir.display().to_string(),
               "stop": {"timeout": 2}})
    };
    let addr = rein.serve_with(
        json!([{"action": {"pass": "applications/rb"}}]),
        json!({"applications": {"rb": app("config.ru")}}),
    );
    wait_for("the bundled app to answer", || get(addr, "/").status == 200);
    let d = dir.display();
    assert_eq!(get(addr, "/").text(), format!("{d}|{d}\n"));

    std::fs::write(
        dir.join("Gemfile"),
        "gem \"rack\"\ngem \"no_such_gem_for_rein\"\n",
    )
    .unwrap();
    let _ = std::fs::remove_file(dir.join("Gemfile.lock"));
    let mut changed = app("config.ru");
    changed["threads"] = json!(2);
    let (code, body) = rein.api("PUT", "/config/applications/rb", Some(&changed.to_string()));
    assert_eq!(code, 400, "{body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("applications/rb/script"), "{detail}");
    assert!(detail.contains("no_such_gem_for_rein"), "{detail}");
}

/// A rackup file that raises, does not parse or is missing is refused with Ruby's error, naming
/// `applications/rb/script`, and the running configuration stays.
#[test]
fn an_app_that_cannot_boot_is_refused_with_its_error_and_nothing_changes() {
    let rein = Rein::start();
    let addr = serve_app(&rein, ruby_app("app.ru", json!({})));
    for (script, expected) in [
        ("broken.ru", "this app refuses to boot (ArgumentError)"),
        ("syntax_error.ru", "SyntaxError"),
        ("missing.ru", "No such file or directory"),
    ] {
        let app = ruby_app(script, json!({}));
        let (code, body) = rein.api("PUT", "/config/applications/rb", Some(&app.to_string()));
        assert_eq!(code, 400, "{script}: {body}");
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("applications/rb/script"), "{detail}");
        assert!(detail.contains(expected), "{script}: {detail}");
    }
    let (_, script) = rein.api("GET", "/config/applications/rb/script", None);
    assert!(script.as_str().unwrap().ends_with("app.ru"), "{script}");
    assert_eq!(get(addr, "/pid").status, 200, "the app still serves");
}

/// A rackup file broken on disk, then reloaded: the reload is abandoned with Ruby's error and the old instance
/// serves on.
#[test]
fn a_reload_onto_a_broken_rackup_file_keeps_the_old_version() {
    let rein = Rein::start();
    let dir = rein.dir.path().join("code");
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("config.ru");
    std::fs::write(&script, "run ->(env) { [200, {}, [\"v1\\n\"]] }\n").unwrap();
    let addr = rein.serve_with(
        json!([{"action": {"pass": "applications/rb"}}]),
        json!({"applications": {"rb": {"type": "ruby", "script": script.display().to_string(),
                                       "stop": {"timeout": 2}}}}),
    );
    wait_for("the app to answer", || get(addr, "/").status == 200);
    std::fs::write(&script, "raise \"version 2 cannot boot\"\n").unwrap();
    let (code, body) = rein.api("GET", "/control/applications/rb/restart", None);
    assert_eq!(code, 500, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("version 2 cannot boot"),
        "{body}"
    );
    assert_eq!(
        get(addr, "/").text(),
        "v1\n",
        "the old instance still serves"
    );
}

fn kill9(pid: u64) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
}

/// Rolling reloads and `kill -9` of an instance, under keep-alive load: no request fails.
#[test]
fn reloads_and_kills_under_load_fail_no_request() {
    reloads_and_kills_under_load(2);
}

/// The same with one thread: the adapter's one loop, requests pipelined on a connection per rein worker.
#[test]
fn reloads_and_kills_under_load_fail_no_request_with_one_thread() {
    reloads_and_kills_under_load(1);
}

fn reloads_and_kills_under_load(threads: u32) {
    let rein = Rein::start();
    let addr = serve_app(
        &rein,
        ruby_app("app.ru", json!({"processes": 2, "threads": threads})),
    );
    wait_for("two ready instances", || ready_pids(&rein).len() == 2);
    let load = Load::start_keyed(addr, &["/pid", "/pid", "/env", "/file", "/pid"], |r| {
        if r.text().starts_with('{') {
            "env".into()
        } else {
            "other".into()
        }
    });
    for round in 0..2 {
        load.wait_more(200);
        let (code, body) = rein.api("GET", "/control/applications/rb/restart", None);
        assert_eq!(code, 200, "reload {round}: {body}");
        load.wait_more(200);
        let pids = ready_pids(&rein);
        kill9(pids[round % pids.len()]);
        load.wait_more(100);
        wait_for("two ready instances again", || ready_pids(&rein).len() == 2);
    }
    load.wait_more(200);
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
    let last = &status(&rein)["last_reload"];
    assert_eq!(last["ok"], true, "{last}");
    assert_eq!(last["requests_failed"], 0, "{last}");
}

/// The adapter's own protocol-level suite (`tests/apps/ruby/test_rack_adapter.py`: FastCGI records, aborts,
/// pipelining, the Rack points on a raw socket), run as part of rein's tests.
#[test]
fn the_adapter_passes_its_own_suite() {
    let out = Command::new("python3")
        .arg(apps().join("test_rack_adapter.py"))
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
