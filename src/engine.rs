//! The configuration lifecycle: one document, changed only whole and only when valid.
//!
//! Every change (API edit, SIGHUP re-read, start-up) goes through [`Engine::change`]: edit a copy, compile it,
//! write it beside the saved file, make it live, then rename it into place. A failure at any step leaves the
//! running configuration, the served snapshot and the saved file as they were. Changes are serialised by one
//! lock, so each sees the result of the last. Each applied change is recorded in the [`History`] under the same
//! lock, with where it came from ([`Source`]).

use serde_json::Value;
use tokio::sync::Mutex;

use crate::compile::{compile_all, compile_with};
use crate::config::pointer::EditError;
use crate::config::{ConfigError, ConfigErrors};
use crate::history::{Entry, History, Source};
use crate::server::Server;
use crate::state::{StateDir, StateError};
use crate::tls::{Bundle, BundleError, CertDir, Certificates};

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
}

/// What a successful change did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// Live and saved. With [`ChangeOptions::wait_for_apps`], the changed applications whose new instances
    /// do not serve, by name, with what happened (the previous instances keep serving them).
    Applied {
        not_ready: std::collections::BTreeMap<String, String>,
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
        }
    }
}

/// What rein starts with: the first document, where it came from, and how many applied documents to keep.
pub struct Initial {
    pub doc: Value,
    pub source: Source,
    pub history_size: usize,
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
}

struct Current {
    doc: Value,
    etag: String,
    generation: u64,
    /// When the document was last applied, in seconds since the epoch.
    changed_at: Option<f64>,
    certs: Certificates,
    history: History,
}

pub struct Engine {
    current: Mutex<Current>,
    server: Server,
    state: Option<StateDir>,
    cert_dir: Option<CertDir>,
}

