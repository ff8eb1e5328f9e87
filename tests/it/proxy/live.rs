//! Live upstream changes under load.

use super::*;

#[test]
fn upstream_servers_change_under_load_without_errors() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let b = Backend::python("B", "0", &[]);
    let c = Backend::python("C", "0", &[]);
    let addr = serve_upstream(&rein, json!({"servers": servers(&[&a, &b])}));
    let load = Load::start_keyed(addr, &["/whoami"; 4], backend_of);
    load.wait_answers("A", 20);
    load.wait_answers("B", 20);

    let set = |to: &[&Backend]| {
        let (status, body) = rein.api(
            "PUT",
            "/config/upstreams/u/servers",
            Some(&servers(to).to_string()),
        );
        assert_eq!(status, 200, "{body}");
    };
    // Checks that, once `now` answered a few, `gone` answer no more.
    let settled = |now: &str, gone: &[&str]| {
        load.wait_answers(now, 20);
        let before: Vec<u64> = gone.iter().map(|g| load.count(g)).collect();
        load.wait_answers(now, 50);
        let after: Vec<u64> = gone.iter().map(|g| load.count(g)).collect();
        assert_eq!(before, after, "{gone:?} still got requests");
    };

    set(&[&b, &c]);
    settled("C", &["A"]);
    load.wait_answers("B", 10);
    set(&[&c]);
    settled("C", &["A", "B"]);
    set(&[&a, &c]);
    load.wait_answers("A", 20);
    settled("C", &["B"]);
    set(&[&b]);
    settled("B", &["A", "C"]);

    let total = load.total();
    let (counts, failures) = load.finish();
    assert!(
        failures.is_empty(),
        "{} of {total} failed across the changes: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(counts["C"] >= 100, "{counts:?}");
    let st = server_status(&rein, &b.addr());
    assert_eq!(st["failures"], 0, "{st}");
}
