//! The ACME account: its key made once and kept in `STATE/acme/` (0600), so each start of rein reuses the
//! account it registered rather than registering a new one, and the HTTP client it talks to the CA with.
//!
//! Credentials are kept per directory URL (a file named after a hash of it): switching between staging and
//! production keeps both accounts.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use instant_acme::{Account, AccountBuilder, AccountCredentials, NewAccount};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use super::AcmeError;
use super::config::AcmeConf;

/// The problem type a CA answers with for an account it no longer knows (a test CA restarted, an account
/// deactivated elsewhere).
const ACCOUNT_GONE: &str = "urn:ietf:params:acme:error:accountDoesNotExist";

/// Whether `e` says the CA does not know the account.
pub fn is_gone(e: &instant_acme::Error) -> bool {
    matches!(e, instant_acme::Error::Api(p) if p.r#type.as_deref() == Some(ACCOUNT_GONE))
}

/// The account for `conf`'s directory: restored from `dir` if registered before, else registered now and
/// saved there.
pub async fn open(dir: &Path, conf: &AcmeConf) -> Result<Account, AcmeError> {
    let file = credentials_file(dir, &conf.directory);
    match read(&file)? {
        Some(credentials) => Ok(builder(conf)?.from_credentials(credentials).await?),
        None => register(dir, &file, conf).await,
    }
}

/// Forgets the saved account for `conf`'s directory, so the next [`open`] registers a new one.
pub fn forget(dir: &Path, conf: &AcmeConf) -> Result<(), AcmeError> {
    match fs::remove_file(credentials_file(dir, &conf.directory)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(AcmeError::Store(e)),
        _ => Ok(()),
    }
}

async fn register(dir: &Path, file: &Path, conf: &AcmeConf) -> Result<Account, AcmeError> {
    let contact = conf.email.as_ref().map(|e| format!("mailto:{e}"));
    let contacts: Vec<&str> = contact.iter().map(String::as_str).collect();
    let new = NewAccount {
        contact: &contacts,
        terms_of_service_agreed: true,
        only_return_existing: false,
    };
    let (account, credentials) = builder(conf)?
        .create(&new, conf.directory.clone(), None)
        .await?;
    let text = serde_json::to_vec(&credentials).map_err(|e| AcmeError::Store(e.into()))?;
    save(dir, file, &text).map_err(AcmeError::Store)?;
    tracing::info!(directory = %conf.directory, account = account.id(), "ACME account registered");
    Ok(account)
}

/// An HTTP client trusting the system's roots and, with `ca`, the roots in that file as well.
fn builder(conf: &AcmeConf) -> Result<AccountBuilder, AcmeError> {
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if let Some(ca) = &conf.ca {
        let extra = CertificateDer::pem_file_iter(ca)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| AcmeError::Ca {
                file: ca.clone(),
                why: e.to_string(),
            })?;
        if extra.is_empty() {
            return Err(AcmeError::Ca {
                file: ca.clone(),
                why: "no certificate in it".into(),
            });
        }
        for cert in extra {
            roots.add(cert).map_err(|e| AcmeError::Ca {
                file: ca.clone(),
                why: e.to_string(),
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| AcmeError::Ca {
            file: conf.ca.clone().unwrap_or_default(),
            why: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector);
    Ok(Account::builder_with_http(Box::new(client)))
}

fn credentials_file(dir: &Path, directory: &str) -> PathBuf {
    // FNV-1a: stable across builds, so the same directory finds the same file after an upgrade.
    let hash = directory.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    dir.join(format!("account-{hash:016x}.json"))
}

fn read(file: &Path) -> Result<Option<AccountCredentials>, AcmeError> {
    let text = match fs::read(file) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(AcmeError::Store(e)),
    };
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|e| AcmeError::Store(io::Error::new(io::ErrorKind::InvalidData, e)))
}

/// Writes `text` as `file`, 0600 in a 0700 directory, whole or not at all.
fn save(dir: &Path, file: &Path, text: &[u8]) -> io::Result<()> {
    match DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        other => other?,
    }
    let tmp = file.with_extension("json.tmp");
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
        f.write_all(text)?;
        f.sync_all()?;
        fs::rename(&tmp, file)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}
