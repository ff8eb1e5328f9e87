//! The ACME task: looks at each bundle the configuration manages, obtains the missing ones, renews those
//! whose renewal is due, backs off after failures, and sleeps until the next is due or the configuration
//! changes.
//!
//! A failure never touches the bundle being served: the engine replaces it only with a newly issued one that
//! parsed and compiled. A restart finds the issued bundles in the store and asks the CA for nothing until they
//! are due.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use instant_acme::Account;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::config::{AcmeConf, Managed};
use super::status::{Entry, State};
use super::{Acme, AcmeError, account, issue, schedule};
use crate::engine::Engine;
use crate::tls::Bundle;

/// The longest one attempt may take, all requests to the CA included: the HTTP client has no timeout of its own.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(300);

/// The longest sleep: a clock stepped forward (a suspended machine) is noticed within this.
const LONGEST_SLEEP: i64 = 3600;

/// Starts the ACME task; it keeps the account in `state/acme` and ends when `stop` fires.
pub fn spawn(engine: Arc<Engine>, state: &Path, stop: CancellationToken) -> JoinHandle<()> {
    let task = Task {
        acme: engine.server().shared().acme.clone(),
        engine,
        dir: state.join("acme"),
        conf: None,
        account: None,
        failures: HashMap::new(),
        issued: HashMap::new(),
    };
    tokio::spawn(task.run(stop))
}

/// Failures in a row of one bundle.
struct Failures {
    count: u32,
    retry_at: i64,
    last_error: String,
}

struct Task {
    engine: Arc<Engine>,
    acme: Arc<Acme>,
    dir: PathBuf,
    /// The configuration last looked at.
    conf: Option<Arc<AcmeConf>>,
    /// The account, for the directory, roots and contact of `conf`.
    account: Option<Account>,
    failures: HashMap<String, Failures>,
    /// When this process last installed each bundle.
    issued: HashMap<String, i64>,
}

impl Task {
    async fn run(mut self, stop: CancellationToken) {
        loop {
            let conf = self
                .engine
                .server()
                .shared()
                .current
                .load()
                .snapshot
                .acme
                .clone();
            self.adopt(conf);
            let wait = match self.conf.clone() {
                Some(conf) => match self.round(&conf, &stop).await {
                    Some(wait) => wait,
                    None => return,
                },
                None => LONGEST_SLEEP,
            };
            if wait == 0 {
                continue;
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.acme.changed.notified() => {}
                () = tokio::time::sleep(Duration::from_secs(wait.unsigned_abs())) => {}
            }
        }
    }

    /// Takes `conf` as the configuration to work to: a changed one clears the back-off (the change may be the
    /// fix) and, with another CA or contact, the account.
    fn adopt(&mut self, conf: Option<Arc<AcmeConf>>) {
        if self.conf.as_deref() == conf.as_deref() {
            return;
        }
        let same_account = |a: &AcmeConf, b: &AcmeConf| {
            a.directory == b.directory && a.ca == b.ca && a.email == b.email
        };
        if !matches!((&self.conf, &conf), (Some(a), Some(b)) if same_account(a, b)) {
            self.account = None;
        }
        self.failures.clear();
        let managed = |name: &str| {
            conf.as_ref()
                .is_some_and(|c| c.certificates.contains_key(name))
        };
        self.acme.board.retain(managed);
        self.issued.retain(|name, _| managed(name));
        self.conf = conf;
    }

