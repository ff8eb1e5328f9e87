//! PHP end to end: rein runs its own PHP-FPM for `"type": "php"` apps, and passes to an existing PHP-FPM
//! with the `fastcgi` action. Real PHP scripts (`tests/apps/php/`) read GET, POST, uploads, cookies,
//! headers and `PATH_INFO`; an app answers as Unit's does (scripts and indexes only); the `fastcgi` action has a
//! front controller and serves static files itself; a fatal
//! error is a logged 500; PHP-FPM killed or reloaded under load fails no request.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::harness::{Conn, Rein, get, wait_for};
use crate::load::{Load, assert_no_failures};

fn php_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/php")
}

/// A PHP app over `tests/apps/php` with the tests' short timeouts; `extra` overrides top-level keys.
fn php_app(extra: Value) -> Value {
    let mut app = json!({
        "type": "php",
        "root": php_root(),
        "processes": 2,
        "environment": {"GREETING": "hi from rein"},
        "stop": {"timeout": 2},
        "restart": {"min_interval": 0.2, "backoff_max": 1, "stable_after": 0.5},
    });
    if let Value::Object(more) = extra {
        app.as_object_mut().unwrap().extend(more);
    }
    app
}

fn serve_php(rein: &Rein, app: Value) -> SocketAddr {
    rein.serve_with(
        json!([{"action": {"pass": "applications/php"}}]),
        json!({"applications": {"php": app}}),
    )
}

fn json_of(r: &crate::harness::Response) -> Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.text()))
}

fn fpm_master(rein: &Rein) -> u32 {
    let (_, status) = rein.api("GET", "/status/applications/php", None);
    status["instances"]
        .as_array()
        .and_then(|i| i.iter().find(|i| i["state"] == "ready"))
        .and_then(|i| i["pid"].as_u64())
        .unwrap_or_else(|| panic!("no ready instance in {status}")) as u32
}

#[test]
fn php_scripts_see_the_request_and_answer_with_their_status_and_headers() {
    let rein = Rein::start();
    let addr = serve_php(
        &rein,
        php_app(json!({"options": {"admin": {"memory_limit": "64M"}}})),
    );
    let mut conn = Conn::open(addr);

    let r = conn.get(
        "/env.php/extra/path?a=1&b=two",
        &[("X-Test", "t"), ("Cookie", "c1=v1; c2=v2")],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let env = json_of(&r);
    assert_eq!(env["method"], "GET");
    assert_eq!(env["get"], json!({"a": "1", "b": "two"}));
    assert_eq!(env["cookie"], json!({"c1": "v1", "c2": "v2"}));
    assert_eq!(env["x_test"], "t");
    assert_eq!(env["script_name"], "/env.php");
    assert_eq!(env["path_info"], "/extra/path");
    assert_eq!(env["request_uri"], "/env.php/extra/path?a=1&b=two");
    assert_eq!(env["query_string"], "a=1&b=two");
    assert_eq!(env["remote_addr"], "127.0.0.1");
    assert_eq!(env["greeting"], "hi from rein");
    assert_eq!(env["memory_limit"], "64M");
    let root = php_root().display().to_string();
    assert_eq!(env["document_root"], root.as_str());
    assert_eq!(env["script_filename"], format!("{root}/env.php"));

    let form = b"name=rein&lang=rust+%26+php";
    let r = conn.request(
        "POST",
        "/env.php",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        form,
    );
    assert_eq!(
        json_of(&r)["post"],
        json!({"name": "rein", "lang": "rust & php"})
    );

    let r = conn.get("/status.php", &[]);
    assert_eq!(r.status, 418);
    assert_eq!(r.header("x-custom"), Some("yes"));
    let cookies: Vec<&str> = r
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(cookies, ["a=1", "b=2"]);
    assert_eq!(r.text(), "teapot");

    let r = conn.get("/redirect.php", &[]);
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("/elsewhere"));

    let r = conn.get("/big.php", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 1 << 20);
    assert!(
        r.body[..65536].iter().all(|&b| b == b'a')
            && r.body[(15 << 16)..].iter().all(|&b| b == b'p')
    );
}

