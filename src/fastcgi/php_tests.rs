//! The client against a real PHP-FPM, when the machine has one: a GET with a status and a header set by the
//! script, then a form POST on the same connection, then a readiness probe.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;

use super::{Cgi, Conn, Params, Script, connect, request_params};
use crate::link::ServerAddr;
use crate::request::RequestInfo;

const FPM: &str = "/usr/sbin/php-fpm8.2";

const SCRIPT: &str = r#"<?php
http_response_code(201);
header('X-Test: 1');
error_log('a line for the server log, not the client');
echo $_SERVER['REQUEST_METHOD'], ' ', $_GET['name'] ?? '-', ' ', $_POST['field'] ?? '-';
"#;

/// PHP-FPM, stopped when dropped: SIGTERM to its master (which stops the workers), SIGKILL if it lingers.
struct Fpm(Child);

impl Fpm {
    fn exited(&mut self) -> Option<ExitStatus> {
        self.0.try_wait().ok().flatten()
    }
}

impl Drop for Fpm {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(dir: &Path) -> Fpm {
    let conf = dir.join("fpm.conf");
    let d = dir.display();
    std::fs::write(
        &conf,
        format!(
            "[global]\npid = {d}/fpm.pid\nerror_log = {d}/err.log\ndaemonize = no\n\n\
             [www]\nlisten = {d}/fpm.sock\npm = static\npm.max_children = 2\n"
        ),
    )
    .unwrap();
    let child = Command::new(FPM)
        .arg("--nodaemonize")
        .arg("--fpm-config")
        .arg(&conf)
        .arg("-R")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Fpm(child)
}

/// A connection once PHP-FPM listens, within 10 s.
async fn ready(fpm: &mut Fpm, addr: &ServerAddr, dir: &Path) -> Conn {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(conn) = connect(addr, Duration::from_secs(1)).await {
            return conn;
        }
        let log = || std::fs::read_to_string(dir.join("err.log")).unwrap_or_default();
        if let Some(status) = fpm.exited() {
            panic!("php-fpm exited ({status}): {}", log());
        }
        assert!(
            Instant::now() < deadline,
            "php-fpm not listening: {}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn request(method: &str, target: &str, headers: &[(&str, &str)]) -> RequestInfo {
    let mut b = http::Request::builder()
        .method(method)
        .uri(target)
        .header("host", "php.test");
    for (n, v) in headers {
        b = b.header(*n, *v);
    }
    let (mut parts, ()) = b.body(()).unwrap().into_parts();
    let remote = "127.0.0.1:40000".parse().ok();
    let local = "127.0.0.1:8080".parse().ok();
    RequestInfo::from_parts(&mut parts, "http", remote, local).0
}

/// Sends, checks the answer's status and header, returns the body text and the connection if reusable.
async fn exchange(
    conn: Conn,
    params: Params,
    body: Option<&'static str>,
) -> (String, Option<Conn>) {
    let body = body.map(crate::body::full);
    let timeout = Duration::from_secs(10);
    let mut response = conn.send(&params, body, timeout).await.unwrap();
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers()["x-test"], "1");
    let slot: Arc<Mutex<Option<Conn>>> = Arc::default();
    let s = slot.clone();
    response
        .body_mut()
        .on_reuse(move |c| *s.lock().unwrap() = Some(c));
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let conn = slot.lock().unwrap().take();
    (String::from_utf8(bytes.to_vec()).unwrap(), conn)
}

#[test]
fn php_fpm_runs_a_script() {
    if !Path::new(FPM).exists() {
        println!("skipped: {FPM} is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("hello.php"), SCRIPT).unwrap();
    let mut fpm = start(&root);
    let addr = ServerAddr::Unix(root.join("fpm.sock"));
    let script = Script {
        filename: root.join("hello.php"),
        name: "/hello.php".into(),
        path_info: String::new(),
        document_root: root.clone(),
        extra: Vec::new(),
        cgi: Cgi::Full,
    };
    let logs = super::client::tests::Logs::default();
    let _guard = logs.capture();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let conn = ready(&mut fpm, &addr, &root).await;

        let get = request("GET", "/hello.php?name=world", &[]);
        let (text, conn) = exchange(conn, request_params(&get, &script, None), None).await;
        assert_eq!(text, "GET world -");
        let conn = conn.expect("PHP-FPM keeps the connection");

        let form = "field=posted&other=1";
        let len = form.len().to_string();
        let post = request(
            "POST",
            "/hello.php?name=again",
            &[
                ("content-type", "application/x-www-form-urlencoded"),
                ("content-length", &len),
            ],
        );
        let params = request_params(&post, &script, None);
        let (text, _) = exchange(conn, params, Some(form)).await;
        assert_eq!(text, "POST again posted");

        let mut conn = ready(&mut fpm, &addr, &root).await;
        conn.probe(Duration::from_secs(5)).await.unwrap();
    });
    // `error_log()` came as STDERR: in the server's log, not in the bodies above.
    let text = logs.text();
    let line = "a line for the server log, not the client";
    assert_eq!(text.matches(line).count(), 2, "{text}");
}
