//! Configuration history: the last N documents the engine applied, each with when, from where and its ETag.
//!
//! [`History`] is a ring the engine records into after each applied change (never a dry run, a refused change
//! or an unchanged document), mirrored to `STATE/history/` by [`store`] so that it survives a restart. The
//! control API lists, reads and diffs its entries ([`diff`]) and rolls back to one through the engine's
//! ordinary change path.

pub(crate) mod diff;
mod store;

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use store::Store;
pub(crate) use store::StoreError;

/// How many documents are kept when `rein run --history-size` is not given.
pub const DEFAULT_SIZE: u16 = 20;

/// Where an applied document came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Source {
    /// A change through the control API.
    #[default]
    Api,
    /// `--config` re-read on SIGHUP.
    Sighup,
    /// `--config` read at start.
    File,
    /// The saved configuration or the embedded default, at start.
    Startup,
    /// A rollback to the history entry with this id.
    Rollback(u64),
    /// The fleet's document, from etcd.
    Fleet,
}

impl Source {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Source::Api => "api",
            Source::Sighup => "sighup",
            Source::File => "file",
            Source::Startup => "startup",
            Source::Rollback(_) => "rollback",
            Source::Fleet => "fleet",
        }
    }

    fn parse(name: &str, rollback_of: Option<u64>) -> Option<Source> {
        Some(match (name, rollback_of) {
            ("api", _) => Source::Api,
            ("sighup", _) => Source::Sighup,
            ("file", _) => Source::File,
            ("startup", _) => Source::Startup,
            ("rollback", Some(id)) => Source::Rollback(id),
            ("fleet", _) => Source::Fleet,
            _ => return None,
        })
    }
}

/// One applied document.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    /// Increases by one with each entry, across restarts.
    pub id: u64,
    /// Seconds since the Unix epoch.
    pub time: u64,
    pub source: Source,
    pub etag: String,
    pub doc: Arc<Value>,
}

impl Entry {
    /// What `GET /history` lists of the entry: everything but the document.
    pub(crate) fn summary(&self) -> Value {
        let mut v = json!({
            "id": self.id,
            "time": rfc3339(self.time),
            "source": self.source.name(),
            "etag": self.etag,
        });
        if let Source::Rollback(of) = self.source {
            v["rollback_of"] = json!(of);
        }
        v
    }

    /// The entry with its document, as `GET /history/ID` answers and as it is saved.
    pub(crate) fn to_json(&self) -> Value {
        let mut v = self.summary();
        v["config"] = (*self.doc).clone();
        v
    }

    fn from_json(v: &Value) -> Option<Entry> {
        let rollback_of = v.get("rollback_of").and_then(Value::as_u64);
        Some(Entry {
            id: v.get("id")?.as_u64()?,
            time: parse_rfc3339(v.get("time")?.as_str()?)?,
            source: Source::parse(v.get("source")?.as_str()?, rollback_of)?,
            etag: v.get("etag")?.as_str()?.to_owned(),
            doc: Arc::new(v.get("config")?.clone()),
        })
    }
}

/// The ring of the last `size` applied documents, oldest first, and its folder when there is a state directory.
pub(crate) struct History {
    entries: VecDeque<Arc<Entry>>,
    size: usize,
    next_id: u64,
    store: Option<Store>,
}

impl History {
    /// A history kept in memory only (no state directory).
    pub(crate) fn in_memory(size: usize) -> History {
        History {
            entries: VecDeque::new(),
            size,
            next_id: 1,
            store: None,
        }
    }

    /// The history saved under `state_dir`, pruned to `size` entries (on disk too). Entries that cannot be read
    /// are logged and left out: a damaged entry must not stop rein from starting.
    pub(crate) fn load(state_dir: &Path, size: usize) -> Result<History, StoreError> {
        let store = Store::open(state_dir)?;
        let mut entries: Vec<Entry> = store.load()?;
        entries.sort_by_key(|e| e.id);
        let next_id = entries.last().map_or(1, |e| e.id + 1);
        let mut history = History {
            entries: entries.into_iter().map(Arc::new).collect(),
            size,
            next_id,
            store: Some(store),
        };
        history.prune();
        Ok(history)
    }

    /// Records an applied document, unless it is the newest entry already (a restart restoring the saved
    /// configuration). A failure to save the entry is logged: the change it records is already live.
    pub(crate) fn record(&mut self, doc: &Value, etag: &str, source: Source) {
        if self.size == 0 || self.entries.back().is_some_and(|e| e.etag == etag) {
            return;
        }
        let entry = Entry {
            id: self.next_id,
            time: now(),
            source,
            etag: etag.to_owned(),
            doc: Arc::new(doc.clone()),
        };
        self.next_id += 1;
        if let Some(store) = &self.store
            && let Err(e) = store.save(&entry)
        {
            tracing::warn!(error = %e, id = entry.id, "cannot save the configuration history entry");
        }
        self.entries.push_back(Arc::new(entry));
        self.prune();
    }

    /// Drops the oldest entries beyond `size`, in memory and on disk.
    fn prune(&mut self) {
        while self.entries.len() > self.size {
            let Some(old) = self.entries.pop_front() else {
                break;
            };
            if let Some(store) = &self.store
                && let Err(e) = store.remove(old.id)
            {
                tracing::warn!(error = %e, id = old.id, "cannot remove an old configuration history entry");
            }
        }
    }

    /// Every entry, oldest first.
    pub(crate) fn entries(&self) -> impl DoubleEndedIterator<Item = &Arc<Entry>> {
        self.entries.iter()
    }

    pub(crate) fn get(&self, id: u64) -> Option<Arc<Entry>> {
        self.entries.iter().find(|e| e.id == id).cloned()
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// `2026-11-22T06:10:28Z`.
fn rfc3339(unix: u64) -> String {
    let (days, secs) = (unix / 86_400, unix % 86_400);
    let (y, m, d) = crate::vars::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The inverse of [`rfc3339`], for the entries read back from disk.
fn parse_rfc3339(text: &str) -> Option<u64> {
    let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<u64>().ok();
    let shape = text.len() == 20
        && text.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            10 => b == b'T',
            13 | 16 => b == b':',
            19 => b == b'Z',
            _ => b.is_ascii_digit(),
        });
    if !shape {
        return None;
    }
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let days = days_from_civil(y, m, d)?;
    Some(days * 86_400 + num(11..13)? * 3600 + num(14..16)? * 60 + num(17..19)?)
}

/// Howard Hinnant's `days_from_civil`, for dates from 1970 on.
fn days_from_civil(y: u64, m: u64, d: u64) -> Option<u64> {
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || y < 1970 {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y % 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).checked_sub(719_468)
}

#[cfg(test)]
mod tests;
