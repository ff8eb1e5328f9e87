//! `rein bench reload APP` and `rein bench crash APP`: closed-loop load through one of a running rein's
//! listeners to an application while, part-way through, the control API rolls the application over
//! (`GET /control/applications/APP/restart`) or one of its instances is killed with SIGKILL.
//!
//! Every answer is recorded into the phase it completed in: **before** the trigger, **during** (from the
//! trigger until the reload call returned, or until as many instances are `ready` as before the kill), and
//! **after**. The phases merged give the overall figures: errors by kind and the longest window with no
//! successful response ([`super::gap`]).
//!
//! The load loop is a small closed-loop twin of [`super::http`]'s (one task per keep-alive connection, a failed
//! request drops its connection), because the phases need each answer's completion time, which
//! [`super::http::drive`] does not expose.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HOST, HeaderValue, USER_AGENT};
use http::{HeaderMap, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};
use tokio::task::AbortHandle;
use tokio::time::{Instant, sleep, sleep_until, timeout};

use super::config::Target;
use super::http::{Endpoint, classify};
use super::report::{Errors, Failure, Latency, Recorder, micros, round3};
use crate::control::ControlAddr;

/// What happens to the application mid-run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// A rolling reload through the control API.
    Reload,
    /// SIGKILL to one ready instance.
    Crash,
}

impl std::fmt::Display for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Trigger::Reload => "reload",
            Trigger::Crash => "crash",
        })
    }
}

/// A reload or crash bench's parameters.
#[derive(Debug, Clone)]
pub struct Config {
    pub trigger: Trigger,
    /// The application's name.
    pub app: String,
    /// rein's control API.
    pub control: ControlAddr,
    /// `Host` and `Authorization` for the control API (its TCP address and token); `Host: localhost` when
    /// empty.
    pub control_headers: Vec<(&'static str, String)>,
    /// Where the load goes; `None`: the first listener whose `pass` is `applications/APP`.
    pub target: Option<Target>,
    pub connections: usize,
    /// No request starts after this.
    pub duration: Duration,
    /// When to trigger, from the start of the load; `None`: a third of the duration.
    pub at: Option<Duration>,
    /// Per request, connecting included.
    pub timeout: Duration,
    pub threads: usize,
    /// How long to wait for capacity to come back after a kill.
    pub capacity_deadline: Duration,
}

impl Config {
    /// Ten connections for ten seconds, triggered at a third, ten-second request timeout.
    pub fn new(trigger: Trigger, app: impl Into<String>, control: ControlAddr) -> Config {
        Config {
            trigger,
            app: app.into(),
            control,
            control_headers: Vec::new(),
            target: None,
            connections: 10,
            duration: Duration::from_secs(10),
            at: None,
            timeout: Duration::from_secs(10),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            capacity_deadline: Duration::from_secs(60),
        }
    }

    /// When the trigger fires.
    pub fn trigger_at(&self) -> Duration {
        self.at.unwrap_or(self.duration / 3)
    }

    /// Checks the numbers make sense; the message says which does not.
    pub fn validate(&self) -> Result<(), String> {
        if self.app.is_empty() {
            return Err("the application name is empty".into());
        }
        if self.connections == 0 {
            return Err("--connections must be at least 1".into());
        }
        if self.threads == 0 {
            return Err("--threads must be at least 1".into());
        }
        if self.duration.is_zero() {
            return Err("--duration must be positive".into());
        }
        if self.trigger_at() >= self.duration {
            return Err(format!(
                "--at ({:.3}s) must be before the end of the run (--duration {:.3}s)",
                self.trigger_at().as_secs_f64(),
                self.duration.as_secs_f64()
            ));
        }
        if self.timeout.is_zero() {
            return Err("--timeout must be positive".into());
        }
        Ok(())
    }
}

/// Why a run could not happen.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The control API did not answer.
    #[error(
        "cannot reach the control API at {addr}: {source}\n(is `rein run` running with the same --state or --control?)"
    )]
    Control { addr: String, source: io::Error },
    /// The listener that leads to the application refused the first connection.
    #[error("cannot connect to {target}: {source}")]
    Unreachable { target: String, source: io::Error },
    /// An unknown application, no listener passing to it, parameters that make no sense.
    #[error("{0}")]
    Invalid(String),
    #[error("cannot start the runtime: {0}")]
    Runtime(io::Error),
}

impl Error {
    /// rein or the application could not be reached (exit code 3, not 1).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Error::Control { .. } | Error::Unreachable { .. })
    }
}

