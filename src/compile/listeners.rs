//! `listeners`: addresses (`*:8080`, `127.0.0.1:8080`, `[::1]:8080`, `unix:/path`) and where they pass.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::routes::compile_pass;
use crate::config::walk::{boolean, integer, known_keys, object, string};
use crate::config::{ConfigError, Errors, JsonPath};
use crate::forwarded::Forwarded;
use crate::snapshot::{ListenAddr, Listener, Pass, PassTarget};
use crate::supervisor::conf::AppConf;
use crate::tls::{Certificates, ListenerTls};

/// One listener as compiled, before its `pass` is checked against the rest of the document.
pub struct Compiled1 {
    pub addr: ListenAddr,
    pub pass: Pass,
    /// The key `pass` came from: `pass`, or Unit's older `application`.
    pub pass_key: &'static str,
    pub backlog: i32,
    pub forwarded: Option<Forwarded>,
    pub tls: Option<ListenerTls>,
    pub h2c: bool,
}

/// Listeners as compiled, still keyed by the user's names so passes can be checked with their paths.
#[derive(Default)]
pub struct Compiled {
    pub by_name: BTreeMap<String, Compiled1>,
}

impl Compiled {
    /// The listeners, each knowing whether it hands its connections to the instances of one of `apps`.
    pub fn into_map(self, apps: &BTreeMap<String, AppConf>) -> BTreeMap<ListenAddr, Listener> {
        self.by_name
            .into_iter()
            .map(|(name, l)| {
                let handoff = handoff(&l.pass, l.tls.is_some() || l.h2c, apps);
                let listener = Listener {
                    handoff,
                    stats: crate::stats::registry().listener(&name),
                    name,
                    pass: l.pass,
                    backlog: l.backlog,
                    forwarded: l.forwarded,
                    tls: l.tls,
                    h2c: l.h2c,
                };
                (l.addr, listener)
            })
            .collect()
    }
}

/// The application a listener hands its connections to: one with `handoff` that the listener passes to
/// straight (with no `targets` name), on plain HTTP/1 (TLS and `h2c` stay rein's to speak).
fn handoff(pass: &Pass, tls_or_h2c: bool, apps: &BTreeMap<String, AppConf>) -> Option<Arc<str>> {
    match pass {
        Pass::Fixed(PassTarget::Application(app, None))
            if !tls_or_h2c && apps.get(app).is_some_and(|a| a.kind.hands_off()) =>
        {
            Some(Arc::from(app.as_str()))
        }
        _ => None,
    }
}

pub fn compile(
    v: &Value,
    path: &JsonPath,
    certificates: &Certificates,
    errors: &mut Errors,
) -> Compiled {
    let mut out = Compiled::default();
    let mut seen: BTreeMap<ListenAddr, String> = BTreeMap::new();
    let Some(listeners) = errors.ok(object(v, path)) else {
        return out;
    };
    // Each listener is checked by itself, so one refusal names every listener at fault.
    for (name, listener) in listeners {
        let lpath = path.key(name);
        let Some(addr) = errors.ok(parse_addr(name, &lpath)) else {
            continue;
        };
        if let Some(other) = seen.insert(addr.clone(), name.clone()) {
            errors.push(lpath.error(format!("the same address as listener \"{other}\"")));
            continue;
        }
        if let Some(compiled) = errors.ok(compile_listener(addr, listener, &lpath, certificates)) {
            out.by_name.insert(name.clone(), compiled);
        }
    }
    out
}

