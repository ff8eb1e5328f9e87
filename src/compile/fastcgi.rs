//! The `fastcgi` action: requests handed to an existing FastCGI server (the system's PHP-FPM, say), with
//! PHP's script rules ([`crate::scripts`]).
//!
//! ```json
//! {"action": {"fastcgi": {"server": "unix:/run/php/php8.2-fpm.sock", "root": "/srv/www",
//!                         "index": "index.php", "params": {"APP_ENV": "production"}}}}
//! ```
//! `server` is an address (`unix:/PATH`, `IP:PORT`, `[IPv6]:PORT`) or `upstreams/NAME`, whose servers,
//! balancing and health then apply; `script` (one script for every request) as in PHP applications.

use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::config::walk::{known_keys, object, string};
use crate::config::{ConfigError, JsonPath};
use crate::link::ServerAddr;
use crate::scripts::PhpTarget;
use crate::snapshot::{FastCgi, FastCgiServer};

const KEYS: &[&str] = &["server", "root", "index", "script", "params"];

/// Compiles the value of `fastcgi`.
pub fn action(v: &Value, path: &JsonPath) -> Result<FastCgi, ConfigError> {
    let map = object(v, path)?;
    known_keys(map, KEYS, path)?;
    let spath = path.key("server");
    let server = string(
        map.get("server")
            .ok_or_else(|| path.error("needs a \"server\""))?,
        &spath,
    )?;
    let server = match server.strip_prefix("upstreams/") {
        Some(name) if !name.is_empty() => FastCgiServer::Upstream(name.to_owned()),
        _ => match ServerAddr::parse(server) {
            Some(addr) => FastCgiServer::Address(addr),
            None => {
                return Err(spath.error(
                    "must be \"unix:/PATH\", \"IP:PORT\", \"[IPv6]:PORT\" or \"upstreams/NAME\"",
                ));
            }
        },
    };
    let params = match map.get("params") {
        Some(p) => object(p, &path.key("params"))?
            .iter()
            .map(|(k, v)| Ok((k.clone(), string(v, &path.key("params").key(k))?.to_owned())))
            .collect::<Result<_, ConfigError>>()?,
        None => Vec::new(),
    };
    Ok(FastCgi {
        server,
        target: php_target(map, path)?,
        params,
    })
}

/// `root` (required, absolute), `index` (default `index.php`) and `script` (relative to `root`): how PHP
/// applications and their `targets` and the `fastcgi` action pick a script.
pub fn php_target(map: &Map<String, Value>, path: &JsonPath) -> Result<PhpTarget, ConfigError> {
    let rpath = path.key("root");
    let root = string(
        map.get("root")
            .ok_or_else(|| path.error("needs a \"root\" directory"))?,
        &rpath,
    )?;
    if !root.starts_with('/') {
        return Err(rpath.error("must be an absolute path"));
    }
    let file_name = |key: &str, v: &Value| -> Result<String, ConfigError> {
        let p = path.key(key);
        let s = string(v, &p)?.trim_start_matches('/');
        if s.is_empty() || s.split('/').any(|part| part == "..") {
            return Err(p.error("must be a file name under \"root\""));
        }
        Ok(s.to_owned())
    };
    Ok(PhpTarget {
        root: PathBuf::from(root),
        index: match map.get("index") {
            Some(i) => file_name("index", i)?,
            None => "index.php".to_owned(),
        },
        script: map
            .get("script")
            .map(|s| file_name("script", s))
            .transpose()?,
    })
}
