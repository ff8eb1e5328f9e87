//! Pipelining against a small FastCGI server written with the codec (the client tests' `Peer`): a rider's
//! request reaches the server before the answer ahead of it is written, its answer is its own, and every way
//! the exchange ahead can end without handing over leaves the rider told and the connection unused.

use std::sync::Arc;

use tokio::time::Instant;

use super::{Counted, Line, Offered, Ride, Seats};
use crate::fastcgi::client::tests::{
    Peer, SECOND, collect, dial, keep, params, rig, taken, within,
};
use crate::fastcgi::client::{Conn, Error};
use crate::fastcgi::exchange::encode_bodiless;
use crate::fastcgi::params::Params;
use crate::link::ServerAddr;

/// Waits until an exchange on `seats` has offered a seat, then rides it with `request`.
async fn ride(seats: &Seats, request: &Params) -> Ride {
    let mut records = encode_bodiless(request);
    loop {
        match seats.ride(records) {
            Ok(ride) => return ride,
            Err(back) => records = back,
        }
        tokio::task::yield_now().await;
    }
}

/// Seats for a server of one connection, and that connection.
async fn one_connection(addr: &ServerAddr) -> (Arc<Seats>, Conn) {
    let seats = Arc::new(Seats::default());
    let conn = dial(addr).await.counted(seats.reserve(1, 1).unwrap());
    (seats, conn)
}

fn get(query: &str) -> Params {
    Params::from_iter([("REQUEST_METHOD", "GET"), ("QUERY_STRING", query)])
}

/// Reads one whole request without a body; its query string.
async fn request(peer: &mut Peer) -> String {
    let params = peer.begin().await;
    assert!(peer.stdin().await.is_empty());
    String::from_utf8(params.get("QUERY_STRING").unwrap().to_vec()).unwrap()
}

#[tokio::test]
async fn a_rider_is_written_behind_and_answered_after() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            assert_eq!(request(&mut peer).await, "first");
            // The rider's request is here before the first answer is written.
            assert_eq!(request(&mut peer).await, "second");
            peer.respond(b"\r\nanswer to first").await;
            peer.respond(b"\r\nanswer to second").await;
            assert_eq!(request(&mut peer).await, "third");
            peer.respond(b"\r\nanswer to third").await;
        });
        let (seats, conn) = one_connection(&addr).await;
        assert!(
            seats.reserve(1, 1).is_none(),
            "one connection allowed, one open"
        );
        let ahead = async {
            let response = conn.send(&get("first"), None, SECOND).await.unwrap();
            collect(response.into_body()).await.unwrap()
        };
        let behind = async {
            let ride = ride(&seats, &get("second")).await;
            let mut ride = ride;
            let handover = (&mut ride.handover).await.expect("handed over");
            let mut response = Conn::resume(handover, SECOND, SECOND).await.unwrap();
            let slot = keep(response.body_mut());
            let body = collect(response.into_body()).await.unwrap();
            (body, slot)
        };
        let (first, (second, slot)) = tokio::join!(ahead, behind);
        assert_eq!(first, b"answer to first");
        assert_eq!(second, b"answer to second");
        // The rider's exchange ends cleanly: the connection is reusable, and no seat is left on offer.
        assert_eq!(seats.offered(), 0);
        let conn = taken(&slot).expect("reused after the rider's answer");
        let response = conn.send(&get("third"), None, SECOND).await.unwrap();
        assert_eq!(
            collect(response.into_body()).await.unwrap(),
            b"answer to third"
        );
        server.await.unwrap();
        drop(conn_count_is_back(&seats));
    })
    .await;
}

/// Every connection counted has closed: the count is back to zero, so one more may open.
fn conn_count_is_back(seats: &Arc<Seats>) -> Counted {
    seats.reserve(1, 1).expect("no connection left counted")
}

#[tokio::test]
async fn a_rider_is_told_when_the_exchange_ahead_fails() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            request(&mut peer).await;
            request(&mut peer).await;
            // Closed without a word: the worker died.
        });
        let (seats, conn) = one_connection(&addr).await;
        let first = get("first");
        let ahead = conn.send(&first, None, SECOND);
        let behind = async {
            let ride = ride(&seats, &get("second")).await;
            let mut ride = ride;
            (&mut ride.handover).await
        };
        let (ahead, behind) = tokio::join!(ahead, behind);
        assert!(matches!(ahead.unwrap_err().error, Error::Closed));
        assert!(
            behind.is_err(),
            "the rider learns the connection is not coming"
        );
        server.await.unwrap();
        drop(conn_count_is_back(&seats));
    })
    .await;
}

