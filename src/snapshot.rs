//! The compiled, immutable form of a configuration: what the data plane reads.
//!
//! [`crate::compile`] builds a [`Snapshot`] from the user's document; the server publishes it atomically and
//! every request loads it once and keeps it to the end, so a change never alters a request in flight.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, StatusCode};

use crate::route::matcher::Match;
use crate::route::pattern::PatternSet;
use crate::share::MimeTypes;
use crate::supervisor::conf::AppConf;
use crate::upstream::conf::UpstreamConf;
use crate::vars::Template;

/// Routes by name, looked up on every request that passes to one: hashed with foldhash, as the names are the
/// administrator's, never a client's.
pub type Routes = HashMap<String, Arc<Route>, foldhash::fast::RandomState>;

/// One whole configuration, compiled.
pub struct Snapshot {
    pub listeners: BTreeMap<ListenAddr, Listener>,
    /// Routes by name; the array form of `routes` is stored under the empty name.
    pub routes: Routes,
    pub settings: HttpSettings,
    pub access_log: Option<AccessLog>,
    /// `applications`, run by the supervisor.
    pub applications: BTreeMap<String, AppConf>,
    /// How a request reaches each application's instances, by name.
    pub transports: BTreeMap<String, AppTransport>,
    pub upstreams: BTreeMap<String, UpstreamConf>,
    /// The targets of `proxy` actions, each a one-server upstream, by URL, and those of `fastcgi` actions by
    /// `fastcgi:ADDRESS`.
    pub proxies: BTreeMap<String, UpstreamConf>,
    /// rein's `acme` section: the bundles the ACME task obtains and renews.
    pub acme: Option<Arc<crate::acme::AcmeConf>>,
}

/// How the data plane hands a request to an application's instances, compiled from the app's type
/// ([`crate::supervisor::kind`]).
#[derive(Debug, Clone, PartialEq)]
pub enum AppTransport {
    /// HTTP to the instances (external and Node.js apps).
    Http,
    /// PHP's script rules, per target, then FastCGI to PHP-FPM.
    Php(Targets<crate::scripts::PhpTarget>),
    /// FastCGI to one of rein's adapters: the path the app (or each target) is mounted at, and which
    /// variables the adapter reads.
    Adapter {
        mounts: Targets<String>,
        cgi: crate::fastcgi::Cgi,
    },
}

/// What an application is without Unit's `targets` (`app`), or each of its targets by name.
#[derive(Debug, Clone, PartialEq)]
pub struct Targets<T> {
    pub app: Option<T>,
    pub named: BTreeMap<String, T>,
}

impl<T> Targets<T> {
    /// What `applications/NAME` (no target) or `applications/NAME/TARGET` names.
    pub fn get(&self, target: Option<&str>) -> Option<&T> {
        match target {
            None => self.app.as_ref(),
            Some(t) => self.named.get(t),
        }
    }
}

/// Where a listener accepts connections.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Tcp(addr) => write!(f, "{addr}"),
            ListenAddr::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

pub struct Listener {
    /// The key as the user wrote it (`*:8080`), for logs and status.
    pub name: String,
    pub pass: Pass,
    pub backlog: i32,
    /// Unit's `forwarded`: the client address and scheme from a trusted proxy's headers.
    pub forwarded: Option<crate::forwarded::Forwarded>,
    /// TLS settings; `None` for a plain listener.
    pub tls: Option<crate::tls::ListenerTls>,
    /// HTTP/2 with prior knowledge (h2c) beside HTTP/1.1 on a plain listener.
    pub h2c: bool,
    /// The application whose instances take this listener's connections themselves (`"handoff": true`).
    pub handoff: Option<Arc<str>>,
    /// Its counters, kept by name across changes.
    pub stats: Arc<crate::stats::counters::ListenerStats>,
}

/// A `pass` destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PassTarget {
    Route(String),
    /// An application, and one of its `targets`.
    Application(String, Option<String>),
    Upstream(String),
}

/// A `pass` value: fixed at compile time, or a template resolved per request (Unit allows variables here).
pub enum Pass {
    Fixed(PassTarget),
    Dynamic(Template),
}

pub struct Route {
    pub steps: Vec<Step>,
}

pub struct Step {
    /// `None` when the step has no `match`: it matches every request.
    pub matcher: Option<Match>,
    pub action: Action,
}

pub struct Action {
    pub kind: ActionKind,
    pub rewrite: Option<Template>,
    pub response_headers: Vec<ResponseHeader>,
}