/// One phase's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Phase {
    /// When the phase began and how long it lasted, in seconds from the start of the load.
    pub start_s: f64,
    pub duration_s: f64,
    /// Requests that completed (or failed) within the phase.
    pub requests: u64,
    pub successes: u64,
    pub failed: u64,
    pub rps: f64,
    pub errors: Errors,
    /// Latency of complete responses in the phase, µs.
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Phases {
    pub before: Phase,
    pub during: Phase,
    pub after: Phase,
}

/// What the rolling reload did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReloadOutcome {
    /// The control API answered 2xx.
    pub ok: bool,
    /// Why not, when not.
    pub reason: Option<String>,
    /// How long `GET /control/applications/APP/restart` took (it answers when the reload is done).
    pub seconds: f64,
    /// The application's generation in its status before and after.
    pub generation_before: Option<u64>,
    pub generation_after: Option<u64>,
}

/// What the kill did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrashOutcome {
    /// As many instances were ready again as before the kill, within the deadline.
    pub ok: bool,
    pub reason: Option<String>,
    /// The pid sent SIGKILL.
    pub killed_pid: Option<i64>,
    /// Ready instances just before the kill.
    pub ready_before: usize,
    /// From the kill until as many instances were ready again (polled every 20 ms), seconds.
    pub time_to_capacity_s: Option<f64>,
    /// Pids of the ready instances before the kill and once capacity was back.
    pub pids_before: Vec<i64>,
    pub pids_after: Vec<i64>,
}

/// What a reload or crash bench measured. Serialized as is for `--json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub bench: Trigger,
    pub app: String,
    pub target: String,
    pub connections: usize,
    /// From the start to the last request's end.
    pub duration_s: f64,
    /// When the reload was asked for or the instance killed, from the start.
    pub trigger_at_s: f64,
    /// When the reload call returned or capacity was back, from the start (null: not within the deadline).
    pub recovered_at_s: Option<f64>,
    pub requests: u64,
    pub successes: u64,
    /// Requests without a 2xx response, all phases.
    pub failed: u64,
    pub errors: Errors,
    pub rps: f64,
    pub latency_us: Latency,
    pub longest_gap_us: u64,
    pub longest_gap_start_s: f64,
    pub phases: Phases,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reload: Option<ReloadOutcome>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crash: Option<CrashOutcome>,
}

/// Runs the bench on a runtime of its own with `config.threads` threads.
pub fn run(config: &Config) -> Result<Report, Error> {
    config.validate().map_err(Error::Invalid)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads.max(1))
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    runtime.block_on(drive(config))
}

