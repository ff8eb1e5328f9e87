//! `rein status`: the running server at a glance, as `pm2 ls` shows it: a table of application instances
//! (pid, state, uptime, restarts, CPU and memory where `/status` has them, requests), then the listeners,
//! upstream servers, connections and requests. `--json` prints `/status` itself.
//!
//! The table is drawn from the JSON alone, reading each field where it is and showing `-` where it is not, so
//! that it keeps working as `/status` grows.

use std::fmt::Write as _;

use serde_json::Value;

use super::units::{bytes, duration};

/// The whole status as text.
pub(super) fn render(status: &Value) -> String {
    let mut out = String::new();
    let apps = object(status, "applications");
    if !apps.is_empty() {
        out.push_str(&applications(apps));
    }
    let listeners = object(status, "listeners");
    if !listeners.is_empty() {
        let rows = listeners
            .iter()
            .map(|(name, l)| vec![name.clone(), text(&l["address"])])
            .collect();
        section(&mut out, &table(&["LISTENER", "BOUND TO"], rows));
    }
    let servers = upstream_servers(status);
    if !servers.is_empty() {
        let head = [
            "UPSTREAM", "SERVER", "STATE", "ACTIVE", "IDLE", "REQUESTS", "FAILURES",
        ];
        section(&mut out, &table(&head, servers));
    }
    section(&mut out, &totals(status));
    out
}

/// `rein status --fleet`: one row per live node, and whether etcd answers.
pub(super) fn render_fleet(view: &Value) -> String {
    let fleet_revision = view["revision"].as_i64();
    let rows = object(view, "nodes")
        .iter()
        .map(|(name, node)| {
            let state = if fleet_revision.is_none() {
                "unknown"
            } else if node["applied"].as_bool() == Some(true) {
                "applied"
            } else if node["refused"].as_i64().is_some() {
                "refused"
            } else {
                "behind"
            };
            vec![
                name.clone(),
                text(&node["revision"]),
                text(&node["generation"]),
                state.to_owned(),
                text(&node["host"]),
                text(&node["error"]),
            ]
        })
        .collect();
    let head = ["NODE", "REVISION", "GENERATION", "STATE", "HOST", "ERROR"];
    let mut out = format!(
        "fleet {} (seen from {}): revision {}\n",
        text(&view["name"]),
        text(&view["node"]),
        fleet_revision.map_or_else(dash, |r| r.to_string()),
    );
    if view["etcd"]["connected"].as_bool() != Some(true) {
        let why = text(&view["etcd"]["error"]);
        let _ = writeln!(out, "etcd unreachable ({why}): this node's own report only");
    }
    section(&mut out, &table(&head, rows));
    out
}

fn section(out: &mut String, text: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(text);
}

/// One row per instance, then a line per application that has something to say (errored, last reload,
/// recent exits that were failures).
fn applications(apps: &serde_json::Map<String, Value>) -> String {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for (name, app) in apps {
        for i in app["instances"].as_array().into_iter().flatten() {
            rows.push(vec![
                name.clone(),
                text(&i["id"]),
                text(&i["pid"]),
                text(&i["state"]),
                text(&i["generation"]),
                i["uptime"].as_f64().map_or_else(dash, duration),
                text(&i["restarts"]),
                cpu(i),
                i["rss_bytes"].as_u64().map_or_else(dash, bytes),
                text(&i["requests"]),
            ]);
        }
        if app["instances"].as_array().is_none_or(Vec::is_empty) {
            rows.push(vec![name.clone(), dash(), dash(), text(&app["state"])]);
        }
        notes.extend(app_notes(name, app));
    }
    let head = [
        "APP", "ID", "PID", "STATE", "GEN", "UPTIME", "RESTARTS", "CPU", "MEMORY", "REQUESTS",
    ];
    let mut out = table(&head, rows);
    for note in notes {
        let _ = writeln!(out, "  {note}");
    }
    out
}

/// What a user should know about one application beyond its rows: an error, a reload that failed, and the
/// failures among its recent exits (an instance rein retired exited as asked: no failure, not shown).
fn app_notes(name: &str, app: &Value) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(errored) = app["errored"]
        .as_str()
        .or(app["errored"]["reason"].as_str())
    {
        notes.push(format!("{name}: errored: {errored}"));
    }
    let reload = &app["last_reload"];
    if reload["ok"] == false {
        notes.push(format!(
            "{name}: reload to generation {} failed: {}",
            text(&reload["generation"]),
            reload["reason"].as_str().unwrap_or("no reason given")
        ));
    }
    for exit in app["exited"].as_array().into_iter().flatten() {
        if exit["state"] == "errored" {
            notes.push(format!(
                "{name}: instance {} (pid {}) {} ago: {}",
                text(&exit["id"]),
                text(&exit["pid"]),
                exit["seconds_ago"].as_f64().map_or_else(dash, duration),
                exit["reason"].as_str().unwrap_or("no reason given")
            ));
        }
    }
    notes
}

/// CPU use where `/status` has it: a percentage, or seconds of CPU time.
fn cpu(instance: &Value) -> String {
    if let Some(p) = instance["cpu_percent"].as_f64() {
        return format!("{p:.1}%");
    }
    match instance["cpu_seconds"].as_f64() {
        Some(s) => format!("{s:.1}s"),
        None => dash(),
    }
}

