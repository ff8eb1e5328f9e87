//! Proxy failures and the one place they become answers: unreachable (or an upstream configured without any
//! server, as Unit answers it) → 502, no available server → 503,
//! timeout → 504, each with a short body and a log line naming the upstream, the server and the reason.

use http::StatusCode;

use crate::body::Body;

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("cannot connect to {server}: {source}")]
    Unreachable {
        server: String,
        source: std::io::Error,
    },
    #[error("{server} failed before answering: {source}")]
    Broken {
        server: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{server} timed out: {reason}")]
    Timeout { server: String, reason: String },
    #[error("no server available")]
    NoServer,
    #[error("the upstream has no servers")]
    NoServers,
    #[error("the request body exceeds max_body_size")]
    BodyTooLarge,
    /// The client's body broke (malformed chunked framing, a read timeout): the client's fault, answered
    /// with the status given.
    #[error("the client's request body failed")]
    ClientBody(StatusCode),
}

impl ProxyError {
    /// A failed connect: a timeout is a 504, anything else a 502.
    pub fn connect(
        server: &crate::link::ServerAddr,
        timeout: std::time::Duration,
        source: std::io::Error,
    ) -> Self {
        if source.kind() == std::io::ErrorKind::TimedOut {
            ProxyError::Timeout {
                server: server.to_string(),
                reason: format!("no connection within {:.1} s", timeout.as_secs_f64()),
            }
        } else {
            ProxyError::Unreachable {
                server: server.to_string(),
                source,
            }
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ProxyError::Unreachable { .. } | ProxyError::Broken { .. } | ProxyError::NoServers => {
                StatusCode::BAD_GATEWAY
            }
            ProxyError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            ProxyError::NoServer => StatusCode::SERVICE_UNAVAILABLE,
            ProxyError::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ProxyError::ClientBody(status) => *status,
        }
    }

    /// The answer to the client, after logging why.
    pub fn into_response(self, upstream: &str) -> http::Response<Body> {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(upstream, error = %self, status = status.as_u16(), "proxy error");
        }
        crate::server::error_page(status)
    }
}
