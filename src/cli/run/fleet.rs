//! `rein run`'s fleet options: which etcd, which fleet, which node, and how to authenticate.

use std::path::PathBuf;

use crate::fleet::Options;

#[derive(clap::Args, Debug)]
pub(crate) struct FleetArgs {
    /// Join a fleet through these etcd endpoints (comma-separated, e.g. http://10.0.0.1:2379,http://10.0.0.2:2379)
    #[arg(
        long,
        value_name = "URL,...",
        value_delimiter = ',',
        requires = "fleet"
    )]
    etcd: Vec<String>,
    /// The fleet's name: its configuration is the etcd key /rein/NAME/config
    #[arg(long, value_name = "NAME", requires = "etcd", value_parser = key_segment)]
    fleet: Option<String>,
    /// This node's name in the fleet [default: the host name]
    #[arg(long, value_name = "NAME", requires = "fleet", value_parser = key_segment)]
    node: Option<String>,
    /// The etcd user to authenticate as
    #[arg(long, value_name = "USER", requires = "etcd_password_file")]
    etcd_user: Option<String>,
    /// A file holding the etcd user's password
    #[arg(long, value_name = "FILE", requires = "etcd_user")]
    etcd_password_file: Option<PathBuf>,
    /// The CA certificate (PEM) that signs etcd's, when it is not one the system trusts
    #[arg(long, value_name = "FILE", requires = "fleet")]
    etcd_ca: Option<PathBuf>,
    /// This node's client certificate (PEM), for etcd's --client-cert-auth
    #[arg(long, value_name = "FILE", requires = "etcd_key")]
    etcd_cert: Option<PathBuf>,
    /// The key (PEM) of --etcd-cert
    #[arg(long, value_name = "FILE", requires = "etcd_cert")]
    etcd_key: Option<PathBuf>,
}

impl FleetArgs {
    /// The fleet to join, if the options name one.
    pub(super) fn options(&self) -> Option<Options> {
        let fleet = self.fleet.clone()?;
        let node = self.node.clone().unwrap_or_else(host_name);
        Some(Options {
            endpoints: self.etcd.clone(),
            fleet,
            node,
            user: self.etcd_user.clone().zip(self.etcd_password_file.clone()),
            ca: self.etcd_ca.clone(),
            identity: self.etcd_cert.clone().zip(self.etcd_key.clone()),
        })
    }
}

fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| key_segment(h).is_ok())
        .unwrap_or_else(|| "rein".to_owned())
}

/// A name that is one segment of an etcd key: letters, digits, `.`, `_` and `-`.
fn key_segment(name: &str) -> Result<String, String> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(name.to_owned())
    } else {
        Err("use letters, digits, '.', '_' and '-' only".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::key_segment;

    #[test]
    fn names_are_one_key_segment() {
        for ok in ["web", "web-1", "eu_west.2"] {
            assert!(key_segment(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a b", "é"] {
            assert!(key_segment(bad).is_err(), "{bad:?}");
        }
    }
}