#[tokio::test]
async fn a_rider_that_gives_up_takes_the_connection_with_it() {
    within(async {
        let (_dir, addr, listener) = rig();
        let (answer, answered) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            request(&mut peer).await;
            request(&mut peer).await;
            answered.await.unwrap();
            peer.respond(b"\r\nanswer to first").await;
            peer.respond(b"\r\nanswer to nobody").await;
        });
        let (seats, conn) = one_connection(&addr).await;
        let ahead = async {
            let mut response = conn.send(&get("first"), None, SECOND).await.unwrap();
            let slot = keep(response.body_mut());
            (collect(response.into_body()).await.unwrap(), slot)
        };
        let behind = async {
            let ride = ride(&seats, &get("second")).await;
            // Taken to be written: too late to take it back.
            while !ride.taken() {
                tokio::task::yield_now().await;
            }
            assert!(ride.cancel().is_none());
            answer.send(()).unwrap();
        };
        let ((first, slot), ()) = tokio::join!(ahead, behind);
        assert_eq!(first, b"answer to first");
        // The rider's answer would come next on it: never pooled.
        assert!(taken(&slot).is_none());
        server.await.unwrap();
        drop(conn_count_is_back(&seats));
    })
    .await;
}

#[tokio::test]
async fn a_rider_dropped_before_its_request_went_out_leaves_the_connection_reusable() {
    within(async {
        let (_dir, addr, listener) = rig();
        let (answer, answered) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            request(&mut peer).await;
            answered.await.unwrap();
            peer.respond(b"\r\nanswer to first").await;
            assert_eq!(request(&mut peer).await, "next");
            peer.respond(b"\r\nanswer to next").await;
        });
        let (seats, conn) = one_connection(&addr).await;
        let first = get("first");
        let ahead = async {
            let mut response = conn.send(&first, None, SECOND).await.unwrap();
            let slot = keep(response.body_mut());
            (collect(response.into_body()).await.unwrap(), slot)
        };
        let behind = async {
            let ride = ride(&seats, &get("second")).await;
            // Its client left before the exchange ahead came to write it.
            assert!(!ride.taken());
            drop(ride);
            answer.send(()).unwrap();
        };
        let ((first, slot), ()) = tokio::join!(ahead, behind);
        assert_eq!(first, b"answer to first");
        let conn = taken(&slot).expect("nothing was written behind: reusable");
        let response = conn.send(&get("next"), None, SECOND).await.unwrap();
        assert_eq!(
            collect(response.into_body()).await.unwrap(),
            b"answer to next"
        );
        server.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn a_worker_gone_between_two_requests_is_a_stale_connection() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            request(&mut peer).await;
            request(&mut peer).await;
            // PHP-FPM's pm.max_requests: the worker answers, then exits without a look at the next.
            peer.respond(b"\r\nanswer to first").await;
        });
        let (seats, conn) = one_connection(&addr).await;
        let ahead = async {
            let response = conn.send(&get("first"), None, SECOND).await.unwrap();
            collect(response.into_body()).await.unwrap()
        };
        let behind = async {
            let ride = ride(&seats, &get("second")).await;
            let mut ride = ride;
            let handover = (&mut ride.handover).await.expect("handed over");
            Conn::resume(handover, SECOND, SECOND).await
        };
        let (first, second) = tokio::join!(ahead, behind);
        assert_eq!(first, b"answer to first");
        let failed = second.unwrap_err();
        assert!(matches!(failed.error, Error::Closed));
        assert!(failed.stale, "nothing came back: safe to send again");
        server.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn no_seat_is_offered_while_a_request_waits_for_a_connection_of_its_own() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            request(&mut peer).await;
            peer.respond(b"\r\nanswer").await;
        });
        let seats = Arc::new(Seats::default());
        let alone = seats.waiting_alone();
        let conn = dial(&addr).await.counted(seats.reserve(1, 1).unwrap());
        let mut response = conn.send(&get("first"), None, SECOND).await.unwrap();
        assert_eq!(seats.offered(), 0);
        let slot = keep(response.body_mut());
        assert_eq!(collect(response.into_body()).await.unwrap(), b"answer");
        // It comes back to the pool, for the request waiting alone.
        assert!(taken(&slot).is_some());
        drop(alone);
        server.await.unwrap();
    })
    .await;
}