impl Engine {
    /// Starts serving `doc`; a document that does not compile or apply is an error and nothing runs.
    pub async fn start(
        server: Server,
        state: Option<StateDir>,
        initial: Initial,
    ) -> Result<Engine, ChangeError> {
        let cert_dir = state.as_ref().map(|s| CertDir::new(s.path()));
        let certs = match &cert_dir {
            Some(dir) => dir.load().unwrap_or_else(|e| {
                tracing::error!(error = %e, "cannot read the saved certificates");
                Certificates::default()
            }),
            None => Certificates::default(),
        };
        let history = match &state {
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
            }),
            server,
            state,
            cert_dir,
        };
        let opts = ChangeOptions {
            startup: true,
            ..ChangeOptions::default()
        };
        let doc = initial.doc;
        engine
            .change_from(
                initial.source,
                |d| {
                    *d = doc;
                    Ok(())
                },
                opts,
            )
            .await?;
        Ok(engine)
    }

    pub fn server(&self) -> &Server {
        &self.server
    }

    /// Reads the document under the lock; returns what `f` made of it and the document's ETag.
    pub async fn read<R>(&self, f: impl FnOnce(&Value) -> R) -> (R, String) {
        let current = self.current.lock().await;
        (f(&current.doc), current.etag.clone())
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
        edit: impl FnOnce(&mut Value) -> Result<(), EditError>,
        opts: ChangeOptions<'_>,
    ) -> Result<Changed, ChangeError> {
        self.change_from(Source::Api, edit, opts).await
    }

    /// [`Engine::change`] from `source`, as the history records it.
    pub async fn change_from(
        &self,
        source: Source,
        edit: impl FnOnce(&mut Value) -> Result<(), EditError>,
        opts: ChangeOptions<'_>,
    ) -> Result<Changed, ChangeError> {
        let mut current = self.current.lock().await;
        if let Some(tag) = opts.if_match
            && !etag_matches(tag, &current.etag)
        {
            return Err(ChangeError::Stale {
                current: current.etag.clone(),
            });
        }
        let mut doc = current.doc.clone();
        edit(&mut doc)?;
        let snapshot = compile_all(&doc, &current.certs).map_err(ChangeError::Invalid)?;
        if opts.dry_run {
            return Ok(Changed::Valid);
        }
        if doc == current.doc && current.generation > 0 {
            return Ok(Changed::Unchanged);
        }
        // The new document is written and fsynced before anything changes: a full disk or an unwritable state
        // directory refuses the change while the old listeners, connections and applications are untouched.
        let pending = match &self.state {
            Some(state) => match state.prepare(&doc) {
                Ok(pending) => Some(pending),
                // The first document is served even if it cannot be saved (a read-only or full state
                // directory): it is the saved one, or `--config`'s. Changes are refused until saving works.
                Err(e) if opts.startup => {
                    tracing::error!(error = %e, "serving the configuration without saving it: changes will be refused until the state directory can be written");
                    None
                }
                Err(e) => return Err(e.into()),
            },
            None => None,
        };
        let reloads = self
            .server
            .apply(snapshot, !opts.startup)
            .await
            .map_err(ChangeError::Apply)?;
        // Only the rename is left, which fails only if the state directory was changed under rein; then the
        // previous configuration is put back, as the saved file still holds it.
        if let Some(Err(e)) = pending.map(crate::state::PendingSave::commit) {
            self.roll_back(&current.doc, &current.certs).await;
            return Err(e.into());
        }
        current.etag = etag(&doc);
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
        // The lock is let go first: reading the configuration does not wait for the applications.
        drop(current);
        let not_ready = if opts.wait_for_apps {
            reloads.wait().await
        } else {
            Default::default()
        };
        Ok(Changed::Applied { not_ready })
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

/// The certificate store: Unit's `/certificates`, beside the document and changed under the same lock.
impl Engine {
    /// Unit's `/certificates` object.
    pub async fn certificates(&self) -> Value {
        self.current.lock().await.certs.describe()
    }

    /// Each stored bundle's leaf expiry, in seconds since the epoch, by name.
    pub(crate) async fn certificate_expiry(&self) -> Vec<(String, i64)> {
        self.current.lock().await.certs.expiry()
    }

    /// The bundle stored under `name` (an issued or uploaded one, never an ACME placeholder).
    pub async fn certificate(&self, name: &str) -> Option<std::sync::Arc<Bundle>> {
        self.current.lock().await.certs.get(name).cloned()
    }

    /// Stores a new bundle under `name`, as Unit's `PUT /certificates/NAME`: a name in use is refused.
    pub async fn add_certificate(&self, name: &str, pem: &[u8]) -> Result<(), CertError> {
        let mut current = self.current.lock().await;
        if !crate::tls::valid_name(name) {
            return Err(CertError::InvalidName);
        }
        if pem.len() > crate::tls::MAX_BUNDLE {
            return Err(CertError::TooLarge);
        }
        if current.certs.contains(name) {
            return Err(CertError::Exists);
        }
        let bundle = Bundle::parse(pem, Some(crate::tls::now())).map_err(CertError::Invalid)?;
        // No listener names a new bundle yet, so nothing is recompiled.
        if let Some(dir) = &self.cert_dir {
            dir.save(name, pem).map_err(CertError::Save)?;
        }
        current.certs = current.certs.with(name, std::sync::Arc::new(bundle));
        tracing::info!(certificate = name, "certificate stored");
        Ok(())
    }

    /// Puts `bundle` under `name`, replacing the bundle there: listeners that name it serve the new one to new
    /// handshakes at once (an automatic renewal). Saved only once the configuration compiled and applied.
    pub async fn replace_certificate(&self, name: &str, bundle: Bundle) -> Result<(), CertError> {
        let mut current = self.current.lock().await;
        let pem = bundle.pem().to_vec();
        let next = current.certs.with(name, std::sync::Arc::new(bundle));
        let snapshot = compile_with(&current.doc, &next).map_err(CertError::Apply)?;
        if let Some(dir) = &self.cert_dir {
            dir.save(name, &pem).map_err(CertError::Save)?;
        }
        self.server
            .apply(snapshot, false)
            .await
            .map_err(CertError::Apply)?;
        current.certs = next;
        tracing::info!(certificate = name, "certificate replaced");
        Ok(())
    }

    /// Unit's `DELETE /certificates/NAME`: refused while a listener names the bundle.
    pub async fn delete_certificate(&self, name: &str) -> Result<(), CertError> {
        let mut current = self.current.lock().await;
        if !current.certs.contains(name) {
            return Err(CertError::NotFound);
        }
        if crate::tls::used_names(&current.doc).contains(name) {
            return Err(CertError::InUse);
        }
        if let Some(dir) = &self.cert_dir {
            dir.remove(name).map_err(CertError::Save)?;
        }
        current.certs = current.certs.without(name);
        tracing::info!(certificate = name, "certificate deleted");
        self.server.shared().acme.changed();
        Ok(())
    }
}

/// A strong ETag of the whole document: any change anywhere changes it.
fn etag(doc: &Value) -> String {
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