/// One of an action's `response_headers`: set to a value, or removed (`null`).
pub struct ResponseHeader {
    pub name: HeaderName,
    /// The name as the configuration spells it, which the answer keeps.
    pub spelled: Box<[u8]>,
    pub value: Option<Template>,
}

pub enum ActionKind {
    Pass(Pass),
    Return {
        status: StatusCode,
        location: Option<Template>,
    },
    Share(Box<Share>),
    Proxy(String),
    FastCgi(Box<FastCgi>),
    /// rein's `metrics`: the Prometheus text of `GET /metrics`, on a listener.
    Metrics,
}

/// The `fastcgi` action.
pub struct FastCgi {
    pub server: FastCgiServer,
    pub target: crate::scripts::PhpTarget,
    /// Extra parameters passed to every script (`params`).
    pub params: Vec<(String, String)>,
}

pub enum FastCgiServer {
    /// One server, reached through the one-server upstream under [`FastCgiServer::key`] in `proxies`.
    Address(crate::link::ServerAddr),
    /// `upstreams/NAME`.
    Upstream(String),
}

impl FastCgiServer {
    /// Where its upstream is found: `proxies` for an address, `named` for an upstream.
    pub fn key(&self) -> String {
        match self {
            FastCgiServer::Address(addr) => format!("fastcgi:{addr}"),
            FastCgiServer::Upstream(name) => name.clone(),
        }
    }
}

pub struct Share {
    pub paths: Vec<Template>,
    pub index: String,
    pub chroot: Option<Template>,
    pub follow_symlinks: bool,
    pub traverse_mounts: bool,
    pub types: Option<PatternSet>,
    pub fallback: Option<Box<Action>>,
}

/// `settings.http`, with Unit's defaults.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
    pub send_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_body_size: u64,
    /// The lowest average rate, in bytes per second, at which a client may send a request body once
    /// `body_read_timeout` has passed; 0 for none.
    pub body_min_rate: u64,
    /// Client connections open at once over every listener; more are closed as they arrive.
    pub max_connections: u64,
    /// Client connections open at once from one address.
    pub max_connections_per_client: u32,
    /// Unit's `large_header_buffer_size`: the longest single header field line (name, value and their
    /// separators); a longer one is answered with 431.
    pub large_header_buffer_size: usize,
    /// Unit's `large_header_buffers`: the whole HTTP/1 head may fill this many large buffers.
    pub large_header_buffers: usize,
    /// Unit's `body_buffer_size`: accepted for compatibility; rein streams bodies instead of buffering them.
    pub body_buffer_size: u64,
    pub discard_unsafe_fields: bool,
    pub server_version: bool,
    pub log_route: bool,
    pub mime_types: MimeTypes,
    pub http2: Http2Settings,
}

/// `settings.http.http2`: what one HTTP/2 client may make rein hold.
#[derive(Debug, Clone)]
pub struct Http2Settings {
    pub max_concurrent_streams: u32,
    pub max_header_list_size: u32,
    pub initial_window_size: u32,
    /// Streams the client opened and reset before rein answered, waiting to be cleared; past it, the
    /// connection is closed (the "rapid reset" flood, CVE-2023-44487).
    pub max_pending_reset_streams: usize,
    /// Streams rein reset for the client's protocol errors; past it, the connection is closed.
    pub max_local_error_resets: usize,
}

impl Default for Http2Settings {
    fn default() -> Self {
        Http2Settings {
            max_concurrent_streams: 128,
            max_header_list_size: 32 * 1024,
            initial_window_size: 1024 * 1024,
            max_pending_reset_streams: 20,
            max_local_error_resets: 1024,
        }
    }
}

impl HttpSettings {
    /// The largest HTTP/1 request head: the large buffers it may fill, as in Unit, and never under hyper's
    /// smallest read buffer (8 KiB).
    pub fn max_head(&self) -> usize {
        self.large_header_buffer_size
            .saturating_mul(self.large_header_buffers)
            .max(8192)
    }
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            header_read_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(180),
            max_body_size: 8 * 1024 * 1024,
            body_min_rate: 256,
            max_connections: 100_000,
            max_connections_per_client: 1024,
            large_header_buffer_size: 8192,
            large_header_buffers: 4,
            body_buffer_size: 16 * 1024,
            discard_unsafe_fields: true,
            server_version: true,
            log_route: false,
            mime_types: MimeTypes::default(),
            http2: Http2Settings::default(),
        }
    }
}

pub struct AccessLog {
    pub path: PathBuf,
    pub format: crate::compile::LogFormat,
    pub condition: Option<crate::compile::LogCondition>,
}
