//! Slots under contention: a server's `max_connections` holds however many worker threads pick at once, and
//! a withdrawn server gets no new request.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::conf::UpstreamConf;
use super::{Member, ServerState, Slot, Upstream, Wanted};
use crate::link::ServerAddr;

/// A slot for a first try, waiting up to the upstream's queue timeout.
async fn acquire(upstream: &Arc<Upstream>) -> Option<Slot> {
    let wanted = Wanted {
        client: None,
        excluded: &[],
        limit: None,
    };
    upstream.acquire(wanted).await
}

fn one_server(max_connections: Option<u32>) -> (Arc<Upstream>, Arc<ServerState>) {
    let addr = ServerAddr::parse("127.0.0.1:9").expect("an address");
    let state = Arc::new(ServerState::new(addr.clone()));
    let member = Member {
        weight: 1.0,
        max_connections,
        pipelining: 0,
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

    let (upstream, _) = one_server(Some(1));
    let held = upstream.pick(None, &[]).expect("the one slot");
    let waiter = tokio::spawn({
        let upstream = upstream.clone();
        async move { acquire(&upstream).await.is_some() }
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
    let mut newcomer = std::pin::pin!(acquire(&upstream));
    assert!(
        newcomer.as_mut().now_or_never().is_none(),
        "the newcomer took the slot the waiting request was woken for"
    );
    assert!(waiter.await.expect("no panic"), "the waiter got the slot");
    assert!(newcomer.await.is_some(), "then the newcomer");
}

/// Two servers of one slot each, an upstream with a lane per worker thread.
fn two_single_slot_servers(lanes: usize) -> Arc<Upstream> {
    let servers: Vec<Member> = (0..2)
        .map(|i| Member {
            weight: 1.0,
            max_connections: Some(1),
            pipelining: 0,
            state: Arc::new(ServerState::new(
                ServerAddr::parse(&format!("127.0.0.1:{}", 9 + i)).expect("an address"),
            )),
        })
        .collect();
    let mut conf = UpstreamConf::to_one(ServerAddr::parse("127.0.0.1:9").expect("an address"));
    conf.balance = super::balance::Balance::LeastConnections;
    conf.passive.failures = 0;
    Upstream::build_with_lanes("t", "t", conf, servers, true, lanes)
}

#[test]
fn a_request_leaving_the_line_wakes_another_for_a_slot_left_free() {
    use futures_util::FutureExt;

    let upstream = two_single_slot_servers(2);
    let admission = &upstream.admission;
    // Lane 1 has a request in line; lane 0's request takes a slot, and the other slot is free.
    let in_line = admission.line().join_at(1);
    let mut woken = std::pin::pin!(in_line.told());
    woken.as_mut().enable();
    let _slot = upstream.pick(None, &[]).expect("a slot");
    assert!(
        woken.as_mut().now_or_never().is_none(),
        "nobody woke it yet"
    );
    admission.pass_on_room(&upstream);
    assert!(
        woken.as_mut().now_or_never().is_some(),
        "the request in line is woken for the free slot"
    );
}

#[test]
fn a_slot_a_wake_up_is_on_its_way_to_wakes_nobody_else() {
    use futures_util::FutureExt;

    let upstream = two_single_slot_servers(2);
    let admission = &upstream.admission;
    let _both_waiting = (admission.count_waiting(), admission.count_waiting());
    let first = admission.line().join_at(1);
    let second = admission.line().join_at(1);
    let mut first_told = std::pin::pin!(first.told());
    let mut second_told = std::pin::pin!(second.told());
    first_told.as_mut().enable();
    second_told.as_mut().enable();
    let _held = upstream.pick(None, &[]).expect("a slot");
    // The other slot is freed: its wake-up goes to the first request in line, and is on its way.
    drop(upstream.pick(None, &[]).expect("the other slot"));
    assert!(
        first_told.as_mut().now_or_never().is_some(),
        "the first is woken"
    );
    admission.pass_on_room(&upstream);
    assert!(
        second_told.as_mut().now_or_never().is_none(),
        "the second is not woken for the slot the first is going to"
    );
}

/// Two requests in line for a server's two slots, both freed at once while neither request runs: both get
/// a slot at that very moment, with no look by the clock. (Time is paused and the queue timeout is an
/// hour: a request left without its wake-up would be let in only by a timer, and the clock would move.)
#[tokio::test(start_paused = true)]
async fn slots_freed_at_once_reach_every_request_in_line_without_the_clock() {
    let addr = ServerAddr::parse("127.0.0.1:9").expect("an address");
    let member = Member {
        weight: 1.0,
        max_connections: Some(2),
        pipelining: 0,
        state: Arc::new(ServerState::new(addr.clone())),
    };
    let mut conf = UpstreamConf::to_one(addr);
    conf.queue_timeout = std::time::Duration::from_secs(3600);
    let upstream = Upstream::build_with_lanes("t", "t", conf, vec![member], false, 1);
    let held = [
        upstream.pick(None, &[]).expect("a slot"),
        upstream.pick(None, &[]).expect("the other slot"),
    ];
    let start = tokio::time::Instant::now();
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let upstream = upstream.clone();
            tokio::spawn(async move { acquire(&upstream).await.is_some() })
        })
        .collect();
    while upstream.queued() < 2 {
        tokio::task::yield_now().await;
    }
    drop(held);
    for waiter in waiters {
        assert!(waiter.await.expect("no panic"), "a slot");
    }
    assert_eq!(
        tokio::time::Instant::now(),
        start,
        "a request waited for a timer"
    );
}

#[test]
fn every_lane_is_served_while_both_wait() {
    use std::sync::atomic::AtomicU64;

    const TOTAL: u64 = 20_000;
    let upstream = two_single_slot_servers(2);
    // The servers: a thread that answers each request after a few microseconds of work, so that the worker
    // threads sleep between answers and are woken across threads, as with real instances.
    let (server_tx, server_rx) = std::sync::mpsc::channel::<tokio::sync::oneshot::Sender<()>>();
    std::thread::spawn(move || {
        while let Ok(reply) = server_rx.recv() {
            let start = std::time::Instant::now();
            while start.elapsed() < std::time::Duration::from_micros(40) {}
            let _ = reply.send(());
        }
    });
    let total = Arc::new(AtomicU64::new(0));
    // For each lane: the request count when it was last served, and the longest run of requests served
    // without it.
    let last = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let longest_without = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let threads: Vec<_> = (0..2)
        .map(|lane| {
            let (upstream, total) = (upstream.clone(), total.clone());
            let (last, longest_without) = (last.clone(), longest_without.clone());
            let server_tx = server_tx.clone();
            std::thread::spawn(move || {
                crate::workers::pretend_current(lane);
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime");
                rt.block_on(async move {
                    let tasks: Vec<_> = (0..40)
                        .map(|_| {
                            let (upstream, total, server) =
                                (upstream.clone(), total.clone(), server_tx.clone());
                            let (last, longest_without) = (last.clone(), longest_without.clone());
                            tokio::spawn(async move {
                                while total.load(Ordering::SeqCst) < TOTAL {
                                    let slot = acquire(&upstream).await;
                                    let slot = slot.expect("a slot within the queue timeout");
                                    let (tx, rx) = tokio::sync::oneshot::channel();
                                    server.send(tx).expect("the server thread");
                                    rx.await.expect("an answer");
                                    drop(slot);
                                    let n = total.fetch_add(1, Ordering::SeqCst) + 1;
                                    last[lane].store(n, Ordering::SeqCst);
                                    let other = 1 - lane;
                                    let without =
                                        n.saturating_sub(last[other].load(Ordering::SeqCst));
                                    longest_without[other].fetch_max(without, Ordering::SeqCst);
                                }
                            })
                        })
                        .collect();
                    for task in tasks {
                        task.await.expect("no panic");
                    }
                });
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("no panic");
    }
    // Two lanes of 40 requests sharing two slots take turns: neither goes unserved for a tenth of the run. A
    // lane starved while the other waits would go unserved for most of it; a tighter bound would measure the
    // machine instead (a lane's thread not scheduled for a few milliseconds misses that many requests).
    let longest = [0, 1].map(|lane| longest_without[lane].load(Ordering::SeqCst));
    assert!(
        longest.iter().all(|n| *n < TOTAL / 10),
        "requests served while a lane waited: {longest:?}"
    );
}

/// An application's upstream: its instances come and go, and requests wait up to an hour for one.
fn app_upstream() -> Arc<Upstream> {
    let mut conf = UpstreamConf::with_servers(Vec::new());
    conf.queue_timeout = std::time::Duration::from_secs(3600);
    Upstream::dynamic("applications/t", conf)
}

#[tokio::test]
async fn an_errored_app_without_instances_is_answered_at_once() {
    use futures_util::FutureExt;

    let upstream = app_upstream();
    // A request that came while the app was still restarting waits for an instance...
    let waiter = tokio::spawn({
        let upstream = upstream.clone();
        async move { acquire(&upstream).await.is_none() }
    });
    for _ in 0..1000 {
        if upstream.queued() > 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(upstream.queued(), 1, "the waiter is in line");
    // ...until the app errs: then it has its answer, and so has every newcomer, without waiting.
    upstream.set_errored(true);
    let gave_up = tokio::time::timeout(std::time::Duration::from_secs(20), waiter).await;
    assert!(gave_up.expect("the waiter was answered").expect("no panic"));
    let newcomer = acquire(&upstream).now_or_never();
    assert!(matches!(newcomer, Some(None)), "a newcomer waited");
    // An instance up again (a retry, a reload) takes requests even before the app stops being errored.
    let addr = ServerAddr::parse("127.0.0.1:9").expect("an address");
    upstream.set_members(vec![Member {
        weight: 1.0,
        max_connections: None,
        pipelining: 0,
        state: Arc::new(ServerState::new(addr)),
    }]);
    let found = acquire(&upstream).now_or_never();
    assert!(
        matches!(found, Some(Some(_))),
        "the instance was not picked"
    );
    upstream.set_errored(false);
    upstream.set_members(Vec::new());
    let newcomer = acquire(&upstream).now_or_never();
    assert!(newcomer.is_none(), "a restarting app is worth waiting for");
}
