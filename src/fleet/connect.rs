//! How a node reaches etcd: its endpoints, and the TLS and user it authenticates with when given.

use std::path::PathBuf;
use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};

/// Why etcd could not be reached or read.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
    #[error("etcd did not answer in time")]
    Timeout,
    #[error("cannot read {path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("etcd: {0}")]
    Watch(String),
    #[error("this node's lease in etcd expired")]
    LeaseExpired,
    #[error("the fleet's document in etcd is not valid JSON: {0}")]
    Document(String),
}

/// What `rein run --etcd … --fleet …` gives.
#[derive(Debug, Clone)]
pub struct Options {
    pub endpoints: Vec<String>,
    pub fleet: String,
    pub node: String,
    /// The etcd user and the file holding its password.
    pub user: Option<(String, PathBuf)>,
    /// The CA that signs etcd's certificate, when it is not a system one.
    pub ca: Option<PathBuf>,
    /// This node's client certificate and key, for etcd's `--client-cert-auth`.
    pub identity: Option<(PathBuf, PathBuf)>,
}

/// How long one request may wait: long enough for an election (etcd's default is about a second), short
/// enough that a write through the API is refused quickly when etcd is gone.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

impl Options {
    pub(super) async fn connect(&self) -> Result<Client, ConnectError> {
        let mut options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(2))
            .with_timeout(REQUEST_TIMEOUT)
            // A member that died without closing its connections is noticed within seconds, so that a watch
            // on it is re-established on another.
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
            .with_keep_alive_while_idle(true)
            // A member cut off from the others' quorum answers no watch: this node then reads from one that
            // has it.
            .with_require_leader(true);
        if let Some((user, file)) = &self.user {
            let password = read(file)?;
            let password = String::from_utf8_lossy(&password).trim_end().to_owned();
            options = options.with_user(user.clone(), password);
        }
        if let Some(tls) = self.tls()? {
            options = options.with_tls(tls);
        }
        Ok(Client::connect(&self.endpoints, Some(options)).await?)
    }

    /// TLS when an endpoint is `https://`, a CA or a client certificate is given.
    fn tls(&self) -> Result<Option<TlsOptions>, ConnectError> {
        let https = self.endpoints.iter().any(|e| e.starts_with("https://"));
        if !https && self.ca.is_none() && self.identity.is_none() {
            return Ok(None);
        }
        let mut tls = TlsOptions::new().with_native_roots();
        if let Some(ca) = &self.ca {
            tls = tls.ca_certificate(Certificate::from_pem(read(ca)?));
        }
        if let Some((cert, key)) = &self.identity {
            tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        Ok(Some(tls))
    }
}

fn read(path: &PathBuf) -> Result<Vec<u8>, ConnectError> {
    std::fs::read(path).map_err(|source| ConnectError::File {
        path: path.clone(),
        source,
    })
}
