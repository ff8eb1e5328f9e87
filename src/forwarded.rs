//! Unit's `forwarded` listener option: behind a trusted proxy, take the client's address and scheme from the
//! headers that proxy sets.
//!
//! ```json
//! {"forwarded": {"client_ip": "X-Forwarded-For", "protocol": "X-Forwarded-Proto",
//!                "source": ["10.0.0.0/8"], "recursive": false}}
//! ```
//!
//! Only a request whose peer matches `source` is trusted. The client address is the last one in the
//! `client_ip` header; with `recursive`, addresses that themselves match `source` are skipped from the right,
//! so a chain of trusted proxies yields the first untrusted hop.

use std::net::{IpAddr, SocketAddr};

use http::HeaderName;
use serde_json::Value;

use crate::config::walk::{boolean, known_keys, object, string};
use crate::config::{ConfigError, JsonPath};
use crate::request::RequestInfo;
use crate::route::address::AddressSet;

pub struct Forwarded {
    client_ip: Option<HeaderName>,
    protocol: Option<HeaderName>,
    source: AddressSet,
    recursive: bool,
}

impl Forwarded {
    pub fn compile(v: &Value, path: &JsonPath) -> Result<Self, ConfigError> {
        let map = object(v, path)?;
        known_keys(map, &["client_ip", "protocol", "source", "recursive"], path)?;
        let header = |key: &str| -> Result<Option<HeaderName>, ConfigError> {
            let Some(h) = map.get(key) else {
                return Ok(None);
            };
            let p = path.key(key);
            HeaderName::from_bytes(string(h, &p)?.as_bytes())
                .map(Some)
                .map_err(|_| p.error("is not a valid header name"))
        };
        let source = map
            .get("source")
            .ok_or_else(|| path.error("needs \"source\": the addresses of the proxies to trust"))?;
        let forwarded = Forwarded {
            client_ip: header("client_ip")?,
            protocol: header("protocol")?,
            source: AddressSet::compile(source, &path.key("source"))?,
            recursive: map
                .get("recursive")
                .map_or(Ok(false), |r| boolean(r, &path.key("recursive")))?,
        };
        if forwarded.client_ip.is_none() && forwarded.protocol.is_none() {
            return Err(path.error("needs \"client_ip\" or \"protocol\""));
        }
        Ok(forwarded)
    }

    /// Rewrites the request's client address and scheme when its peer is a trusted proxy.
    /// Whether `peer` is one of the trusted proxies.
    pub fn trusts(&self, peer: SocketAddr) -> bool {
        self.source.matches(Some(peer))
    }

    pub fn apply(&self, req: &mut RequestInfo) {
        if !self.source.matches(req.remote) {
            return;
        }
        if let Some(name) = &self.client_ip
            && let Some(ip) = self.client_from(req, name)
        {
            req.remote = Some(SocketAddr::new(ip, 0));
        }
        if let Some(name) = &self.protocol
            && let Some(value) = req.headers.get(name).and_then(|v| v.to_str().ok())
        {
            match value.trim().to_ascii_lowercase().as_str() {
                "https" | "on" => req.scheme = "https",
                "http" => req.scheme = "http",
                _ => {}
            }
        }
    }

    fn client_from(&self, req: &RequestInfo, name: &HeaderName) -> Option<IpAddr> {
        let hops: Vec<IpAddr> = req
            .headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|h| h.trim().parse::<IpAddr>())
            .collect::<Result<_, _>>()
            .ok()?;
        let mut chosen = None;
        for ip in hops.into_iter().rev() {
            chosen = Some(ip);
            if !self.recursive || !self.source.matches(Some(SocketAddr::new(ip, 0))) {
                break;
            }
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(peer: &str, xff: &str) -> RequestInfo {
        let mut parts = http::Request::get("/")
            .header("x-forwarded-for", xff)
            .header("x-forwarded-proto", "https")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        RequestInfo::from_parts(&mut parts, "http", peer.parse().ok(), None).0
    }

    fn forwarded(recursive: bool) -> Forwarded {
        let v = json!({"client_ip": "X-Forwarded-For", "protocol": "X-Forwarded-Proto",
                       "source": ["10.0.0.0/8"], "recursive": recursive});
        Forwarded::compile(&v, &JsonPath::root()).unwrap()
    }

    #[test]
    fn trusted_peers_only() {
        let mut req = request("192.0.2.1:5000", "203.0.113.9");
        forwarded(false).apply(&mut req);
        assert_eq!(req.remote.unwrap().ip().to_string(), "192.0.2.1");
        assert_eq!(req.scheme, "http");
        let mut req = request("10.1.1.1:5000", "203.0.113.9");
        forwarded(false).apply(&mut req);
        assert_eq!(req.remote.unwrap().ip().to_string(), "203.0.113.9");
        assert_eq!(req.scheme, "https");
    }

    #[test]
    fn recursive_skips_trusted_hops() {
        let mut req = request("10.1.1.1:5000", "198.51.100.7, 203.0.113.9, 10.2.2.2");
        forwarded(false).apply(&mut req);
        assert_eq!(req.remote.unwrap().ip().to_string(), "10.2.2.2");
        let mut req = request("10.1.1.1:5000", "198.51.100.7, 203.0.113.9, 10.2.2.2");
        forwarded(true).apply(&mut req);
        assert_eq!(req.remote.unwrap().ip().to_string(), "203.0.113.9");
    }

    #[test]
    fn needs_source_and_a_header() {
        let err = Forwarded::compile(
            &json!({"client_ip": "X-Real-IP"}),
            &JsonPath::root().key("f"),
        );
        assert!(
            err.err()
                .unwrap()
                .to_string()
                .starts_with("f: needs \"source\"")
        );
        let err = Forwarded::compile(&json!({"source": "10.0.0.1"}), &JsonPath::root().key("f"));
        assert!(err.is_err());
    }
}
