//! Balancing: weighted round-robin, least connections, ip_hash; the `/status/upstreams` counters; pooled
//! connections closed once idle.

use super::*;

#[test]
fn round_robin_follows_weights_and_status_counts_requests() {
    let rein = Rein::start();
    let bs = [
        Backend::python("A", "0", &[]),
        Backend::python("B", "0", &[]),
        Backend::python("C", "0", &[]),
    ];
    let addr = serve_upstream(
        &rein,
        json!({"servers": {
            bs[0].addr(): {"weight": 1},
            bs[1].addr(): {"weight": 2},
            bs[2].addr(): {"weight": 3},
        }}),
    );
    let mut c = Conn::open(addr);
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for _ in 0..600 {
        let r = c.get("/whoami", &[]);
        assert_eq!(r.status, 200);
        *counts.entry(r.text()).or_default() += 1;
    }
    for (b, expected) in bs.iter().zip([100u64, 200, 300]) {
        let got = counts.get(&b.name).copied().unwrap_or(0);
        assert!(
            got.abs_diff(expected) <= expected / 10,
            "{}: {got} requests, expected {expected} ± 10% ({counts:?})",
            b.name
        );
        // The status counters agree with what the backends answered.
        let st = server_status(&rein, &b.addr());
        assert_eq!(st["requests"], got, "{}: {st}", b.name);
        assert_eq!(st["failures"], 0);
        assert_eq!(st["state"], "healthy");
        assert_eq!(st["active"], 0);
        assert_eq!(b.count("path=/whoami"), got);
    }
}

#[test]
fn idle_pooled_connections_close_after_the_idle_timeout_without_traffic() {
    let rein = Rein::start();
    let b = Backend::python("A", "0", &["--delay-ms", "300"]);
    let addr = serve_upstream(
        &rein,
        json!({"servers": servers(&[&b]), "timeouts": {"idle": 0.5}}),
    );
    // Four requests at once: four connections, pooled once answered.
    let held: Vec<JoinHandle<Response>> = (0..4)
        .map(|_| std::thread::spawn(move || Conn::open(addr).get("/whoami", &[])))
        .collect();
    for h in held {
        assert_eq!(h.join().unwrap().status, 200);
    }
    let st = server_status(&rein, &b.addr());
    assert!(st["idle_connections"].as_u64().unwrap() >= 2, "{st}");
    // No request from now on: the pool empties by itself (the backend keeps its side open).
    wait_for("the idle connections closed", || {
        server_status(&rein, &b.addr())["idle_connections"] == 0
    });
}

#[test]
fn least_connections_sends_to_the_idle_server() {
    let rein = Rein::start();
    // A answers every request after 3 s: whatever lands on it stays in flight.
    let a = Backend::python("A", "0", &["--delay-ms", "3000"]);
    let b = Backend::python("B", "0", &[]);
    let addr = serve_upstream(
        &rein,
        json!({"servers": servers(&[&a, &b]), "balance": "least_connections"}),
    );
    // Hold requests on A: three concurrent ones; each lands on A or, when B is busier, on B (which is quick).
    let held: Vec<JoinHandle<Response>> = (0..3)
        .map(|_| std::thread::spawn(move || Conn::open(addr).get("/whoami", &[])))
        .collect();
    wait_for("requests held on A and none left on B", || {
        let (sa, sb) = (
            server_status(&rein, &a.addr()),
            server_status(&rein, &b.addr()),
        );
        let done_on_b = sb["requests"].as_u64().unwrap();
        sa["active"].as_u64().unwrap() >= 1
            && sb["active"] == 0
            && sa["active"].as_u64().unwrap() + done_on_b == 3
    });
    let held_on_a = server_status(&rein, &a.addr())["active"].as_u64().unwrap();
    // Every new request goes to B, the server with fewer requests in flight.
    let mut c = Conn::open(addr);
    for i in 0..20 {
        let r = c.get("/whoami", &[]);
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "B"),
            "request {i} while A holds {held_on_a}"
        );
    }
    // The premise held throughout: A still had its requests in flight.
    assert_eq!(
        server_status(&rein, &a.addr())["active"],
        held_on_a,
        "A's requests ended during the test"
    );
    let answers: Vec<String> = held.into_iter().map(|h| h.join().unwrap().text()).collect();
    assert_eq!(
        answers.iter().filter(|n| *n == "A").count() as u64,
        held_on_a,
        "{answers:?}"
    );
    wait_for("A to be idle again", || {
        server_status(&rein, &a.addr())["active"] == 0
    });
}

#[test]
fn ip_hash_keeps_a_client_on_one_server() {
    let rein = Rein::start();
    let bs = [
        Backend::python("A", "0", &[]),
        Backend::python("B", "0", &[]),
        Backend::python("C", "0", &[]),
    ];
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes"}, "[::1]:0": {"pass": "routes"}},
        "routes": upstream_routes(),
        "upstreams": {"u": {"servers": servers(&[&bs[0], &bs[1], &bs[2]]), "balance": "ip_hash"}},
    }));
    let v4 = rein.bound("127.0.0.1:0");
    let v6 = rein.bound("[::1]:0");
    let names_from = |addr: SocketAddr, n: usize| -> BTreeSet<String> {
        (0..n)
            .map(|_| {
                // A fresh connection (a new source port) each time: the address decides.
                let r = Conn::open(addr).get("/whoami", &[]);
                assert_eq!(r.status, 200);
                r.text()
            })
            .collect()
    };
    let from_v4 = names_from(v4, 60);
    assert_eq!(from_v4.len(), 1, "127.0.0.1 was spread: {from_v4:?}");
    let from_v6 = names_from(v6, 60);
    assert_eq!(from_v6.len(), 1, "::1 was spread: {from_v6:?}");
    // One keep-alive connection: same server too.
    let mut c = Conn::open(v4);
    for _ in 0..40 {
        assert_eq!(&c.get("/whoami", &[]).text(), from_v4.first().unwrap());
    }

    // When that server goes away, the client moves, to one server again, with no failed request.
    let chosen = from_v4.first().unwrap().clone();
    let mut bs = bs;
    bs.iter_mut().find(|b| b.name == chosen).unwrap().kill();
    let moved = names_from(v4, 30);
    assert_eq!(moved.len(), 1, "after {chosen} died: {moved:?}");
    assert!(!moved.contains(&chosen));
}

/// Round robin with a server that refuses connections: the refused request is retried on the next server,
/// and that retry is not a turn of the rotation, so each server keeps its share of first tries (Unit's 10/10
/// of 20 requests at 1:1) and the good server also takes the 10 retries.
#[test]
fn a_retry_after_a_refusal_is_not_a_turn_of_the_round_robin() {
    let rein = Rein::start();
    let good = Backend::python("B", "0", &[]);
    let held = Refusing::new();
    let refusing = held.addr().to_owned();
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": {refusing.clone(): {}, good.addr(): {}},
            "health": {"passive": {"failures": 0}}
        }),
    );
    let mut c = Conn::open(addr);
    for _ in 0..20 {
        assert_eq!(c.get("/whoami", &[]).status, 200);
    }
    assert_eq!(good.count("path=/whoami"), 20);
    assert_eq!(server_status(&rein, &refusing)["failures"], 10);
}

/// An upstream configured without any server answers 502, as Unit does (nothing will ever answer: no server
/// to wait for, unlike an application's instances).
#[test]
fn an_upstream_without_servers_answers_502() {
    let rein = Rein::start();
    let addr = serve_upstream(&rein, json!({"servers": {}}));
    assert_eq!(Conn::open(addr).get("/", &[]).status, 502);
}
