//! Configuration history: `/history` lists, reads and diffs the applied documents, a rollback is an ordinary
//! change (validated, If-Match, recorded), the last N are kept in `STATE/history/` across restarts; and a
//! refused document lists every error.

use serde_json::{Value, json};

use crate::harness::{Conn, Rein};
use crate::tls::pki::{Alg, Ca};

/// A listener on 127.0.0.1:0 answering `status`.
fn answering(status: u16) -> Value {
    json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [{"action": {"return": status}}],
    })
}

fn ids(rein: &Rein) -> Vec<u64> {
    let (status, list) = rein.api("GET", "/history", None);
    assert_eq!(status, 200, "{list}");
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect()
}

fn served_status(rein: &Rein) -> u16 {
    Conn::open(rein.bound("127.0.0.1:0")).get("/", &[]).status
}

fn etag(rein: &Rein) -> String {
    let (_, headers, _) = rein.api_raw("GET", "/config", None, &[]);
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("etag"))
        .map(|(_, v)| v.clone())
        .expect("an ETag")
}

/// Runs `rein ARGS --state STATE`; the exit code, stdout and stderr.
fn cli(rein: &Rein, args: &[&str]) -> (Option<i32>, String, String) {
    let out = rein.cli(args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn applied_documents_are_listed_read_diffed_and_rolled_back() {
    let rein = Rein::start();
    rein.configure(answering(200));
    rein.configure(answering(204));
    let (_, list) = rein.api("GET", "/history", None);
    let sources: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["api", "api", "file"], "{list}");
    assert_eq!(list[0]["current"], true);
    assert_eq!(list[1]["current"], false);
    assert_eq!(list[0]["etag"].as_str().unwrap(), etag(&rein));
    assert!(list[0]["time"].as_str().unwrap().ends_with('Z'), "{list}");
    assert!(list[0].get("config").is_none(), "{list}");

    let (status, second) = rein.api("GET", "/history/2", None);
    assert_eq!((status, &second["config"]), (200, &answering(200)));
    let (status, diff) = rein.api("GET", "/history/2/diff/3", None);
    assert_eq!(status, 200);
    assert_eq!(
        diff,
        json!({"from": 2, "to": 3, "added": [], "removed": [],
               "changed": [{"path": "routes/0/action/return", "from": 200, "to": 204}]})
    );
    let (_, to_current) = rein.api("GET", "/history/1/diff", None);
    assert_eq!(to_current["to"], "current");
    let added: Vec<&str> = to_current["added"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(added, ["listeners", "routes"]);

    assert_eq!(served_status(&rein), 204);
    let (status, body) = rein.api("POST", "/history/2/rollback", None);
    assert_eq!(
        (status, &body),
        (200, &json!({"success": "Reconfiguration done."}))
    );
    assert_eq!(served_status(&rein), 200);
    let (_, list) = rein.api("GET", "/history", None);
    assert_eq!(
        (&list[0]["id"], &list[0]["source"], &list[0]["rollback_of"]),
        (&json!(4), &json!("rollback"), &json!(2))
    );
    assert_eq!(list[0]["etag"], list[2]["etag"]);
    assert_eq!(
        list[2]["current"], false,
        "only the newest entry is current"
    );
    let (status, config) = rein.api("GET", "/config", None);
    assert_eq!((status, config), (200, answering(200)));

    for (method, path, code) in [
        ("GET", "/history/99", 404),
        ("GET", "/history/x", 404),
        ("POST", "/history/99/rollback", 404),
        ("GET", "/history/2/diff/99", 404),
        ("DELETE", "/history", 405),
        ("GET", "/history/2/rollback", 405),
        ("GET", "/history/2/nope", 404),
    ] {
        assert_eq!(rein.api(method, path, None).0, code, "{method} {path}");
    }
}

#[test]
fn a_rollback_honours_if_match_and_dry_run_and_records_nothing_then() {
    let rein = Rein::start();
    rein.configure(answering(200));
    rein.configure(answering(204));
    let before = etag(&rein);
    let stale = [("If-Match", "\"0000000000000000\"")];
    let (status, _, body) = rein.api_raw("PUT", "/history/2/rollback", None, &stale);
    assert_eq!(status, 412, "{}", String::from_utf8_lossy(&body));
    let (status, body) = rein.api("PUT", "/history/2/rollback?dry_run", None);
    assert_eq!(
        (status, &body),
        (200, &json!({"success": "Configuration is valid."}))
    );
    assert_eq!((etag(&rein), ids(&rein)), (before.clone(), vec![3, 2, 1]));
    assert_eq!(served_status(&rein), 204);
    let fresh = [("If-Match", before.as_str())];
    let (status, _, _) = rein.api_raw("PUT", "/history/2/rollback", None, &fresh);
    assert_eq!(status, 200);
    assert_eq!(served_status(&rein), 200);
    // Rolling back to the running document changes nothing and records nothing.
    assert_eq!(rein.api("POST", "/history/4/rollback", None).0, 200);
    assert_eq!(ids(&rein), [4, 3, 2, 1]);
}

#[test]
fn refused_dry_run_and_unchanged_documents_are_not_recorded() {
    let rein = Rein::start();
    rein.configure(answering(200));
    let doc = answering(200).to_string();
    assert_eq!(rein.api("PUT", "/config", Some(&doc)).0, 200);
    assert_eq!(rein.api("PUT", "/config?dry_run", Some("{}")).0, 200);
    let bad = json!({"routes": [{"action": {"retrun": 1}}]}).to_string();
    assert_eq!(rein.api("PUT", "/config", Some(&bad)).0, 400);
    assert_eq!(ids(&rein), [2, 1]);
}

#[test]
fn the_last_n_are_kept_on_disk_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut rein = Rein::start_in(dir, &["--config", "EMPTY", "--history-size", "3"]);
    rein.wait_ready();
    for status in [200, 201, 202, 203] {
        rein.configure(answering(status));
    }
    assert_eq!(ids(&rein), [5, 4, 3]);
    let files = |rein: &Rein| {
        let mut names: Vec<String> = std::fs::read_dir(rein.state.join("history"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        files(&rein),
        ["0000000003.json", "0000000004.json", "0000000005.json"]
    );
    let (_, before) = rein.api("GET", "/history", None);

    rein.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(rein.wait_exit().0, Some(0));
    let dir = std::mem::replace(&mut rein.dir, tempfile::tempdir().unwrap());
    // Restored from the saved configuration: the same document, so no new entry.
    let again = Rein::start_in(dir, &["--history-size", "3"]);
    again.wait_ready();
    let (_, after) = again.api("GET", "/history", None);
    assert_eq!(after, before);
    let (_, third) = again.api("GET", "/history/3", None);
    assert_eq!(third["config"], answering(201));
    assert_eq!(served_status(&again), 203);
    again.configure(answering(299));
    assert_eq!(ids(&again), [6, 5, 4]);
    assert_eq!(
        files(&again),
        ["0000000004.json", "0000000005.json", "0000000006.json"]
    );
}

#[test]
fn a_rollback_to_a_document_naming_a_deleted_certificate_is_refused_and_changes_nothing() {
    let rein = Rein::start();
    let ca = Ca::new();
    let pem = ca.bundle(&["site.test"], Alg::Ecdsa);
    assert_eq!(rein.api("PUT", "/certificates/site", Some(&pem)).0, 200);
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes", "tls": {"certificate": "site"}}},
        "routes": [{"action": {"return": 200}}],
    }));
    rein.configure(answering(204));
    assert_eq!(rein.api("DELETE", "/certificates/site", None).0, 200);
    let before = (etag(&rein), ids(&rein));

    let (status, body) = rein.api("POST", "/history/2/rollback", None);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"], "Invalid configuration.");
    assert_eq!(
        body["errors"][0]["path"], "listeners/127.0.0.1:0/tls/certificate",
        "{body}"
    );
    assert_eq!((etag(&rein), ids(&rein)), before);
    assert_eq!(served_status(&rein), 204);
}