fn upstream_servers(status: &Value) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for (name, upstream) in object(status, "upstreams") {
        for (addr, s) in object(upstream, "servers") {
            rows.push(vec![
                name.clone(),
                addr.clone(),
                text(&s["state"]),
                text(&s["active"]),
                text(&s["idle_connections"]),
                text(&s["requests"]),
                text(&s["failures"]),
            ]);
        }
    }
    rows
}

fn totals(status: &Value) -> String {
    let c = &status["connections"];
    format!(
        "connections: {} accepted, {} active, {} idle, {} closed, {} refused; requests: {}\n",
        text(&c["accepted"]),
        text(&c["active"]),
        text(&c["idle"]),
        text(&c["closed"]),
        text(&c["refused"]),
        text(&status["requests"]["total"])
    )
}

fn object<'a>(value: &'a Value, key: &str) -> &'a serde_json::Map<String, Value> {
    static EMPTY: std::sync::OnceLock<serde_json::Map<String, Value>> = std::sync::OnceLock::new();
    value[key]
        .as_object()
        .unwrap_or_else(|| EMPTY.get_or_init(serde_json::Map::new))
}

/// A scalar as a cell: strings without quotes, `-` for null or absent.
fn text(value: &Value) -> String {
    match value {
        Value::Null => dash(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

fn dash() -> String {
    "-".to_owned()
}

/// Left-aligned columns, two spaces apart; a short row leaves its last cells empty.
fn table(head: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let head: Vec<String> = head.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&head).chain(&rows) {
        let cells: Vec<String> = widths
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let cell = row.get(i).map_or("", String::as_str);
                format!("{cell:<w$}")
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn the_fleet_view_is_one_row_per_node_with_its_state() {
        let view = json!({
            "name": "web", "node": "a", "etcd": {"connected": true, "error": null}, "revision": 9,
            "nodes": {
                "a": {"revision": 9, "generation": 3, "applied": true, "refused": null, "error": null, "host": "h1"},
                "b": {"revision": 7, "generation": 2, "applied": false, "refused": 9,
                      "error": "cannot listen on *:80", "host": "h2"},
                "c": {"revision": 7, "generation": 2, "applied": false, "refused": null, "error": null, "host": "h3"}
            }
        });
        let text = super::render_fleet(&view);
        let row = |node: &str| {
            let line = text.lines().find(|l| l.starts_with(node)).unwrap();
            line.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert!(
            text.starts_with("fleet web (seen from a): revision 9"),
            "{text}"
        );
        assert_eq!(row("a ")[..4], ["a", "9", "3", "applied"]);
        assert_eq!(row("b ")[..4], ["b", "7", "2", "refused"]);
        assert!(text.contains("cannot listen on *:80"), "{text}");
        assert_eq!(row("c ")[3], "behind");
        assert!(!text.contains("unreachable"), "{text}");
    }

    #[test]
    fn without_etcd_the_fleet_view_says_so() {
        let view = json!({
            "name": "web", "node": "a", "etcd": {"connected": false, "error": "etcd did not answer in time"},
            "revision": null,
            "nodes": {"a": {"revision": 9, "generation": 3, "applied": false, "refused": null, "error": null}}
        });
        let text = super::render_fleet(&view);
        assert!(
            text.contains("etcd unreachable (etcd did not answer in time)"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.starts_with("a ") && l.contains("unknown")),
            "{text}"
        );
    }

    #[test]
    fn instances_listeners_and_upstreams_are_rows() {
        let status = json!({
            "connections": {"accepted": 3, "active": 1, "idle": 0, "closed": 2, "refused": 0},
            "requests": {"total": 7},
            "listeners": {"*:8080": {"address": "0.0.0.0:8080"}},
            "upstreams": {"backend": {"servers": {"127.0.0.1:9000": {
                "state": "up", "active": 0, "idle_connections": 1, "requests": 5, "failures": 0}}}},
            "applications": {"api": {
                "state": "running", "generation": 2,
                "instances": [{"id": 4, "pid": 1234, "state": "ready", "generation": 2, "uptime": 125.2,
                               "restarts": 1, "rss_bytes": 21_300_000, "requests": 9}],
                "exited": [
                    {"id": 1, "pid": 1000, "state": "stopped", "reason": "killed by signal 15", "seconds_ago": 3.0},
                    {"id": 2, "pid": 1001, "state": "errored", "reason": "exited with code 1; Error: boom", "seconds_ago": 9.0}
                ],
                "last_reload": {"ok": true, "generation": 2}
            }}
        });
        let text = super::render(&status);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("APP  ID  PID   STATE  GEN  UPTIME  RESTARTS"),
            "{text}"
        );
        assert!(
            lines[1].starts_with("api  4   1234  ready  2    2m 5s   1         -    21.3 MB  9"),
            "{text}"
        );
        assert!(
            text.contains("api: instance 2 (pid 1001) 9s ago: exited with code 1; Error: boom"),
            "{text}"
        );
        assert!(
            !text.contains("signal 15"),
            "a retired instance is no failure: {text}"
        );
        assert!(text.contains("*:8080    0.0.0.0:8080"), "{text}");
        assert!(text.contains("backend   127.0.0.1:9000  up"), "{text}");
        assert!(
            text.contains(
                "connections: 3 accepted, 1 active, 0 idle, 2 closed, 0 refused; requests: 7"
            ),
            "{text}"
        );
    }
}
