//! Header rules of a proxy hop: hop-by-hop fields removed both ways (RFC 9110 §7.6.1), `X-Forwarded-*` added
//! on the way in, and the upgrade handshake kept for WebSocket and other `Upgrade` requests.

use std::net::SocketAddr;

use bytes::BufMut;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::http1::{Fields, HeadWriter, connection_lists};

static HOP_BY_HOP: [HeaderName; 7] = [
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

/// Whether a request asks to switch protocols (`Connection: upgrade` with an `Upgrade` field) in a way rein
/// passes on. An upgrade to `h2c` is not: a server that accepted it would take HTTP/2 requests on the tunnel
/// that rein never routes ("h2c smuggling"), so the field is dropped like any hop-by-hop one.
pub fn wants_upgrade(headers: &HeaderMap) -> bool {
    let tunnels = |u: &HeaderValue| {
        let protocols = u.to_str().unwrap_or("h2c");
        !protocols
            .split(',')
            .any(|p| p.trim().eq_ignore_ascii_case("h2c"))
    };
    headers.get(header::UPGRADE).is_some_and(tunnels) && connection_lists(headers, "upgrade")
}

/// Removes hop-by-hop fields, including those the `Connection` field names; keeps the upgrade pair when
/// `keep_upgrade`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap, keep_upgrade: bool) {
    // One pass over the names present finds what goes (most answers carry none or two such fields): a lookup
    // of each of the seven names cost more than the rest of the answer's handling.
    let mut gone: Vec<HeaderName> = headers
        .keys()
        .filter(|name| HOP_BY_HOP.contains(name))
        .cloned()
        .collect();
    if gone.is_empty() && !keep_upgrade {
        return;
    }
    if gone.contains(&header::CONNECTION) {
        gone.extend(connection_named(headers));
    }
    let upgrade = keep_upgrade
        .then(|| headers.get(header::UPGRADE).cloned())
        .flatten();
    for name in &gone {
        headers.remove(name);
    }
    if let Some(upgrade) = upgrade {
        headers.insert(header::UPGRADE, upgrade);
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
}

/// Drops the hop-by-hop fields of an answer passed on as bytes, including those its `Connection` field names
/// (as [`strip_hop_by_hop`] does to a header map).
pub fn drop_hop_by_hop(fields: &mut Fields) {
    // Nearly every answer's `Connection` lists only `keep-alive` or `close`, which name no field to drop:
    // then nothing is collected.
    let mut named: Vec<Vec<u8>> = Vec::new();
    for value in fields.get_all("connection") {
        for token in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
            let skip = [&b""[..], b"keep-alive", b"close", b"host"]
                .iter()
                .any(|t| t.eq_ignore_ascii_case(token));
            if !skip {
                named.push(token.to_vec());
            }
        }
    }
    fields.retain(|known, name| {
        !known.is_hop_by_hop() && !named.iter().any(|n| n.eq_ignore_ascii_case(name))
    });
}

/// Writes the request's fields as they go upstream, straight into the head (no copy of the header map):
/// hop-by-hop fields and those `Connection` names left out (the upgrade pair kept when `upgrading`),
/// `Expect` left out (rein reads the client's body itself, so the server has nothing to agree to),
/// `X-Forwarded-For` extended with the client's address, `X-Forwarded-Proto` and `X-Forwarded-Host` set, and
/// a `Host` supplied if the request had none. `upstream_host` (a TLS server's name) replaces the client's
/// `Host`, which `X-Forwarded-Host` still carries. Hop-by-hop fields are those [`strip_hop_by_hop`] removes
/// from answers.
pub fn write_upstream_fields(
    head: &mut HeadWriter,
    headers: &HeaderMap,
    remote: Option<SocketAddr>,
    scheme: &str,
    upgrading: bool,
    upstream_host: Option<&str>,
) {
    // What the fields hold is learnt in the pass that writes them, rather than by a lookup of each name that
    // matters: most requests carry none of `Connection` and `X-Forwarded-For`.
    let named: Vec<HeaderName> = match headers.keys().any(|n| n == header::CONNECTION) {
        true => connection_named(headers).collect(),
        false => Vec::new(),
    };
    let dropped = |name: &HeaderName| {
        HOP_BY_HOP.contains(name)
            || named.contains(name)
            || [header::EXPECT, X_FORWARDED_PROTO, X_FORWARDED_HOST].contains(name)
    };
    let (mut host, mut forwarded_for) = (None, false);
    for (name, value) in headers {
        if *name == X_FORWARDED_FOR {
            forwarded_for = true;
            continue;
        }
        if dropped(name) {
            continue;
        }
        if *name == header::HOST {
            host = host.or(Some(value));
            if upstream_host.is_some() {
                continue;
            }
        }
        head.field(name.as_str(), value.as_bytes());
    }
    if let Some(upstream_host) = upstream_host {
        head.field("host", upstream_host.as_bytes());
    }
    if upgrading && let Some(upgrade) = headers.get(header::UPGRADE) {
        head.field("upgrade", upgrade.as_bytes());
        head.field("connection", b"upgrade");
    }
    if let Some(ip) = remote.map(|r| r.ip().to_canonical()) {
        let chain = forwarded_for && !dropped(&X_FORWARDED_FOR);
        head.field_with(X_FORWARDED_FOR.as_str(), |out| {
            if chain {
                for prior in headers.get_all(&X_FORWARDED_FOR).iter() {
                    if let Ok(prior) = prior.to_str() {
                        out.put_slice(prior.as_bytes());
                        out.put_slice(b", ");
                    }
                }
            }
            out.put_slice(crate::ascii::ip(ip).as_bytes());
        });
    }
    if HeaderValue::try_from(scheme).is_ok() {
        head.field(X_FORWARDED_PROTO.as_str(), scheme.as_bytes());
    }
    match host {
        Some(host) => head.field(X_FORWARDED_HOST.as_str(), host.as_bytes()),
        None if upstream_host.is_none() => head.field("host", b"localhost"),
        None => {}
    }
}

