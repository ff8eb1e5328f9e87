//! The HTTP/1.1 load generator: `connections` keep-alive connections, each its own
//! `hyper::client::conn::http1` handshake over TCP or a Unix socket, at most one request in flight on each.
//!
//! Requests are numbered by one shared counter. Closed loop, a connection sends ticket `k` as soon as it is
//! free; open loop (`rate`), ticket `k` is due at `start + k / rate`. When every connection is busy past that
//! time, its latency is measured from when it was due, not from when a connection got round to it, so a
//! stalled server shows up as latency instead of as fewer samples (no coordinated omission); a connection that
//! was free and waiting measures from when its timer fired. A request that fails drops its connection; the next
//! one reconnects. Latency includes connecting when a connection had to be (re)opened.
//!
//! The connections are shared out among one worker task per thread; each worker records into its own
//! [`Recorder`], merged into the [`Report`] at the end.

use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HOST, HeaderValue, USER_AGENT};
use http::{HeaderMap, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio::task::AbortHandle;
use tokio::time::{Instant, sleep_until, timeout};

use super::config::{Config, Stop, Target};
use super::report::{Failure, Recorder, Report, micros};

/// Why a run could not happen.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The first connection failed: nothing to measure.
    #[error("cannot connect to {target}: {source}")]
    Unreachable { target: String, source: io::Error },
    #[error("cannot start the runtime: {0}")]
    Runtime(io::Error),
}

/// Live counts, for a progress line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    pub elapsed: Duration,
    pub requests: u64,
    pub successes: u64,
    pub errors: u64,
    pub bytes_read: u64,
}

/// Like [`run`], calling `on_tick` about four times a second while it runs.
pub fn run_with_progress(config: &Config, on_tick: impl FnMut(&Progress)) -> Result<Report, Error> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads.max(1))
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    runtime.block_on(drive(config, on_tick))
}

