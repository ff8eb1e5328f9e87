//! `rein dashboard`: a live web dashboard of a running server, served to a browser on this machine.
//!
//! The command listens on a loopback port and prints a one-time link; the browser that opens it gets a session
//! (see `session`) and a page that follows the server live: a stream of `/status` readings (server-sent
//! events), charts of the last minutes, every listener, upstream server and application instance, recent
//! restarts and reloads, configuration changes, an application's log, and buttons to reload an application or
//! roll the configuration back. The page's requests go to the control API through this command, which holds
//! the way in (the control socket, or the TCP API's token): the API itself is never opened to the browser.
//! Every asset is in the binary: the page works without internet access.

mod routes;
mod session;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;

use super::client::{self, Target};
use super::exit;

/// What the page's requests need: the API, the state directory (for logs), the session, the reading interval.
pub(super) struct Dashboard {
    target: Target,
    state: PathBuf,
    session: session::Session,
    interval: Duration,
}

pub(super) fn run(
    target: Target,
    state: PathBuf,
    listen: SocketAddr,
    interval: Duration,
) -> ExitCode {
    let runtime = match client::runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rein: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    match runtime.block_on(serve(target, state, listen, interval)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}

async fn serve(
    target: Target,
    state: PathBuf,
    listen: SocketAddr,
    interval: Duration,
) -> Result<(), ExitCode> {
    // Fail at once, not in the browser, when there is no server to show.
    if let Err(e) = super::client::get(&target, "/status").await {
        eprintln!("rein: {e}\n(is `rein run` running with the same --state or --control?)");
        return Err(ExitCode::from(exit::UNREACHABLE));
    }
    let failed = |e: std::io::Error| {
        eprintln!("rein: cannot listen on {listen}: {e}");
        ExitCode::from(exit::FAILED)
    };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(failed)?;
    let bound = listener.local_addr().map_err(failed)?;
    let session = session::Session::new(bound.to_string()).map_err(failed)?;
    println!(
        "rein dashboard: open {} (the link works once; Ctrl-C stops the dashboard)",
        session.link()
    );
    let dashboard = Arc::new(Dashboard {
        target,
        state,
        session,
        interval,
    });
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let dashboard = dashboard.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let dashboard = dashboard.clone();
                async move { Ok::<_, std::convert::Infallible>(routes::answer(&dashboard, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