#[test]
fn multipart_uploads_reach_php_files() {
    let rein = Rein::start();
    let addr = serve_php(&rein, php_app(json!({})));
    let file: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let boundary = "reinboundary42";
    let mut body = Vec::new();
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nholiday\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"p.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(&file);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let content_type = format!("multipart/form-data; boundary={boundary}");
    let r = Conn::open(addr).request(
        "POST",
        "/env.php",
        &[("Content-Type", &content_type)],
        &body,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let env = json_of(&r);
    assert_eq!(env["post"], json!({"title": "holiday"}));
    assert_eq!(env["files"]["photo"]["name"], "p.bin");
    assert_eq!(env["files"]["photo"]["size"], 300_000);
    assert_eq!(env["files"]["photo"]["md5"], md5_of(&file));
}

/// A PHP application answers as Unit's does: scripts and directory indexes run; no other file under `root`
/// is sent (its source would leak: `index.wrong` holding PHP); a path that is no script is a 404 (Unit's
/// front controller needs `script`); a directory without its slash is redirected with an absolute
/// `Location`; a directory the app's users cannot enter is a 403.
#[test]
fn a_php_app_runs_scripts_and_indexes_only_as_unit_does() {
    let rein = Rein::start();
    let root = rein.dir.path().join("www");
    std::fs::create_dir_all(root.join("blog")).unwrap();
    std::fs::write(
        root.join("index.php"),
        "<?php echo 'front|', $_SERVER['SCRIPT_NAME'];",
    )
    .unwrap();
    std::fs::write(root.join("index.wrong"), "<?php echo 'secret source';").unwrap();
    std::fs::write(root.join("style.css"), "body {}").unwrap();
    std::fs::write(root.join("blog/index.php"), "<?php echo 'blog index';").unwrap();
    std::fs::create_dir(root.join("closed")).unwrap();
    let addr = serve_php(&rein, php_app(json!({"root": root})));

    assert_eq!(get(addr, "/").text(), "front|/index.php");
    assert_eq!(get(addr, "/index.php").text(), "front|/index.php");
    assert_eq!(get(addr, "/blog/").text(), "blog index");
    for path in [
        "/index.wrong",
        "/style.css",
        "/2026/11/hello-world",
        "/missing.php",
    ] {
        let r = get(addr, path);
        assert_eq!(r.status, 404, "{path}: {}", r.text());
        assert!(!r.text().contains("secret source"), "{path}");
    }
    assert_eq!(get(addr, "/style.css.php/x").status, 404);

    let r = get(addr, "/blog?p=2");
    assert_eq!(r.status, 301);
    assert_eq!(
        r.header("location"),
        Some("http://test/blog/?p=2"),
        "the client's Host, as Unit writes it"
    );

    use std::os::unix::fs::PermissionsExt;
    let closed = root.join("closed");
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o000)).unwrap();
    assert_eq!(get(addr, "/closed/").status, 403);
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Unit's `options`: a relative `file` is resolved (against `working_directory`), and `disable_functions` /
/// `disable_classes` in `admin` take effect.
#[test]
fn php_options_relative_file_and_disabled_functions() {
    let rein = Rein::start();
    let dir = rein.dir.path().join("wd");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("app.ini"), "memory_limit = 71M\n").unwrap();
    let root = rein.dir.path().join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("probe.php"),
        "<?php set_error_handler(function ($n, $m) { echo str_contains($m, 'disabled') ? 'no class' : $m; \
         return true; });\n\
         echo ini_get('memory_limit'), '|', function_exists('str_rot13') ? 'f' : 'no function', '|';\n\
         new ArrayObject();",
    )
    .unwrap();
    let app = php_app(json!({
        "root": root,
        "working_directory": dir,
        "options": {
            "file": "app.ini",
            "admin": {"disable_functions": "str_rot13", "disable_classes": "ArrayObject"}
        }
    }));
    let addr = serve_php(&rein, app);
    assert_eq!(get(addr, "/probe.php").text(), "71M|no function|no class");
}