/// The bench itself, on the current runtime.
pub async fn drive(config: &Config) -> Result<Report, Error> {
    config.validate().map_err(Error::Invalid)?;
    let control = Control {
        addr: config.control.clone(),
        headers: config.control_headers.clone(),
    };
    let app_path = format!("/status/applications/{}", segment(&config.app));
    let (status, _) = control.get(&app_path).await?;
    if status == StatusCode::NOT_FOUND {
        let known = control.app_names().await.unwrap_or_default();
        return Err(Error::Invalid(format!(
            "no application {:?} in rein ({})",
            config.app,
            if known.is_empty() {
                "it runs none".to_owned()
            } else {
                format!("known: {}", known.join(", "))
            }
        )));
    }
    if !status.is_success() {
        return Err(Error::Invalid(format!("GET {app_path} answered {status}")));
    }
    let target = match &config.target {
        Some(t) => t.clone(),
        None => control.find_target(&config.app).await?,
    };
    let endpoint = match timeout(config.timeout, Endpoint::probe(&target)).await {
        Ok(Ok(e)) => e,
        Ok(Err(source)) => {
            return Err(Error::Unreachable {
                target: target.to_string(),
                source,
            });
        }
        Err(_) => {
            return Err(Error::Unreachable {
                target: target.to_string(),
                source: io::ErrorKind::TimedOut.into(),
            });
        }
    };

    let start = Instant::now();
    let load = Arc::new(Load::new(config, &target, endpoint, start));
    let conns: Vec<_> = (0..config.connections)
        .map(|_| tokio::spawn(connection(load.clone())))
        .collect();
    let marks = trigger(config, &control, &load, start).await;
    let mut phases: [Recorder; 3] = Default::default();
    for handle in conns {
        match handle.await {
            Ok(recs) => {
                for (total, rec) in phases.iter_mut().zip(recs) {
                    total.merge(rec);
                }
            }
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    // The load's end: the last answer, or the trigger's end if that came later (a crash bench keeps polling).
    let end = load
        .last
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .max(start + config.duration);
    let elapsed = end - start;
    Ok(assemble(config, &target, &phases, elapsed, marks))
}

/// When the phases changed, and what the trigger reported.
struct Marks {
    trigger_at: Duration,
    recovered_at: Option<Duration>,
    reload: Option<ReloadOutcome>,
    crash: Option<CrashOutcome>,
}

fn assemble(
    config: &Config,
    target: &Target,
    phases: &[Recorder; 3],
    elapsed: Duration,
    marks: Marks,
) -> Report {
    let mut all = Recorder::default();
    for p in phases {
        all.merge(p.clone());
    }
    let overall = all.report(target.to_string(), config.connections, None, elapsed, 0);
    let trigger_at = marks.trigger_at.min(elapsed);
    let recovered = marks
        .recovered_at
        .unwrap_or(elapsed)
        .clamp(trigger_at, elapsed);
    let bounds = [
        (Duration::ZERO, trigger_at),
        (trigger_at, recovered),
        (recovered, elapsed),
    ];
    let [before, during, after] = [0, 1, 2].map(|i| {
        let (from, to) = bounds[i];
        let r = phases[i].report(String::new(), config.connections, None, to - from, 0);
        Phase {
            start_s: round3(from.as_secs_f64()),
            duration_s: round3((to - from).as_secs_f64()),
            requests: r.requests,
            successes: r.successes,
            failed: r.errors.total,
            rps: r.rps,
            errors: r.errors,
            p50_us: r.latency_us.p50,
            p99_us: r.latency_us.p99,
            max_us: r.latency_us.max,
        }
    });
    Report {
        bench: config.trigger,
        app: config.app.clone(),
        target: overall.target,
        connections: config.connections,
        duration_s: overall.duration_s,
        trigger_at_s: round3(marks.trigger_at.as_secs_f64()),
        recovered_at_s: marks.recovered_at.map(|d| round3(d.as_secs_f64())),
        requests: overall.requests,
        successes: overall.successes,
        failed: overall.errors.total,
        errors: overall.errors,
        rps: overall.rps,
        latency_us: overall.latency_us,
        longest_gap_us: overall.longest_gap_us,
        longest_gap_start_s: overall.longest_gap_start_s,
        phases: Phases {
            before,
            during,
            after,
        },
        reload: marks.reload,
        crash: marks.crash,
    }
}

/// Waits for the trigger time, does it, and moves the load through the phases.
async fn trigger(config: &Config, control: &Control, load: &Load, start: Instant) -> Marks {
    sleep_until(start + config.trigger_at()).await;
    let app = segment(&config.app);
    let status_path = format!("/status/applications/{app}");
    let before = control.get(&status_path).await.ok().map(|(_, v)| v);
    match config.trigger {
        Trigger::Reload => {
            load.phase.store(1, Relaxed);
            let trigger_at = start.elapsed();
            let t0 = Instant::now();
            let answer = control
                .get(&format!("/control/applications/{app}/restart"))
                .await;
            let took = t0.elapsed();
            load.phase.store(2, Relaxed);
            let recovered_at = start.elapsed();
            let (ok, reason) = match answer {
                Ok((s, _)) if s.is_success() => (true, None),
                Ok((s, body)) => (false, Some(api_error(s, &body))),
                Err(e) => (false, Some(e.to_string())),
            };
            let after = control.get(&status_path).await.ok().map(|(_, v)| v);
            let generation = |v: &Option<Value>| v.as_ref().and_then(|v| v["generation"].as_u64());
            Marks {
                trigger_at,
                recovered_at: Some(recovered_at),
                reload: Some(ReloadOutcome {
                    ok,
                    reason,
                    seconds: round3(took.as_secs_f64()),
                    generation_before: generation(&before),
                    generation_after: generation(&after),
                }),
                crash: None,
            }
        }
        Trigger::Crash => {
            let pids_before = before.as_ref().map(ready_pids).unwrap_or_default();
            let mut outcome = CrashOutcome {
                ok: false,
                reason: None,
                killed_pid: None,
                ready_before: pids_before.len(),
                time_to_capacity_s: None,
                pids_before: pids_before.clone(),
                pids_after: Vec::new(),
            };
            let fail = |mut outcome: CrashOutcome, reason: String| {
                outcome.reason = Some(reason);
                load.phase.store(1, Relaxed);
                Marks {
                    trigger_at: start.elapsed(),
                    recovered_at: None,
                    reload: None,
                    crash: Some(outcome),
                }
            };
            let Some(&victim) = pids_before.first() else {
                let reason = match before {
                    None => "cannot read the application's status".to_owned(),
                    Some(_) => "no ready instance to kill".to_owned(),
                };
                return fail(outcome, reason);
            };
            outcome.killed_pid = Some(victim);
            load.phase.store(1, Relaxed);
            let trigger_at = start.elapsed();
            let t0 = Instant::now();
            if let Err(e) = kill9(victim) {
                return fail(outcome, format!("kill -9 {victim}: {e}"));
            }
            let deadline = t0 + config.capacity_deadline;
            let mut last = Vec::new();
            loop {
                sleep(Duration::from_millis(20)).await;
                if let Ok((s, v)) = control.get(&status_path).await
                    && s.is_success()
                {
                    last = ready_pids(&v);
                    if !last.contains(&victim) && last.len() >= outcome.ready_before {
                        let took = t0.elapsed();
                        load.phase.store(2, Relaxed);
                        outcome.ok = true;
                        outcome.time_to_capacity_s = Some(round3(took.as_secs_f64()));
                        outcome.pids_after = last;
                        return Marks {
                            trigger_at,
                            recovered_at: Some(start.elapsed()),
                            reload: None,
                            crash: Some(outcome),
                        };
                    }
                }
                if Instant::now() >= deadline {
                    outcome.reason = Some(format!(
                        "capacity not back after {:.1}s: {} of {} instances ready",
                        config.capacity_deadline.as_secs_f64(),
                        last.iter().filter(|p| **p != victim).count(),
                        outcome.ready_before
                    ));
                    outcome.pids_after = last;
                    return Marks {
                        trigger_at,
                        recovered_at: None,
                        reload: None,
                        crash: Some(outcome),
                    };
                }
            }
        }
    }
}

/// What every connection reads.
struct Load {
    endpoint: Endpoint,
    uri: Uri,
    headers: HeaderMap,
    timeout: Duration,
    start: Instant,
    deadline: Instant,
    /// 0 before the trigger, 1 during, 2 after.
    phase: AtomicU8,
    /// When the last request ended.
    last: std::sync::Mutex<Instant>,
}

impl Load {
    fn new(config: &Config, target: &Target, endpoint: Endpoint, start: Instant) -> Load {
        let mut headers = HeaderMap::new();
        if let Ok(host) = HeaderValue::from_str(target.host_header()) {
            headers.insert(HOST, host);
        }
        headers.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("rein-bench/", env!("CARGO_PKG_VERSION"))),
        );
        Load {
            endpoint,
            uri: target
                .path()
                .parse()
                .unwrap_or_else(|_| Uri::from_static("/")),
            headers,
            timeout: config.timeout,
            start,
            deadline: start + config.duration,
            phase: AtomicU8::new(0),
            last: std::sync::Mutex::new(start),
        }
    }
}

