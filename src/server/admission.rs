//! Which connections are let in: at most `settings.http.max_connections` open at once over every listener, and
//! at most `max_connections_per_client` from one client address, so one client cannot take every descriptor
//! (and, with each unfinished request head bounded, the memory those heads hold is bounded too). A proxy the
//! listener trusts through `forwarded` is not one client, and is not held to the per-client limit. A connection
//! over a limit is closed as soon as it is accepted, which keeps the listen queue moving; it is counted in
//! `/status` as `refused` and logged, at most once per 10 s.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::Shared;
use crate::snapshot::ListenAddr;

#[derive(Debug, Default)]
pub struct Admission {
    open: AtomicU64,
    refused: AtomicU64,
    per_client: Mutex<HashMap<IpAddr, u32>>,
}

/// A connection let in; it leaves when this is dropped.
pub struct Admitted {
    shared: Arc<Shared>,
    client: Option<IpAddr>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Full,
    ClientFull,
}

impl Admission {
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    fn refuse(&self, why: Refused) -> Result<Admitted, Refused> {
        self.refused.fetch_add(1, Ordering::Relaxed);
        Err(why)
    }
}

/// Lets a connection from `peer` on `listener` in, if the limits of the current settings allow it. A peer the
/// listener's `forwarded` trusts is a proxy carrying many clients: it is not held to the per-client limit.
pub fn admit(
    shared: &Arc<Shared>,
    listener: &ListenAddr,
    peer: Option<SocketAddr>,
) -> Result<Admitted, Refused> {
    let (max, per_client, client) = {
        let current = shared.current.load();
        let s = &current.snapshot.settings;
        let trusted = current
            .snapshot
            .listeners
            .get(listener)
            .and_then(|l| l.forwarded.as_ref())
            .zip(peer)
            .is_some_and(|(f, p)| f.trusts(p));
        let client = peer.map(|p| p.ip()).filter(|_| !trusted);
        (s.max_connections, s.max_connections_per_client, client)
    };
    let admission = &shared.admission;
    if admission.open.fetch_add(1, Ordering::AcqRel) >= max {
        admission.open.fetch_sub(1, Ordering::AcqRel);
        return admission.refuse(Refused::Full);
    }
    let mut admitted = Admitted {
        shared: shared.clone(),
        client: None,
    };
    let Some(ip) = client else {
        return Ok(admitted);
    };
    let Ok(mut clients) = admission.per_client.lock() else {
        return Ok(admitted);
    };
    let count = clients.entry(ip).or_insert(0);
    if *count >= per_client {
        drop(clients);
        drop(admitted);
        return admission.refuse(Refused::ClientFull);
    }
    *count += 1;
    admitted.client = Some(ip);
    Ok(admitted)
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let admission = &self.shared.admission;
        admission.open.fetch_sub(1, Ordering::AcqRel);
        let Some(ip) = self.client else {
            return;
        };
        if let Ok(mut clients) = admission.per_client.lock()
            && let Some(count) = clients.get_mut(&ip)
        {
            *count -= 1;
            if *count == 0 {
                clients.remove(&ip);
            }
        }
    }
}