/// The fields a request's `Connection` field names (hop-by-hop by that naming). `Host` is never one: it is for
/// every recipient (RFC 9110 §7.6.1), and a client that named it would have the server see another host than
/// the one rein routed on.
fn connection_named(headers: &HeaderMap) -> impl Iterator<Item = HeaderName> + '_ {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        // The tokens nearly every message carries name no field, or one that goes anyway: no name to make.
        .filter(|t| !t.eq_ignore_ascii_case("keep-alive") && !t.eq_ignore_ascii_case("close"))
        .filter_map(|t| HeaderName::from_bytes(t.as_bytes()).ok())
        .filter(|name| *name != header::HOST)
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
    fn hop_by_hop_fields_passed_as_bytes_are_dropped() {
        let mut buf = bytes::BytesMut::from(
            "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Secret\r\nKeep-Alive: timeout=5\r\n\
             x-secret: 1\r\nTE: trailers\r\nAccept-Ranges: bytes\r\nContent-Length: 0\r\n\r\n",
        );
        let request = crate::http1::RequestHead::new(
            &http::Method::GET,
            "/",
            &HeaderMap::new(),
            false,
            false,
        );
        let mut fields = crate::http1::head::parse_response(&mut buf, &request)
            .unwrap()
            .unwrap()
            .fields;
        drop_hop_by_hop(&mut fields);
        let left: Vec<_> = fields.iter().map(|(n, _)| n.to_vec()).collect();
        assert_eq!(left, [&b"Accept-Ranges"[..], b"Content-Length"]);
    }

    #[test]
    fn an_h2c_upgrade_is_not_passed_on() {
        let h = map(&[
            ("connection", "Upgrade, HTTP2-Settings"),
            ("upgrade", "h2c"),
        ]);
        assert!(!wants_upgrade(&h));
        let text = written(&h, false);
        assert!(!text.contains("h2c") && !text.contains("upgrade"), "{text}");
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

    fn written(headers: &HeaderMap, upgrading: bool) -> String {
        let mut head = HeadWriter::new(&http::Method::GET, "/", 0);
        let remote = "127.0.0.1:5000".parse().ok();
        write_upstream_fields(&mut head, headers, remote, "https", upgrading, None);
        let bytes = head.finish(false, upgrading).bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn upstream_fields_extend_forwarded_for_and_leave_hop_by_hop_out() {
        let h = map(&[
            ("host", "example.com"),
            ("x-forwarded-for", "10.0.0.1"),
            ("x-forwarded-for", "10.0.0.2"),
            ("x-forwarded-proto", "gopher"),
            ("connection", "keep-alive, x-secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("expect", "100-continue"),
            ("accept", "*/*"),
        ]);
        assert_eq!(
            written(&h, false),
            "GET / HTTP/1.1\r\nhost: example.com\r\naccept: */*\r\n\
             x-forwarded-for: 10.0.0.1, 10.0.0.2, 127.0.0.1\r\nx-forwarded-proto: https\r\n\
             x-forwarded-host: example.com\r\n\r\n"
        );
    }

    #[test]
    fn answers_without_hop_by_hop_fields_are_left_as_they_are() {
        let mut h = map(&[("content-type", "text/plain"), ("content-length", "5")]);
        let before = h.clone();
        strip_hop_by_hop(&mut h, false);
        assert_eq!(h, before);
        let mut h = map(&[("keep-alive", "timeout=5"), ("date", "x")]);
        strip_hop_by_hop(&mut h, false);
        assert_eq!(h.keys().collect::<Vec<_>>(), ["date"]);
    }

    #[test]
    fn a_tls_servers_name_replaces_the_host_which_goes_in_x_forwarded_host() {
        let h = map(&[("host", "www.example.com"), ("accept", "*/*")]);
        let mut head = HeadWriter::new(&http::Method::GET, "/", 0);
        write_upstream_fields(
            &mut head,
            &h,
            None,
            "https",
            false,
            Some("api.internal:8443"),
        );
        let bytes = head.finish(false, false).bytes();
        assert_eq!(
            String::from_utf8(bytes.to_vec()).unwrap(),
            "GET / HTTP/1.1\r\naccept: */*\r\nhost: api.internal:8443\r\nx-forwarded-proto: https\r\n\
             x-forwarded-host: www.example.com\r\n\r\n"
        );
    }

    #[test]
    fn connection_cannot_remove_the_host() {
        let h = map(&[("host", "a.example"), ("connection", "Host")]);
        assert!(written(&h, false).contains("\r\nhost: a.example\r\n"));
    }

    #[test]
    fn upstream_fields_keep_the_upgrade_pair_and_supply_a_host() {
        let h = map(&[("connection", "Upgrade"), ("upgrade", "websocket")]);
        let text = written(&h, true);
        assert!(
            text.contains("upgrade: websocket\r\nconnection: upgrade\r\n"),
            "{text}"
        );
        assert!(text.contains("host: localhost\r\n"), "{text}");
        let plain = written(&h, false);
        assert!(!plain.contains("upgrade"), "{plain}");
    }
}
