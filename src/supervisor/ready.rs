//! Readiness checks of an instance on the socket rein gave it: a plain connect, an HTTP `GET` answered
//! with a status below 500, or a FastCGI `FCGI_GET_VALUES` answered.

use std::time::Duration;

use http::{Request, header};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};

use super::conf::Readiness;
use super::spawn::AppSocket;
use crate::body;

/// One attempt may take this long before it counts as "not yet".
const ATTEMPT: Duration = Duration::from_secs(2);

/// One readiness attempt: true when the instance passes.
pub async fn check(addr: &AppSocket, readiness: &Readiness) -> bool {
    if *readiness == Readiness::FastCgi {
        return fastcgi_answers(addr).await;
    }
    let attempt = async {
        match addr {
            AppSocket::Unix(path) => probe(UnixStream::connect(path).await.ok()?, readiness).await,
            AppSocket::Tcp(sa) => probe(TcpStream::connect(sa).await.ok()?, readiness).await,
        }
    };
    matches!(tokio::time::timeout(ATTEMPT, attempt).await, Ok(Some(true)))
}

async fn probe<S>(stream: S, readiness: &Readiness) -> Option<bool>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Readiness::Http(path) = readiness else {
        // The app accepted: with rein owning the socket, a connect alone only proves the kernel queued it,
        // so `connect` readiness also asks for the first bytes of an HTTP answer.
        return Some(http_answers(stream, "/").await.is_some());
    };
    http_answers(stream, path).await.map(|status| status < 500)
}

async fn http_answers<S>(stream: S, path: &str) -> Option<u16>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    tokio::spawn(conn);
    let req = Request::get(path)
        .header(header::HOST, "localhost")
        .header(header::USER_AGENT, "rein-readiness")
        .body(body::empty())
        .ok()?;
    let response = sender.send_request(req).await.ok()?;
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    Some(status)
}

/// A FastCGI server answers management records only once it accepts: PHP-FPM's master and the Python
/// adapter after its import.
async fn fastcgi_answers(addr: &AppSocket) -> bool {
    let server = super::launch::server_addr(addr);
    let attempt = async {
        let mut conn = crate::fastcgi::connect(&server, ATTEMPT).await.ok()?;
        conn.probe(ATTEMPT).await.ok()
    };
    matches!(tokio::time::timeout(ATTEMPT, attempt).await, Ok(Some(())))
}
