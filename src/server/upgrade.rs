//! The client's side of a protocol upgrade (a proxied WebSocket) as the actions and the proxy see it: taken
//! from the request, and, once the `101` answer has gone out, the client's connection to carry the tunnel,
//! from rein's HTTP/1 connection or from hyper's (an `h2c` listener).

use http::Extensions;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

use super::h1::{BoxIo, PendingUpgrade};

/// A request's upgrade, to be completed after its `101` answer.
pub(crate) enum ClientUpgrade {
    Hyper(OnUpgrade),
    H1(oneshot::Receiver<BoxIo>),
}

/// The client's connection could not be taken over.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpgradeError {
    #[error(transparent)]
    Hyper(hyper::Error),
    #[error("the client connection ended before the upgrade")]
    Closed,
}

impl ClientUpgrade {
    /// The upgrade the server connection put in the request's extensions, if it can take one.
    pub(crate) fn take(extensions: &mut Extensions) -> Option<ClientUpgrade> {
        if let Some(from) = extensions.remove::<PendingUpgrade>() {
            return from.take().map(ClientUpgrade::H1);
        }
        extensions.remove::<OnUpgrade>().map(ClientUpgrade::Hyper)
    }

    /// The client's connection, once the `101` answer has been written.
    pub(crate) async fn connection(self) -> Result<BoxIo, UpgradeError> {
        match self {
            ClientUpgrade::Hyper(on) => match on.await {
                Ok(upgraded) => Ok(Box::new(TokioIo::new(upgraded))),
                Err(e) => Err(UpgradeError::Hyper(e)),
            },
            ClientUpgrade::H1(from) => from.await.map_err(|_| UpgradeError::Closed),
        }
    }
}
