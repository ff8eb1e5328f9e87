//! The `upstreams` section compiled: Unit's `servers` with `weight`, and rein's additions in the same object
//! (balancing, health, timeouts, retries, waiting for a healthy server).
//!
//! ```json
//! {"servers": {"127.0.0.1:8081": {"weight": 2}, "unix:/run/app.sock": {"max_connections": 64}},
//!  "balance": "least_connections",
//!  "health": {"passive": {"failures": 1, "timeout": 10},
//!             "active": {"path": "/health", "interval": 5, "timeout": 2, "status": "200-399", "rise": 2, "fall": 3}},
//!  "timeouts": {"connect": 5, "read": 60, "send": 60, "idle": 4},
//!  "retries": {"tries": 3, "timeout": 10},
//!  "queue_timeout": 5,
//!  "tls": {"ca": "/etc/rein/internal-ca.pem", "server_name": "api.internal"}}
//! ```
//!
//! A server is an address or a `HOST:PORT` whose name is resolved at each new connection. With `tls` every
//! server is reached over TLS (see [`super::tls`]).

use std::time::Duration;

use serde_json::{Map, Value};

use super::balance::Balance;
use super::health::{ActiveRules, PassiveRules};
use super::tls::{self, TlsConf};
use crate::config::walk::{integer, known_keys, object, seconds, string};
use crate::config::{ConfigError, JsonPath};
use crate::link::ServerAddr;

