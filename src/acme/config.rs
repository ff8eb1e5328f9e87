//! The `acme` section of the document (rein's extension): which CA, the account's contact, and the bundles to
//! obtain and keep renewed, each with its names and key type.
//!
//! Compiled with the rest of the document, pure: the `ca` file is read by the ACME task, and a problem with it
//! shows in `/status` rather than refusing the configuration.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::config::walk::{boolean, known_keys, object, string, strings};
use crate::config::{ConfigError, JsonPath};

/// Let's Encrypt's production directory: the default.
pub(crate) const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

/// Let's Encrypt's staging directory, for trying a setup without its production rate limits.
const LETS_ENCRYPT_STAGING: &str = "https://acme-staging-v02.api.letsencrypt.org/directory";

/// The longest `renew_before` taken, in days: beyond any certificate's lifetime a CA issues.
const MAX_RENEW_BEFORE_DAYS: f64 = 3650.0;

/// The compiled `acme` section.
#[derive(Debug, Clone, PartialEq)]
pub struct AcmeConf {
    /// The directory URL of the CA.
    pub directory: String,
    /// The account's contact address, without `mailto:`.
    pub email: Option<String>,
    /// Extra roots (PEM) trusted for the directory's own HTTPS, besides the system's.
    pub ca: Option<PathBuf>,
    /// How long before expiry a bundle is renewed; `None` for the default (a third of its lifetime, at most 30
    /// days).
    pub renew_before: Option<Duration>,
    /// The bundles to obtain, by the name listeners and `/certificates` know them by.
    pub certificates: BTreeMap<String, Managed>,
}

/// One bundle ACME obtains and renews.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Managed {
    /// The DNS names, lowercase, in the order written (the first is the subject's).
    pub names: Vec<String>,
    pub key: KeyKind,
    pub challenge: Proof,
}

/// How the CA is shown that rein serves a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// HTTP-01: a token answered on a plain-HTTP listener (port 80 for a public CA). The default.
    Http01,
    /// TLS-ALPN-01 (RFC 8737): a validation certificate presented on a TLS listener (port 443), for a server
    /// whose port 80 is closed or taken.
    TlsAlpn01,
}

/// The type of a bundle's private key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// ECDSA P-256: the default, smaller and faster to handshake with.
    Ecdsa,
    /// RSA 2048, for clients that take nothing else.
    Rsa,
}

pub fn compile(v: &Value, path: &JsonPath) -> Result<AcmeConf, ConfigError> {
    let map = object(v, path)?;
    known_keys(
        map,
        &[
            "directory",
            "email",
            "accept_terms",
            "ca",
            "renew_before",
            "certificates",
        ],
        path,
    )?;
    let directory = match map.get("directory") {
        Some(d) => directory(d, &path.key("directory"))?,
        None => LETS_ENCRYPT.to_owned(),
    };
    let email = map
        .get("email")
        .map(|e| email(e, &path.key("email")))
        .transpose()?;
    let ca = map
        .get("ca")
        .map(|c| absolute(c, &path.key("ca")))
        .transpose()?;
    let renew_before = map
        .get("renew_before")
        .map(|r| days(r, &path.key("renew_before")))
        .transpose()?;
    let certificates = match map.get("certificates") {
        Some(c) => certificates(c, &path.key("certificates"))?,
        None => BTreeMap::new(),
    };
    let accepted = match map.get("accept_terms") {
        Some(a) => boolean(a, &path.key("accept_terms"))?,
        None => false,
    };
    if !accepted && !certificates.is_empty() {
        return Err(path.key("accept_terms").error(
            "must be true: the CA registers an account only for someone who accepts its terms of service",
        ));
    }
    Ok(AcmeConf {
        directory,
        email,
        ca,
        renew_before,
        certificates,
    })
}

/// A directory URL, or `letsencrypt` / `letsencrypt-staging`.
fn directory(v: &Value, path: &JsonPath) -> Result<String, ConfigError> {
    let url = string(v, path)?;
    match url {
        "letsencrypt" => return Ok(LETS_ENCRYPT.to_owned()),
        "letsencrypt-staging" => return Ok(LETS_ENCRYPT_STAGING.to_owned()),
        _ => {}
    }
    let parsed: http::Uri = url
        .parse()
        .map_err(|_| path.error(format!("{url:?} is not a URL")))?;
    if parsed.scheme_str() != Some("https") || parsed.host().is_none() {
        return Err(path.error(
            "must be an https:// URL (RFC 8555 requires HTTPS), \"letsencrypt\" or \"letsencrypt-staging\"",
        ));
    }
    Ok(url.to_owned())
}

