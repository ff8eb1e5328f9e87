//! Passive and active health: servers taken out and brought back.

use super::*;

#[test]
fn passive_health_fails_over_without_errors_and_recovers() {
    let rein = Rein::start();
    let mut a = Backend::python("A", "0", &[]);
    let b = Backend::python("B", "0", &[]);
    let a_port = a.port;
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": servers(&[&a, &b]),
            "health": {"passive": {"failures": 1, "timeout": 0.5}},
            "queue_timeout": 2,
        }),
    );
    let load = Load::start_keyed(addr, &["/whoami"; 4], backend_of);
    load.wait_answers("A", 20);
    load.wait_answers("B", 20);

    a.kill();
    wait_for("A to be marked failed", || {
        server_status(&rein, &a.addr())["state"] == "failed"
    });
    // Let A's passive time-out run out and be renewed a few times, under load.
    wait_for("A to be tried again after its time-outs", || {
        server_status(&rein, &a.addr())["failures"]
            .as_u64()
            .unwrap()
            >= 3
    });
    let before = load.count("A");
    load.wait_answers("B", 50);
    assert_eq!(load.count("A"), before, "a dead A answered?");

    let _a = restart_on("A", a_port);
    load.wait_answers("A", 20);
    let total = load.total();
    let (counts, failures) = load.finish();
    assert!(
        failures.is_empty(),
        "{} of {total} requests failed while A died and came back: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    let st = server_status(&rein, &format!("127.0.0.1:{a_port}"));
    assert_eq!(st["state"], "healthy", "{st}");
    assert!(counts["A"] > 0 && counts["B"] > 0, "{counts:?}");
}

#[test]
fn active_health_takes_a_server_out_and_back() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let b = Backend::python("B", "0", &[]);
    let addr = serve_upstream(
        &rein,
        json!({
            "servers": servers(&[&a, &b]),
            "health": {"active": {"path": "/health", "interval": 0.1, "timeout": 1, "rise": 2, "fall": 2}},
        }),
    );
    wait_for("probes to reach A", || a.count("path=/health") >= 1);
    let mut c = Conn::open(addr);
    let names: BTreeSet<String> = (0..10).map(|_| c.get("/whoami", &[]).text()).collect();
    assert_eq!(names.len(), 2, "{names:?}");

    // Counted before the switch, so a probe answered between the two is not mistaken for a failed one.
    let probes = a.count("path=/health");
    assert_eq!(a.direct("/health/down").status, 200);
    wait_for("A to be unhealthy", || {
        server_status(&rein, &a.addr())["state"] == "unhealthy"
    });
    assert!(
        a.count("path=/health") >= probes + 2,
        "unhealthy before `fall` (2) failed probes"
    );
    let whoami_on_a = a.count("path=/whoami");
    for _ in 0..30 {
        let r = c.get("/whoami", &[]);
        assert_eq!((r.status, r.text().as_str()), (200, "B"));
    }
    assert_eq!(a.count("path=/whoami"), whoami_on_a, "A got traffic");

    let probes = a.count("path=/health");
    assert_eq!(a.direct("/health/up").status, 200);
    wait_for("A to be healthy again", || {
        server_status(&rein, &a.addr())["state"] == "healthy"
    });
    assert!(
        a.count("path=/health") >= probes + 2,
        "healthy before `rise` (2) good probes"
    );
    let names: Vec<String> = (0..10).map(|_| c.get("/whoami", &[]).text()).collect();
    assert!(names.iter().any(|n| n == "A"), "{names:?}");
    assert!(a.count("path=/whoami") > whoami_on_a);
}

/// Turning active checks off forgets what they held against a server: a server they had marked unhealthy used
/// to stay out for good (every request a 503 after `queue_timeout`), since no probe would ever bring it back.
#[test]
fn turning_active_checks_off_brings_back_the_servers_they_took_out() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let checked = json!({
        "servers": servers(&[&a]),
        "health": {"active": {"path": "/health", "interval": 0.1, "timeout": 1, "rise": 1, "fall": 1}},
        "queue_timeout": 0.5,
    });
    let addr = serve_upstream(&rein, checked);
    assert_eq!(a.direct("/health/down").status, 200);
    wait_for("A to be unhealthy", || {
        server_status(&rein, &a.addr())["state"] == "unhealthy"
    });
    let (status, body) = rein.api("DELETE", "/config/upstreams/u/health", None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(server_status(&rein, &a.addr())["state"], "healthy");
    let r = Conn::open(addr).get("/whoami", &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "A"));
}