/// The bench itself, on the current runtime.
pub async fn drive(config: &Config, mut on_tick: impl FnMut(&Progress)) -> Result<Report, Error> {
    let unreachable = |source| Error::Unreachable {
        target: config.target.to_string(),
        source,
    };
    // One connection first: an unreachable target is an error, not a run full of connect errors.
    let endpoint = match timeout(config.timeout, Endpoint::probe(&config.target)).await {
        Ok(Ok(endpoint)) => endpoint,
        Ok(Err(e)) => return Err(unreachable(e)),
        Err(_) => return Err(unreachable(io::ErrorKind::TimedOut.into())),
    };

    let start = Instant::now();
    let shared = Arc::new(Shared::new(config, endpoint, start));
    let workers = config.threads.clamp(1, config.connections);
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let conns =
                config.connections / workers + usize::from(w < config.connections % workers);
            tokio::spawn(worker(shared.clone(), conns))
        })
        .collect();
    let all = futures_util::future::join_all(handles);
    tokio::pin!(all);
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.tick().await;
    let results = loop {
        tokio::select! {
            results = &mut all => break results,
            _ = tick.tick() => on_tick(&shared.progress()),
        }
    };
    // A timed run measures its duration: requests stuck on the server once the load stopped starting new ones
    // still count (as answers or timeouts), but the time spent draining them is no outage seen by new
    // requests, nor part of the rate (as wrk reports).
    let elapsed = match config.stop {
        Stop::Duration(d) => start.elapsed().min(d),
        Stop::Requests(_) => start.elapsed(),
    };
    let mut total = Recorder::default();
    for result in results {
        match result {
            Ok(recorder) => total.merge(recorder),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    let mut report = total.report(
        config.target.to_string(),
        config.connections,
        config.rate,
        elapsed,
        shared.bytes.load(Relaxed),
    );
    if !config.gap_from.is_zero() {
        report.gap_from(&total, config.gap_from, elapsed);
    }
    Ok(report)
}

/// What every connection reads: the request, the schedule, live counters.
struct Shared {
    endpoint: Endpoint,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
    timeout: Duration,
    start: Instant,
    deadline: Option<Instant>,
    limit: Option<u64>,
    rate: Option<f64>,
    tickets: AtomicU64,
    requests: AtomicU64,
    successes: AtomicU64,
    errors: AtomicU64,
    bytes: Arc<AtomicU64>,
}

impl Shared {
    fn new(config: &Config, endpoint: Endpoint, start: Instant) -> Shared {
        let mut headers = config.headers.clone();
        if !headers.contains_key(HOST)
            && let Ok(host) = HeaderValue::from_str(config.target.host_header())
        {
            headers.insert(HOST, host);
        }
        if !headers.contains_key(USER_AGENT) {
            headers.insert(
                USER_AGENT,
                HeaderValue::from_static(concat!("rein-bench/", env!("CARGO_PKG_VERSION"))),
            );
        }
        let (deadline, limit) = match config.stop {
            Stop::Duration(d) => (Some(start + d), None),
            Stop::Requests(n) => (None, Some(n)),
        };
        Shared {
            endpoint,
            method: config.method.clone(),
            uri: config
                .target
                .path()
                .parse()
                .unwrap_or_else(|_| Uri::from_static("/")),
            headers,
            body: config.body.clone(),
            timeout: config.timeout,
            start,
            deadline,
            limit,
            rate: config.rate,
            tickets: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            successes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            bytes: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Takes the next request's ticket; returns the instant its latency counts from, or `None` once the run is
    /// over.
    async fn next(&self) -> Option<Instant> {
        let k = self.tickets.fetch_add(1, Relaxed);
        if self.limit.is_some_and(|n| k >= n) {
            return None;
        }
        let Some(rate) = self.rate else {
            let now = Instant::now();
            return self.deadline.is_none_or(|d| now < d).then_some(now);
        };
        let due = self.start + Duration::from_secs_f64(k as f64 / rate);
        if self.deadline.is_some_and(|d| due >= d) {
            return None;
        }
        if Instant::now() < due {
            // A free connection waits for the schedule; the timer's lateness (up to a millisecond) is ours, not
            // the server's, so latency starts when it fires.
            sleep_until(due).await;
            return Some(Instant::now());
        }
        // Behind schedule because every connection was busy: the wait counts against the server.
        Some(due)
    }

    fn request(&self) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(self.body.clone()));
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }

    fn progress(&self) -> Progress {
        Progress {
            elapsed: self.start.elapsed(),
            requests: self.requests.load(Relaxed),
            successes: self.successes.load(Relaxed),
            errors: self.errors.load(Relaxed),
            bytes_read: self.bytes.load(Relaxed),
        }
    }
}

/// One worker: drives its connections concurrently in one task, recording into one recorder.
async fn worker(shared: Arc<Shared>, connections: usize) -> Recorder {
    let recorder = Mutex::new(Recorder::default());
    futures_util::future::join_all((0..connections).map(|_| connection(&shared, &recorder))).await;
    recorder.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// One connection's loop: take a ticket, send, record; reconnect after a failure.
async fn connection(shared: &Shared, recorder: &Mutex<Recorder>) {
    let mut conn: Option<Conn> = None;
    while let Some(due) = shared.next().await {
        let outcome = timeout(shared.timeout, exchange(shared, &mut conn)).await;
        let done = Instant::now();
        let mut rec = recorder.lock().unwrap_or_else(|e| e.into_inner());
        shared.requests.fetch_add(1, Relaxed);
        match outcome {
            Ok(Ok(status)) => {
                let status = status.as_u16();
                rec.response(status, done - due, micros(done - shared.start));
                if (200..300).contains(&status) {
                    shared.successes.fetch_add(1, Relaxed);
                } else {
                    shared.errors.fetch_add(1, Relaxed);
                }
            }
            Ok(Err(failure)) => {
                rec.failure(failure);
                shared.errors.fetch_add(1, Relaxed);
            }
            Err(_elapsed) => {
                rec.failure(Failure::Timeout);
                shared.errors.fetch_add(1, Relaxed);
            }
        }
    }
}

/// One request and its whole response on `conn`, opening a connection if there is none. The connection is put
/// back only after a complete response, so a failure or a timeout (which drops this future) closes it.
async fn exchange(shared: &Shared, conn: &mut Option<Conn>) -> Result<http::StatusCode, Failure> {
    let mut reuse = conn.take();
    // The server may have closed an idle connection (`Connection: close`, keep-alive timeout): not an error.
    if let Some(c) = &mut reuse
        && c.sender.ready().await.is_err()
    {
        reuse = None;
    }
    let mut c = match reuse {
        Some(c) => c,
        None => {
            let mut c = shared
                .endpoint
                .connect(shared.bytes.clone())
                .await
                .map_err(|_| Failure::Connect)?;
            c.sender.ready().await.map_err(|e| classify(&e))?;
            c
        }
    };
    let response = c
        .sender
        .send_request(shared.request())
        .await
        .map_err(|e| classify(&e))?;
    let status = response.status();
    let mut body = response.into_body();
    while let Some(frame) = body.frame().await {
        frame.map_err(|e| classify(&e))?;
    }
    *conn = Some(c);
    Ok(status)
}

/// The kind of failure a hyper client error stands for.
pub(super) fn classify(e: &hyper::Error) -> Failure {
    if e.is_timeout() {
        Failure::Timeout
    } else if e.is_parse() || e.is_parse_status() || e.is_parse_too_large() || e.is_user() {
        Failure::Other
    } else {
        // Closed before the response was complete, reset, broken pipe.
        Failure::Reset
    }
}

/// Where to connect, resolved once.
pub(super) enum Endpoint {
    Tcp(std::net::SocketAddr),
    Unix(PathBuf),
}

impl Endpoint {
    /// Resolves the target and opens (then drops) one connection; the address that answered is kept.
    pub(super) async fn probe(target: &Target) -> io::Result<Endpoint> {
        match target {
            Target::Unix { socket, .. } => {
                UnixStream::connect(socket).await?;
                Ok(Endpoint::Unix(socket.clone()))
            }
            Target::Tcp { host, port, .. } => {
                let mut last =
                    io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"));
                for addr in tokio::net::lookup_host((host.as_str(), *port)).await? {
                    match TcpStream::connect(addr).await {
                        Ok(_) => return Ok(Endpoint::Tcp(addr)),
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
        }
    }

    async fn connect(&self, bytes: Arc<AtomicU64>) -> io::Result<Conn> {
        let stream = match self {
            Endpoint::Tcp(addr) => {
                let s = TcpStream::connect(addr).await?;
                s.set_nodelay(true)?;
                Stream::Tcp(s)
            }
            Endpoint::Unix(path) => Stream::Unix(UnixStream::connect(path).await?),
        };
        let (sender, driver) =
            hyper::client::conn::http1::handshake(TokioIo::new(Counted { stream, bytes }))
                .await
                .map_err(io::Error::other)?;
        let driver = tokio::spawn(driver).abort_handle();
        Ok(Conn { sender, driver })
    }
}

/// A client connection; dropping it closes the socket.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    driver: AbortHandle,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// A socket that counts the bytes read from it.
struct Counted {
    stream: Stream,
    bytes: Arc<AtomicU64>,
}

impl AsyncRead for Counted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = match &mut this.stream {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
        };
        if let Poll::Ready(Ok(())) = poll {
            this.bytes
                .fetch_add((buf.filled().len() - before) as u64, Relaxed);
        }
        poll
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().stream {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().stream {
            Stream::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.stream {
            Stream::Tcp(s) => s.is_write_vectored(),
            Stream::Unix(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