/// One connection's loop: send, record into the current phase, reconnect after a failure.
async fn connection(load: Arc<Load>) -> [Recorder; 3] {
    let mut recs: [Recorder; 3] = Default::default();
    let mut conn: Option<Conn> = None;
    loop {
        let sent = Instant::now();
        if sent >= load.deadline {
            break;
        }
        let outcome = timeout(load.timeout, exchange(&load, &mut conn)).await;
        let done = Instant::now();
        let rec = &mut recs[usize::from(load.phase.load(Relaxed).min(2))];
        match outcome {
            Ok(Ok(status)) => rec.response(status.as_u16(), done - sent, micros(done - load.start)),
            Ok(Err(failure)) => rec.failure(failure),
            Err(_) => rec.failure(Failure::Timeout),
        }
        let mut last = load.last.lock().unwrap_or_else(|e| e.into_inner());
        *last = (*last).max(done);
    }
    recs
}

/// One GET and its whole response, opening a connection if there is none; the connection is kept only after a
/// complete response.
async fn exchange(load: &Load, conn: &mut Option<Conn>) -> Result<StatusCode, Failure> {
    let mut reuse = conn.take();
    if let Some(c) = &mut reuse
        && c.sender.ready().await.is_err()
    {
        reuse = None; // closed by the server while idle: not an error
    }
    let mut c = match reuse {
        Some(c) => c,
        None => {
            let mut c = connect(&load.endpoint)
                .await
                .map_err(|_| Failure::Connect)?;
            c.sender.ready().await.map_err(|e| classify(&e))?;
            c
        }
    };
    let mut req = Request::new(Empty::<Bytes>::new());
    *req.uri_mut() = load.uri.clone();
    *req.headers_mut() = load.headers.clone();
    let response = c.sender.send_request(req).await.map_err(|e| classify(&e))?;
    let status = response.status();
    let mut body = response.into_body();
    while let Some(frame) = body.frame().await {
        frame.map_err(|e| classify(&e))?;
    }
    *conn = Some(c);
    Ok(status)
}

