//! The test harness: a real `rein` process in a temp dir, its control API, and a raw HTTP/1.1 client.
//!
//! rein starts with an empty configuration and is configured only through the control API. Listeners bind
//! port 0; the port chosen is read from `/status`. Waits are deadlines, never fixed sleeps. When a test fails,
//! the harness prints rein's log and live configuration.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const DEADLINE: Duration = Duration::from_secs(20);

/// A running rein.
pub struct Rein {
    child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub state: PathBuf,
    pub log: PathBuf,
    /// The control socket: `STATE/control.sock`, or the path of a `--control unix:PATH` argument.
    control: PathBuf,
    /// The command that started rein, run again by [`Rein::restart`].
    launch: Launch,
    /// How long an API request may wait for its answer (`None`: forever).
    api_timeout: Option<Duration>,
}

/// A command line that starts rein: the wrapper, rein's path and arguments, extra environment variables.
struct Launch {
    argv: Vec<String>,
    env: Vec<(String, String)>,
}

impl Launch {
    fn spawn(&self) -> Child {
        let (program, args) = self.argv.split_first().expect("a program");
        Command::new(program)
            .args(args)
            .env("REIN_LOG", "debug")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn rein")
    }
}

impl Rein {
    /// Starts rein on an empty configuration in a new temp dir.
    pub fn start() -> Rein {
        let dir = tempfile::tempdir().expect("temp dir");
        let rein = Rein::start_in(dir, &["--config", "EMPTY"]);
        rein.wait_ready();
        rein
    }

    /// Starts rein in `dir` with extra arguments (`EMPTY` stands for an empty configuration file).
    pub fn start_in(dir: tempfile::TempDir, args: &[&str]) -> Rein {
        Rein::start_in_env(dir, args, &[])
    }

    /// [`Rein::start_in`] with extra environment variables.
    pub fn start_in_env(dir: tempfile::TempDir, args: &[&str], env: &[(&str, &str)]) -> Rein {
        Rein::start_through(dir, &[], args, env)
    }

