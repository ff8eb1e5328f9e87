//! Active health checks: a `GET` of the configured path on a fresh connection to each server (over TLS for a
//! TLS server, with its name as `Host`), every `interval`; `fall` failed probes in a row take a server out, `rise` good ones bring it back.
//!
//! The task holds only a weak handle on its upstream and ends once the configuration that created it is gone.

use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, header};
use http_body_util::BodyExt;

use super::conf::ActiveCheck;
use super::{ServerState, Ticker, WeakUpstream};
use crate::http1::{RequestHead, connect};

pub async fn run(upstream: WeakUpstream) {
    let Some(interval) = upstream
        .upgrade()
        .and_then(|u| u.conf.active.as_ref().map(|a| a.interval))
    else {
        return;
    };
    let mut ticker = Ticker::new(upstream, interval);
    while let Some(up) = ticker.next().await {
        let Some(check) = up.conf.active.clone() else {
            return;
        };
        let members = up.members();
        let probes = members.iter().map(|m| probe(&m.state, &check));
        let results = futures_util::future::join_all(probes).await;
        for (member, ok) in members.iter().zip(results) {
            let change = member.state.update_health(|h| h.probe(&check.rules, ok));
            up.announce(&member.state, change, "health check");
        }
    }
}

/// One probe: true when the server answers the check path with an expected status within the timeout.
async fn probe(server: &ServerState, check: &ActiveCheck) -> bool {
    let attempt = async {
        let conn = connect(&server.addr, server.tls.as_ref(), check.timeout)
            .await
            .ok()?;
        let mut headers = HeaderMap::new();
        let host = match server.host() {
            Some(name) => HeaderValue::from_str(name).ok()?,
            None => HeaderValue::from_static("localhost"),
        };
        headers.insert(header::HOST, host);
        headers.insert(
            header::USER_AGENT,
            HeaderValue::from_static("rein-health-check"),
        );
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        let head = RequestHead::new(&Method::GET, &check.path, &headers, false, false);
        let response = conn.send(&head, None, check.timeout).await.ok()?;
        let status = response.status().as_u16();
        let _ = response.into_body().collect().await;
        Some((check.status.0..=check.status.1).contains(&status))
    };
    let within: Duration = check.timeout;
    matches!(tokio::time::timeout(within, attempt).await, Ok(Some(true)))
}