#[test]
fn a_fatal_error_is_a_logged_500() {
    let rein = Rein::start();
    let addr = serve_php(&rein, php_app(json!({})));
    let r = get(addr, "/fatal.php");
    assert_eq!(r.status, 500, "{}", r.text());
    wait_for("the PHP error in a log", || {
        (rein.log_text() + &app_log(&rein)).contains("undefined_function_for_the_test")
    });
}

/// The app's own log file (PHP-FPM's messages and its workers' output).
fn app_log(rein: &Rein) -> String {
    std::fs::read_to_string(rein.dir.path().join("state/logs/php.log")).unwrap_or_default()
}

/// A script's standard error reaches the app's log (PHP-FPM catches its workers' output, as Unit kept an app's
/// stderr); what it logs with `error_log()` also comes to rein as FastCGI stderr.
#[test]
fn what_a_script_writes_to_stderr_reaches_the_logs() {
    let rein = Rein::start();
    let addr = serve_php(&rein, php_app(json!({})));
    let r = get(addr, "/stderr.php");
    assert_eq!((r.status, r.text().as_str()), (200, "logged"));
    wait_for("php://stderr in the app's log", || {
        app_log(&rein).contains("stderr-line-for-the-test")
    });
    wait_for("error_log() in rein's log", || {
        rein.log_text().contains("error-log-line-for-the-test")
    });
}

#[test]
fn killing_php_fpm_under_load_fails_no_get() {
    let rein = Rein::start();
    let addr = serve_php(&rein, php_app(json!({})));
    wait_for("PHP to answer", || get(addr, "/hello.php").status == 200);
    let load = Load::start(
        addr,
        &["/hello.php", "/hello.php", "/hello.php", "/hello.php"],
    );
    for _ in 0..2 {
        load.wait_more(200);
        let master = fpm_master(&rein);
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(master as i32), Signal::SIGKILL).unwrap();
        wait_for("a new PHP-FPM master", || {
            let (_, s) = rein.api("GET", "/status/applications/php", None);
            s["instances"].as_array().is_some_and(|i| {
                i.iter()
                    .any(|i| i["state"] == "ready" && i["pid"] != master)
            })
        });
    }
    load.wait_more(200);
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
    assert!(ok.get("hello").copied().unwrap_or(0) >= 600, "{ok:?}");
}

#[test]
fn rolling_reloads_under_load_fail_no_request() {
    let rein = Rein::start();
    let addr = serve_php(&rein, php_app(json!({})));
    wait_for("PHP to answer", || get(addr, "/hello.php").status == 200);
    let load = Load::start(addr, &["/hello.php", "/hello.php", "/env.php", "/blog/"]);
    for _ in 0..3 {
        load.wait_more(200);
        let before = fpm_master(&rein);
        let (code, body) = rein.api("GET", "/control/applications/php/restart", None);
        assert_eq!(code, 200, "{body}");
        wait_for("the new master to take over", || {
            fpm_master(&rein) != before
        });
    }
    load.wait_more(200);
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
}

#[test]
fn targets_pick_their_own_root_and_script() {
    let rein = Rein::start();
    let root = php_root();
    let addr = rein.serve_with(
        json!([
            {"match": {"uri": "/direct/*"}, "action": {"rewrite": "/hello.php", "pass": "applications/php/direct"}},
            {"action": {"pass": "applications/php/front"}}
        ]),
        json!({"applications": {"php": {
            "type": "php",
            "processes": 1,
            "targets": {
                "direct": {"root": root},
                "front": {"root": root, "script": "index.php"}
            }
        }}}),
    );
    assert!(get(addr, "/direct/x").text().starts_with("hello:"));
    // With a `script`, every path runs it, even a static file's, as its PATH_INFO.
    assert_eq!(
        get(addr, "/style.css").text(),
        "front|/style.css|/index.php|/style.css\n"
    );
}

/// A `rewrite` that puts the decoded `$uri` (a space, CR LF) into the target gives PHP a `REQUEST_URI` with
/// those bytes percent-encoded, as a client would have sent them; `PATH_INFO` stays decoded.
#[test]
fn a_rewritten_request_uri_reaches_php_encoded() {
    let rein = Rein::start();
    let addr = rein.serve_with(
        json!([
            {"match": {"uri": "/in/*"}, "action": {"rewrite": "/env.php$uri", "pass": "applications/php"}}
        ]),
        json!({"applications": {"php": php_app(json!({"processes": 1}))}}),
    );
    let env = json_of(&get(addr, "/in/a%20b%0D%0Ac?x=1"));
    assert_eq!(env["request_uri"], "/env.php/in/a%20b%0D%0Ac?x=1");
    assert_eq!(env["path_info"], "/in/a b\r\nc");
    assert_eq!(env["get"]["x"], "1");
}

