//! Unit compatibility of configuration text, routing, variables, static files, upstreams, the access log and
//! `/status`: the places where a Unit user's configuration or client met a different answer from rein than
//! from Unit. Each test cites the Unit behaviour it checks; where Unit's documentation is silent, the comment
//! says what a Unit user's client expects and why.

use serde_json::json;

use crate::harness::{Rein, get, wait_for};

// ----- configuration text and the API ---------------------------------------------------------------------

/// Unit reads its configuration with JavaScript-style comments and skips a UTF-8 byte-order mark.
#[test]
fn a_document_with_comments_and_a_byte_order_mark_loads() {
    let rein = Rein::start();
    let text = "\u{FEFF}{\n  // where requests arrive\n  \"listeners\": {\"127.0.0.1:0\": {\"pass\": \"routes\"}},\n  \
                /* every request */ \"routes\": [{\"action\": {\"return\": 204}}]\n}\n";
    let (status, body) = rein.api("PUT", "/config", Some(text));
    assert_eq!(status, 200, "{body}");
    assert_eq!(get(rein.bound("127.0.0.1:0"), "/").status, 204);
    // A syntax error still points at the line the user wrote.
    let (status, body) = rein.api("PUT", "/config/routes", Some("[ /* a\n b */ x ]"));
    assert_eq!(status, 400);
    assert!(
        body["detail"].as_str().unwrap().contains("line 2"),
        "{body}"
    );
}

/// Unit's `PUT` on an array index equal to the array's length appends an element.
#[test]
fn put_at_the_end_of_an_array_appends() {
    let rein = Rein::start();
    let a = rein.serve(json!([{"match": {"uri": "/a"}, "action": {"return": 201}}]));
    let step = json!({"action": {"return": 202}}).to_string();
    let (status, body) = rein.api("PUT", "/config/routes/1", Some(&step));
    assert_eq!(status, 200, "{body}");
    assert_eq!(get(a, "/b").status, 202);
    let (status, _) = rein.api("PUT", "/config/routes/3", Some(&step));
    assert_eq!(status, 404);
}

/// Unit's listener option from before `pass` existed, `"application": "NAME"`, which Unit still takes.
#[test]
fn a_listener_with_the_old_application_option_serves_the_app() {
    let rein = Rein::start();
    let js = "require('http').createServer((q, s) => s.end('app')).listen({fd: 3})";
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"application": "a"}},
        "applications": {"a": {"type": "external", "executable": "node", "arguments": ["-e", js]}},
    }));
    let a = rein.bound("127.0.0.1:0");
    wait_for("the app", || get(a, "/").text() == "app");
    let (status, body) = rein.api(
        "PUT",
        "/config/listeners",
        Some(&json!({"127.0.0.1:0": {"application": "nope"}}).to_string()),
    );
    assert_eq!(status, 400);
    assert!(
        body["detail"].as_str().unwrap().contains("application"),
        "{body}"
    );
}
