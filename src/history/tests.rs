use serde_json::json;

use super::diff::{Change, diff};
use super::*;

#[test]
fn times_are_written_and_read_back_as_rfc3339() {
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(1_795_328_428), "2026-11-22T06:20:28Z");
    for t in [0, 59, 951_782_400, 1_795_328_428, 4_102_444_799] {
        assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t), "{t}");
    }
    assert_eq!(parse_rfc3339("2026-13-01T00:00:00Z"), None);
    assert_eq!(parse_rfc3339("2026-11-22 06:20:28Z"), None);
    assert_eq!(parse_rfc3339("2026-11-22T06:20:28"), None);
}

#[test]
fn a_ring_keeps_the_last_entries_and_skips_a_repeat_of_the_newest() {
    let mut h = History::in_memory(2);
    for (n, source) in [(1, Source::Startup), (2, Source::Api), (3, Source::Sighup)] {
        h.record(&json!({"n": n}), &format!("\"{n}\""), source);
    }
    h.record(&json!({"n": 3}), "\"3\"", Source::Api);
    let ids: Vec<u64> = h.entries().map(|e| e.id).collect();
    assert_eq!(ids, [2, 3]);
    assert_eq!(h.get(3).unwrap().source, Source::Sighup);
    assert!(h.get(1).is_none());
}

#[test]
fn a_size_of_zero_keeps_nothing() {
    let mut h = History::in_memory(0);
    h.record(&json!({}), "\"x\"", Source::Api);
    assert_eq!(h.entries().count(), 0);
}

#[test]
fn entries_survive_a_reload_from_disk_and_are_pruned_there_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::load(dir.path(), 3).unwrap();
    for n in 1..=4 {
        let source = if n == 4 {
            Source::Rollback(2)
        } else {
            Source::Api
        };
        h.record(&json!({"n": n}), &format!("\"{n}\""), source);
    }
    let files = |d: &Path| {
        let mut names: Vec<String> = fs_names(&d.join("history"));
        names.sort();
        names
    };
    assert_eq!(
        files(dir.path()),
        ["0000000002.json", "0000000003.json", "0000000004.json"]
    );
    let again = History::load(dir.path(), 2).unwrap();
    let loaded: Vec<_> = again.entries().map(|e| (**e).clone()).collect();
    assert_eq!(loaded.len(), 2);
    assert_eq!(loaded[1], *h.get(4).unwrap());
    assert_eq!(loaded[1].source, Source::Rollback(2));
    assert_eq!(files(dir.path()), ["0000000003.json", "0000000004.json"]);
    let mut again = again;
    again.record(&json!({"n": 5}), "\"5\"", Source::Api);
    assert_eq!(again.entries().last().unwrap().id, 5);
}

#[test]
fn a_damaged_entry_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::load(dir.path(), 5).unwrap();
    h.record(&json!({}), "\"a\"", Source::File);
    std::fs::write(dir.path().join("history/0000000007.json"), "{").unwrap();
    let again = History::load(dir.path(), 5).unwrap();
    assert_eq!(again.entries().map(|e| e.id).collect::<Vec<_>>(), [1]);
}

fn fs_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

#[test]
fn a_diff_lists_added_removed_and_changed_paths() {
    let a = json!({
        "listeners": {"*:80": {"pass": "routes"}, "unix:/a.sock": {"pass": "routes"}},
        "routes": [{"action": {"return": 200}}, {"action": {"return": 404}}],
        "settings": {"http": {"idle_timeout": 30}},
    });
    let b = json!({
        "listeners": {"*:80": {"pass": "routes/main"}},
        "routes": [{"action": {"return": 204}}],
        "settings": {"http": {"idle_timeout": 30}},
        "access_log": "/tmp/a%.log",
    });
    assert_eq!(
        diff(&a, &b),
        [
            Change::Changed {
                path: "listeners/*:80/pass".into(),
                from: json!("routes"),
                to: json!("routes/main")
            },
            Change::Removed {
                path: "listeners/unix:%2Fa.sock".into(),
                value: json!({"pass": "routes"})
            },
            Change::Changed {
                path: "routes/0/action/return".into(),
                from: json!(200),
                to: json!(204)
            },
            Change::Removed {
                path: "routes/1".into(),
                value: json!({"action": {"return": 404}})
            },
            Change::Added {
                path: "access_log".into(),
                value: json!("/tmp/a%.log")
            },
        ]
    );
    assert!(diff(&a, &a).is_empty());
    assert_eq!(
        diff(&json!(1), &json!({})),
        [Change::Changed {
            path: String::new(),
            from: json!(1),
            to: json!({})
        }]
    );
}
