//! Turns the user's document into a [`Snapshot`]: pure, no I/O, every error with its JSON path.
//!
//! The whole document is compiled before anything is applied, so an error anywhere leaves the running
//! configuration untouched.

mod access_log;
mod fastcgi;
mod listeners;
mod routes;
mod settings;

pub use access_log::{LogCondition, LogFormat};
pub use fastcgi::php_target;
pub use routes::parse_pass;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::config::walk::{known_keys, object};
use crate::config::{ConfigError, JsonPath};
use crate::snapshot::{Pass, PassTarget, Snapshot};
use crate::supervisor::conf::AppConf;
use crate::tls::Certificates;
use crate::upstream::conf::UpstreamConf;

const SECTIONS: &[&str] = &[
    "listeners",
    "routes",
    "applications",
    "upstreams",
    "settings",
    "access_log",
    "acme",
];

/// Compiles a whole configuration document against an empty certificate store.
pub fn compile(doc: &Value) -> Result<Snapshot, ConfigError> {
    compile_with(doc, &Certificates::default())
}

/// Compiles a whole configuration document; TLS listeners take their bundles from `certificates`, or, for a
/// bundle the `acme` section manages and `certificates` does not hold yet, a placeholder.
pub fn compile_with(doc: &Value, certificates: &Certificates) -> Result<Snapshot, ConfigError> {
    let root = JsonPath::root();
    let top = object(doc, &root)?;
    known_keys(top, SECTIONS, &root)?;

    let acme = top
        .get("acme")
        .map(|v| crate::acme::config::compile(v, &root.key("acme")))
        .transpose()?;
    let filled;
    let certificates = match &acme {
        Some(conf) => {
            let path = root.key("acme").key("certificates");
            filled = crate::acme::fill(certificates, conf, &path)?;
            &filled
        }
        None => certificates,
    };

    let applications = applications(top.get("applications"), &root.key("applications"))?;
    let upstreams = upstreams(top.get("upstreams"), &root.key("upstreams"))?;
    let (routes, passes) = match top.get("routes") {
        Some(v) => routes::compile(v, &root.key("routes"))?,
        None => (Default::default(), Vec::new()),
    };
    let listeners = match top.get("listeners") {
        Some(v) => listeners::compile(v, &root.key("listeners"), certificates)?,
        None => Default::default(),
    };
    let settings = match top.get("settings") {
        Some(v) => settings::compile(v, &root.key("settings"))?,
        None => Default::default(),
    };
    let access_log = match top.get("access_log") {
        Some(v) => Some(access_log::access_log(v, &root.key("access_log"))?),
        None => None,
    };
    let upstream_names = upstreams.keys().cloned().collect();
    let targets = routes::Targets {
        routes: &routes,
        applications: &applications,
        upstreams: &upstream_names,
    };
    for (name, listener) in &listeners.by_name {
        let path = root.key("listeners").key(name).key(listener.pass_key);
        targets.check(&listener.pass, &path)?;
    }
    for (pass, path, _) in &passes {
        targets.check(pass, path)?;
        fastcgi_without_tls(pass, path, &upstreams)?;
    }
    routes::check_cycles(&routes, &passes)?;

    let proxies = routes::proxies(&routes);
    Ok(Snapshot {
        listeners: listeners.into_map(),
        routes,
        settings,
        access_log,
        applications,
        upstreams,
        proxies,
        acme: acme.map(std::sync::Arc::new),
    })
}

/// A `fastcgi` action's `server` cannot be an upstream with `tls`: FastCGI goes over plain sockets.
fn fastcgi_without_tls(
    pass: &Pass,
    path: &JsonPath,
    upstreams: &BTreeMap<String, UpstreamConf>,
) -> Result<(), ConfigError> {
    let Pass::Fixed(PassTarget::Upstream(name)) = pass else {
        return Ok(());
    };
    // The passes a `fastcgi` action records are at its `server` key.
    let fastcgi = path.as_str().ends_with("/fastcgi/server");
    if fastcgi && upstreams.get(name).is_some_and(|u| u.tls.is_some()) {
        return Err(path.error(format!(
            "upstream \"{name}\" has \"tls\": FastCGI is spoken over plain TCP or Unix sockets only"
        )));
    }
    Ok(())
}

/// `applications`: each compiled by [`crate::supervisor::conf::compile`].
fn applications(
    v: Option<&Value>,
    path: &JsonPath,
) -> Result<BTreeMap<String, AppConf>, ConfigError> {
    let Some(v) = v else {
        return Ok(BTreeMap::new());
    };
    object(v, path)?
        .iter()
        .map(|(name, a)| {
            app_name(name, path)?;
            Ok((
                name.clone(),
                crate::supervisor::conf::compile(a, &path.key(name))?,
            ))
        })
        .collect()
}

/// The longest application name: it names a file (`logs/NAME.log`) and a directory of sockets, whose names
/// the filesystem limits to 255 bytes.
const APP_NAME_MAX: usize = 200;

/// An application's name becomes file names in the state directory: one that cannot be a file name (empty,
/// `.`, `..`, holding `/` or a NUL byte, or too long) would be accepted and never start.
fn app_name(name: &str, path: &JsonPath) -> Result<(), ConfigError> {
    if name.len() > APP_NAME_MAX {
        return Err(path.error(format!(
            "an application name is at most {APP_NAME_MAX} bytes (one is {})",
            name.len()
        )));
    }
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(path.key(name).error(
            "is not a valid application name: it cannot be empty, \".\" or \"..\", or hold '/' or a NUL byte",
        ));
    }
    Ok(())
}

/// `upstreams`: each compiled by [`crate::upstream::conf::compile`].
fn upstreams(
    v: Option<&Value>,
    path: &JsonPath,
) -> Result<BTreeMap<String, UpstreamConf>, ConfigError> {
    let Some(v) = v else {
        return Ok(BTreeMap::new());
    };
    object(v, path)?
        .iter()
        .map(|(name, u)| {
            Ok((
                name.clone(),
                crate::upstream::conf::compile(u, &path.key(name))?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests;
