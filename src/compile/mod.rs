//! Turns the user's document into a [`Snapshot`]: pure, no I/O, every error with its JSON path.
//!
//! The whole document is compiled before anything is applied, so an error anywhere leaves the running
//! configuration untouched.

mod listeners;
mod routes;
mod settings;

pub use routes::parse_pass;
pub use settings::{DEFAULT_LOG_FORMAT, LogCondition};

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use crate::config::walk::{known_keys, object, string};
use crate::config::{ConfigError, JsonPath};
use crate::snapshot::Snapshot;

const SECTIONS: &[&str] = &[
    "listeners",
    "routes",
    "applications",
    "upstreams",
    "settings",
    "access_log",
];

/// Compiles a whole configuration document.
pub fn compile(doc: &Value) -> Result<Snapshot, ConfigError> {
    let root = JsonPath::root();
    let top = object(doc, &root)?;
    known_keys(top, SECTIONS, &root)?;

    let applications = names(
        top.get("applications"),
        &root.key("applications"),
        check_app,
    )?;
    let upstreams = names(top.get("upstreams"), &root.key("upstreams"), check_upstream)?;
    let (routes, passes) = match top.get("routes") {
        Some(v) => routes::compile(v, &root.key("routes"))?,
        None => (HashMap::new(), Vec::new()),
    };
    let listeners = match top.get("listeners") {
        Some(v) => listeners::compile(v, &root.key("listeners"))?,
        None => Default::default(),
    };
    let settings = match top.get("settings") {
        Some(v) => settings::compile(v, &root.key("settings"))?,
        None => Default::default(),
    };
    let access_log = match top.get("access_log") {
        Some(v) => Some(settings::access_log(v, &root.key("access_log"))?),
        None => None,
    };
    let targets = routes::Targets {
        routes: &routes,
        applications: &applications,
        upstreams: &upstreams,
    };
    for (name, listener) in &listeners.by_name {
        targets.check(&listener.1, &root.key("listeners").key(name).key("pass"))?;
    }
    for (pass, path) in &passes {
        targets.check(pass, path)?;
    }
    routes::check_cycles(&routes, &passes)?;

    Ok(Snapshot {
        listeners: listeners.into_map(),
        routes,
        settings,
        access_log,
        applications,
        upstreams,
    })
}

/// The member names of an `applications` or `upstreams` object, each checked by `check`.
fn names(
    v: Option<&Value>,
    path: &JsonPath,
    check: fn(&Value, &JsonPath) -> Result<(), ConfigError>,
) -> Result<BTreeSet<String>, ConfigError> {
    let Some(v) = v else {
        return Ok(BTreeSet::new());
    };
    let mut out = BTreeSet::new();
    for (name, member) in object(v, path)? {
        check(member, &path.key(name))?;
        out.insert(name.clone());
    }
    Ok(out)
}

/// Applications are brought to life by the supervisor; until then rein checks their shape only.
fn check_app(v: &Value, path: &JsonPath) -> Result<(), ConfigError> {
    let app = object(v, path)?;
    let kind = app
        .get("type")
        .ok_or_else(|| path.error("an application needs a \"type\""))?;
    string(kind, &path.key("type"))?;
    Ok(())
}

/// Unit's upstream schema: `{"servers": {"ADDRESS": {"weight": N}}}`.
fn check_upstream(v: &Value, path: &JsonPath) -> Result<(), ConfigError> {
    let upstream = object(v, path)?;
    known_keys(upstream, &["servers"], path)?;
    let servers_path = path.key("servers");
    let servers = upstream
        .get("servers")
        .ok_or_else(|| path.error("an upstream needs \"servers\""))?;
    for (addr, server) in object(servers, &servers_path)? {
        let server_path = servers_path.key(addr);
        addr.parse::<std::net::SocketAddr>()
            .map_err(|_| server_path.error("must be an address such as \"127.0.0.1:8081\""))?;
        let server = object(server, &server_path)?;
        known_keys(server, &["weight"], &server_path)?;
        if let Some(w) = server.get("weight") {
            match w.as_f64() {
                Some(w) if (0.0..=1_000_000.0).contains(&w) => {}
                _ => {
                    return Err(server_path
                        .key("weight")
                        .error("must be a number from 0 to 1000000"));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
