//! TLS on the listening side: certificate bundles (a store beside the configuration, Unit's `/certificates`),
//! their description, SNI selection, and the rustls configuration a TLS listener carries in the snapshot.
//!
//! Bundles come from the control API (and from ACME) through the engine, which compiles the configuration
//! against the new store before it replaces the old; the accept loop wraps a TLS listener's connections with the
//! configuration of the snapshot current at accept time.

mod bundle;
mod describe;
mod listener;
mod store;
pub mod validation;

use std::sync::{Arc, OnceLock};

pub use bundle::{Bundle, BundleError, MAX_BUNDLE};
pub use describe::date;
pub use listener::{ListenerTls, compile};
pub use store::{CertDir, Certificates, valid_name};
pub use validation::ACME_TLS;

/// The bundles the listeners of `doc` name.
pub fn used_names(doc: &serde_json::Value) -> std::collections::BTreeSet<String> {
    let Some(listeners) = doc.get("listeners").and_then(|l| l.as_object()) else {
        return Default::default();
    };
    listeners
        .values()
        .filter_map(|l| l.get("tls")?.get("certificate"))
        .flat_map(|c| match c {
            serde_json::Value::Array(names) => names.iter().filter_map(|n| n.as_str()).collect(),
            other => other.as_str().into_iter().collect::<Vec<_>>(),
        })
        .map(str::to_owned)
        .collect()
}

/// Seconds since the epoch, now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// One set of session ticket keys for the process, rotated by rustls, shared by every TLS listener.
fn ticketer() -> Result<Arc<dyn rustls::server::ProducesTickets>, rustls::Error> {
    static TICKETER: OnceLock<Arc<dyn rustls::server::ProducesTickets>> = OnceLock::new();
    if let Some(t) = TICKETER.get() {
        return Ok(t.clone());
    }
    let made = rustls::crypto::aws_lc_rs::Ticketer::new()?;
    Ok(TICKETER.get_or_init(|| made).clone())
}
