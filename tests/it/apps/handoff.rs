//! `"handoff": true`: a Node.js app's instances take the client connections of a listener that passes straight
//! to the app (the instance sees the client's own socket), hand idle ones back to rein on a reload so that a
//! keep-alive connection moves to the new instance without being closed, and rein takes over when an instance
//! dies.

use super::*;

/// A listener passing straight to `web` (handed off) and one reaching it through routes (proxied).
fn start_handoff(rein: &Rein, processes: u64) -> (SocketAddr, SocketAddr) {
    let web = node_app(
        "node_app.js",
        &["h"],
        json!({"processes": processes, "handoff": true}),
    );
    rein.configure(json!({
        "listeners": {
            "127.0.0.1:0": {"pass": "applications/web"},
            "127.0.0.2:0": {"pass": "routes"},
        },
        "routes": [{"action": {"pass": "applications/web"}}],
        "applications": {"web": web},
    }));
    wait_ready(rein, "web", processes as usize);
    (rein.bound("127.0.0.1:0"), rein.bound("127.0.0.2:0"))
}

/// The client's port as the app saw it, asked over `conn` (`undefined` over a Unix socket).
fn seen_port(conn: &mut Conn) -> String {
    let r = conn.get("/peer", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    r.text()
}

fn local_port(conn: &mut Conn) -> String {
    conn.reader()
        .get_ref()
        .local_addr()
        .unwrap()
        .port()
        .to_string()
}

#[test]
fn an_instance_serves_the_client_connection_itself() {
    let rein = Rein::start();
    let (direct, routed) = start_handoff(&rein, 1);

    let mut conn = Conn::open(direct);
    let port = local_port(&mut conn);
    assert_eq!(
        seen_port(&mut conn),
        port,
        "the app sees the client's socket"
    );
    assert_eq!(
        seen_port(&mut conn),
        port,
        "keep-alive: the same connection"
    );

    let mut proxied = Conn::open(routed);
    let port = local_port(&mut proxied);
    assert_ne!(
        seen_port(&mut proxied),
        port,
        "through routes, rein proxies"
    );
    let handed: u64 = instances(&rein, "web")
        .iter()
        .filter_map(|i| i["connections_handed"].as_u64())
        .sum();
    assert_eq!(handed, 1, "{:?}", instances(&rein, "web"));
}

#[test]
fn handoff_needs_a_node_app() {
    let rein = Rein::start();
    let conf = json!({"applications": {"sh": app("/bin/sh", &["-c", "sleep 100"], json!({"handoff": true}))}});
    let (code, body) = rein.api("PUT", "/config", Some(&conf.to_string()));
    assert_eq!(code, 400, "{body}");
    let text = body.to_string();
    assert!(
        text.contains("applications/sh/handoff") && text.contains("Node.js"),
        "{text}"
    );
}

#[test]
fn rolling_reloads_move_keep_alive_connections_without_closing_one() {
    let rein = Rein::start();
    let (direct, _) = start_handoff(&rein, 2);
    let first = ready_pids(&rein, "web");

    // Counted by the whole answer, `node:h:PID`: a connection that stays open and answers from a new pid
    // was handed back and passed on.
    let load = Load::start_keyed(direct, &["/a", "/b", "/c", "/d"], |r| r.text());
    load.wait_more(100);
    for round in 0..3 {
        let (code, body) = restart(&rein, "web");
        assert_eq!(code, 200, "restart {round}: {body}");
        load.wait_more(50);
    }
    let last = wait_ready(&rein, "web", 2);
    for pid in &last {
        load.wait_answers(&format!("node:h:{pid}"), 20);
    }
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
    assert!(first.is_disjoint(&last), "{first:?} then {last:?}");
    let st = status(&rein, "web");
    assert_eq!(st["last_reload"]["ok"], true, "{st}");
}

#[test]
fn connections_after_an_instance_is_killed_reach_the_others() {
    let rein = Rein::start();
    let (direct, _) = start_handoff(&rein, 2);
    let pids: Vec<u32> = ready_pids(&rein, "web").into_iter().collect();
    kill9(pids[0]);
    // Every new connection is answered, whichever instance rein passes it to, while the killed one is
    // replaced.
    for _ in 0..20 {
        let r = get(direct, "/x");
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(
            !r.text().ends_with(&format!(":{}", pids[0])),
            "{}",
            r.text()
        );
    }
    wait_ready(&rein, "web", 2);
}
