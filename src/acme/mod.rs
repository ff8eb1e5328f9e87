//! Automatic certificates through ACME (RFC 8555), rein's extension to Unit's schema: the `acme` section names
//! bundles and their DNS names, and a task obtains them from the CA and renews them before they expire.
//!
//! The pieces: [`config`] compiles the section with the rest of the document; [`placeholder`] lets a listener
//! name a bundle before it is issued; [`challenge`] is the map of HTTP-01 tokens the plain-HTTP listeners answer
//! from (TLS-ALPN-01's validation certificates are in [`crate::tls::validation`], where the TLS listeners look); [`account`] keeps the account key in `STATE/acme/`; [`issue`] runs one order; [`schedule`] says when to
//! renew and how long to back off; [`task`] drives it all; [`status`] is what `/status` shows. An issued bundle
//! goes through [`crate::engine::Engine::replace_certificate`], the change path the API's certificates take, so
//! it is saved in `STATE/certs/` and listed under `/certificates` like an uploaded one.

mod account;
mod challenge;
pub mod config;
mod issue;
mod placeholder;
mod schedule;
mod status;
mod task;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use http::Response;
use tokio::sync::Notify;

pub use config::AcmeConf;
pub use placeholder::fill;
pub use task::spawn;

use crate::body::Body;
use crate::request::RequestInfo;
use crate::stats::snapshot::CertificateStatus;

/// What the ACME task shares with the server: the challenges to answer, the status to show, and a nudge when
/// the configuration changed.
#[derive(Debug, Default)]
pub struct Acme {
    challenges: challenge::Challenges,
    board: status::Board,
    changed: Notify,
}

impl Acme {
    /// The answer to an HTTP-01 validation request for a pending token, on a plain-HTTP listener; `None` for
    /// any other request.
    pub fn answer(&self, request: &RequestInfo) -> Option<Response<Body>> {
        self.challenges.answer(request)
    }

    /// `/status`'s `certificates`: each ACME bundle's state.
    pub(crate) fn status(&self) -> BTreeMap<String, CertificateStatus> {
        self.board.status()
    }

    /// Tells the task to look at the configuration and the store again (a change may add, drop or rename
    /// bundles; a bundle deleted through the API is to be obtained again).
    pub fn changed(&self) {
        // A stored permit: a change made while the task is busy is seen when it next waits.
        self.changed.notify_one();
    }

    /// Answers (or, with `None`, stops answering) an HTTP-01 token another node of the fleet published.
    pub(crate) fn mirror_challenge(&self, token: &str, key_authorization: Option<&str>) {
        self.challenges.mirror(token, key_authorization);
    }
}

/// Why an issuance or renewal failed; the bundle already there keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum AcmeError {
    #[error("{}", chain(.0))]
    Protocol(#[from] instant_acme::Error),
    #[error("the CA refused the order: {0}")]
    Refused(String),
    #[error("the CA offers no {kind} challenge for {name}")]
    NoChallenge { kind: &'static str, name: String },
    #[error("cannot make the TLS-ALPN-01 validation certificate: {0}")]
    Validation(String),
    #[error("cannot make the certificate's key: {0}")]
    Key(rcgen::Error),
    #[error("the certificate the CA issued is not usable: {0}")]
    Bundle(crate::tls::BundleError),
    #[error("cannot read the roots in {}: {why}", file.display())]
    Ca { file: PathBuf, why: String },
    #[error("cannot keep the ACME account in the state directory: {0}")]
    Store(std::io::Error),
    #[error("cannot install the issued certificate: {}", chain(.0))]
    Install(crate::engine::CertError),
    #[error("no answer from the CA within {} seconds", .0.as_secs())]
    Timeout(Duration),
    #[error("cannot coordinate with the fleet: {0}")]
    Fleet(crate::fleet::ConnectError),
}

/// An error and its causes on one line: a connection failure says why ("Connection refused") only in its
/// sources.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}
