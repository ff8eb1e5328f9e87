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
            "routes/0/action/proxy: must start with \"http://\"",
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