    /// [`Rein::start_in_env`] through a wrapper: `wrapper` is the start of the command line, followed by
    /// rein's path and arguments (`["sh", "-c", "ulimit -n 64 && exec \"$@\"", "sh"]`).
    pub fn start_through(
        dir: tempfile::TempDir,
        wrapper: &[&str],
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Rein {
        let state = dir.path().join("state");
        let log = dir.path().join("rein.log");
        let empty = dir.path().join("empty.json");
        std::fs::write(&empty, "{}").unwrap();
        // Tests run their apps as the test's user unless they say otherwise: `DEFAULT-USER` leaves rein's own
        // default (`nobody` when rein runs as root).
        let default_user = args.iter().any(|a| *a == "DEFAULT-USER" || *a == "--user");
        let mut args: Vec<String> = args
            .iter()
            .filter(|a| **a != "DEFAULT-USER")
            .map(|a| {
                if *a == "EMPTY" {
                    empty.display().to_string()
                } else {
                    a.to_string()
                }
            })
            .collect();
        if !default_user {
            args.extend(["--user".to_owned(), test_user()]);
        }
        let mut argv: Vec<String> = wrapper.iter().map(|w| w.to_string()).collect();
        argv.push(env!("CARGO_BIN_EXE_rein").to_owned());
        argv.extend(["run".to_owned(), "--state".to_owned()]);
        argv.push(state.display().to_string());
        argv.push("--log".to_owned());
        argv.push(log.display().to_string());
        argv.extend(args.iter().cloned());
        let launch = Launch {
            argv,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let child = launch.spawn();
        let control = args
            .iter()
            .skip_while(|a| *a != "--control")
            .nth(1)
            .and_then(|a| a.strip_prefix("unix:"))
            .map_or_else(|| state.join("control.sock"), PathBuf::from);
        Rein {
            child: Some(child),
            dir,
            state,
            log,
            control,
            launch,
            api_timeout: None,
        }
    }

    /// Fails an API request that gets no answer within `timeout`, instead of waiting for it forever.
    pub fn set_api_timeout(&mut self, timeout: Duration) {
        self.api_timeout = Some(timeout);
    }

    pub fn control(&self) -> PathBuf {
        self.control.clone()
    }

    /// Waits until the control API answers. Connecting is not enough: the socket accepts from the moment it is
    /// bound, before the applications' directories exist and the first configuration is applied.
    pub fn wait_ready(&self) {
        wait_for("the control API", || self.answers());
    }

    /// Whether the control API answers `GET /status` with 200.
    pub fn answers(&self) -> bool {
        let Ok(mut s) = UnixStream::connect(self.control()) else {
            return false;
        };
        let mut answer = String::new();
        s.write_all(b"GET /status HTTP/1.0\r\n\r\n").is_ok()
            && s.read_to_string(&mut answer).is_ok()
            && answer.split(' ').nth(1) == Some("200")
    }

    /// If rein has exited: its exit code and standard error (it is then no longer running).
    pub fn exited(&mut self) -> Option<(Option<i32>, String)> {
        let status = self.child.as_mut()?.try_wait().ok()??;
        let mut err = String::new();
        if let Some(mut e) = self.child.take().and_then(|mut c| c.stderr.take()) {
            let _ = e.read_to_string(&mut err);
        }
        Some((status.code(), err))
    }

    /// Runs `rein ARGS --state STATE` against this rein (the environment's control settings left out).
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_rein"))
            .args(args)
            .arg("--state")
            .arg(&self.state)
            .env_remove("REIN_CONTROL")
            .env_remove("REIN_STATE")
            .output()
            .unwrap()
    }

    /// Kills rein (SIGKILL) and starts it again with the same command line, so on the same state directory;
    /// waits until its API answers.
    pub fn restart(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.child = Some(self.launch.spawn());
        self.wait_ready();
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends a signal to rein.
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid() as i32), sig).unwrap();
    }

    /// Waits for rein to exit; returns its exit code and standard error.
    pub fn wait_exit(&mut self) -> (Option<i32>, String) {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                return (status.code(), err);
            }
            assert!(Instant::now() < deadline, "rein did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// One control API request: status, parsed JSON body, ETag.
    pub fn api(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
        let (status, headers, body) = self.api_raw(method, path, body, &[]);
        let _ = headers;
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    pub fn api_raw(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        extra: &[(&str, &str)],
    ) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let mut stream = UnixStream::connect(self.control()).expect("control socket");
        let body = body.unwrap_or("");
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in extra {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        stream.write_all(req.as_bytes()).unwrap();
        stream.set_read_timeout(self.api_timeout).unwrap();
        let r = read_response(&mut BufReader::new(stream), method == "HEAD").unwrap_or_else(|| {
            panic!(
                "no answer from the control API to {method} {path} (waited at most {:?})",
                self.api_timeout
            )
        });
        (r.status, r.headers, r.body)
    }

    /// PUTs a whole configuration and asserts it was accepted.
    pub fn configure(&self, config: Value) {
        let (status, body) = self.api("PUT", "/config", Some(&config.to_string()));
        assert_eq!(status, 200, "configuration refused: {body}");
    }

    /// Configures one listener on 127.0.0.1:0 passing to `routes`, and returns the address it bound.
    pub fn serve(&self, routes: Value) -> SocketAddr {
        self.serve_with(routes, json!({}))
    }

    /// Like [`Rein::serve`], with extra top-level sections (`settings`, `access_log`...).
    pub fn serve_with(&self, routes: Value, extra: Value) -> SocketAddr {
        let mut config = json!({
            "listeners": {"127.0.0.1:0": {"pass": "routes"}},
            "routes": routes,
        });
        if let Value::Object(more) = extra {
            config.as_object_mut().unwrap().extend(more);
        }
        self.configure(config);
        self.bound("127.0.0.1:0")
    }

    /// The address a listener is bound to, from `/status`.
    pub fn bound(&self, listener: &str) -> SocketAddr {
        let (_, status) = self.api("GET", "/status", None);
        status["listeners"][listener]["address"]
            .as_str()
            .unwrap_or_else(|| panic!("no listener {listener} in {status}"))
            .parse()
            .unwrap()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Rein {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Only over the Unix socket: a rein whose API is on TCP would panic again here.
            if self.child.is_some() && UnixStream::connect(self.control()).is_ok() {
                let (_, config) = self.api("GET", "/config", None);
                eprintln!("--- rein configuration ---\n{config:#}");
            }
            eprintln!("--- rein log ---\n{}", self.log_text());
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Polls `cond` until it holds, failing the test at the deadline.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A parsed HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Reads one response; `None` when the connection closed before a status line.
pub fn read_response(r: &mut impl BufRead, head_only: bool) -> Option<Response> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let status: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let mut resp = Response {
        status,
        headers,
        body: Vec::new(),
    };
    if status == 100 {
        return read_response(r, head_only).map(|mut final_resp| {
            final_resp
                .headers
                .push(("x-test-saw-100".into(), "1".into()));
            final_resp
        });
    }
    if head_only || status == 204 || status == 304 {
        return Some(resp);
    }
    if resp
        .header("transfer-encoding")
        .is_some_and(|te| te.contains("chunked"))
    {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            resp.body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = resp
        .header("content-length")
        .and_then(|n| n.parse::<usize>().ok())
    {
        resp.body = vec![0; n];
        r.read_exact(&mut resp.body).ok()?;
    } else {
        r.read_to_end(&mut resp.body).ok()?;
    }
    Some(resp)
}

/// A keep-alive HTTP/1.1 client connection speaking raw bytes.
pub struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        Conn {
            reader: BufReader::new(stream),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).expect("write");
    }

    pub fn reader(&mut self) -> &mut BufReader<TcpStream> {
        &mut self.reader
    }

    pub fn read(&mut self) -> Option<Response> {
        read_response(&mut self.reader, false)
    }

    pub fn read_head_only(&mut self) -> Option<Response> {
        read_response(&mut self.reader, true)
    }

    /// `GET path` with extra headers, on this connection.
    pub fn get(&mut self, path: &str, headers: &[(&str, &str)]) -> Response {
        self.request("GET", path, headers, b"")
    }

    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if !body.is_empty() {
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        self.send_raw(&bytes);
        let resp = if method == "HEAD" {
            self.read_head_only()
        } else {
            self.read()
        };
        resp.unwrap_or_else(|| panic!("no response to {method} {path}"))
    }

    /// Whether the server closed the connection (reads EOF before the deadline).
    pub fn is_closed(&mut self) -> bool {
        let mut buf = [0u8; 1];
        matches!(self.reader.read(&mut buf), Ok(0) | Err(_))
    }
}

/// One request on a fresh connection.
pub fn get(addr: SocketAddr, path: &str) -> Response {
    Conn::open(addr).get(path, &[])
}

pub fn get_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Response {
    Conn::open(addr).get(path, headers)
}

/// A temp file path inside the test's dir.
pub fn file(dir: &Path, name: &str, contents: &[u8]) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, contents).unwrap();
    p
}

/// What one `rein bench` run left.
pub struct BenchRun {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl BenchRun {
    pub fn json(&self) -> Value {
        assert_eq!(self.code, Some(0), "rein bench failed: {}", self.stderr);
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.stdout))
    }
}

/// Runs `rein bench ARGS` (with no REIN_CONTROL/REIN_STATE from the environment), killing it (and failing)
/// past the deadline.
pub fn rein_bench(args: &[&str]) -> BenchRun {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rein"))
        .arg("bench")
        .args(args)
        .env_remove("REIN_CONTROL")
        .env_remove("REIN_STATE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rein bench");
    // The output is small: it fits the pipes while we wait.
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rein bench {args:?} did not finish within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = started.elapsed();
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    BenchRun {
        code: status.code(),
        stdout,
        stderr,
        took,
    }
}

/// The user running the tests, by name (`--user` takes a name).
fn test_user() -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::effective())
        .ok()
        .flatten()
        .map_or_else(|| "root".to_owned(), |u| u.name)
}
