//! Compile-time checks: each invalid document is rejected with the JSON path of the problem.

use serde_json::json;

use super::compile;

fn error_of(doc: serde_json::Value) -> String {
    match compile(&doc) {
        Ok(_) => panic!("compiled: {doc}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn accepts_unit_shapes() {
    let doc = json!({
        "listeners": {"*:8080": {"pass": "routes/main"}, "unix:/tmp/x.sock": {"pass": "upstreams/u"}},
        "routes": {"main": [
            {"match": {"uri": "/api/*"}, "action": {"pass": "applications/app"}},
            {"action": {"share": "/www$uri", "fallback": {"return": 404}}}
        ]},
        "applications": {"app": {"type": "external", "executable": "/bin/true"}},
        "upstreams": {"u": {"servers": {"127.0.0.1:9000": {"weight": 2}}}},
        "settings": {"http": {"idle_timeout": 5, "max_body_size": 1024, "static": {"mime_types": {"text/x": [".x"]}}}},
        "access_log": {"path": "/tmp/access.log", "format": "$remote_addr $status"}
    });
    let snapshot = compile(&doc).unwrap();
    assert_eq!(snapshot.listeners.len(), 2);
    assert_eq!(snapshot.settings.max_body_size, 1024);
}

#[test]
fn names_the_path_of_each_error() {
    let cases = [
        (
            json!({"listeners": {"*:80": {}}}),
            "listeners/*:80: a listener needs a \"pass\"",
        ),
        (
            json!({"listeners": {"nope": {"pass": "routes"}}, "routes": []}),
            "listeners/nope: not a listener address",
        ),
        (
            json!({"listeners": {"*:80": {"pass": "routes/x"}}, "routes": {}}),
            "listeners/*:80/pass: route \"x\" does not exist",
        ),
        (
            json!({"routes": [{"action": {"return": 200, "share": "/x"}}]}),
            "routes/0/action: has more than one",
        ),
        (
            json!({"routes": [{"action": {"return": 1000}}]}),
            "routes/0/action/return: must be at most 999",
        ),
        (
            json!({"routes": [{"action": {"return": 200, "index": "x"}}]}),
            "routes/0/action/index: is only valid with \"share\"",
        ),
        (
            json!({"routes": [{"action": {"pass": "applications/none"}}]}),
            "routes/0/action/pass: application \"none\" does not exist",
        ),
        (
            json!({"routes": [{"action": {"proxy": "ftp://x"}}]}),
            "routes/0/action/proxy: must start with \"http://\" or \"https://\"",
        ),
        (
            json!({"routes": [{"action": {"proxy": "https://unix:/run/a.sock"}}]}),
            "routes/0/action/proxy: must be \"http://ADDRESS\" or \"https://ADDRESS\"",
        ),
        (
            json!({"routes": [{"action": {"proxy": "https://api.example.com/v1"}}]}),
            "routes/0/action/proxy: must be",
        ),
        (
            json!({
                "routes": [{"action": {"fastcgi": {"server": "upstreams/u", "root": "/srv"}}}],
                "upstreams": {"u": {"servers": {"127.0.0.1:9000": {}}, "tls": {}}},
            }),
            "routes/0/action/fastcgi/server: upstream \"u\" has \"tls\"",
        ),
        (
            json!({"settings": {"http": {"idle_timeout": "x"}}}),
            "settings/http/idle_timeout: must be a non-negative number",
        ),
        (
            json!({"settings": {"http": {"typo": 1}}}),
            "settings/http/typo: unknown option",
        ),
        (json!({"bogus": 1}), "bogus: unknown option"),
        (
            json!({"access_log": "relative.log"}),
            "access_log: the log path must be absolute",
        ),
    ];
    for (doc, expected) in cases {
        let got = error_of(doc);
        assert!(
            got.starts_with(expected),
            "expected {expected:?}, got {got:?}"
        );
    }
}

/// `{"upstreams": {"u": U}}` with one good server and `extra` merged into `U`.
fn upstream_with(extra: serde_json::Value) -> serde_json::Value {
    let mut u = json!({"servers": {"127.0.0.1:9000": {}}});
    u.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    json!({"upstreams": {"u": u}})
}

#[test]
fn names_the_path_of_each_upstream_error() {
    let u = "upstreams/u";
    let cases = [
        (
            json!({"upstreams": {"u": {}}}),
            format!("{u}: an upstream needs \"servers\""),
        ),
        (
            json!({"upstreams": {"u": {"servers": {"nowhere": {}}}}}),
            format!("{u}/servers/nowhere: must be an address"),
        ),
        (
            json!({"upstreams": {"u": {"servers": {"unix:relative.sock": {}}}}}),
            format!("{u}/servers/unix:relative.sock: must be an address"),
        ),
        (
            json!({"upstreams": {"u": {"servers": {"127.0.0.1:9000": {"wieght": 2}}}}}),
            format!("{u}/servers/127.0.0.1:9000/wieght: unknown option"),
        ),
        (
            json!({"upstreams": {"u": {"servers": {"127.0.0.1:9000": {"weight": -1}}}}}),
            format!("{u}/servers/127.0.0.1:9000/weight: must be a number from 0 to 1000000"),
        ),
        (
            json!({"upstreams": {"u": {"servers": {"127.0.0.1:9000": {"weight": "2"}}}}}),
            format!("{u}/servers/127.0.0.1:9000/weight: must be a number from 0 to 1000000"),
        ),
        (
            json!({"upstreams": {"u": {"servers": {"127.0.0.1:9000": {"max_connections": 1.5}}}}}),
            format!("{u}/servers/127.0.0.1:9000/max_connections: must be a non-negative integer"),
        ),
        (
            json!({"upstreams": {"u": {"servers": {"app.internal": {}}}}}),
            format!("{u}/servers/app.internal: must be an address"),
        ),
        (
            json!({"upstreams": {"u": {"servers": {"unix:/run/a.sock": {}}, "tls": {}}}}),
            format!("{u}/servers/unix:/run/a.sock: an upstream with \"tls\" takes"),
        ),
        (
            upstream_with(json!({"tls": {"ca": "/ca.pem", "verify": false}})),
            format!("{u}/tls/verify: unknown option"),
        ),
        (
            upstream_with(json!({"tls": {"server_name": "a b"}})),
            format!("{u}/tls/server_name: must be a DNS name or an IP address"),
        ),
        (
            upstream_with(json!({"balance": "random"})),
            format!("{u}/balance: must be \"round_robin\""),
        ),
        (
            upstream_with(json!({"balance": 1})),
            format!("{u}/balance: must be a string"),
        ),
        (
            upstream_with(json!({"health": {"pasive": {}}})),
            format!("{u}/health/pasive: unknown option"),
        ),
        (
            upstream_with(json!({"health": {"passive": {"failures": -1}}})),
            format!("{u}/health/passive/failures: must be a non-negative integer"),
        ),
        (
            upstream_with(json!({"health": {"passive": {"timeout": "10s"}}})),
            format!("{u}/health/passive/timeout: must be a non-negative number of seconds"),
        ),
        (
            upstream_with(json!({"health": {"active": {"path": "health"}}})),
            format!("{u}/health/active/path: must start with \"/\""),
        ),
        (
            upstream_with(json!({"health": {"active": {"interval": 0}}})),
            format!("{u}/health/active/interval: must be more than 0"),
        ),
        (
            upstream_with(json!({"health": {"active": {"status": "399-200"}}})),
            format!("{u}/health/active/status: must be a status"),
        ),
        (
            upstream_with(json!({"health": {"active": {"rise": 0}}})),
            format!("{u}/health/active/rise: must be at least 1"),
        ),
        (
            upstream_with(json!({"timeouts": {"write": 1}})),
            format!(
                "{u}/timeouts/write: unknown option; expected one of: connect, read, send, idle"
            ),
        ),
        (
            upstream_with(json!({"timeouts": {"send": -1}})),
            format!("{u}/timeouts/send: must be a non-negative number of seconds"),
        ),
        (
            upstream_with(json!({"timeouts": {"connect": "5"}})),
            format!("{u}/timeouts/connect: must be a non-negative number of seconds"),
        ),
        (
            upstream_with(json!({"retries": {"tries": 0}})),
            format!("{u}/retries/tries: must be at least 1"),
        ),
        (
            upstream_with(json!({"retries": {"tries": 101}})),
            format!("{u}/retries/tries: must be at most 100"),
        ),
        (
            upstream_with(json!({"retries": {"timeout": null}})),
            format!("{u}/retries/timeout: must be a non-negative number of seconds"),
        ),
        (
            upstream_with(json!({"retries": {"budget": 1}})),
            format!("{u}/retries/budget: unknown option"),
        ),
        (
            upstream_with(json!({"queue_timeout": -0.5})),
            format!("{u}/queue_timeout: must be a non-negative number of seconds"),
        ),
        (
            upstream_with(json!({"queue": 1})),
            format!("{u}/queue: unknown option"),
        ),
    ];
    for (doc, expected) in cases {
        let got = error_of(doc);
        assert!(
            got.starts_with(&expected),
            "expected {expected:?}, got {got:?}"
        );
    }
}

#[test]
fn compiles_every_upstream_option() {
    let doc = upstream_with(json!({
        "balance": "ip_hash",
        "health": {"passive": {"failures": 2, "timeout": 1.5},
                   "active": {"path": "/h", "interval": 0.5, "timeout": 1, "status": 204, "rise": 1, "fall": 2}},
        "timeouts": {"connect": 1, "read": 2, "send": 3, "idle": 4},
        "retries": {"tries": 5, "timeout": 6},
        "queue_timeout": 7,
    }));
    let u = &doc["upstreams"]["u"];
    let conf =
        crate::upstream::conf::compile(u, &crate::config::JsonPath::root().key("u")).unwrap();
    use std::time::Duration as D;
    assert_eq!(conf.balance, crate::upstream::balance::Balance::IpHash);
    assert_eq!(conf.passive.failures, 2);
    assert_eq!(conf.passive.timeout, D::from_millis(1500));
    let active = conf.active.expect("active checks");
    assert_eq!((active.path.as_str(), active.status), ("/h", (204, 204)));
    let t = conf.timeouts;
    assert_eq!(
        (t.connect, t.read, t.send, t.idle),
        (
            D::from_secs(1),
            D::from_secs(2),
            D::from_secs(3),
            D::from_secs(4)
        )
    );
    assert_eq!(conf.retries.tries, 5);
    assert_eq!(conf.retries.timeout, D::from_secs(6));
    assert_eq!(conf.queue_timeout, D::from_secs(7));
    // Unset, the send timeout is the read timeout's default.
    let plain = upstream_with(json!({}));
    let conf =
        crate::upstream::conf::compile(&plain["upstreams"]["u"], &crate::config::JsonPath::root())
            .unwrap();
    assert_eq!(conf.timeouts.send, conf.timeouts.read);
}

#[test]
fn rejects_routes_that_loop() {
    let doc = json!({"routes": {
        "a": [{"action": {"pass": "routes/b"}}],
        "b": [{"match": {"uri": "/x"}, "action": {"pass": "routes/a"}}]
    }});
    assert!(error_of(doc).contains("makes a loop"));
    let self_loop = json!({"routes": [{"action": {"pass": "routes"}}]});
    assert!(error_of(self_loop).contains("makes a loop"));
}

/// The paths of every error `compile_all` finds in `doc`.
fn all_error_paths(doc: serde_json::Value) -> Vec<String> {
    match super::compile_all(&doc, &Default::default()) {
        Ok(_) => panic!("compiled: {doc}"),
        Err(e) => e.iter().map(|e| e.path.as_str().to_owned()).collect(),
    }
}

#[test]
fn every_independent_mistake_is_listed_in_document_order() {
    let doc = json!({
        "listeners": {"*:8080": {"pass": "routes"}, "*:99999": {"pass": "routes"}},
        "routes": [
            {"action": {"retrun": 200}},
            {"action": {"return": 200}},
            {"match": {"method": 5}, "action": {"return": 200}}
        ],
        "applications": {"a": {"type": "external"}, "b": {"type": "external", "executable": "/bin/true"}},
        "upstreams": {"u": {"servers": {"nowhere": {}}}},
        "settings": {"http": {"idle_timeout": "soon"}},
        "acess_log": "/tmp/a.log",
    });
    assert_eq!(
        all_error_paths(doc),
        [
            "acess_log",
            "applications/a",
            "upstreams/u/servers/nowhere",
            "routes/0/action/retrun",
            "routes/2/match/method",
            "listeners/*:99999",
            "settings/http/idle_timeout",
        ]
    );
}

#[test]
fn checks_across_the_document_wait_for_its_parts_and_then_are_all_listed() {
    // An application at fault is not also reported as missing by the listener that passes to it.
    let doc = json!({
        "listeners": {"*:8080": {"pass": "applications/a"}},
        "applications": {"a": {"type": "external"}},
    });
    assert_eq!(all_error_paths(doc), ["applications/a"]);
    let doc = json!({
        "listeners": {"*:8080": {"pass": "applications/a"}, "*:8081": {"pass": "upstreams/u"}},
        "routes": [{"action": {"pass": "routes/missing"}}],
    });
    assert_eq!(
        all_error_paths(doc),
        [
            "listeners/*:8080/pass",
            "listeners/*:8081/pass",
            "routes/0/action/pass"
        ]
    );
}

#[test]
fn the_first_error_is_what_compile_reports() {
    let doc = json!({"routes": [{"action": {}}], "listeners": {"x": {}}});
    let Err(all) = super::compile_all(&doc, &Default::default()) else {
        panic!("compiled");
    };
    let first = all.first().to_string();
    assert_eq!(error_of(doc), first);
}
