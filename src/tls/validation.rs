//! TLS-ALPN-01 (RFC 8737) on the TLS listeners: the validation certificates the ACME task publishes while the
//! CA checks a name, presented only to a handshake that offers the `acme-tls/1` protocol for that name.
//!
//! Process-wide, like the ticket keys: a validation is about a name, not a listener, and the CA may connect to
//! any TLS listener on port 443. Ordinary handshakes never offer `acme-tls/1`, so they never look here.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, RwLock};

use rustls::server::ClientHello;
use rustls::sign::CertifiedKey;

/// The ALPN protocol of a validation handshake (RFC 8737 §6.2).
pub const ACME_TLS: &[u8] = b"acme-tls/1";

/// Validation certificates by the lowercase name they prove.
static PENDING: LazyLock<RwLock<HashMap<String, Arc<CertifiedKey>>>> =
    LazyLock::new(Default::default);

/// Presents `key` to validation handshakes for `name` until the returned guard is dropped.
pub fn publish(name: &str, key: Arc<CertifiedKey>) -> Published {
    let name = name.to_ascii_lowercase();
    write().insert(name.clone(), key);
    Published { name }
}

/// The validation certificate for a handshake that offers only `acme-tls/1`, if one is pending for its name.
pub(super) fn lookup(hello: &ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
    // RFC 8737 §3: the validator offers `acme-tls/1` alone; a client offering it among others is not one.
    let mut offered = hello.alpn()?;
    if offered.next() != Some(ACME_TLS) || offered.next().is_some() {
        return None;
    }
    let name = hello.server_name()?.to_ascii_lowercase();
    read().get(&name).cloned()
}

fn read() -> std::sync::RwLockReadGuard<'static, HashMap<String, Arc<CertifiedKey>>> {
    // The map holds whole values only: one left by a panicking writer is still sound.
    PENDING.read().unwrap_or_else(|e| e.into_inner())
}

fn write() -> std::sync::RwLockWriteGuard<'static, HashMap<String, Arc<CertifiedKey>>> {
    PENDING.write().unwrap_or_else(|e| e.into_inner())
}

/// A validation certificate being presented; dropping it withdraws it, whatever became of the order.
#[derive(Debug)]
pub struct Published {
    name: String,
}

impl Drop for Published {
    fn drop(&mut self) {
        write().remove(&self.name);
    }
}
