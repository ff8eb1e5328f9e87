//! Header rules of a proxy hop: hop-by-hop fields removed both ways (RFC 9110 §7.6.1), `X-Forwarded-*` added
//! on the way in, and the upgrade handshake kept for WebSocket and other `Upgrade` requests.

use std::net::SocketAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Whether a request asks to switch protocols (`Connection: upgrade` with an `Upgrade` field).
pub fn wants_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE) && connection_lists(headers, "upgrade")
}

fn connection_lists(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Removes hop-by-hop fields, including those the `Connection` field names; keeps the upgrade pair when
/// `keep_upgrade`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap, keep_upgrade: bool) {
    let upgrade = keep_upgrade
        .then(|| headers.get(header::UPGRADE).cloned())
        .flatten();
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
    if let Some(upgrade) = upgrade {
        headers.insert(header::UPGRADE, upgrade);
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
}

/// Adds the client's address to `X-Forwarded-For`, and sets `X-Forwarded-Proto` and `X-Forwarded-Host`.
pub fn add_forwarded(
    headers: &mut HeaderMap,
    remote: Option<SocketAddr>,
    scheme: &str,
    host: Option<HeaderValue>,
) {
    if let Some(ip) = remote.map(|r| r.ip().to_canonical()) {
        // Every prior field, in order: a chain may arrive split over several lines.
        let mut value: String = headers
            .get_all(&X_FORWARDED_FOR)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
            .join(", ");
        if !value.is_empty() {
            value.push_str(", ");
        }
        value.push_str(&ip.to_string());
        if let Ok(v) = HeaderValue::try_from(value) {
            headers.insert(X_FORWARDED_FOR, v);
        }
    }
    if let Ok(v) = HeaderValue::try_from(scheme) {
        headers.insert(X_FORWARDED_PROTO, v);
    }
    if let Some(host) = host {
        headers.insert(X_FORWARDED_HOST, host);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn strips_hop_by_hop_and_connection_named_fields() {
        let mut h = map(&[
            ("connection", "keep-alive, x-secret"),
            ("keep-alive", "timeout=5"),
            ("x-secret", "1"),
            ("te", "trailers"),
            ("accept", "*/*"),
        ]);
        strip_hop_by_hop(&mut h, false);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("accept"));
    }

    #[test]
    fn keeps_the_upgrade_handshake() {
        let mut h = map(&[
            ("connection", "Upgrade"),
            ("upgrade", "websocket"),
            ("keep-alive", "1"),
        ]);
        assert!(wants_upgrade(&h));
        strip_hop_by_hop(&mut h, true);
        assert_eq!(h.get("upgrade").unwrap(), "websocket");
        assert_eq!(h.get("connection").unwrap(), "upgrade");
        assert!(!h.contains_key("keep-alive"));
    }

    #[test]
    fn appends_forwarded_for() {
        let mut h = map(&[("x-forwarded-for", "10.0.0.1")]);
        let remote = "127.0.0.1:5000".parse().ok();
        add_forwarded(
            &mut h,
            remote,
            "http",
            Some(HeaderValue::from_static("example.com")),
        );
        assert_eq!(h.get("x-forwarded-for").unwrap(), "10.0.0.1, 127.0.0.1");
        assert_eq!(h.get("x-forwarded-proto").unwrap(), "http");
        assert_eq!(h.get("x-forwarded-host").unwrap(), "example.com");
    }
}
