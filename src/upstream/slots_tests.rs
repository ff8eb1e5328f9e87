//! Slots under contention: a server's `max_connections` holds however many worker threads pick at once, and
//! a withdrawn server gets no new request.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::conf::{ServerAddr, UpstreamConf};
use super::{Member, ServerState, Upstream};

fn one_server(max_connections: Option<u32>) -> (Arc<Upstream>, Arc<ServerState>) {
    let addr = ServerAddr::parse("127.0.0.1:9").expect("an address");
    let state = Arc::new(ServerState::new(addr.clone()));
    let member = Member {
        weight: 1.0,
        max_connections,
        state: state.clone(),
    };
    (
        Upstream::new("t", UpstreamConf::to_one(addr), vec![member]),
        state,
    )
}

#[test]
fn max_connections_holds_when_threads_pick_at_once() {
    let (upstream, _) = one_server(Some(2));
    let held = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (upstream, held, most) = (upstream.clone(), held.clone(), most.clone());
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    if let Some(slot) = upstream.pick(None, &[]) {
                        let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        // Held a moment, so that others read the candidates while it is.
                        std::thread::yield_now();
                        held.fetch_sub(1, Ordering::SeqCst);
                        drop(slot);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no panic");
    }
    let most = most.load(Ordering::SeqCst);
    assert!((1..=2).contains(&most), "{most} slots held at once");
}

#[test]
fn a_withdrawn_server_takes_no_new_request() {
    let (upstream, state) = one_server(None);
    let slot = upstream.pick(None, &[]).expect("a slot");
    assert!(state.withdraw(), "a request is in flight");
    assert!(upstream.pick(None, &[]).is_none());
    drop(slot);
    assert!(!state.busy());
    assert!(upstream.pick(None, &[]).is_none());
}

#[tokio::test]
async fn a_newcomer_queues_behind_a_request_already_waiting() {
    use futures_util::FutureExt;

    use crate::proxy::retry::wait_for_server;

    let (upstream, _) = one_server(Some(1));
    let held = upstream.pick(None, &[]).expect("the one slot");
    let waiter = tokio::spawn({
        let upstream = upstream.clone();
        async move { wait_for_server(&upstream, None, &[]).await.is_some() }
    });
    for _ in 0..1000 {
        if upstream.queued() > 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(upstream.queued(), 1, "the waiter is in line");
    // The slot is freed: the waiter is woken, but has not run yet when a newcomer looks.
    drop(held);
    let mut newcomer = std::pin::pin!(wait_for_server(&upstream, None, &[]));
    assert!(
        newcomer.as_mut().now_or_never().is_none(),
        "the newcomer took the slot the waiting request was woken for"
    );
    assert!(waiter.await.expect("no panic"), "the waiter got the slot");
    assert!(newcomer.await.is_some(), "then the newcomer");
}
