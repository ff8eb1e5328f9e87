//! What dialling one server over TLS needs: the connector with its upstream's client configuration, the
//! name sent in SNI and verified against the certificate, and the `Host` requests to it carry. The
//! configuration itself is made from an upstream's `tls` option (see `crate::upstream::tls`).

use std::io;
use std::sync::Arc;

use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::addr::ServerAddr;

/// What connecting to one server over TLS needs.
pub struct TlsTarget {
    connector: TlsConnector,
    name: ServerName<'static>,
    /// The `Host` of requests to this server: the name, with the port unless it is 443.
    host: String,
}

impl TlsTarget {
    /// For the server at `addr`, verified as `server_name` when given (an upstream's `tls.server_name`);
    /// `None` for a Unix socket without a name.
    pub fn new(
        config: Arc<ClientConfig>,
        server_name: Option<&ServerName<'static>>,
        addr: &ServerAddr,
    ) -> Option<TlsTarget> {
        let name = match (server_name, addr) {
            (Some(name), _) => name.clone(),
            (None, ServerAddr::Tcp(a)) => ServerName::IpAddress(a.ip().into()),
            (None, ServerAddr::Name(host, _)) => ServerName::try_from(host.clone()).ok()?,
            (None, ServerAddr::Unix(_)) => return None,
        };
        let host = host_field(&name, addr.port()?);
        Some(TlsTarget {
            connector: TlsConnector::from(config),
            name,
            host,
        })
    }

    /// The `Host` field's value for requests to this server.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The TLS handshake on a connected socket. A failure names the server's name and says why (an
    /// unknown authority, a certificate for another name, a server that does not speak TLS).
    pub async fn handshake(&self, tcp: TcpStream) -> io::Result<TlsStream<TcpStream>> {
        self.connector
            .connect(self.name.clone(), tcp)
            .await
            .map_err(|e| {
                let kind = match e.kind() {
                    io::ErrorKind::TimedOut => io::ErrorKind::TimedOut,
                    _ => io::ErrorKind::InvalidData,
                };
                let name = self.name.to_str().into_owned();
                io::Error::new(kind, HandshakeError { name, source: e })
            })
    }
}

/// A failed handshake, with the name it was for.
#[derive(Debug, thiserror::Error)]
#[error("TLS handshake with {name} failed: {source}")]
struct HandshakeError {
    name: String,
    source: io::Error,
}

/// `name[:port]` as a `Host` field: an IPv6 address in brackets, port 443 left out.
fn host_field(name: &ServerName<'_>, port: u16) -> String {
    let host = match name {
        ServerName::IpAddress(rustls_pki_types::IpAddr::V6(_)) => format!("[{}]", name.to_str()),
        _ => name.to_str().into_owned(),
    };
    match port {
        443 => host,
        port => format!("{host}:{port}"),
    }
}
