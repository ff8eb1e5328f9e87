//! The control API: Unit's paths and answers, nested edits, validation with paths, ETag/If-Match, dry runs.

use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use crate::harness::{Rein, get};

#[test]
fn edits_nested_paths_and_arrays() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 201}}]));
    assert_eq!(get(addr, "/").status, 201);

    // Sub-path PUT, POST appends, GET by index, DELETE by index.
    let (s, body) = rein.api("PUT", "/config/routes/0/action/return", Some("202"));
    assert_eq!(
        (s, body["success"].as_str()),
        (200, Some("Reconfiguration done."))
    );
    assert_eq!(get(addr, "/").status, 202);
    let step = json!({"match": {"uri": "/b"}, "action": {"return": 203}}).to_string();
    assert_eq!(rein.api("POST", "/config/routes", Some(&step)).0, 200);
    assert_eq!(
        rein.api("GET", "/config/routes/1/action/return", None),
        (200, json!(203))
    );
    assert_eq!(rein.api("DELETE", "/config/routes/0", None).0, 200);
    assert_eq!(get(addr, "/b").status, 203);
    assert_eq!(get(addr, "/a").status, 404);

    // A listener key with `*` and `:` in the path, and a percent-encoded one.
    assert_eq!(
        rein.api("GET", "/config/listeners/127.0.0.1:0/pass", None),
        (200, json!("routes"))
    );
    assert_eq!(
        rein.api("GET", "/config/listeners/127.0.0.1%3A0", None).1,
        json!({"pass": "routes"})
    );
    let sock = rein.dir.path().join("l.sock");
    let key = format!("unix:{}", sock.display()).replace('/', "%2F");
    let (s, body) = rein.api(
        "PUT",
        &format!("/config/listeners/{key}"),
        Some(r#"{"pass": "routes"}"#),
    );
    assert_eq!(s, 200, "{body}");
    assert!(sock.exists());
    assert_eq!(
        rein.api("DELETE", &format!("/config/listeners/{key}"), None)
            .0,
        200
    );

    // Missing values, unknown paths, wrong methods.
    assert_eq!(
        rein.api("GET", "/config/nope", None),
        (404, json!({"error": "Value doesn't exist."}))
    );
    assert_eq!(rein.api("DELETE", "/config/routes/9", None).0, 404);
    assert_eq!(rein.api("PUT", "/config/nope/deeper", Some("1")).0, 404);
    assert_eq!(rein.api("POST", "/config/listeners", Some("1")).0, 400);
    assert_eq!(rein.api("GET", "/elsewhere", None).0, 404);
    assert_eq!(rein.api("PATCH", "/config", Some("{}")).0, 405);
    assert_eq!(rein.api("DELETE", "/status", None).0, 405);
    assert_eq!(
        rein.api("POST", "/control/applications/web/restart", None),
        (405, json!({"error": "Invalid method."}))
    );
}

#[test]
fn invalid_documents_are_refused_with_their_path_and_change_nothing() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    let (_, before) = rein.api("GET", "/config", None);
    let cases = [
        (
            "/config/routes/0/action",
            r#"{"return": 200, "pass": "routes"}"#,
            "routes/0/action: has more than one of pass, return",
        ),
        (
            "/config/routes/0/match",
            r#"{"uri": 5}"#,
            "routes/0/match/uri: must be a pattern string",
        ),
        (
            "/config/routes/0/action",
            r#"{"pass": "routes/missing"}"#,
            "routes/0/action/pass: route \"missing\" does not exist",
        ),
        (
            "/config/listeners/127.0.0.1:0/pass",
            r#""applications/none""#,
            "listeners/127.0.0.1:0/pass: application \"none\" does not exist",
        ),
        (
            "/config/listeners/bogus",
            r#"{"pass": "routes"}"#,
            "listeners/bogus: not a listener address",
        ),
        (
            "/config/settings",
            r#"{"http": {"idle_timeout": -1}}"#,
            "settings/http/idle_timeout: must be a non-negative number",
        ),
        (
            "/config/routes/0/action",
            r#"{"share": "/x/$nosuchvar"}"#,
            "routes/0/action/share: unknown variable \"nosuchvar\"",
        ),
        ("/config/surprise", "{}", "surprise: unknown option"),
    ];
    for (path, doc, named) in cases {
        let (status, body) = rein.api("PUT", path, Some(doc));
        assert_eq!(status, 400, "{path} {doc}: {body}");
        assert_eq!(body["error"], "Invalid configuration.", "{body}");
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.starts_with(named),
            "detail {detail:?} should start with the path and reason {named:?}"
        );
    }
    let (status, body) = rein.api("PUT", "/config", Some("{\"listeners\": "));
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("Invalid JSON."))
    );
    assert_eq!(rein.api("GET", "/config", None).1, before);
    assert_eq!(get(addr, "/").status, 200);
}

