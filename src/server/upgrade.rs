//! The client's side of a protocol upgrade (a proxied WebSocket) as the actions and the proxy see it: taken
//! from the request, and, once the `101` answer has gone out, the client's connection to carry the tunnel.

use http::Extensions;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

/// A request's upgrade, to be completed after its `101` answer.
pub(crate) struct ClientUpgrade(OnUpgrade);

/// The client's connection could not be taken over.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub(crate) struct UpgradeError(hyper::Error);

impl ClientUpgrade {
    /// The upgrade the server connection put in the request's extensions, if it can take one.
    pub(crate) fn take(extensions: &mut Extensions) -> Option<ClientUpgrade> {
        extensions.remove::<OnUpgrade>().map(ClientUpgrade)
    }

    /// The client's connection, once the `101` answer has been written.
    pub(crate) async fn connection(
        self,
    ) -> Result<impl AsyncRead + AsyncWrite + Unpin + Send + 'static, UpgradeError> {
        self.0.await.map(TokioIo::new).map_err(UpgradeError)
    }
}
