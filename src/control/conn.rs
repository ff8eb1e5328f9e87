//! One control API connection: HTTP/1.1 with bounds on slow clients, and the TCP checks of [`super::guard`]
//! before any request reaches [`super::api`].
//!
//! A client that opens a connection and sends nothing, or half a request head, is closed after
//! [`HEAD_TIMEOUT`] (hyper's header timer runs from the end of the previous request, so an idle keep-alive
//! connection is closed the same way). A request body must have arrived whole within [`BODY_TIMEOUT`] of its
//! head. Nothing bounds the time rein takes to answer: a rolling reload may take minutes.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, header};
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioTimer;
use tokio::time::Sleep;

use super::guard::{Guard, Refusal};
use super::{api, routes};
use crate::body::Body;
use crate::engine::Engine;

/// The longest wait for a complete request head, from the connection's start or the previous response.
pub(super) const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest time a request body may take to arrive, from its head.
pub(super) const BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// Who is on the other end, and so what a request must show.
#[derive(Clone)]
pub(super) enum Peer {
    /// A client of the Unix socket: the socket's mode already admitted it.
    Local,
    /// A TCP client that reached `local`: [`Guard::check`] decides.
    Tcp {
        guard: Arc<Guard>,
        local: SocketAddr,
    },
}

/// Serves one connection until the client closes it or a timeout does.
pub(super) async fn serve<I>(io: I, engine: Arc<Engine>, peer: Peer)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = service_fn(move |req: Request<Incoming>| {
        let engine = engine.clone();
        let refused = admit(&peer, &req).err();
        async move {
            let response = match refused {
                Some(refusal) => refuse(refusal),
                None => routes::dispatch(req.map(RequestBody::new), engine).await,
            };
            Ok::<_, Infallible>(response)
        }
    });
    if let Err(e) = builder().serve_connection(io, svc).await {
        tracing::debug!(error = %e, "control connection ended with an error");
    }
}

fn builder() -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT);
    builder
}

fn admit(peer: &Peer, req: &Request<Incoming>) -> Result<(), Refusal> {
    match peer {
        Peer::Local => Ok(()),
        Peer::Tcp { guard, local } => guard.check(req.headers(), *local),
    }
}

fn refuse(refusal: Refusal) -> Response<Body> {
    let status = refusal.status;
    let mut response = api::fail(status, refusal.error, Some(refusal.detail));
    if status == http::StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"rein control API\""),
        );
    }
    response
}

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum BodyError {
    #[error("the request body did not arrive within {} s", BODY_TIMEOUT.as_secs())]
    Timeout,
    #[error(transparent)]
    Read(#[from] hyper::Error),
}

/// A request body that fails once [`BODY_TIMEOUT`] has passed since the head.
pub(super) struct RequestBody {
    inner: Incoming,
    deadline: Pin<Box<Sleep>>,
}

impl RequestBody {
    fn new(inner: Incoming) -> RequestBody {
        RequestBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(BODY_TIMEOUT)),
        }
    }
}

impl HttpBody for RequestBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(BodyError::Read))),
            Poll::Pending if this.deadline.as_mut().poll(cx).is_ready() => {
                Poll::Ready(Some(Err(BodyError::Timeout)))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