#[test]
fn a_listener_that_cannot_bind_fails_the_change_and_keeps_the_old_one() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let key = taken.local_addr().unwrap().to_string();
    let (status, body) = rein.api(
        "PUT",
        &format!("/config/listeners/{key}"),
        Some(r#"{"pass": "routes"}"#),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"], "Failed to apply new configuration.");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("listeners/{key}")),
        "{body}"
    );
    assert_eq!(
        rein.api("GET", &format!("/config/listeners/{key}"), None).0,
        404
    );
    assert_eq!(get(addr, "/").status, 200);
}

#[test]
fn etags_if_match_and_dry_runs() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    let (s, headers, _) = rein.api_raw("GET", "/config", None, &[]);
    assert_eq!(s, 200);
    let etag = header(&headers, "etag");
    let (_, sub_headers, _) = rein.api_raw("GET", "/config/routes", None, &[]);
    assert_eq!(
        header(&sub_headers, "etag"),
        etag,
        "a read of any path carries the document's ETag"
    );

    // A write with the current tag succeeds and moves the tag on; the old tag is then stale.
    let (s, headers, _) = rein.api_raw(
        "PUT",
        "/config/routes/0/action/return",
        Some("204"),
        &[("If-Match", &etag)],
    );
    assert_eq!(s, 200);
    let new_tag = header(&headers, "etag");
    assert_ne!(new_tag, etag);
    let (s, headers, body) = rein.api_raw(
        "PUT",
        "/config/routes/0/action/return",
        Some("205"),
        &[("If-Match", &etag)],
    );
    assert_eq!(s, 412, "{}", String::from_utf8_lossy(&body));
    assert_eq!(header(&headers, "etag"), new_tag);
    assert_eq!(get(addr, "/").status, 204);

    // Dry runs validate without applying.
    let (s, body) = rein.api("PUT", "/config/routes/0/action/return?dry_run", Some("206"));
    assert_eq!(
        (s, body["success"].as_str()),
        (200, Some("Configuration is valid."))
    );
    let (s, body) = rein.api(
        "PUT",
        "/config/routes/0/action/return?dry_run",
        Some("2000"),
    );
    assert_eq!(s, 400, "{body}");
    assert_eq!(get(addr, "/").status, 204);
    assert_eq!(
        rein.api("GET", "/config/routes/0/action/return", None).1,
        json!(204)
    );

    // POST and DELETE honour If-Match and dry runs the same way.
    let stale = etag;
    let step = json!({"match": {"uri": "/other"}, "action": {"return": 201}}).to_string();
    let (s, _, _) = rein.api_raw(
        "POST",
        "/config/routes",
        Some(&step),
        &[("If-Match", &stale)],
    );
    assert_eq!(s, 412, "a POST with a stale tag");
    let (s, _, _) = rein.api_raw("DELETE", "/config/routes/0", None, &[("If-Match", &stale)]);
    assert_eq!(s, 412, "a DELETE with a stale tag");
    let (s, body) = rein.api("POST", "/config/routes?dry_run", Some(&step));
    assert_eq!(s, 200, "{body}");
    let (s, body) = rein.api("DELETE", "/config/routes/0?dry_run", None);
    assert_eq!(s, 200, "{body}");
    let (_, routes) = rein.api("GET", "/config/routes", None);
    assert_eq!(
        routes.as_array().map(Vec::len),
        Some(1),
        "nothing applied: {routes}"
    );
    assert_eq!(get(addr, "/").status, 204);

    let (_, headers, _) = rein.api_raw("GET", "/config", None, &[]);
    let current = header(&headers, "etag");
    let (s, _, _) = rein.api_raw(
        "POST",
        "/config/routes",
        Some(&step),
        &[("If-Match", &current)],
    );
    assert_eq!(s, 200, "a POST with the current tag");
    assert_eq!(
        get(addr, "/other").status,
        204,
        "the first step still matches first"
    );
    let (_, headers, _) = rein.api_raw("GET", "/config", None, &[]);
    let current = header(&headers, "etag");
    let (s, _, _) = rein.api_raw(
        "DELETE",
        "/config/routes/0",
        None,
        &[("If-Match", &current)],
    );
    assert_eq!(s, 200, "a DELETE with the current tag");
    assert_eq!(
        get(addr, "/other").status,
        201,
        "the appended step is now the only one"
    );
}

