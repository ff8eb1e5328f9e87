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

/// Sends one request and prints the answer: the body on stdout for success, on stderr otherwise.
pub fn send(
    target: &Target,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
    if_match: Option<&str>,
) -> ExitCode {
    let headers = match target.headers() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("rein: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    // A path or a header that makes no request is the caller's mistake, not an unreachable server.
    let req = match build(method, path, body, if_match, &headers) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rein: cannot make a control API request of {path:?}: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let addr = &target.addr;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rein: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    match runtime.block_on(request(addr, req)) {
        Ok((status, text)) if status.is_success() => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Ok((status, text)) => {
            eprint!("rein: {status}\n{text}");
            ExitCode::from(exit::FAILED)
        }
        Err(e) => {
            eprintln!(
                "rein: cannot reach the control API at {addr}: {e}\n(is `rein run` running with the same --state or --control?)"
            );
            ExitCode::from(exit::UNREACHABLE)
        }
    }
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

pub(super) fn build(
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

pub(super) async fn request(
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
    fn the_host_names_the_address_reached() {
        let host = |a: &str| super::host(a.parse().unwrap());
        assert_eq!(host("127.0.0.1:8443"), "127.0.0.1:8443");
        assert_eq!(host("0.0.0.0:8443"), "127.0.0.1:8443");
        assert_eq!(host("[::]:8443"), "[::1]:8443");
        assert_eq!(host("10.1.2.3:9"), "10.1.2.3:9");
    }
}