fn compile_listener(
    addr: ListenAddr,
    v: &Value,
    path: &JsonPath,
    certificates: &Certificates,
) -> Result<Compiled1, ConfigError> {
    let map = object(v, path)?;
    known_keys(
        map,
        &[
            "pass",
            "application",
            "backlog",
            "forwarded",
            "client_ip",
            "tls",
            "h2c",
        ],
        path,
    )?;
    let (pass, pass_key) = listener_pass(map, path)?;
    let backlog = match map.get("backlog") {
        Some(b) => integer(b, &path.key("backlog"), i32::MAX as u64)? as i32,
        None => 511,
    };
    let forwarded = match (map.get("forwarded"), map.get("client_ip")) {
        (Some(_), Some(_)) => {
            return Err(path
                .key("client_ip")
                .error("Unit's older form of \"forwarded\": give one or the other"));
        }
        (Some(f), None) => Some(Forwarded::compile(f, &path.key("forwarded"))?),
        (None, Some(c)) => Some(legacy_client_ip(c, &path.key("client_ip"))?),
        (None, None) => None,
    };
    let tls = match map.get("tls") {
        Some(t) => Some(crate::tls::compile(t, &path.key("tls"), certificates)?),
        None => None,
    };
    let h2c = match map.get("h2c") {
        Some(h) => boolean(h, &path.key("h2c"))?,
        None => false,
    };
    if h2c && tls.is_some() {
        return Err(path
            .key("h2c")
            .error("a TLS listener negotiates HTTP/2 by ALPN; \"h2c\" is for plain listeners"));
    }
    Ok(Compiled1 {
        addr,
        pass,
        pass_key,
        backlog,
        forwarded,
        tls,
        h2c,
    })
}

/// A listener's destination: `pass`, or Unit's older `"application": "NAME"` (which Unit still takes, and
/// which yields to `pass` when both are given, as in Unit).
fn listener_pass(
    map: &serde_json::Map<String, Value>,
    path: &JsonPath,
) -> Result<(Pass, &'static str), ConfigError> {
    if let Some(pass) = map.get("pass") {
        return Ok((compile_pass(pass, &path.key("pass"))?, "pass"));
    }
    let app = map
        .get("application")
        .ok_or_else(|| path.error("a listener needs a \"pass\""))?;
    let app_path = path.key("application");
    let name = string(app, &app_path)?;
    if name.is_empty() {
        return Err(app_path.error("names an application; it cannot be empty"));
    }
    let target = PassTarget::Application(name.to_owned(), None);
    Ok((Pass::Fixed(target), "application"))
}

/// Parses a listener key as Unit writes it; `*` means every IPv4 address. `at` is the listener's path.
fn parse_addr(name: &str, at: &JsonPath) -> Result<ListenAddr, ConfigError> {
    let bad_addr = || {
        at.error(
            "not a listener address; expected \"*:PORT\", \"IP:PORT\", \"[IPv6]:PORT\" or \"unix:/PATH\"",
        )
    };
    if let Some(path) = name.strip_prefix("unix:") {
        if !path.starts_with('/') {
            return Err(at.error(
                "a Unix socket listener needs an absolute path, as in \"unix:/run/app.sock\"",
            ));
        }
        return Ok(ListenAddr::Unix(PathBuf::from(path)));
    }
    if let Some(port) = name.strip_prefix("*:") {
        let port = port.parse::<u16>().map_err(|_| bad_addr())?;
        return Ok(ListenAddr::Tcp(SocketAddr::from((
            Ipv4Addr::UNSPECIFIED,
            port,
        ))));
    }
    name.parse::<SocketAddr>()
        .map(ListenAddr::Tcp)
        .map_err(|_| bad_addr())
}

/// Unit's `client_ip` listener option from before 1.28, which Unit still takes: `{"header", "source",
/// "recursive"}`, the `forwarded` object with `header` for `client_ip` and no `protocol`.
fn legacy_client_ip(v: &Value, path: &JsonPath) -> Result<Forwarded, ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["header", "source", "recursive"], path)?;
    let header = map
        .get("header")
        .ok_or_else(|| path.error("needs \"header\": the field holding the client's address"))?;
    let mut forwarded = map.clone();
    forwarded.remove("header");
    forwarded.insert("client_ip".into(), header.clone());
    Forwarded::compile(&Value::Object(forwarded), path)
}