/// RFC 9110 §13.1.1: `If-Match` is a list, in one field line or several; a write goes ahead when any member
/// is the current tag (strong comparison: a weak `W/` tag never matches).
#[test]
fn if_match_takes_a_list_in_one_or_several_fields() {
    let rein = Rein::start();
    rein.serve(json!([{"action": {"return": 200}}]));
    let current = || {
        let (_, headers, _) = rein.api_raw("GET", "/config", None, &[]);
        header(&headers, "etag")
    };
    let other = "\"0123456789abcdef\"";
    let put = |code: u16, fields: &[(&str, &str)]| {
        let body = code.to_string();
        let path = "/config/routes/0/action/return";
        let (s, _, answer) = rein.api_raw("PUT", path, Some(&body), fields);
        (s, String::from_utf8_lossy(&answer).into_owned())
    };
    let tag = current();
    let (s, body) = put(201, &[("If-Match", &format!("{other}, {tag}"))]);
    assert_eq!(s, 200, "one field, current tag second: {body}");
    let tag = current();
    let (s, body) = put(202, &[("If-Match", other), ("If-Match", &tag)]);
    assert_eq!(s, 200, "two fields, current tag in the second: {body}");
    let tag = current();
    let (s, body) = put(203, &[("If-Match", &format!("W/{tag}"))]);
    assert_eq!(s, 412, "a weak tag: {body}");
    let (s, body) = put(203, &[("If-Match", other), ("If-Match", other)]);
    assert_eq!(s, 412, "no member matches: {body}");
    let (s, body) = put(204, &[("If-Match", "*")]);
    assert_eq!(s, 200, "`*`: {body}");
    assert_eq!(
        rein.api("GET", "/config/routes/0/action/return", None).1,
        json!(204)
    );
}

#[test]
fn an_unchanged_document_is_a_no_op() {
    let rein = Rein::start();
    rein.serve(json!([{"action": {"return": 200}}]));
    let generation = |r: &Rein| r.api("GET", "/status", None).1["config"]["generation"].clone();
    let before = generation(&rein);
    let (_, doc) = rein.api("GET", "/config", None);
    assert_eq!(rein.api("PUT", "/config", Some(&doc.to_string())).0, 200);
    assert_eq!(generation(&rein), before);
}

#[test]
fn status_counts_connections_and_requests() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    let mut conn = crate::harness::Conn::open(addr);
    for _ in 0..3 {
        assert_eq!(conn.get("/", &[]).status, 200);
    }
    let (_, status) = rein.api("GET", "/status", None);
    assert_eq!(status["requests"]["total"], 3, "{status}");
    assert_eq!(status["connections"]["accepted"], 1);
    assert_eq!(status["connections"]["idle"], 1);
    assert_eq!(status["connections"]["active"], 0);
    drop(conn);
    crate::harness::wait_for("the connection to close", || {
        rein.api("GET", "/status/connections/closed", None).1 == 1
    });
    let (_, both) = rein.api("GET", "/", None);
    assert!(both["config"]["listeners"].is_object() && both["status"]["requests"].is_object());
}

#[test]
fn the_control_socket_the_state_dir_and_the_saved_file_are_private() {
    let rein = Rein::start();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&rein.control()), 0o600);
    // Traversable by others, not listable: an app running as another `user` reads rein's Node.js and Python
    // support files under it (apps::as_user). What is private is closed by its own mode.
    assert_eq!(mode(&rein.state), 0o711, "rein created the state dir");
    assert_eq!(mode(&rein.state.join("run")), 0o711);
    assert_eq!(mode(&rein.state.join("run/node")), 0o755);
    assert_eq!(mode(&rein.state.join("run/python")), 0o755);
    // The instances' sockets (an app has its own as fd 3) and the apps' logs.
    assert_eq!(mode(&rein.state.join("run/apps")), 0o700);
    assert_eq!(mode(&rein.state.join("logs")), 0o700);
    rein.configure(json!({"applications": {}, "listeners": {}}));
    assert_eq!(mode(&rein.state.join("conf.json")), 0o600);
    // The socket was bound in a private directory beside it and moved into place; nothing is left of that.
    let left: Vec<_> = std::fs::read_dir(&rein.state)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".rein"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The new document is written before anything changes: a save that fails refuses the change while the