#[test]
fn bad_php_configurations_are_refused_naming_the_key() {
    let rein = Rein::start();
    let refused = |app: Value, path: &str| {
        let config = json!({"applications": {"php": app}});
        let (code, body) = rein.api("PUT", "/config", Some(&config.to_string()));
        assert_eq!(code, 400, "{body}");
        let detail = body["detail"].as_str().unwrap_or_default().to_owned();
        assert!(detail.contains(path), "{path} not in {body}");
    };
    refused(json!({"type": "php"}), "applications/php");
    refused(
        json!({"type": "php", "root": "relative"}),
        "applications/php/root",
    );
    refused(
        json!({"type": "php", "root": "/srv", "index": "../x.php"}),
        "applications/php/index",
    );
    refused(
        json!({"type": "php", "root": "/srv", "options": {"admin": {"a\nb": "1"}}}),
        "applications/php/options/admin",
    );
    refused(
        json!({"type": "php", "root": "/srv", "executable": "/bin/sh"}),
        "applications/php",
    );
    refused(
        json!({"type": "php", "root": "/srv", "options": {"file": "php.ini"}}),
        "applications/php/options/file",
    );
    refused(
        json!({"type": "php", "root": "/srv", "options": {"file": "/no/such/php.ini"}}),
        "applications/php/options/file",
    );
    let (_, config) = rein.api("GET", "/config", None);
    assert_eq!(
        config["applications"],
        Value::Null,
        "nothing changed: {config}"
    );
}

/// A PHP-FPM started by the test, as a system's would be: rein reaches it with the `fastcgi` action.
struct SystemFpm {
    child: Child,
    socket: PathBuf,
}

impl SystemFpm {
    fn start(dir: &Path) -> SystemFpm {
        let socket = dir.join("system-fpm.sock");
        let conf = dir.join("system-fpm.conf");
        std::fs::write(
            &conf,
            format!(
                "[global]\nerror_log = {}\ndaemonize = no\n[www]\nlisten = {}\nuser = root\npm = static\npm.max_children = 2\nclear_env = no\n",
                dir.join("system-fpm.log").display(),
                socket.display()
            ),
        )
        .unwrap();
        let fpm = std::fs::read_dir("/usr/sbin")
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("php-fpm")
            })
            .expect("php-fpm is installed by scripts/test.sh");
        let mut cmd = Command::new(fpm);
        cmd.args(["--nodaemonize", "--fpm-config"]).arg(&conf);
        if nix::unistd::geteuid().is_root() {
            cmd.arg("--allow-to-run-as-root");
        }
        let child = cmd
            .env("APP_ENV_FROM_SYSTEM", "1")
            .spawn()
            .expect("php-fpm");
        wait_for("the system PHP-FPM socket", || socket.exists());
        SystemFpm { child, socket }
    }
}

