//! The configuration lifecycle: one document, changed only whole and only when valid.
//!
//! Every change (API edit, SIGHUP re-read, start-up) goes through [`Engine::change`]: edit a copy, compile it,
//! write it beside the saved file, make it live, then rename it into place. A failure at any step leaves the
//! running configuration, the served snapshot and the saved file as they were. Changes are serialised by one
//! lock, so each sees the result of the last. Each applied change is recorded in the [`History`] under the same
//! lock, with where it came from ([`Source`]).
//!
//! The document is kept by a [`Store`]: the state directory, and in a fleet etcd too, whose watch hands each
//! new fleet document to the same path ([`Engine::adopt`]).

mod certificates;
mod fleet;
mod store;

pub use store::Store;

use serde_json::Value;
use tokio::sync::Mutex;

use crate::compile::{compile_all, compile_with};
use crate::config::pointer::EditError;
use crate::config::{ConfigError, ConfigErrors};
use crate::history::{Entry, History, Source};
use crate::server::Server;
use crate::state::StateError;
use crate::tls::{BundleError, CertDir, Certificates};

/// Why a change was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error(transparent)]
    Edit(#[from] EditError),
    #[error("Invalid configuration: {0}")]
    Invalid(ConfigErrors),
    #[error("Failed to apply new configuration: {0}")]
    Apply(ConfigError),
    #[error(transparent)]
    Save(#[from] StateError),
    #[error("the configuration changed since it was read (ETag {current})")]
    Stale { current: String },
    /// In a fleet whose etcd cannot be reached: the change would apply to this node alone.
    #[error("{0}")]
    Unreachable(String),
    /// The fleet took the change, at this revision, but this node could not apply it; it serves its previous
    /// configuration, and says why in its report.
    #[error(
        "the fleet took the change (revision {revision}) but this node could not apply it: {source}"
    )]
    NotApplied { revision: i64, source: ConfigError },
}

/// What a successful change did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// Live and saved. With [`ChangeOptions::wait_for_apps`], the changed applications whose new instances
    /// do not serve, by name, with what happened (the previous instances keep serving them).
    Applied {
        not_ready: std::collections::BTreeMap<String, String>,
        /// In a fleet, the fleet's revision of the document.
        revision: Option<i64>,
    },
    /// The new document equals the running one: nothing was done.
    Unchanged,
    /// A dry run: the document is valid, and was not applied.
    Valid,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct ChangeOptions<'a> {
    /// The ETag the client last read; the change is refused if the document moved on since.
    pub if_match: Option<&'a str>,
    pub dry_run: bool,
    /// The first configuration of this process: applications are not refused for a missing executable.
    pub startup: bool,
    /// Answer only once the changed applications' new instances serve (or their reload failed, or their
    /// readiness timeout passed): what a change asked through the API promises, as Unit's does.
    pub wait_for_apps: bool,
    /// The document is the fleet's at this revision, as its watch delivered it: applied, never published.
    pub adopt: Option<i64>,
}

impl<'a> ChangeOptions<'a> {
    /// A change asked for through the API: its precondition and dry run, answered once changed
    /// applications serve.
    pub fn asked(if_match: Option<&'a str>, dry_run: bool) -> Self {
        ChangeOptions {
            if_match,
            dry_run,
            startup: false,
            wait_for_apps: true,
            adopt: None,
        }
    }
}

/// What rein starts with: the first document, where it came from, and how many applied documents to keep.
pub struct Initial {
    pub doc: Value,
    pub source: Source,
    pub history_size: usize,
    /// In a fleet, the fleet's revision of `doc`, when it is the fleet's.
    pub revision: Option<i64>,
}

