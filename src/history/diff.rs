//! The difference between two documents, path by path: what was added, removed and changed.
//!
//! Objects are compared member by member and arrays element by element (by index), down to the first values
//! that differ; each path is written as the control API takes it (`listeners/*:8080/pass`, with `%` and `/`
//! in a key percent-encoded), so `rein config get PATH` reads the value on either side.

use serde_json::{Value, json};

/// One difference.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Change {
    Added {
        path: String,
        value: Value,
    },
    Removed {
        path: String,
        value: Value,
    },
    Changed {
        path: String,
        from: Value,
        to: Value,
    },
}

/// Every difference from `from` to `to`, in document order.
pub(crate) fn diff(from: &Value, to: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk(from, to, &mut String::new(), &mut out);
    out
}

fn walk(from: &Value, to: &Value, path: &mut String, out: &mut Vec<Change>) {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, va) in a {
                with_segment(path, &encode(key), |path| match b.get(key) {
                    Some(vb) => walk(va, vb, path, out),
                    None => out.push(Change::Removed {
                        path: path.clone(),
                        value: va.clone(),
                    }),
                });
            }
            for (key, vb) in b.iter().filter(|(k, _)| !a.contains_key(*k)) {
                with_segment(path, &encode(key), |path| {
                    out.push(Change::Added {
                        path: path.clone(),
                        value: vb.clone(),
                    })
                });
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for i in 0..a.len().max(b.len()) {
                with_segment(path, &i.to_string(), |path| match (a.get(i), b.get(i)) {
                    (Some(va), Some(vb)) => walk(va, vb, path, out),
                    (Some(va), None) => out.push(Change::Removed {
                        path: path.clone(),
                        value: va.clone(),
                    }),
                    (None, Some(vb)) => out.push(Change::Added {
                        path: path.clone(),
                        value: vb.clone(),
                    }),
                    (None, None) => {}
                });
            }
        }
        _ if from != to => out.push(Change::Changed {
            path: path.clone(),
            from: from.clone(),
            to: to.clone(),
        }),
        _ => {}
    }
}

/// Runs `f` with `segment` appended to `path`, then takes it off again.
fn with_segment(path: &mut String, segment: &str, f: impl FnOnce(&mut String)) {
    let len = path.len();
    if !path.is_empty() {
        path.push('/');
    }
    path.push_str(segment);
    f(path);
    path.truncate(len);
}

/// A key as one API path segment: `%` and `/` percent-encoded, everything else as it is.
fn encode(key: &str) -> String {
    key.replace('%', "%25").replace('/', "%2F")
}

/// `{"added": [...], "removed": [...], "changed": [...]}`, as the control API answers a diff.
pub(crate) fn to_json(changes: &[Change]) -> Value {
    let (mut added, mut removed, mut changed) = (Vec::new(), Vec::new(), Vec::new());
    for c in changes {
        match c {
            Change::Added { path, value } => added.push(json!({"path": path, "value": value})),
            Change::Removed { path, value } => removed.push(json!({"path": path, "value": value})),
            Change::Changed { path, from, to } => {
                changed.push(json!({"path": path, "from": from, "to": to}))
            }
        }
    }
    json!({"added": added, "removed": removed, "changed": changed})
}
