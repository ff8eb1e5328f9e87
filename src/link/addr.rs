//! Where an upstream server listens: an IP address and port, a DNS name and port (resolved at each dial), or
//! a Unix socket; as written in `servers` and in a `proxy` target.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use rustls_pki_types::DnsName;

/// Where a server listens.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServerAddr {
    Tcp(SocketAddr),
    /// A DNS name and a port: resolved at each new connection, so a change of address is followed.
    Name(String, u16),
    Unix(PathBuf),
}

impl fmt::Display for ServerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerAddr::Tcp(a) => write!(f, "{a}"),
            ServerAddr::Name(host, port) => write!(f, "{host}:{port}"),
            ServerAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

impl ServerAddr {
    /// `IP:PORT`, `[IPv6]:PORT` or `unix:/path`.
    pub fn parse(s: &str) -> Option<ServerAddr> {
        match s.strip_prefix("unix:") {
            Some(p) if p.starts_with('/') => Some(ServerAddr::Unix(PathBuf::from(p))),
            Some(_) => None,
            None => s.parse().ok().map(ServerAddr::Tcp),
        }
    }

    /// What [`ServerAddr::parse`] takes, or `HOST:PORT` with a DNS name; the port may be left out when
    /// `default_port` is given (a proxy URL's scheme says it).
    pub fn parse_with_names(s: &str, default_port: Option<u16>) -> Option<ServerAddr> {
        if let Some(addr) = ServerAddr::parse(s) {
            return Some(addr);
        }
        if let Some(port) = default_port
            && let Some(addr) = ServerAddr::parse(&with_port(s, port))
        {
            return Some(addr);
        }
        let (host, port) = match s.rsplit_once(':') {
            Some((host, port)) => (host, port.parse().ok().filter(|p| *p != 0)?),
            None => (s, default_port?),
        };
        is_dns_name(host).then(|| ServerAddr::Name(host.to_ascii_lowercase(), port))
    }

    /// The TCP port, if it is a TCP server.
    pub fn port(&self) -> Option<u16> {
        match self {
            ServerAddr::Tcp(a) => Some(a.port()),
            ServerAddr::Name(_, port) => Some(*port),
            ServerAddr::Unix(_) => None,
        }
    }
}

/// `IP` or `[IPv6]` with `:PORT` added, to be parsed as a socket address.
fn with_port(host: &str, port: u16) -> String {
    match host.parse::<std::net::Ipv6Addr>() {
        // A bare IPv6 address is ambiguous with a port; only the bracketed form takes one.
        Ok(_) => String::new(),
        Err(_) => format!("{host}:{port}"),
    }
}

/// Whether `s` is a DNS name a server can be reached by.
pub(crate) fn is_dns_name(s: &str) -> bool {
    DnsName::try_from(s).is_ok()
}