    /// Works on the first bundle that is due; returns how long to wait before the next round (0: at once), or
    /// `None` if `stop` fired.
    async fn round(&mut self, conf: &AcmeConf, stop: &CancellationToken) -> Option<i64> {
        let now = crate::tls::now();
        let mut next = now + LONGEST_SLEEP;
        for (name, managed) in &conf.certificates {
            let current = self.engine.certificate(name).await;
            self.forget_failure_if_served(name, managed, current.as_deref(), conf);
            let due = self.due(name, managed, current.as_deref(), conf);
            self.show(name, managed, current.as_deref(), due);
            if due > now {
                next = next.min(due);
                continue;
            }
            let attempt = self.attempt(name, managed, conf);
            tokio::select! {
                () = stop.cancelled() => return None,
                outcome = tokio::time::timeout(ATTEMPT_TIMEOUT, attempt) => {
                    let outcome = outcome.unwrap_or(Err(AcmeError::Timeout(ATTEMPT_TIMEOUT)));
                    self.record(name, outcome);
                }
            }
            return Some(0);
        }
        Some((next - now).max(1))
    }

    /// Forgets this node's failures for `name` once a bundle that is not due serves it: one another node of
    /// the fleet issued (this node's own orders may have failed, e.g. when only some nodes reach the CA).
    fn forget_failure_if_served(
        &mut self,
        name: &str,
        managed: &Managed,
        current: Option<&Bundle>,
        conf: &AcmeConf,
    ) {
        let fresh = current.is_some_and(|b| {
            covers(b, managed)
                && schedule::renewal_due(b.not_before(), b.not_after(), conf.renew_before)
                    > crate::tls::now()
        });
        if fresh && self.failures.remove(name).is_some() {
            tracing::info!(
                certificate = name,
                "ACME: a fresh certificate serves; earlier failures forgotten"
            );
        }
    }

    /// When `name` is next to be (re)issued: now if there is no usable bundle for its names, else when its
    /// renewal is due; after failures, not before the back-off ends.
    fn due(&self, name: &str, managed: &Managed, current: Option<&Bundle>, conf: &AcmeConf) -> i64 {
        let now = crate::tls::now();
        let planned = match current {
            Some(b) if covers(b, managed) && b.not_after() > now => {
                // A CA may backdate a certificate; counted from its `not_before`, a short one could be due
                // the moment it arrives. Its lifetime starts no earlier than when this process installed it.
                let start = self
                    .issued
                    .get(name)
                    .map_or(b.not_before(), |&i| i.max(b.not_before()));
                schedule::renewal_due(start, b.not_after(), conf.renew_before)
            }
            _ => now,
        };
        match self.failures.get(name) {
            Some(f) => planned.max(f.retry_at),
            None => planned,
        }
    }

    /// Updates `name`'s entry in `/status`.
    fn show(&self, name: &str, managed: &Managed, current: Option<&Bundle>, due: i64) {
        let usable = current.filter(|b| covers(b, managed));
        let failure = self.failures.get(name);
        let state = match (failure, usable) {
            (Some(_), _) => State::Failed,
            (None, Some(b)) if b.not_after() > crate::tls::now() => State::Valid,
            (None, _) => State::Pending,
        };
        self.acme.board.set(
            name,
            Entry {
                state,
                names: managed.names.clone(),
                expires: usable.map(Bundle::not_after),
                next_renewal: Some(due),
                last_error: failure.map(|f| f.last_error.clone()),
                last_issued: self.issued.get(name).copied(),
            },
        );
    }

    /// Obtains a bundle for `name` and installs it.
    async fn attempt(
        &mut self,
        name: &str,
        managed: &Managed,
        conf: &AcmeConf,
    ) -> Result<i64, AcmeError> {
        let engine = self.engine.clone();
        let Some(fleet) = engine.fleet() else {
            return self.order(name, managed, conf).await;
        };
        // One node of the fleet orders at a time; the others find its bundle when they get the lock.
        let lock = fleet.lock_issuance(name).await.map_err(AcmeError::Fleet)?;
        let outcome = match self.issued_by_fleet(fleet, name, managed, conf).await {
            Ok(Some(expires)) => Ok(expires),
            Ok(None) => self.order(name, managed, conf).await,
            Err(e) => Err(e),
        };
        lock.release().await;
        outcome
    }