#[test]
fn a_refused_document_lists_every_error_with_its_path() {
    let rein = Rein::start();
    let bad = json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes"}, "nowhere": {"pass": "routes"}},
        "routes": [{"action": {"retrun": 200}}],
        "applications": {"a": {"type": "external"}},
    });
    let (status, body) = rein.api("PUT", "/config", Some(&bad.to_string()));
    assert_eq!(status, 400, "{body}");
    let paths: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "applications/a",
            "routes/0/action/retrun",
            "listeners/nowhere"
        ]
    );
    let first = &body["errors"][0];
    assert_eq!(
        body["detail"].as_str().unwrap(),
        format!(
            "{}: {}",
            first["path"].as_str().unwrap(),
            first["error"].as_str().unwrap()
        )
    );
    assert_eq!(ids(&rein), [1]);
}

#[test]
fn the_cli_lists_diffs_and_rolls_back() {
    let rein = Rein::start();
    rein.configure(answering(200));
    rein.configure(answering(204));
    let (code, out, err) = cli(&rein, &["config", "history"]);
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].contains("ID") && lines[0].contains("SOURCE"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("*  3") && lines[1].contains("api"),
        "{out}"
    );
    assert!(lines[3].contains("file"), "{out}");
    let (code, out, _) = cli(&rein, &["config", "history", "2"]);
    assert_eq!(code, Some(0));
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), answering(200));
    let (code, out, _) = cli(&rein, &["config", "diff", "2", "3"]);
    assert_eq!(
        (code, out.as_str()),
        (Some(0), "~ routes/0/action/return: 200 -> 204\n")
    );
    let (code, out, _) = cli(&rein, &["config", "diff", "3"]);
    assert_eq!((code, out.as_str()), (Some(0), "no differences\n"));
    let (code, out, _) = cli(&rein, &["config", "diff", "2", "--json"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["to"],
        "current"
    );
    let (code, _, err) = cli(&rein, &["config", "rollback", "2"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(served_status(&rein), 200);
    let (code, _, err) = cli(&rein, &["config", "rollback", "42"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("History entry 42 doesn't exist"), "{err}");
}

#[test]
fn a_sighup_reread_is_recorded_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conf.json");
    std::fs::write(&file, answering(200).to_string()).unwrap();
    let rein = Rein::start_in(dir, &["--config", file.to_str().unwrap()]);
    rein.wait_ready();
    std::fs::write(&file, answering(204).to_string()).unwrap();
    rein.signal(nix::sys::signal::Signal::SIGHUP);
    crate::harness::wait_for("the re-read recorded", || ids(&rein).len() == 2);
    let (_, list) = rein.api("GET", "/history", None);
    assert_eq!(
        (&list[0]["source"], &list[1]["source"]),
        (&json!("sighup"), &json!("file"))
    );
    assert_eq!(served_status(&rein), 204);
}