impl Drop for SystemFpm {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(group, Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

#[test]
fn the_fastcgi_action_reaches_an_existing_php_fpm() {
    let rein = Rein::start();
    let fpm = SystemFpm::start(rein.dir.path());
    let addr = rein.serve(json!([
        {"match": {"uri": "/static/*"}, "action": {"share": format!("{}/style.css", php_root().display())}},
        {"action": {"fastcgi": {
            "server": format!("unix:{}", fpm.socket.display()),
            "root": php_root(),
            "params": {"APP_MODE": "production"}
        }}}
    ]));
    let mut conn = Conn::open(addr);
    for _ in 0..3 {
        // Several requests on one keep-alive client connection, over pooled FastCGI connections.
        let r = conn.get("/env.php/p?q=1", &[]);
        assert_eq!(r.status, 200, "{}", r.text());
        let env = json_of(&r);
        assert_eq!(env["path_info"], "/p");
        assert_eq!(env["extra"], "production");
    }
    let body = vec![b'z'; 2_000_000];
    let r = conn.request(
        "PUT",
        "/env.php",
        &[("Content-Type", "application/octet-stream")],
        &body,
    );
    let env = json_of(&r);
    assert_eq!(env["method"], "PUT");
    assert_eq!(env["input_md5"], md5_of(&body));
    assert_eq!(
        get(addr, "/2026/post").text(),
        "front|/2026/post|/index.php|\n"
    );
}

/// An existing PHP-FPM whose worker count is given as the upstream server's `max_connections` keeps its
/// connections under load: no dial per request.
#[test]
fn a_fastcgi_server_with_max_connections_keeps_its_connections_under_load() {
    let rein = Rein::start();
    let fpm = SystemFpm::start(rein.dir.path());
    let server = format!("unix:{}", fpm.socket.display());
    let addr = rein.serve_with(
        json!([{"action": {"fastcgi": {"server": "upstreams/fpm", "root": php_root()}}}]),
        json!({"upstreams": {"fpm": {"servers": {&server: {"max_connections": 2}}}}}),
    );
    wait_for("PHP-FPM to answer", || {
        get(addr, "/hello.php").status == 200
    });
    let load = Load::start(addr, &["/hello.php"; 8]);
    load.wait_more(400);
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
    let (_, status) = rein.api("GET", "/status/upstreams/fpm", None);
    let entry = &status["servers"][&server];
    let opened = entry["connections_opened"].as_u64().unwrap();
    assert!(
        (1..=2).contains(&opened),
        "pm.max_children = 2, {} requests: {opened} connections dialled ({status})",
        entry["requests"]
    );
}

/// With `pipelining`, a GET may be queued on a busy connection: under concurrent GETs and POSTs every answer
/// is the one to its own request, the POSTs get connections of their own, and no more connections are
/// dialled than PHP-FPM has workers.
#[test]
fn pipelined_requests_each_get_their_own_answer() {
    let rein = Rein::start();
    let fpm = SystemFpm::start(rein.dir.path());
    let server = format!("unix:{}", fpm.socket.display());
    let addr = rein.serve_with(
        json!([{"action": {"fastcgi": {"server": "upstreams/fpm", "root": php_root()}}}]),
        json!({"upstreams": {"fpm": {"servers": {&server: {"max_connections": 2, "pipelining": true}}}}}),
    );
    wait_for("PHP-FPM to answer", || {
        get(addr, "/hello.php").status == 200
    });
    let clients: Vec<_> = (0..8)
        .map(|client| {
            std::thread::spawn(move || {
                let mut conn = Conn::open(addr);
                for i in 0..60 {
                    let tag = format!("{client}-{i}");
                    if client == 0 && i % 3 == 0 {
                        let body = format!("n={tag}");
                        let r = conn.request(
                            "POST",
                            "/env.php",
                            &[("Content-Type", "application/x-www-form-urlencoded")],
                            body.as_bytes(),
                        );
                        assert_eq!(r.status, 200, "{}", r.text());
                        assert_eq!(json_of(&r)["post"]["n"], tag.as_str());
                    } else {
                        let r = conn.get(&format!("/env.php?n={tag}"), &[]);
                        assert_eq!(r.status, 200, "{}", r.text());
                        assert_eq!(json_of(&r)["get"]["n"], tag.as_str());
                    }
                }
            })
        })
        .collect();
    for client in clients {
        client.join().expect("every answer matched its request");
    }
    let (_, status) = rein.api("GET", "/status/upstreams/fpm", None);
    let entry = &status["servers"][&server];
    let opened = entry["connections_opened"].as_u64().unwrap();
    assert!((1..=2).contains(&opened), "pm.max_children = 2: {status}");
    assert!(entry["pipelined"].as_u64().unwrap() > 0, "{status}");
    // Without max_connections there is no worker count to queue behind: refused, naming the key.
    let bad = json!({"upstreams": {"fpm": {"servers": {&server: {"pipelining": true}}}}});
    let (code, body) = rein.api(
        "PUT",
        "/config/upstreams",
        Some(&bad["upstreams"].to_string()),
    );
    assert_eq!(code, 400, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("pipelining") && detail.contains("max_connections"),
        "{body}"
    );
}

#[test]
fn an_unreachable_fastcgi_server_is_a_502_and_a_bad_one_is_refused() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"fastcgi": {
        "server": format!("unix:{}/nobody-here.sock", rein.dir.path().display()),
        "root": php_root()
    }}}]));
    assert_eq!(get(addr, "/hello.php").status, 502);
    let bad = json!({"listeners": {}, "routes": [{"action": {"fastcgi": {"server": "php-fpm", "root": "/srv"}}}]});
    let (code, body) = rein.api("PUT", "/config", Some(&bad.to_string()));
    assert_eq!(code, 400);
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("routes/0/action/fastcgi/server"),
        "{body}"
    );
}

