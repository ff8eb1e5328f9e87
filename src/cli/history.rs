//! `rein config history`, `rein config diff`, `rein config rollback`: the control API's `/history`, printed
//! for a person (a table, a list of changed paths) or, with `--json`, as the API answers.

use std::process::ExitCode;

use clap::Args;
use http::Method;
use serde_json::Value;

use super::client::{self, Target};
use super::{ControlArgs, exit};

#[derive(Args, Debug)]
pub(super) struct HistoryArgs {
    /// Print this entry's document (with --json: the entry, with its time, source and ETag)
    id: Option<u64>,
    /// Print the API's JSON answer
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    control: ControlArgs,
}

#[derive(Args, Debug)]
pub(super) struct DiffArgs {
    /// The history entry to compare from
    from: u64,
    /// The history entry to compare to [default: the running configuration]
    to: Option<u64>,
    /// Print the API's JSON answer
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    control: ControlArgs,
}

#[derive(Args, Debug)]
pub(super) struct RollbackArgs {
    /// The history entry whose document becomes the running configuration
    id: u64,
    /// Only validate; change nothing
    #[arg(long)]
    dry_run: bool,
    /// Refuse the rollback if the configuration's ETag is no longer this one
    #[arg(long)]
    if_match: Option<String>,
    #[command(flatten)]
    control: ControlArgs,
}

pub(super) fn history(args: HistoryArgs) -> ExitCode {
    let target = args.control.client();
    let Some(id) = args.id else {
        return show(&target, "/history", args.json, table);
    };
    if args.json {
        return client::show(&target, &format!("/history/{id}"));
    }
    show(&target, &format!("/history/{id}"), false, |entry| {
        let doc = entry.get("config").cloned().unwrap_or(Value::Null);
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        text
    })
}

pub(super) fn diff(args: DiffArgs) -> ExitCode {
    let path = match args.to {
        Some(to) => format!("/history/{}/diff/{to}", args.from),
        None => format!("/history/{}/diff", args.from),
    };
    show(&args.control.client(), &path, args.json, changes)
}

pub(super) fn rollback(args: RollbackArgs) -> ExitCode {
    let mut path = format!("/history/{}/rollback", args.id);
    if args.dry_run {
        path.push_str("?dry_run");
    }
    client::send(
        &args.control.client(),
        Method::POST,
        &path,
        None,
        args.if_match.as_deref(),
    )
}

/// GETs `path` and prints it raw (`json`) or through `render`; an error answer is one line on stderr.
fn show(target: &Target, path: &str, json: bool, render: fn(&Value) -> String) -> ExitCode {
    if json {
        return client::show(target, path);
    }
    match client::fetch(target, Method::GET, path, None, None) {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(v) => {
                print!("{}", render(&v));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("rein: the answer to {path} is not JSON: {e}");
                ExitCode::from(exit::FAILED)
            }
        },
        Err(failure) => failure.report(),
    }
}

/// `GET /history` as a table, newest first; `*` marks the running configuration.
fn table(entries: &Value) -> String {
    let rows: Vec<[String; 5]> = entries
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|e| {
            let text = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            let mut source = text("source");
            if let Some(of) = e.get("rollback_of").and_then(Value::as_u64) {
                source = format!("rollback to {of}");
            }
            let current = e.get("current").and_then(Value::as_bool) == Some(true);
            [
                if current { "*" } else { "" }.to_owned(),
                e.get("id").map(Value::to_string).unwrap_or_default(),
                text("time"),
                source,
                text("etag"),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "no configuration history (rein run --history-size 0?)\n".to_owned();
    }
    let head = ["", "ID", "TIME", "SOURCE", "ETAG"].map(str::to_owned);
    let mut widths = [0; 5];
    for row in std::iter::once(&head).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&head).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// A diff as lines: `- PATH: VALUE` removed, `+ PATH: VALUE` added, `~ PATH: FROM -> TO` changed.
fn changes(diff: &Value) -> String {
    let list = |k: &str| {
        diff.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let path = |c: &Value| {
        let p = c.get("path").and_then(Value::as_str).unwrap_or("");
        if p.is_empty() {
            "(root)".to_owned()
        } else {
            p.to_owned()
        }
    };
    let value = |c: &Value, k: &str| c.get(k).map(Value::to_string).unwrap_or_default();
    let mut out = String::new();
    for c in list("removed") {
        out.push_str(&format!("- {}: {}\n", path(&c), value(&c, "value")));
    }
    for c in list("added") {
        out.push_str(&format!("+ {}: {}\n", path(&c), value(&c, "value")));
    }
    for c in list("changed") {
        let (from, to) = (value(&c, "from"), value(&c, "to"));
        out.push_str(&format!("~ {}: {from} -> {to}\n", path(&c)));
    }
    if out.is_empty() {
        out.push_str("no differences\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_history_table_marks_the_running_entry() {
        let entries = json!([
            {"id": 12, "time": "2026-01-02T03:04:05Z", "source": "rollback", "rollback_of": 3, "etag": "\"b\"", "current": true},
            {"id": 3, "time": "2026-01-01T00:00:00Z", "source": "api", "etag": "\"a\"", "current": false},
        ]);
        assert_eq!(
            super::table(&entries),
            "   ID  TIME                  SOURCE         ETAG\n\
             *  12  2026-01-02T03:04:05Z  rollback to 3  \"b\"\n   \
             3   2026-01-01T00:00:00Z  api            \"a\"\n"
        );
    }

    #[test]
    fn a_diff_is_one_line_per_path() {
        let diff = json!({
            "from": 1, "to": 2,
            "added": [{"path": "access_log", "value": "/tmp/a.log"}],
            "removed": [{"path": "routes/1", "value": {"action": {"return": 404}}}],
            "changed": [{"path": "routes/0/action/return", "from": 200, "to": 204}],
        });
        assert_eq!(
            super::changes(&diff),
            "- routes/1: {\"action\":{\"return\":404}}\n\
             + access_log: \"/tmp/a.log\"\n\
             ~ routes/0/action/return: 200 -> 204\n"
        );
        assert_eq!(
            super::changes(&json!({"added": [], "removed": [], "changed": []})),
            "no differences\n"
        );
    }
}