#[derive(Debug, Clone, PartialEq)]
pub struct ServerConf {
    pub addr: ServerAddr,
    pub weight: f64,
    pub max_connections: Option<u32>,
    /// FastCGI: a request without a body may be queued on a busy connection (needs `max_connections`).
    pub pipelining: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ActiveCheck {
    pub path: String,
    pub interval: Duration,
    pub timeout: Duration,
    /// Inclusive range of statuses that count as healthy.
    pub status: (u16, u16),
    pub rules: ActiveRules,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeouts {
    pub connect: Duration,
    /// Waiting for the response head, and between two reads of the response body.
    pub read: Duration,
    /// Waiting for the server to take more of the request (head or body) while none of it moves.
    pub send: Duration,
    /// How long an idle pooled connection is kept: shorter than typical app keep-alives (Node's is 5 s).
    pub idle: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Retries {
    /// Attempts in all, the first included.
    pub tries: u32,
    /// No new attempt starts after this long since the request arrived.
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamConf {
    pub servers: Vec<ServerConf>,
    pub balance: Balance,
    pub passive: PassiveRules,
    pub active: Option<ActiveCheck>,
    pub timeouts: Timeouts,
    pub retries: Retries,
    /// How long a request waits for a server to become available before 503.
    pub queue_timeout: Duration,
    /// Every server is reached over TLS.
    pub tls: Option<TlsConf>,
}

impl UpstreamConf {
    /// The defaults, around one server (what a `proxy` or `fastcgi` action's address gets).
    pub fn to_one(addr: ServerAddr) -> Self {
        UpstreamConf::with_servers(vec![ServerConf {
            addr,
            weight: 1.0,
            max_connections: None,
            pipelining: false,
        }])
    }

    /// The defaults, around the given servers (also what a `proxy` action gets).
    pub fn with_servers(servers: Vec<ServerConf>) -> Self {
        UpstreamConf {
            servers,
            balance: Balance::RoundRobin,
            passive: PassiveRules {
                failures: 1,
                timeout: Duration::from_secs(10),
            },
            active: None,
            timeouts: Timeouts {
                connect: Duration::from_secs(5),
                read: Duration::from_secs(60),
                send: Duration::from_secs(60),
                idle: Duration::from_secs(4),
            },
            retries: Retries {
                tries: 3,
                timeout: Duration::from_secs(10),
            },
            queue_timeout: Duration::from_secs(5),
            tls: None,
        }
    }
}

const KEYS: &[&str] = &[
    "servers",
    "balance",
    "health",
    "timeouts",
    "retries",
    "queue_timeout",
    "tls",
];

pub fn compile(v: &Value, path: &JsonPath) -> Result<UpstreamConf, ConfigError> {
    let map = object(v, path)?;
    known_keys(map, KEYS, path)?;
    let servers_v = map
        .get("servers")
        .ok_or_else(|| path.error("an upstream needs \"servers\""))?;
    let mut conf = UpstreamConf::with_servers(servers(servers_v, &path.key("servers"))?);
    for (key, value) in map {
        let p = path.key(key);
        match key.as_str() {
            "balance" => conf.balance = balance(value, &p)?,
            "health" => health(value, &p, &mut conf)?,
            "timeouts" => timeouts(value, &p, &mut conf.timeouts)?,
            "retries" => retries(value, &p, &mut conf.retries)?,
            "queue_timeout" => conf.queue_timeout = seconds(value, &p)?,
            "tls" => conf.tls = Some(tls::compile(value, &p)?),
            _ => {}
        }
    }
    if conf.tls.is_some() {
        only_tcp(&conf.servers, &path.key("servers"))?;
    }
    Ok(conf)
}

/// TLS goes over TCP: a Unix socket server in an upstream with `tls` is refused.
fn only_tcp(servers: &[ServerConf], path: &JsonPath) -> Result<(), ConfigError> {
    match servers.iter().find(|s| s.addr.port().is_none()) {
        Some(s) => Err(path
            .key(&s.addr.to_string())
            .error("an upstream with \"tls\" takes \"HOST:PORT\" servers, not Unix sockets")),
        None => Ok(()),
    }
}

fn servers(v: &Value, path: &JsonPath) -> Result<Vec<ServerConf>, ConfigError> {
    let mut out = Vec::new();
    for (addr, server) in object(v, path)? {
        let spath = path.key(addr);
        let parsed = ServerAddr::parse_with_names(addr, None).ok_or_else(|| {
            spath.error(
                "must be an address: \"IP:PORT\", \"[IPv6]:PORT\", \"HOST:PORT\" or \"unix:/PATH\"",
            )
        })?;
        let server = object(server, &spath)?;
        known_keys(server, &["weight", "max_connections", "pipelining"], &spath)?;
        let weight = match server.get("weight") {
            None => 1.0,
            Some(w) => match w.as_f64() {
                Some(w) if (0.0..=1_000_000.0).contains(&w) => w,
                _ => {
                    return Err(spath
                        .key("weight")
                        .error("must be a number from 0 to 1000000"));
                }
            },
        };
        let max_connections = match server.get("max_connections") {
            None => None,
            Some(m) => Some(integer(m, &spath.key("max_connections"), u32::MAX as u64)? as u32),
        };
        let pipelining = match server.get("pipelining") {
            None | Some(Value::Bool(false)) => false,
            Some(Value::Bool(true)) if max_connections.is_some() => true,
            Some(Value::Bool(true)) => {
                return Err(spath.key("pipelining").error(
                    "needs max_connections: the server's worker count, which pipelining doubles requests over",
                ));
            }
            Some(_) => return Err(spath.key("pipelining").error("must be true or false")),
        };
        out.push(ServerConf {
            addr: parsed,
            weight,
            max_connections,
            pipelining,
        });
    }
    Ok(out)
}

fn balance(v: &Value, path: &JsonPath) -> Result<Balance, ConfigError> {
    match string(v, path)? {
        "round_robin" => Ok(Balance::RoundRobin),
        "least_connections" => Ok(Balance::LeastConnections),
        "ip_hash" => Ok(Balance::IpHash),
        _ => Err(path.error("must be \"round_robin\", \"least_connections\" or \"ip_hash\"")),
    }
}

fn health(v: &Value, path: &JsonPath, conf: &mut UpstreamConf) -> Result<(), ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["passive", "active"], path)?;
    if let Some(p) = map.get("passive") {
        let ppath = path.key("passive");
        let passive = object(p, &ppath)?;
        known_keys(passive, &["failures", "timeout"], &ppath)?;
        if let Some(f) = passive.get("failures") {
            conf.passive.failures = integer(f, &ppath.key("failures"), 1_000_000)? as u32;
        }
        if let Some(t) = passive.get("timeout") {
            conf.passive.timeout = seconds(t, &ppath.key("timeout"))?;
        }
    }
    if let Some(a) = map.get("active") {
        conf.active = Some(active(a, &path.key("active"))?);
    }
    Ok(())
}

fn active(v: &Value, path: &JsonPath) -> Result<ActiveCheck, ConfigError> {
    let map = object(v, path)?;
    known_keys(
        map,
        &["path", "interval", "timeout", "status", "rise", "fall"],
        path,
    )?;
    let get_secs = |key: &str, default: u64| -> Result<Duration, ConfigError> {
        map.get(key).map_or(Ok(Duration::from_secs(default)), |v| {
            seconds(v, &path.key(key))
        })
    };
    let get_count = |key: &str, default: u32| -> Result<u32, ConfigError> {
        match map.get(key) {
            None => Ok(default),
            Some(v) => match integer(v, &path.key(key), 1000)? {
                0 => Err(path.key(key).error("must be at least 1")),
                n => Ok(n as u32),
            },
        }
    };
    let check_path = match map.get("path") {
        Some(p) => {
            let p = string(p, &path.key("path"))?;
            if !p.starts_with('/') {
                return Err(path.key("path").error("must start with \"/\""));
            }
            p.to_owned()
        }
        None => "/".to_owned(),
    };
    let interval = get_secs("interval", 5)?;
    if interval.is_zero() {
        return Err(path.key("interval").error("must be more than 0"));
    }
    Ok(ActiveCheck {
        path: check_path,
        interval,
        timeout: get_secs("timeout", 2)?,
        status: match map.get("status") {
            Some(s) => status_range(s, &path.key("status"))?,
            None => (200, 399),
        },
        rules: ActiveRules {
            rise: get_count("rise", 2)?,
            fall: get_count("fall", 3)?,
        },
    })
}

/// `200`, or `"200-399"`.
fn status_range(v: &Value, path: &JsonPath) -> Result<(u16, u16), ConfigError> {
    let bad = || path.error("must be a status such as 200, or a range such as \"200-399\"");
    let parse = |s: &str| {
        s.trim()
            .parse::<u16>()
            .ok()
            .filter(|n| (100..=999).contains(n))
    };
    match v {
        Value::Number(_) => {
            let n = integer(v, path, 999)? as u16;
            if n < 100 { Err(bad()) } else { Ok((n, n)) }
        }
        Value::String(s) => {
            let (lo, hi) = s.split_once('-').ok_or_else(bad)?;
            match (parse(lo), parse(hi)) {
                (Some(lo), Some(hi)) if lo <= hi => Ok((lo, hi)),
                _ => Err(bad()),
            }
        }
        _ => Err(bad()),
    }
}

fn timeouts(v: &Value, path: &JsonPath, t: &mut Timeouts) -> Result<(), ConfigError> {
    let map: &Map<String, Value> = object(v, path)?;
    known_keys(map, &["connect", "read", "send", "idle"], path)?;
    for (key, value) in map {
        let d = seconds(value, &path.key(key))?;
        match key.as_str() {
            "connect" => t.connect = d,
            "read" => t.read = d,
            "send" => t.send = d,
            _ => t.idle = d,
        }
    }
    Ok(())
}

fn retries(v: &Value, path: &JsonPath, r: &mut Retries) -> Result<(), ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["tries", "timeout"], path)?;
    if let Some(t) = map.get("tries") {
        r.tries = match integer(t, &path.key("tries"), 100)? {
            0 => return Err(path.key("tries").error("must be at least 1")),
            n => n as u32,
        };
    }
    if let Some(t) = map.get("timeout") {
        r.timeout = seconds(t, &path.key("timeout"))?;
    }
    Ok(())
}

/// A `proxy` action's target as a one-server upstream with the defaults: `http://` and an address
/// (`127.0.0.1:8081`, `[::1]:8081`, `unix:/path`) or `HOST:PORT`, or `https://` and the same but a Unix
/// socket, over TLS verified against the system's roots. The port defaults to the scheme's (80, 443).
pub fn proxy_target(url: &str) -> Option<UpstreamConf> {
    if let Some(rest) = url.strip_prefix("http://") {
        let addr = ServerAddr::parse_with_names(rest, Some(80))?;
        return Some(UpstreamConf::to_one(addr));
    }
    let addr = ServerAddr::parse_with_names(url.strip_prefix("https://")?, Some(443))?;
    addr.port()?;
    Some(UpstreamConf {
        tls: Some(TlsConf::default()),
        ..UpstreamConf::to_one(addr)
    })
}
