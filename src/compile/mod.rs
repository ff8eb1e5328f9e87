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

use crate::config::walk::{object, unknown_keys};
use crate::config::{ConfigError, ConfigErrors, Errors, JsonPath};
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
/// bundle the `acme` section manages and `certificates` does not hold yet, a placeholder. The first error.
pub fn compile_with(doc: &Value, certificates: &Certificates) -> Result<Snapshot, ConfigError> {
    compile_all(doc, certificates).map_err(ConfigErrors::into_first)
}

/// [`compile_with`], with every error found. Each section, and each listener, route step, application and
/// upstream in it, is checked by itself, so a refusal names each of them at fault; the checks across the
/// document (a `pass` naming what does not exist, a loop of routes) are made once those parts compile, since a
/// part at fault would make them report what is not wrong.
pub fn compile_all(doc: &Value, certificates: &Certificates) -> Result<Snapshot, ConfigErrors> {
    let root = JsonPath::root();
    let top = object(doc, &root)?;
    let mut errors = Errors::default();
    unknown_keys(top, SECTIONS, &root).for_each(|e| errors.push(e));

    let acme = top
        .get("acme")
        .and_then(|v| errors.ok(crate::acme::config::compile(v, &root.key("acme"))));
    let filled;
    let certificates = match &acme {
        Some(conf) => {
            let path = root.key("acme").key("certificates");
            match errors.ok(crate::acme::fill(certificates, conf, &path)) {
                Some(f) => {
                    filled = f;
                    &filled
                }
                None => certificates,
            }
        }
        None => certificates,
    };

    let applications = applications(
        top.get("applications"),
        &root.key("applications"),
        &mut errors,
    );
    let upstreams = upstreams(top.get("upstreams"), &root.key("upstreams"), &mut errors);
    let (routes, passes) = match top.get("routes") {
        Some(v) => routes::compile(v, &root.key("routes"), &mut errors),
        None => (Default::default(), Vec::new()),
    };
    let listeners = match top.get("listeners") {
        Some(v) => listeners::compile(v, &root.key("listeners"), certificates, &mut errors),
        None => Default::default(),
    };
    let settings = top
        .get("settings")
        .and_then(|v| errors.ok(settings::compile(v, &root.key("settings"))))
        .unwrap_or_default();
    let access_log = top
        .get("access_log")
        .and_then(|v| errors.ok(access_log::access_log(v, &root.key("access_log"))));
    errors.check()?;

    let upstream_names = upstreams.keys().cloned().collect();
    let targets = routes::Targets {
        routes: &routes,
        applications: &applications,
        upstreams: &upstream_names,
    };
    for (name, listener) in &listeners.by_name {
        let path = root.key("listeners").key(name).key(listener.pass_key);
        errors.ok(targets.check(&listener.pass, &path));
    }
    for (pass, path, _) in &passes {
        errors.ok(targets.check(pass, path));
        errors.ok(fastcgi_without_tls(pass, path, &upstreams));
    }
    if errors.is_empty() {
        errors.ok(routes::check_cycles(&routes, &passes));
    }
    errors.check()?;

    let proxies = routes::proxies(&routes);
    Ok(Snapshot {
        listeners: listeners.into_map(&applications),
        routes,
        settings,
        access_log,
        transports: applications
            .iter()
            .map(|(name, app)| (name.clone(), app.kind.transport()))
            .collect(),
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

/// `applications`: each compiled by [`crate::supervisor::conf::compile`], each one's error kept.
fn applications(
    v: Option<&Value>,
    path: &JsonPath,
    errors: &mut Errors,
) -> BTreeMap<String, AppConf> {
    let Some(map) = v.and_then(|v| errors.ok(object(v, path))) else {
        return BTreeMap::new();
    };
    map.iter()
        .filter_map(|(name, a)| {
            errors.ok(app_name(name, path))?;
            let conf = errors.ok(crate::supervisor::conf::compile(a, &path.key(name)))?;
            Some((name.clone(), conf))
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

/// `upstreams`: each compiled by [`crate::upstream::conf::compile`], each one's error kept.
fn upstreams(
    v: Option<&Value>,
    path: &JsonPath,
    errors: &mut Errors,
) -> BTreeMap<String, UpstreamConf> {
    let Some(map) = v.and_then(|v| errors.ok(object(v, path))) else {
        return BTreeMap::new();
    };
    map.iter()
        .filter_map(|(name, u)| {
            let conf = errors.ok(crate::upstream::conf::compile(u, &path.key(name)))?;
            Some((name.clone(), conf))
        })
        .collect()
}

#[cfg(test)]
mod tests;
