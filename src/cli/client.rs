//! A small client of the control API for the CLI: one request, the answer printed, an exit code.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

use super::exit;
use crate::control::{ControlAddr, token};

/// A running rein's control API, and where its token is kept.
#[derive(Clone)]
pub struct Target {
    pub addr: ControlAddr,
    /// Read when the API is on TCP, unless `REIN_TOKEN` holds the token itself.
    pub token_file: PathBuf,
}

impl Target {
    /// The `Host` and `Authorization` a request to this API carries. The Unix socket needs no token; over
    /// TCP, `Host` names the address (the API refuses any other) and the token comes from `REIN_TOKEN` or the
    /// token file. A missing token is not an error here: the API's 401 says what is needed.
    pub fn headers(&self) -> Result<Vec<(&'static str, String)>, token::TokenError> {
        let ControlAddr::Tcp(addr) = &self.addr else {
            return Ok(vec![("host", "localhost".to_owned())]);
        };
        let mut headers = vec![("host", host(*addr))];
        let from_env = std::env::var("REIN_TOKEN").ok();
        let token = match from_env.as_deref().and_then(token::parse) {
            Some(t) => Some(t.to_owned()),
            None => token::read(&self.token_file)?,
        };
        if let Some(t) = token {
            headers.push(("authorization", format!("Bearer {t}")));
        }
        Ok(headers)
    }
}