    /// The fleet's bundle `name`, read from etcd, when another node already issued one that is not due: it is
    /// installed here and nothing is ordered.
    async fn issued_by_fleet(
        &self,
        fleet: &crate::fleet::Fleet,
        name: &str,
        managed: &Managed,
        conf: &AcmeConf,
    ) -> Result<Option<i64>, AcmeError> {
        let pem = fleet
            .fetch_certificate(name)
            .await
            .map_err(AcmeError::Fleet)?;
        let Some(pem) = pem else { return Ok(None) };
        let Ok(bundle) = Bundle::parse(&pem, Some(crate::tls::now())) else {
            return Ok(None);
        };
        let fresh = covers(&bundle, managed)
            && schedule::renewal_due(bundle.not_before(), bundle.not_after(), conf.renew_before)
                > crate::tls::now();
        if !fresh {
            return Ok(None);
        }
        tracing::info!(
            certificate = name,
            "ACME: another node of the fleet issued this certificate"
        );
        self.engine.adopt_certificate(name, Some(&pem)).await;
        Ok(Some(bundle.not_after()))
    }

    /// Orders a bundle for `name` from the CA and installs it.
    async fn order(
        &mut self,
        name: &str,
        managed: &Managed,
        conf: &AcmeConf,
    ) -> Result<i64, AcmeError> {
        let renewing = self.engine.certificate(name).await.is_some();
        tracing::info!(certificate = name, names = ?managed.names, renewing, "ACME: requesting a certificate");
        let bundle = self.obtain(managed, conf).await?;
        let expires = bundle.not_after();
        self.engine
            .replace_certificate(name, bundle)
            .await
            .map_err(AcmeError::Install)?;
        Ok(expires)
    }

    /// One order, with the account registered first if need be, and registered again if the CA forgot it.
    async fn obtain(&mut self, managed: &Managed, conf: &AcmeConf) -> Result<Bundle, AcmeError> {
        let account = self.account(conf).await?;
        let engine = self.engine.clone();
        let fleet = engine.fleet();
        match issue::issue(&account, managed, &self.acme.challenges, fleet).await {
            Err(AcmeError::Protocol(e)) if account::is_gone(&e) => {
                tracing::warn!(directory = %conf.directory, "ACME: the CA no longer knows the saved account; registering again");
                self.account = None;
                account::forget(&self.dir, conf)?;
                let account = self.account(conf).await?;
                issue::issue(&account, managed, &self.acme.challenges, fleet).await
            }
            other => other,
        }
    }

    async fn account(&mut self, conf: &AcmeConf) -> Result<Account, AcmeError> {
        if let Some(a) = &self.account {
            return Ok(a.clone());
        }
        let a = account::open(&self.dir, conf).await?;
        self.account = Some(a.clone());
        Ok(a)
    }

    /// Notes the outcome of an attempt: resets or extends the back-off, and logs it.
    fn record(&mut self, name: &str, outcome: Result<i64, AcmeError>) {
        let now = crate::tls::now();
        match outcome {
            Ok(expires) => {
                self.failures.remove(name);
                self.issued.insert(name.to_owned(), now);
                tracing::info!(certificate = name, expires = %crate::tls::date(expires), "ACME: certificate issued and installed");
            }
            Err(e) => {
                let count = self.failures.get(name).map_or(0, |f| f.count) + 1;
                let wait = schedule::retry_after(count);
                tracing::warn!(certificate = name, error = %e, failures = count, retry_in_seconds = wait, "ACME: could not obtain a certificate; the current one keeps serving");
                self.failures.insert(
                    name.to_owned(),
                    Failures {
                        count,
                        retry_at: now + wait,
                        last_error: e.to_string(),
                    },
                );
            }
        }
    }
}

/// Whether `bundle` is for every name `managed` lists.
fn covers(bundle: &Bundle, managed: &Managed) -> bool {
    managed.names.iter().all(|n| bundle.serves(n))
}
