//! The retry loop's limits, with attempts that fail as told: `retries.tries`, the `retries.timeout` budget (a
//! retry's wait for a server included), and which failures may go to another server.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::ProxyError;
use super::retry::{Failed, Plan, run};
use crate::body::{self as rbody, Body};
use crate::link::ServerAddr;
use crate::upstream::conf::{Retries, ServerConf, UpstreamConf};
use crate::upstream::{Member, ServerState, Slot, Upstream};

/// An upstream over `n` servers of one slot each, with these retry limits and no passive health.
fn upstream(n: u16, tries: u32, budget: Duration) -> Arc<Upstream> {
    let servers: Vec<ServerConf> = (0..n)
        .map(|i| ServerConf {
            addr: ServerAddr::parse(&format!("127.0.0.1:{}", 9000 + i)).unwrap(),
            weight: 1.0,
            max_connections: Some(1),
            pipelining: false,
        })
        .collect();
    let members = servers
        .iter()
        .map(|s| Member {
            weight: 1.0,
            max_connections: s.max_connections,
            pipelining: 0,
            state: Arc::new(ServerState::new(s.addr.clone())),
        })
        .collect();
    let mut conf = UpstreamConf::with_servers(servers);
    conf.passive.failures = 0;
    conf.queue_timeout = Duration::from_secs(30);
    conf.retries = Retries {
        tries,
        timeout: budget,
    };
    Upstream::new("t", conf, members)
}

fn plan(body: Option<Body>, replayable: bool) -> Plan<'static> {
    Plan {
        client: None,
        body,
        replayable,
        upload: None,
    }
}

/// A refused connect: nothing was sent, the body comes back.
fn refused(slot: &Slot, body: Option<Body>) -> Failed {
    Failed {
        error: ProxyError::Unreachable {
            server: slot.server.addr.to_string(),
            source: std::io::ErrorKind::ConnectionRefused.into(),
        },
        unsent: body,
        stale: false,
        reached: false,
    }
}

/// A request without a body that is not idempotent (a bare POST): refused at connect, it never reached a
/// server, so it goes on to the next, up to `tries`.
#[tokio::test]
async fn tries_bounds_the_attempts_on_refused_servers() {
    let u = upstream(3, 2, Duration::from_secs(10));
    let attempts = AtomicU32::new(0);
    let result: Result<(), _> = run(&u, plan(None, false), |slot, body| {
        attempts.fetch_add(1, Ordering::SeqCst);
        let failed = refused(&slot, body);
        async move { Err(failed) }
    })
    .await;
    assert!(matches!(result, Err(ProxyError::Unreachable { .. })));
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_unsent_post_body_goes_to_the_next_server() {
    let u = upstream(2, 3, Duration::from_secs(10));
    let first = std::sync::Mutex::new(None);
    let answer = run(
        &u,
        plan(Some(rbody::full("payload")), false),
        |slot, body| {
            let mut first = first.lock().unwrap();
            let refuse = first.is_none();
            first.get_or_insert(slot.server.addr.clone());
            let failed = refused(&slot, body);
            async move {
                match refuse {
                    true => Err(failed),
                    false => {
                        let body = failed.unsent.expect("the body, intact");
                        let bytes = http_body_util::BodyExt::collect(body).await.unwrap();
                        Ok((slot.server.addr.clone(), bytes.to_bytes()))
                    }
                }
            }
        },
    )
    .await
    .expect("answered by the second server");
    assert_ne!(Some(answer.0), first.lock().unwrap().clone());
    assert_eq!(&answer.1[..], b"payload");
}

#[tokio::test]
async fn a_sent_body_is_never_retried_a_sent_get_is() {
    for (replayable, expected) in [(false, 1), (true, 3)] {
        let u = upstream(3, 3, Duration::from_secs(10));
        let attempts = AtomicU32::new(0);
        let result: Result<(), _> = run(&u, plan(None, replayable), |slot, _body| {
            attempts.fetch_add(1, Ordering::SeqCst);
            let server = slot.server.addr.to_string();
            async move {
                Err(Failed::sent(ProxyError::Broken {
                    server,
                    source: "closed".into(),
                }))
            }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(
            attempts.load(Ordering::SeqCst),
            expected,
            "replayable: {replayable}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn no_attempt_starts_after_the_time_budget() {
    let u = upstream(5, 5, Duration::from_secs(1));
    let attempts = AtomicU32::new(0);
    let start = tokio::time::Instant::now();
    let result: Result<(), _> = run(&u, plan(None, true), |slot, body| {
        attempts.fetch_add(1, Ordering::SeqCst);
        let failed = refused(&slot, body);
        async move {
            tokio::time::sleep(Duration::from_millis(600)).await;
            Err(failed)
        }
    })
    .await;
    assert!(result.is_err());
    // Attempts start at 0 and 0.6 s; at 1.2 s the budget is spent.
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(start.elapsed(), Duration::from_millis(1200));
}

#[tokio::test(start_paused = true)]
async fn a_retry_waits_for_a_busy_server_only_within_the_budget() {
    let u = upstream(2, 3, Duration::from_secs(1));
    let start = tokio::time::Instant::now();
    let attempts = AtomicU32::new(0);
    let held = std::sync::Mutex::new(None);
    let result: Result<(), _> = run(&u, plan(None, true), |slot, body| {
        attempts.fetch_add(1, Ordering::SeqCst);
        // The other server is busy (its one slot held) when this one fails.
        *held.lock().unwrap() = u.pick(None, std::slice::from_ref(&slot.server));
        let failed = refused(&slot, body);
        async move { Err(failed) }
    })
    .await;
    assert!(held.lock().unwrap().is_some(), "the other server was held");
    assert!(matches!(result, Err(ProxyError::Unreachable { .. })));
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    // Not queue_timeout (30 s): the retry's wait ends with the budget.
    assert_eq!(start.elapsed(), Duration::from_secs(1));
}
