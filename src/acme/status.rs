//! What `/status` shows of each ACME bundle: `status.certificates.NAME`, written by the ACME task and read by
//! the control API.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::stats::snapshot::CertificateStatus;

/// Where a bundle stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not issued yet (a placeholder is served), or being issued.
    Pending,
    /// Issued and current.
    Valid,
    /// The last attempt failed; the bundle there (issued or placeholder) keeps serving.
    Failed,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Valid => "valid",
            State::Failed => "failed",
        }
    }
}

/// One bundle's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub state: State,
    pub names: Vec<String>,
    /// The served certificate's expiry, when one was issued.
    pub expires: Option<i64>,
    /// When the next attempt (issuance, renewal or retry) is due.
    pub next_renewal: Option<i64>,
    pub last_error: Option<String>,
    /// When the CA last issued this bundle to this process.
    pub last_issued: Option<i64>,
}

impl Entry {
    fn status(&self) -> CertificateStatus {
        let date = |t: &Option<i64>| t.map(crate::tls::date);
        CertificateStatus {
            managed: "acme",
            state: self.state.as_str(),
            names: self.names.clone(),
            expires: date(&self.expires),
            next_renewal: date(&self.next_renewal),
            last_issued: date(&self.last_issued),
            last_error: self.last_error.clone(),
        }
    }
}

/// Every ACME bundle's entry, by name.
#[derive(Debug, Default)]
pub struct Board {
    entries: Mutex<BTreeMap<String, Entry>>,
}

impl Board {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        // Entries are replaced whole, so one left by a panicking writer is still consistent.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn set(&self, name: &str, entry: Entry) {
        self.lock().insert(name.to_owned(), entry);
    }

    /// Forgets the bundles no longer managed.
    pub(super) fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.lock().retain(|name, _| keep(name));
    }

    pub(crate) fn status(&self) -> BTreeMap<String, CertificateStatus> {
        self.lock()
            .iter()
            .map(|(name, e)| (name.clone(), e.status()))
            .collect()
    }
}