#[test]
fn a_malformed_or_truncated_fastcgi_answer_is_a_502_and_a_log_line() {
    let rein = Rein::start();
    for mode in ["garbage", "truncated"] {
        let socket = rein.dir.path().join(format!("{mode}.sock"));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/backends/bad_fastcgi.py");
        let mut server = Command::new("python3")
            .arg(script)
            .arg(&socket)
            .arg(mode)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(server.stdout.take().unwrap()),
            &mut ready,
        )
        .unwrap();
        let addr = rein.serve(json!([{"action": {"fastcgi": {
            "server": format!("unix:{}", socket.display()),
            "root": php_root()
        }}}]));
        let r = get(addr, "/hello.php");
        let _ = server.kill();
        let _ = server.wait();
        assert_eq!(r.status, 502, "{mode}: {}", r.text());
        wait_for("the proxy error in rein's log", || {
            rein.log_text().contains(&format!("{mode}.sock"))
        });
    }
}

#[test]
fn a_php_app_can_listen_on_tcp() {
    let rein = Rein::start();
    let addr = serve_php(&rein, php_app(json!({"socket": "tcp"})));
    assert!(get(addr, "/hello.php").text().starts_with("hello:"));
}

/// MD5 through the system's md5sum (no hashing crate for two tests).
fn md5_of(data: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("md5sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("md5sum");
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().next().unwrap().to_owned()
}

/// One kept-alive FastCGI connection per PHP worker, never one per request, over a Unix socket and over TCP:
/// with more clients than workers, the extra requests wait in rein rather than on fresh connections queued
/// behind busy workers.
#[test]
fn a_php_app_dials_one_connection_per_worker_under_load() {
    for socket in ["unix", "tcp"] {
        let rein = Rein::start();
        let addr = serve_php(&rein, php_app(json!({"socket": socket})));
        wait_for("PHP to answer", || get(addr, "/hello.php").status == 200);
        let load = Load::start(addr, &["/hello.php"; 8]);
        load.wait_more(400);
        let (ok, failures) = load.finish();
        assert_no_failures(&ok, &failures);
        let (_, status) = rein.api("GET", "/status/applications/php", None);
        let instance = &status["instances"][0];
        let opened = instance["connections_opened"].as_u64().unwrap();
        assert!(
            (1..=2).contains(&opened),
            "{socket}: 2 workers, {} requests: {opened} connections dialled ({status})",
            instance["requests"]
        );
        assert!(
            instance["idle_connections"].as_u64().unwrap() <= 2,
            "{socket}: {status}"
        );
        // 8 clients, 2 workers: requests queue on busy connections (PHP apps pipeline).
        assert!(
            instance["pipelined"].as_u64().unwrap() > 0,
            "{socket}: {status}"
        );
    }
}

/// `options.file` is the php.ini PHP-FPM loads (in place of the system's).
#[test]
fn options_file_is_the_php_ini_the_scripts_run_under() {
    let rein = Rein::start();
    let ini = rein.dir.path().join("app.ini");
    std::fs::write(&ini, "memory_limit = 77M\n").unwrap();
    let addr = serve_php(
        &rein,
        php_app(json!({"options": {"file": ini.display().to_string()}})),
    );
    let env = json_of(&get(addr, "/env.php"));
    assert_eq!(env["memory_limit"], "77M", "{env}");
}