/// Why a certificate change was refused; nothing changed. The texts are Unit's.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("Invalid certificate name.")]
    InvalidName,
    #[error("Certificate bundle is too large.")]
    TooLarge,
    #[error("Invalid certificate.")]
    Invalid(#[source] BundleError),
    #[error("Certificate already exists.")]
    Exists,
    #[error("Certificate doesn't exist.")]
    NotFound,
    #[error("Certificate is used in the configuration.")]
    InUse,
    #[error("Failed to store the certificate.")]
    Save(#[source] std::io::Error),
    #[error("Failed to apply the certificate.")]
    Apply(#[source] ConfigError),
    /// In a fleet whose etcd cannot be reached: the change would apply to this node alone.
    #[error("The fleet's etcd is unreachable; nothing changed.")]
    Unreachable(String),
}

struct Current {
    doc: Value,
    etag: String,
    generation: u64,
    /// When the document was last applied, in seconds since the epoch.
    changed_at: Option<f64>,
    certs: Certificates,
    history: History,
    /// In a fleet, the fleet's revision of `doc`.
    revision: Option<i64>,
    /// The fleet's newer document that this node could not apply.
    desired: Option<Desired>,
}

/// A fleet document this node refused: what the API reads and edits on this node, so that a change through
/// it builds on the fleet's document, not on the older one it still serves.
struct Desired {
    doc: Value,
    etag: String,
    revision: i64,
    error: String,
}

impl Current {
    /// What a change builds on and `If-Match` is checked against: the fleet's newer document if this node
    /// refused it, else the served one. With its ETag and fleet revision.
    fn base(&self) -> (&Value, &str, Option<i64>) {
        match &self.desired {
            Some(d) => (&d.doc, &d.etag, Some(d.revision)),
            None => (&self.doc, &self.etag, self.revision),
        }
    }
}

pub struct Engine {
    current: Mutex<Current>,
    server: Server,
    store: Store,
    cert_dir: Option<CertDir>,
}

impl Engine {
    /// Starts serving `doc`; a document that does not compile or apply is an error and nothing runs.
    pub async fn start(
        server: Server,
        store: Store,
        initial: Initial,
    ) -> Result<Engine, ChangeError> {
        let state = store.state();
        let cert_dir = state.map(|s| CertDir::new(s.path()));
        let certs = match &cert_dir {
            Some(dir) => dir.load().unwrap_or_else(|e| {
                tracing::error!(error = %e, "cannot read the saved certificates");
                Certificates::default()
            }),
            None => Certificates::default(),
        };
        let history = match state {
            Some(dir) => History::load(dir.path(), initial.history_size).unwrap_or_else(|e| {
                tracing::error!(error = %e, "cannot read the configuration history; keeping it in memory only");
                History::in_memory(initial.history_size)
            }),
            None => History::in_memory(initial.history_size),
        };
        let engine = Engine {
            current: Mutex::new(Current {
                etag: etag(&Value::Object(Default::default())),
                doc: Value::Object(Default::default()),
                generation: 0,
                changed_at: None,
                certs,
                history,
                revision: initial.revision,
                desired: None,
            }),
            server,
            store,
            cert_dir,
        };
        let opts = ChangeOptions {
            startup: true,
            ..ChangeOptions::default()
        };
        engine.replace(initial.source, initial.doc, opts).await?;
        Ok(engine)
    }

    pub fn server(&self) -> &Server {
        &self.server
    }

    /// Reads the document under the lock; returns what `f` made of it and the document's ETag. In a fleet
    /// whose newer document this node refused, that document: the one changes build on.
    pub async fn read<R>(&self, f: impl FnOnce(&Value) -> R) -> (R, String) {
        let current = self.current.lock().await;
        let (doc, etag, _) = current.base();
        (f(doc), etag.to_owned())
    }

    /// The generation, and when the document was last applied (seconds since the epoch).
    pub(crate) async fn generation_and_change(&self) -> (u64, Option<f64>) {
        let current = self.current.lock().await;
        (current.generation, current.changed_at)
    }

    /// The recorded history, oldest first: the newest entry is the running document.
    pub(crate) async fn history(&self) -> Vec<std::sync::Arc<Entry>> {
        self.current
            .lock()
            .await
            .history
            .entries()
            .cloned()
            .collect()
    }

    /// One history entry, if it is still kept.
    pub(crate) async fn history_entry(&self, id: u64) -> Option<std::sync::Arc<Entry>> {
        self.current.lock().await.history.get(id)
    }

    /// Edits a copy of the document with `edit` and, if it is valid and different, makes it live and saves it;
    /// the history records it as a change through the API.
    pub async fn change(
        &self,
        edit: impl Fn(&mut Value) -> Result<(), EditError>,
        opts: ChangeOptions<'_>,
    ) -> Result<Changed, ChangeError> {
        self.change_from(Source::Api, edit, opts).await
    }

    /// Makes `doc` the whole document, from `source`.
    pub async fn replace(
        &self,
        source: Source,
        doc: Value,
        opts: ChangeOptions<'_>,
    ) -> Result<Changed, ChangeError> {
        let edit = |d: &mut Value| {
            d.clone_from(&doc);
            Ok(())
        };
        self.change_from(source, edit, opts).await
    }

    /// [`Engine::change`] from `source`, as the history records it.
    ///
    /// In a fleet, a change without `If-Match` that loses the compare-and-swap (another node wrote since this
    /// one last heard) is made again on the fleet's newest document, as a change to a single server is made on
    /// whatever document it has: only `If-Match` asks for a 412.
    pub async fn change_from(
        &self,
        source: Source,
        edit: impl Fn(&mut Value) -> Result<(), EditError>,
        opts: ChangeOptions<'_>,
    ) -> Result<Changed, ChangeError> {
        let mut attempts = 0;
        loop {
            let result = self.change_once(source, &edit, opts).await;
            let retry = matches!(result, Err(ChangeError::Stale { .. }))
                && opts.if_match.is_none()
                && opts.adopt.is_none()
                && attempts < MAX_REBASES;
            if !retry {
                return result;
            }
            attempts += 1;
            // Boxed: catching up applies a document through this very path.
            Box::pin(self.catch_up()).await;
        }
    }

    async fn change_once(
        &self,
        source: Source,
        edit: &impl Fn(&mut Value) -> Result<(), EditError>,
        opts: ChangeOptions<'_>,
    ) -> Result<Changed, ChangeError> {
        let mut current = self.current.lock().await;
        let (base, base_etag, base_revision) = current.base();
        if let Some(tag) = opts.if_match
            && !etag_matches(tag, base_etag)
        {
            return Err(ChangeError::Stale {
                current: base_etag.to_owned(),
            });
        }
        let mut doc = base.clone();
        edit(&mut doc)?;
        let snapshot = match compile_all(&doc, &current.certs) {
            Ok(s) => s,
            Err(e) => {
                if let Some(revision) = opts.adopt {
                    self.refuse(&mut current, doc, revision, e.to_string());
                }
                return Err(ChangeError::Invalid(e));
            }
        };
        if opts.dry_run {
            return Ok(Changed::Valid);
        }
        if doc == *base && current.generation > 0 && opts.adopt.is_none() {
            return Ok(Changed::Unchanged);
        }
        // Everything that can refuse the change comes first (a full disk, a concurrent writer in the fleet),
        // while the old listeners, connections and applications are untouched.
        let publish = opts.adopt.is_none() && !opts.startup;
        let base_revision = opts.adopt.or(base_revision);
        let prepared = self
            .store
            .prepare(&doc, base_revision, publish, opts.startup)
            .await?;
        let revision = prepared.revision;
        // A fleet document equal to the served one (a change undoing one this node refused) needs no apply.
        let reloads = if doc == current.doc && current.generation > 0 {
            None
        } else {
            match self.server.apply(snapshot, !opts.startup).await {
                Ok(reloads) => Some(reloads),
                Err(e) => return Err(self.not_applied(&mut current, doc, revision, e)),
            }
        };
        // Only the rename is left, which fails only if the state directory was changed under rein; then the
        // previous configuration is put back, as the saved file still holds it.
        if let Err(e) = prepared.commit() {
            self.roll_back(&current.doc, &current.certs).await;
            return Err(e.into());
        }
        self.record(&mut current, doc, revision, source);
        // The lock is let go first: reading the configuration does not wait for the applications.
        drop(current);
        let not_ready = match reloads {
            Some(reloads) if opts.wait_for_apps => reloads.wait().await,
            _ => Default::default(),
        };
        Ok(Changed::Applied {
            not_ready,
            revision,
        })
    }

    /// Makes `doc` the running document in the books: ETag, history, generation, report.
    fn record(&self, current: &mut Current, doc: Value, revision: Option<i64>, source: Source) {
        let changed = doc != current.doc || current.generation == 0;
        current.etag = etag(&doc);
        if changed {
            let tag = current.etag.clone();
            current.history.record(&doc, &tag, source);
            current.doc = doc;
            current.generation += 1;
            current.changed_at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs_f64());
            tracing::info!(generation = current.generation, "configuration applied");
            self.server.shared().acme.changed();
        }
        current.revision = revision;
        current.desired = None;
        self.report(current);
    }

    /// A change that failed to apply: outside a fleet, or before the fleet took it, nothing changed; once the
    /// fleet has it, this node remembers the document it could not apply and reports why.
    fn not_applied(
        &self,
        current: &mut Current,
        doc: Value,
        revision: Option<i64>,
        error: ConfigError,
    ) -> ChangeError {
        match revision.filter(|r| Some(*r) != current.revision) {
            Some(revision) => {
                self.refuse(current, doc, revision, error.to_string());
                ChangeError::NotApplied {
                    revision,
                    source: error,
                }
            }
            None => ChangeError::Apply(error),
        }
    }

    /// Puts the previous document back after a failure that came after it was replaced (only a failed rename of
    /// the prepared save).
    async fn roll_back(&self, previous: &Value, certs: &Certificates) {
        let restored = match compile_with(previous, certs) {
            Ok(snapshot) => self.server.apply(snapshot, false).await.map(drop),
            Err(e) => Err(e),
        };
        if let Err(e) = restored {
            tracing::error!(error = %e, "could not restore the previous configuration");
        }
    }
}

/// How many times a change without `If-Match` is made again on a newer fleet document before its 412 is
/// answered: each time another node won the race, so this bounds a write under a storm of others.
const MAX_REBASES: u32 = 5;

/// A strong ETag of the whole document: any change anywhere changes it, and the same document has the same
/// ETag on every node of a fleet.
pub(crate) fn etag(doc: &Value) -> String {
    let text = serde_json::to_vec(doc).unwrap_or_default();
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let hash = text.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("\"{hash:016x}\"")
}

fn etag_matches(header: &str, etag: &str) -> bool {
    header
        .split(',')
        .map(str::trim)
        .any(|t| t == "*" || t == etag)
}
