//! A small client of the control API for the CLI: one request, the answer printed, an exit code.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

use super::exit;
use crate::control::ControlAddr;

pub fn show(addr: &ControlAddr, path: &str) -> ExitCode {
    send(addr, Method::GET, path, None, None)
}

pub fn put(addr: &ControlAddr, path: &str, file: &Path, if_match: Option<&str>) -> ExitCode {
    let body = if file == Path::new("-") {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).map(|_| buf)
    } else {
        std::fs::read(file)
    };
    match body {
        Ok(body) => send(addr, Method::PUT, path, Some(body), if_match),
        Err(e) => {
            eprintln!("rein: cannot read {}: {e}", file.display());
            ExitCode::from(exit::FAILED)
        }
    }
}

/// Sends one request and prints the answer: the body on stdout for success, on stderr otherwise.
pub fn send(
    addr: &ControlAddr,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
    if_match: Option<&str>,
) -> ExitCode {
    // A path or a header that makes no request is the caller's mistake, not an unreachable server.
    let req = match build(method, path, body, if_match) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rein: cannot make a control API request of {path:?}: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
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

fn build(
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
    if_match: Option<&str>,
) -> http::Result<Request<Full<Bytes>>> {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost");
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