/// listener it would remove keeps serving, even on a kept-alive connection.
#[test]
fn a_change_that_cannot_be_saved_changes_nothing() {
    let rein = Rein::start();
    let addr = rein.serve(json!([{"action": {"return": 200}}]));
    let mut conn = crate::harness::Conn::open(addr);
    assert_eq!(conn.get("/", &[]).status, 200);
    let (_, before) = rein.api("GET", "/config", None);
    let generation = |r: &Rein| r.api("GET", "/status", None).1["config"]["generation"].clone();
    let gen_before = generation(&rein);
    // rein writes the new document to `.conf.json.tmp` first; a directory there fails that write even for
    // root, whom file modes do not stop.
    let blocker = rein.state.join(".conf.json.tmp");
    std::fs::create_dir(&blocker).unwrap();

    let (status, body) = rein.api("PUT", "/config/listeners", Some("{}"));
    assert_eq!(status, 500, "{body}");
    assert_eq!(
        body["error"], "Failed to save the configuration; nothing changed.",
        "{body}"
    );
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("conf.json"),
        "{body}"
    );
    assert_eq!(rein.api("GET", "/config", None).1, before);
    assert_eq!(generation(&rein), gen_before);
    assert_eq!(
        conn.get("/", &[]).status,
        200,
        "the kept-alive connection still served"
    );
    assert_eq!(get(addr, "/").status, 200, "the listener still accepts");

    // Once the state dir can be written again, the same change goes through.
    std::fs::remove_dir(&blocker).unwrap();
    assert_eq!(rein.api("PUT", "/config/listeners", Some("{}")).0, 200);
    crate::harness::wait_for("the listener to close", || {
        std::net::TcpStream::connect(addr).is_err()
    });
}

fn header(headers: &[(String, String)], name: &str) -> String {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no {name} header"))
}

/// Every `null` in `v`, by path.
fn nulls(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Null => out.push(at.to_owned()),
        Value::Object(map) => map
            .iter()
            .for_each(|(k, v)| nulls(v, &format!("{at}/{k}"), out)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .for_each(|(i, v)| nulls(v, &format!("{at}/{i}"), out)),
        _ => {}
    }
}

/// The document a monitoring script written for Unit reads (Unit's Status API): its members with Unit's types,
/// and no `null` anywhere, where such a script expects an object or a number.
#[test]
fn status_has_units_shape() {
    let rein = Rein::start();
    let mut app = crate::python::python_app("wsgi_app", json!({}));
    app["processes"] = json!(2);
    let addr = rein.serve_with(
        json!([{"action": {"pass": "applications/py"}}]),
        json!({"applications": {"py": app}}),
    );
    assert_eq!(get(addr, "/env").status, 200);
    crate::harness::wait_for("both instances ready", || {
        rein.api("GET", "/status", None).1["applications"]["py"]["processes"]["running"] == 2
    });
    let (_, status) = rein.api("GET", "/status", None);
    for (path, want) in [
        ("/connections/accepted", "number"),
        ("/connections/active", "number"),
        ("/connections/idle", "number"),
        ("/connections/closed", "number"),
        ("/requests/total", "number"),
        ("/modules", "object"),
        ("/applications/py/processes/running", "number"),
        ("/applications/py/processes/starting", "number"),
        ("/applications/py/processes/idle", "number"),
        ("/applications/py/requests/active", "number"),
    ] {
        let v = status
            .pointer(path)
            .unwrap_or_else(|| panic!("{path} missing: {status:#}"));
        let is = match v {
            Value::Number(_) => "number",
            Value::Object(_) => "object",
            _ => "other",
        };
        assert_eq!(is, want, "{path}: {status:#}");
    }
    assert_eq!(
        status.pointer("/applications/py/processes/starting"),
        Some(&json!(0))
    );
    assert_eq!(
        status.pointer("/applications/py/processes/idle"),
        Some(&json!(2))
    );
    assert_eq!(
        status.pointer("/applications/py/requests/active"),
        Some(&json!(0))
    );
    let mut found = Vec::new();
    nulls(&status, "", &mut found);
    assert!(found.is_empty(), "null at {found:?}: {status:#}");
    // Each section reads the same on its own.
    let (code, app) = rein.api("GET", "/status/applications/py/processes", None);
    assert_eq!(code, 200);
    assert_eq!(app["running"], 2);
}