/// Opens a keep-alive connection to the endpoint the load was probed on.
async fn connect(endpoint: &Endpoint) -> io::Result<Conn> {
    match endpoint {
        Endpoint::Tcp(addr) => {
            let s = TcpStream::connect(addr).await?;
            s.set_nodelay(true)?;
            Conn::handshake(s).await
        }
        Endpoint::Unix(path) => Conn::handshake(UnixStream::connect(path).await?).await,
    }
}

/// A keep-alive client connection; dropping it closes the socket.
struct Conn {
    sender: SendRequest<Empty<Bytes>>,
    driver: AbortHandle,
}

impl Conn {
    async fn handshake<S>(stream: S) -> io::Result<Conn>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, driver) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(io::Error::other)?;
        let driver = tokio::spawn(driver).abort_handle();
        Ok(Conn { sender, driver })
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// One request on a fresh connection, the whole body read.
async fn exchange_once<S>(stream: S, req: Request<Empty<Bytes>>) -> io::Result<(StatusCode, Bytes)>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut conn = Conn::handshake(stream).await?;
    let response = conn
        .sender
        .send_request(req)
        .await
        .map_err(io::Error::other)?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(io::Error::other)?
        .to_bytes();
    drop(conn);
    Ok((status, body))
}

mod control;
mod output;
use control::{Control, api_error, kill9, ready_pids, segment};
pub use output::{human, json};

#[cfg(test)]
mod tests {
    use super::control::listener_target;
    use super::*;

    #[test]
    fn listener_urls() {
        let t = |k: &str, b: Option<&str>| listener_target(k, b).map(|t| t.to_string());
        assert_eq!(t("*:8080", None).unwrap(), "http://127.0.0.1:8080/");
        assert_eq!(
            t("127.0.0.1:0", Some("127.0.0.1:41234")).unwrap(),
            "http://127.0.0.1:41234/"
        );
        assert_eq!(t("[::]:81", None).unwrap(), "http://[::1]:81/");
        assert_eq!(t("unix:/run/a.sock", None).unwrap(), "unix:/run/a.sock:/");
        assert!(t("nonsense", None).unwrap_err().contains("--url"));
    }

    #[test]
    fn validation_and_default_trigger_time() {
        let mut c = Config::new(Trigger::Reload, "web", ControlAddr::Unix("/x".into()));
        c.duration = Duration::from_secs(3);
        assert_eq!(c.trigger_at(), Duration::from_secs(1));
        assert!(c.validate().is_ok());
        c.at = Some(Duration::from_secs(3));
        assert!(c.validate().unwrap_err().contains("--at"));
        c.at = None;
        c.connections = 0;
        assert!(c.validate().unwrap_err().contains("--connections"));
    }

    #[test]
    fn phases_split_at_the_marks() {
        let mut recs: [Recorder; 3] = Default::default();
        recs[0].response(200, Duration::from_micros(100), 100_000);
        recs[1].response(200, Duration::from_micros(5_000), 1_100_000);
        recs[1].failure(Failure::Reset);
        recs[2].response(200, Duration::from_micros(200), 2_500_000);
        let mut c = Config::new(Trigger::Crash, "web", ControlAddr::Unix("/x".into()));
        c.connections = 1;
        let target: Target = "http://127.0.0.1:1/".parse().unwrap();
        let r = assemble(
            &c,
            &target,
            &recs,
            Duration::from_secs(3),
            Marks {
                trigger_at: Duration::from_secs(1),
                recovered_at: Some(Duration::from_secs(2)),
                reload: None,
                crash: None,
            },
        );
        assert_eq!((r.requests, r.successes, r.failed), (4, 3, 1));
        assert_eq!(r.errors.reset, 1);
        let p = &r.phases;
        assert_eq!((p.before.start_s, p.before.duration_s), (0.0, 1.0));
        assert_eq!((p.during.start_s, p.during.duration_s), (1.0, 1.0));
        assert_eq!((p.after.start_s, p.after.duration_s), (2.0, 1.0));
        assert_eq!((p.during.requests, p.during.failed), (2, 1));
        assert!((5_000..5_010).contains(&p.during.p99_us));
        assert_eq!(r.longest_gap_us, 1_400_000);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["bench"], "crash");
        assert!(v.get("reload").is_none());
    }
}