#[test]
fn seats_without_an_exchange() {
    let seats = Arc::new(Seats::default());
    // Nothing on offer: the records come back whole.
    let records = encode_bodiless(&params("GET"));
    let back = seats.ride(records.clone()).err().expect("no seat");
    assert_eq!(back, records);
    // The count caps connections and is given back with them.
    let one = seats.reserve(2, 1).unwrap();
    let two = seats.reserve(2, 1).unwrap();
    assert!(seats.reserve(2, 1).is_none());
    drop(one);
    assert!(seats.reserve(2, 1).is_some());
    drop(two);
}

#[tokio::test(start_paused = true)]
async fn no_request_queues_behind_one_that_has_run_for_a_while() {
    let seats = Arc::new(Seats::default());
    let slow = Offered::new(&seats, Instant::now()).unwrap();
    tokio::time::advance(std::time::Duration::from_millis(11)).await;
    let fresh = Offered::new(&seats, Instant::now()).unwrap();
    let records = || encode_bodiless(&params("GET"));
    let _ride = seats.ride(records()).expect("the fresh seat");
    // The slow exchange's seat was taken off offer, not ridden.
    assert_eq!(seats.offered(), 0);
    assert!(seats.ride(records()).is_err());
    assert!(slow.close().is_none());
    assert!(fresh.close().is_some());
}

/// On a connection of depth 2, two riders line up behind the request in progress: all three requests reach
/// the server before its first answer, each answer reaches its own request, the second rider's through the
/// first's exchange, and no more than two queue.
#[tokio::test]
async fn riders_line_up_behind_the_request_in_progress() {
    within(async {
        let (_dir, addr, listener) = rig();
        let server = tokio::spawn(async move {
            let mut peer = Peer::accept(&listener).await;
            assert_eq!(request(&mut peer).await, "first");
            assert_eq!(request(&mut peer).await, "second");
            assert_eq!(request(&mut peer).await, "third");
            for name in ["first", "second", "third"] {
                peer.respond(format!("\r\nanswer to {name}").as_bytes())
                    .await;
            }
        });
        let seats = Arc::new(Seats::default());
        let conn = dial(&addr).await.counted(seats.reserve(1, 2).unwrap());
        let ahead = async {
            let response = conn.send(&get("first"), None, SECOND).await.unwrap();
            collect(response.into_body()).await.unwrap()
        };
        let riders = async {
            let mut second = ride(&seats, &get("second")).await;
            let mut third = ride(&seats, &get("third")).await;
            assert!(
                seats.ride(encode_bodiless(&get("fourth"))).is_err(),
                "two in line: no seat for a third rider"
            );
            let handover = (&mut second.handover).await.expect("handed over");
            let response = Conn::resume(handover, SECOND, SECOND).await.unwrap();
            let second_body = async { collect(response.into_body()).await.unwrap() };
            let third_body = async {
                let handover = (&mut third.handover).await.expect("handed over, in turn");
                let response = Conn::resume(handover, SECOND, SECOND).await.unwrap();
                collect(response.into_body()).await.unwrap()
            };
            tokio::join!(second_body, third_body)
        };
        let (first, (second, third)) = tokio::join!(ahead, riders);
        assert_eq!(first, b"answer to first");
        assert_eq!(second, b"answer to second");
        assert_eq!(third, b"answer to third");
        server.await.unwrap();
    })
    .await;
}

/// The seats further down a line carry the age of the request at its head: none is taken behind a request
/// that has run for a while, however recently the seat was offered.
#[tokio::test(start_paused = true)]
async fn no_request_lines_up_behind_one_that_has_run_for_a_while() {
    let seats = Arc::new(Seats::default());
    let waker = std::task::Waker::noop();
    let mut line = Line::default();
    let records = || encode_bodiless(&params("GET"));
    assert!(
        line.next_records(&seats, 2, waker).is_none(),
        "a first seat offered"
    );
    let _first = seats.ride(records()).expect("the first seat");
    assert!(
        line.next_records(&seats, 2, waker).is_some(),
        "its rider's records"
    );
    tokio::time::advance(std::time::Duration::from_millis(11)).await;
    assert!(
        line.next_records(&seats, 2, waker).is_none(),
        "a second seat offered"
    );
    assert!(
        seats.ride(records()).is_err(),
        "not behind a request in progress for 11 ms"
    );
}
