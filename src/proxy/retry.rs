//! The retry loop every transport shares (HTTP and FastCGI): pick a server, try once, and decide whether
//! another server may have the request.
//!
//! A request whose connection failed before any byte was sent is always tried again on another server;
//! once sent, it is tried again only if it is replayable (an idempotent method with no body). Attempts are
//! bounded by `retries.tries` and `retries.timeout` (a retry's wait for a server included). When no server is
//! available, the request waits up to `queue_timeout` for one (a restarting backend) before 503, admitted by
//! its upstream ([`crate::upstream::Upstream::acquire`]). A
//! send on a reused keep-alive connection that the server had already closed is no fault of the server's: it
//! is retried at no cost to `tries`.

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use super::ProxyError;
use super::body::UploadWatch;
use crate::body::Body;
use crate::upstream::{ServerState, Slot, Upstream, Wanted};

/// Sends on reused connections that the server turned out to have closed, retried at no cost to `tries`.
const MAX_STALE: u32 = 4;

/// One attempt that did not produce an answer.
pub struct Failed {
    pub error: ProxyError,
    /// The request body, when none of it was sent: safe to send elsewhere.
    pub unsent: Option<Body>,
    /// It failed on a reused keep-alive connection the server had already closed.
    pub stale: bool,
    /// The request may have reached the server: false for a failed connect or a stale connection. A
    /// request that did not may go elsewhere whatever its method.
    pub reached: bool,
}

impl Failed {
    /// A failure after the request went out: never stale, nothing to send again.
    pub fn sent(error: ProxyError) -> Self {
        Failed {
            error,
            unsent: None,
            stale: false,
            reached: true,
        }
    }

    /// A connect that failed: nothing reached the server, and the body may go to the next one.
    pub fn connect(
        server: &crate::link::ServerAddr,
        timeout: Duration,
        source: std::io::Error,
        unsent: Option<Body>,
    ) -> Self {
        Failed {
            error: ProxyError::connect(server, timeout, source),
            unsent,
            stale: false,
            reached: false,
        }
    }
}

/// What the loop needs to know of the request.
pub struct Plan<'a> {
    pub client: Option<IpAddr>,
    /// The body to send, if any (`None`: an empty request body).
    pub body: Option<Body>,
    /// Whether the request may be sent again after it went out (idempotent, no body).
    pub replayable: bool,
    pub upload: Option<&'a UploadWatch>,
}

/// Runs `attempt` on servers of `upstream` until one answers or the retry budget is spent.
pub async fn run<T, F, Fut>(
    upstream: &Arc<Upstream>,
    plan: Plan<'_>,
    mut attempt: F,
) -> Result<T, ProxyError>
where
    F: FnMut(Slot, Option<Body>) -> Fut,
    Fut: Future<Output = Result<T, Failed>>,
{
    if upstream.has_no_servers() {
        return Err(ProxyError::NoServers);
    }
    let retries = upstream.conf.retries;
    // No new attempt starts after this, and a retry does not wait for a server past it either.
    let budget_ends = tokio::time::Instant::now() + retries.timeout;
    let had_body = plan.body.is_some();
    let mut body = plan.body;
    let mut excluded: Vec<Arc<ServerState>> = Vec::new();
    let mut last_error = ProxyError::NoServer;
    let (mut attempts, mut stale_left) = (0, MAX_STALE);
    while attempts < retries.tries {
        let retrying = attempts > 0;
        if retrying && tokio::time::Instant::now() >= budget_ends {
            break;
        }
        let limit = retrying.then_some(budget_ends);
        let wanted = Wanted {
            client: plan.client,
            excluded: &excluded,
            limit,
        };
        let Some(slot) = upstream.acquire(wanted).await else {
            break;
        };
        if retrying {
            upstream.stats.retried();
        }
        let server = slot.server.clone();
        let failed = match attempt(slot, body.take()).await {
            Ok(answer) => return Ok(answer),
            Err(failed) => failed,
        };
        if plan.upload.is_some_and(|w| w.too_large()) {
            return Err(ProxyError::BodyTooLarge);
        }
        if let Some(status) = plan.upload.and_then(|w| w.client_failure()) {
            return Err(ProxyError::ClientBody(status));
        }
        tracing::debug!(upstream = %upstream.name, attempts, error = %failed.error, stale = failed.stale, "attempt failed");
        if failed.stale && stale_left > 0 {
            // The server had closed an idle connection: try again, on a fresh one if need be.
            stale_left -= 1;
        } else {
            attempts += 1;
            upstream.record(&server, false);
            excluded.push(server);
        }
        last_error = failed.error;
        match failed.unsent {
            // Never written: the same body can go to the next server.
            Some(returned) => body = Some(returned),
            // Some of the body went out: it cannot be sent again.
            None if had_body => break,
            // A request without a body: again if it never reached the server, or if it may be replayed.
            None if failed.reached && !plan.replayable => break,
            None => {}
        }
    }
    Err(last_error)
}
