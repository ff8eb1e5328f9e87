//! What `/status` shows, as plain values: each owner (the server's counters, the upstreams, the supervisor,
//! the ACME task, the engine) fills its part, and [`super::status`] and [`super::prometheus`] render the
//! whole. Fields are declared in the order `/status` has always shown them; a member that is unknown is
//! `None` and left out of the JSON.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};

/// The whole of `GET /status`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Status {
    pub connections: Connections,
    pub requests: Requests,
    pub listeners: BTreeMap<String, ListenerStatus>,
    pub upstreams: BTreeMap<String, UpstreamStatus>,
    pub applications: BTreeMap<String, AppStatus>,
    pub certificates: BTreeMap<String, CertificateStatus>,
    pub config: ConfigStatus,
    /// rein runs Python and PHP through its own adapter and PHP-FPM, not loaded modules: Unit's object,
    /// empty.
    pub modules: Empty,
}

/// Client connections, as Unit counts them: `active` ones are handling a request, `idle` ones wait for the
/// next; `refused` (rein's) were closed on arrival for a connection limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Connections {
    pub accepted: u64,
    pub active: u64,
    pub idle: u64,
    pub closed: u64,
    pub refused: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Requests {
    pub total: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ListenerStatus {
    /// The address it is bound to (the port the system chose for port 0).
    pub address: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct UpstreamStatus {
    /// By address, in the upstream's order.
    #[serde(serialize_with = "as_map")]
    pub servers: Vec<(String, ServerStatus)>,
}

/// One server of an upstream.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct ServerStatus {
    /// `healthy`, `failed` (inside a passive time-out) or `unhealthy` (down by active checks).
    pub state: &'static str,
    pub active: u32,
    pub idle_connections: usize,
    pub connections_opened: u64,
    pub pipelined: u64,
    pub requests: u64,
    pub failures: u64,
}

/// One application. Before its runner first reports, only `instances` (empty) and Unit's counts are known.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct AppStatus {
    pub generation: Option<u64>,
    /// `running`, `reloading` or `errored`.
    pub state: Option<&'static str>,
    pub errored: Option<String>,
    pub instances: Vec<InstanceStatus>,
    pub exited: Option<Vec<ExitedStatus>>,
    pub replacements: Option<u64>,
    pub last_reload: Option<ReloadStatus>,
    /// Requests waiting for an instance.
    pub queued: u32,
    /// Unit's fields: a monitoring script written for Unit reads these.
    pub processes: Processes,
    pub requests: AppRequests,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct InstanceStatus {
    pub id: u64,
    pub pid: Option<u32>,
    pub state: &'static str,
    pub generation: u64,
    pub uptime: Option<f64>,
    pub restarts: u32,
    pub rss_bytes: Option<u64>,
    pub requests: Option<u64>,
    pub in_flight: Option<u32>,
    pub idle_connections: Option<usize>,
    pub connections_opened: Option<u64>,
    pub pipelined: Option<u64>,
    /// A `handoff` app's instance: client connections it took, and those it handed back (a drain).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections_handed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections_returned: Option<u64>,
    /// CPU time used (user and system), for the metrics only.
    #[serde(skip)]
    pub cpu_seconds: Option<f64>,
}

/// An instance that has exited, among the last few.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct ExitedStatus {
    pub id: u64,
    pub pid: Option<u32>,
    pub state: &'static str,
    pub generation: u64,
    pub reason: String,
    pub seconds_ago: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct ReloadStatus {
    pub ok: bool,
    pub generation: u64,
    pub seconds: f64,
    pub reason: Option<String>,
    pub requests_served: Option<u64>,
    pub requests_failed: Option<u64>,
}

/// Unit's `processes`: `running` counts instances serving or finishing their requests, `idle` the serving ones
/// with none in flight.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Processes {
    pub running: u64,
    pub starting: u64,
    pub idle: u64,
}

/// Unit's `requests`: in flight to the instances, and waiting for one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct AppRequests {
    pub active: u64,
}

/// An ACME bundle (dates as OpenSSL prints them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct CertificateStatus {
    pub managed: &'static str,
    /// `pending`, `valid` or `failed`.
    pub state: &'static str,
    pub names: Vec<String>,
    pub expires: Option<String>,
    pub next_renewal: Option<String>,
    pub last_issued: Option<String>,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct ConfigStatus {
    pub generation: u64,
    /// When the configuration last changed, in seconds since the epoch (metrics only).
    #[serde(skip)]
    pub changed_at: Option<f64>,
}

/// Serialises as `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Empty;

impl Serialize for Empty {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(std::iter::empty::<((), ())>())
    }
}

/// A list of pairs as a JSON object, in the list's order.
fn as_map<S: Serializer, V: Serialize>(pairs: &[(String, V)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}