/// The `Host` of a request to `addr`. A connection to an unspecified address (`0.0.0.0:8443`, rein's own
/// `--control` given to the CLI as it is) reaches the loopback address, which is what the API sees.
fn host(addr: std::net::SocketAddr) -> String {
    let mut reached = addr;
    if addr.ip().is_unspecified() {
        reached.set_ip(match addr {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    reached.to_string()
}

pub fn show(target: &Target, path: &str) -> ExitCode {
    send(target, Method::GET, path, None, None)
}

pub fn put(target: &Target, path: &str, file: &Path, if_match: Option<&str>) -> ExitCode {
    let body = if file == Path::new("-") {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).map(|_| buf)
    } else {
        std::fs::read(file)
    };
    match body {
        Ok(body) => send(target, Method::PUT, path, Some(body), if_match),
        Err(e) => {
            eprintln!("rein: cannot read {}: {e}", file.display());
            ExitCode::from(exit::FAILED)
        }
    }
}

/// Sends one request and prints the answer: the body on stdout for success; otherwise one line on stderr,
/// `rein: error: WHAT: DETAIL`. Applications a change left not serving are named on stderr too.
pub fn send(
    target: &Target,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
    if_match: Option<&str>,
) -> ExitCode {
    match fetch(target, method, path, body, if_match) {
        Ok(text) => {
            print!("{text}");
            for line in not_ready(&text) {
                eprintln!("rein: warning: {line}");
            }
            ExitCode::SUCCESS
        }
        Err(failure) => failure.report(),
    }
}

/// Why a request to the API gave no answer to print.
pub enum Failure {
    /// The request could not be made (a bad header), or the client could not start.
    Local(String),
    /// The API answered with an error: its status and body.
    Refused(StatusCode, String),
    /// Nothing answers at the address.
    Unreachable(ControlAddr, std::io::Error),
}

impl Failure {
    /// Prints the failure as one line (two for an unreachable API: the hint) and gives the exit code.
    pub fn report(self) -> ExitCode {
        eprintln!("rein: {self}");
        match self {
            Failure::Local(_) | Failure::Refused(..) => ExitCode::from(exit::FAILED),
            Failure::Unreachable(..) => {
                eprintln!("(is `rein run` running with the same --state or --control?)");
                ExitCode::from(exit::UNREACHABLE)
            }
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Local(message) => f.write_str(message),
            Failure::Refused(status, text) => write!(f, "error: {}", error_line(*status, text)),
            Failure::Unreachable(addr, e) => {
                write!(f, "cannot reach the control API at {addr}: {e}")
            }
        }
    }
}

/// The small runtime a command runs its requests on.
pub(super) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Why a request to the control API got no answer.
#[derive(Debug, thiserror::Error)]
pub(super) enum ClientError {
    #[error(transparent)]
    Token(#[from] token::TokenError),
    #[error("cannot make a control API request of {path:?}: {source}")]
    Request { path: String, source: http::Error },
    #[error("cannot reach the control API at {addr}: {source}")]
    Unreachable {
        addr: String,
        source: std::io::Error,
    },
}

/// `GET path`: its status and body, for a command that reads the answer itself (`rein top`).
pub(super) async fn get(target: &Target, path: &str) -> Result<(StatusCode, String), ClientError> {
    call(target, Method::GET, path).await
}

/// One request without a body: its status and body.
pub(super) async fn call(
    target: &Target,
    method: Method,
    path: &str,
) -> Result<(StatusCode, String), ClientError> {
    let headers = target.headers()?;
    let req = build(method, path, None, None, &headers).map_err(|source| ClientError::Request {
        path: path.to_owned(),
        source,
    })?;
    request(&target.addr, req)
        .await
        .map_err(|source| ClientError::Unreachable {
            addr: target.addr.to_string(),
            source,
        })
}

/// One request; the body of a successful answer.
pub fn fetch(
    target: &Target,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
    if_match: Option<&str>,
) -> Result<String, Failure> {
    let headers = target
        .headers()
        .map_err(|e| Failure::Local(e.to_string()))?;
    // A path or a header that makes no request is the caller's mistake, not an unreachable server.
    let req = build(method, path, body, if_match, &headers).map_err(|e| {
        Failure::Local(format!(
            "cannot make a control API request of {path:?}: {e}"
        ))
    })?;
    let runtime = runtime().map_err(|e| Failure::Local(e.to_string()))?;
    match runtime.block_on(request(&target.addr, req)) {
        Ok((status, text)) if status.is_success() => Ok(text),
        Ok((status, text)) => Err(Failure::Refused(status, text)),
        Err(e) => Err(Failure::Unreachable(target.addr.clone(), e)),
    }
}

/// An API error as one line: `{"error": "Invalid configuration.", "detail": "routes/0: …"}` is
/// `Invalid configuration: routes/0: …`; a body that is not such a document is shown after the status.
fn error_line(status: StatusCode, text: &str) -> String {
    let doc: Option<serde_json::Value> = serde_json::from_str(text).ok();
    let field = |name: &str| {
        doc.as_ref()
            .and_then(|d| d.get(name))
            .and_then(|v| v.as_str())
            .map(|s| one_line(s.trim_end_matches('.')))
    };
    match (field("error"), field("detail")) {
        (Some(error), Some(detail)) => format!("{error}: {detail}"),
        (Some(error), None) => error,
        _ => match one_line(text.trim()) {
            body if body.is_empty() => status.to_string(),
            body => format!("{status}: {body}"),
        },
    }
}

/// Line breaks folded, so that a message stays one line.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// A change applied whose applications did not all start: `NAME: reason` for each.
fn not_ready(text: &str) -> Vec<String> {
    let doc: Option<serde_json::Value> = serde_json::from_str(text).ok();
    let Some(apps) = doc
        .as_ref()
        .and_then(|d| d.get("applications"))
        .and_then(|a| a.as_object())
    else {
        return Vec::new();
    };
    apps.iter()
        .map(|(name, why)| {
            let why = why.as_str().map_or_else(|| why.to_string(), one_line);
            format!("application {name:?} is not serving: {why}")
        })
        .collect()
}

fn build(
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
    if_match: Option<&str>,
    headers: &[(&'static str, String)],
) -> http::Result<Request<Full<Bytes>>> {
    let mut req = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        req = req.header(*name, value);
    }
    if let Some(tag) = if_match {
        req = req.header("if-match", tag);
    }
    req.body(Full::new(Bytes::from(body.unwrap_or_default())))
}

async fn request(
    addr: &ControlAddr,
    req: Request<Full<Bytes>>,
) -> std::io::Result<(StatusCode, String)> {
    match addr {
        ControlAddr::Unix(p) => exchange(tokio::net::UnixStream::connect(p).await?, req).await,
        ControlAddr::Tcp(a) => exchange(tokio::net::TcpStream::connect(a).await?, req).await,
    }
}

async fn exchange<S>(stream: S, req: Request<Full<Bytes>>) -> std::io::Result<(StatusCode, String)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(conn);
    let response = sender
        .send_request(req)
        .await
        .map_err(std::io::Error::other)?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_api_error_is_one_line() {
        let line = |status: u16, text: &str| {
            super::error_line(http::StatusCode::from_u16(status).unwrap(), text)
        };
        assert_eq!(
            line(
                400,
                "{\"error\": \"Invalid configuration.\", \"detail\": \"routes/0: bad\\nthing.\"}\n"
            ),
            "Invalid configuration: routes/0: bad | thing"
        );
        assert_eq!(
            line(404, "{\"error\": \"Value doesn't exist.\"}"),
            "Value doesn't exist"
        );
        assert_eq!(line(502, "oops\n"), "502 Bad Gateway: oops");
        assert_eq!(line(500, ""), "500 Internal Server Error");
    }

    #[test]
    fn the_host_names_the_address_reached() {
        let host = |a: &str| super::host(a.parse().unwrap());
        assert_eq!(host("127.0.0.1:8443"), "127.0.0.1:8443");
        assert_eq!(host("0.0.0.0:8443"), "127.0.0.1:8443");
        assert_eq!(host("[::]:8443"), "[::1]:8443");
        assert_eq!(host("10.1.2.3:9"), "10.1.2.3:9");
    }
}