fn email(v: &Value, path: &JsonPath) -> Result<String, ConfigError> {
    let text = string(v, path)?;
    let text = text.strip_prefix("mailto:").unwrap_or(text);
    let valid = text
        .split_once('@')
        .is_some_and(|(user, host)| !user.is_empty() && !host.is_empty() && !host.contains('@'))
        && !text
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control());
    if !valid {
        return Err(path.error(format!("{text:?} is not an e-mail address")));
    }
    Ok(text.to_owned())
}

fn absolute(v: &Value, path: &JsonPath) -> Result<PathBuf, ConfigError> {
    let file = PathBuf::from(string(v, path)?);
    if !file.is_absolute() {
        return Err(path.error("must be an absolute path to a PEM file"));
    }
    Ok(file)
}

/// A number of days, fractions allowed, above zero.
fn days(v: &Value, path: &JsonPath) -> Result<Duration, ConfigError> {
    match v.as_f64() {
        Some(d) if d > 0.0 && d <= MAX_RENEW_BEFORE_DAYS => {
            Ok(Duration::from_secs_f64(d * 86_400.0))
        }
        _ => Err(path.error(format!(
            "must be a number of days above 0 and at most {MAX_RENEW_BEFORE_DAYS}"
        ))),
    }
}

fn certificates(v: &Value, path: &JsonPath) -> Result<BTreeMap<String, Managed>, ConfigError> {
    object(v, path)?
        .iter()
        .map(|(name, c)| {
            let cpath = path.key(name);
            if !crate::tls::valid_name(name) {
                return Err(cpath.error(
                    "a bundle's name is kept to letters, digits and ._-@+~ (it names a file)",
                ));
            }
            Ok((name.clone(), managed(c, &cpath)?))
        })
        .collect()
}

fn managed(v: &Value, path: &JsonPath) -> Result<Managed, ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["names", "key", "challenge"], path)?;
    let npath = path.key("names");
    let Some(names) = map.get("names") else {
        return Err(path.error("needs \"names\": the DNS names the certificate is for"));
    };
    let mut out: Vec<String> = Vec::new();
    for (i, name) in strings(names, &npath)?.into_iter().enumerate() {
        let name = dns_name(name, &npath.index(i))?;
        if !out.contains(&name) {
            out.push(name);
        }
    }
    let key = match map.get("key") {
        None => KeyKind::Ecdsa,
        Some(k) => match string(k, &path.key("key"))? {
            "ecdsa" => KeyKind::Ecdsa,
            "rsa" => KeyKind::Rsa,
            _ => return Err(path.key("key").error("must be \"ecdsa\" or \"rsa\"")),
        },
    };
    let challenge = match map.get("challenge") {
        None => Proof::Http01,
        Some(c) => match string(c, &path.key("challenge"))? {
            "http-01" => Proof::Http01,
            "tls-alpn-01" => Proof::TlsAlpn01,
            _ => {
                return Err(path
                    .key("challenge")
                    .error("must be \"http-01\" or \"tls-alpn-01\""));
            }
        },
    };
    Ok(Managed {
        names: out,
        key,
        challenge,
    })
}

/// A DNS name HTTP-01 and TLS-ALPN-01 can prove: no wildcard (that takes DNS-01), no IP address, letters, digits and hyphens
/// in dot-separated labels.
fn dns_name(name: &str, path: &JsonPath) -> Result<String, ConfigError> {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name.starts_with("*.") {
        return Err(path.error(
            "a wildcard name needs the DNS-01 challenge; rein answers HTTP-01 and TLS-ALPN-01 only, so list each name",
        ));
    }
    if name.parse::<std::net::IpAddr>().is_ok() {
        return Err(path.error("an IP address is not a DNS name"));
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(path.error(format!("{name:?} is not a DNS name")));
    }
    Ok(name)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
