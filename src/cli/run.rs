//! `rein run`: start from a configuration, serve until a signal says stop.
//!
//! The first configuration comes from `--config` if given, else from the state directory, else the embedded
//! default. SIGHUP re-reads `--config` through the same validation as the API and reloads every application;
//! SIGUSR1 reopens the log files; SIGTERM, SIGINT and SIGQUIT stop accepting, let in-flight requests finish
//! and stop the applications, all within `--stop-timeout`, and exit ([`super::signals`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

mod error;
mod fleet;

use error::{ConfigFileError, RunError};
pub(crate) use fleet::FleetArgs;

use super::notify::{Status, notify};
use super::signals::{Asked, Signals};
use super::{LogFormat, RunArgs, exit};
use crate::config::default_document;
use crate::control::ControlListener;
use crate::engine::{ChangeError, ChangeOptions, Engine, Initial, Store};
use crate::fleet::Fleet;
use crate::history::Source;
use crate::log_file::Reopenable;
use crate::server::Server;
use crate::state::StateDir;
use crate::supervisor::Supervisor;
use crate::supervisor::conf::AppConf;

pub fn run(args: RunArgs) -> ExitCode {
    let own_log = match init_logging(args.log.as_deref(), args.log_format) {
        Ok(log) => log,
        Err(e) => {
            eprintln!(
                "rein: cannot open the log {}: {e}",
                args.log.as_deref().unwrap_or(Path::new("")).display()
            );
            return ExitCode::from(exit::FAILED);
        }
    };
    match crate::fd_limit::raise() {
        Ok((before, after)) if before != after => {
            tracing::info!(
                before,
                after,
                "raised the open-file limit (RLIMIT_NOFILE) to its hard limit"
            )
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-file limit (RLIMIT_NOFILE)"),
    }
    let logs_to_file = own_log.is_some();
    // Requests are served by the workers; this runtime has the control API, the supervisor and health
    // checks. It is multi-threaded (one thread) so that a Python import check can block in place.
    let workers = args
        .workers
        .map_or_else(crate::workers::default_count, usize::from);
    let runtime = match crate::workers::start(workers).and_then(|()| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(16)
            .enable_all()
            .build()
    }) {
        Ok(r) => r,
        Err(e) => return fail(RunError::Runtime(e), logs_to_file),
    };
    match runtime.block_on(serve(args, own_log)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e, logs_to_file),
    }
}

/// Logs why rein stops, and says it on the terminal too when the log is a file (once: without `--log`, the log
/// is the terminal).
fn fail(error: RunError, logs_to_file: bool) -> ExitCode {
    tracing::error!("{error}");
    if logs_to_file {
        eprintln!("rein: {error}");
    }
    ExitCode::from(exit::FAILED)
}

async fn serve(args: RunArgs, own_log: Option<Reopenable>) -> Result<(), RunError> {
    let signals = Signals::install().map_err(RunError::Signals)?;
    let state_dir = args.control.state_dir();
    let state = StateDir::open(&state_dir).map_err(|source| RunError::StateDir {
        path: state_dir.clone(),
        source,
    })?;
    let (doc, origin) = initial_document(args.config.as_deref(), args.listen.as_deref(), &state)?;
    let fleet = args.fleet.options().map(|o| Arc::new(Fleet::new(o)));
    let (doc, origin, revision) = match &fleet {
        Some(fleet) => fleet_document(fleet, &state, doc, origin).await,
        None => (doc, origin, None),
    };
    let control_addr = args.control.control_addr();
    let control = ControlListener::bind(&control_addr, &args.control.token_file())
        .await
        .map_err(|source| RunError::Control {
            addr: control_addr.clone(),
            source,
        })?;
    let supervisor = Supervisor::new(&state_dir, default_user(&args.user)?);
    let initial = Initial {
        doc,
        source: origin.source(),
        history_size: usize::from(args.history_size),
        revision,
    };
    let store = match &fleet {
        Some(fleet) => Store::fleet(state, fleet.clone()),
        None => Store::local(state),
    };
    let engine = Engine::start(Server::with_supervisor(supervisor), store, initial)
        .await
        .map_err(|e| start_error(e, &origin))?;
    let engine = Arc::new(engine);
    if let Some(pid) = &args.pid {
        std::fs::write(pid, format!("{}\n", std::process::id())).map_err(|source| {
            RunError::PidFile {
                path: pid.clone(),
                source,
            }
        })?;
    }
    let stop = CancellationToken::new();
    let control_task = tokio::spawn(control.serve(engine.clone(), stop.clone()));
    let acme_task = crate::acme::spawn(engine.clone(), &state_dir, stop.clone());
    let fleet_task = fleet.map(|f| crate::fleet::spawn(f, engine.clone(), stop.clone()));
    tracing::info!(control = %control_addr, state = %state_dir.display(), "rein is running");
    notify(Status::Ready);
    wait_for_stop(&engine, args.config.as_deref(), own_log.as_ref(), signals).await;
    notify(Status::Stopping);

    stop_within(&engine, Duration::from_secs_f64(args.stop_timeout.max(0.0))).await;
    stop.cancel();
    let _ = control_task.await;
    let _ = acme_task.await;
    if let Some(task) = fleet_task {
        let _ = task.await;
    }
    if let Some(pid) = &args.pid {
        let _ = std::fs::remove_file(pid);
    }
    tracing::info!("stopped");
    Ok(())
}

/// Who an application without `user` runs as: `--user` when rein is root (never root by default, as in Unit);
/// otherwise rein's own user, the only one it can run them as.
fn default_user(user: &str) -> Result<Option<String>, RunError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    let name = user.to_owned();
    match nix::unistd::User::from_name(user) {
        Ok(Some(_)) => Ok(Some(name)),
        Ok(None) => Err(RunError::NoSuchUser { name }),
        Err(source) => Err(RunError::UserLookup { name, source }),
    }
}

/// Stops accepting, lets requests in flight finish, then stops the applications, all within `timeout`: one
/// deadline for the whole stop, so that draining the applications (whose requests in flight the server already
/// waited for) cannot hold rein past `--stop-timeout` a second time. Instances still running when rein exits
/// get their death signal (`PR_SET_PDEATHSIG`).
async fn stop_within(engine: &Engine, timeout: Duration) {
    let deadline = tokio::time::Instant::now() + timeout;
    tracing::info!("stopping: no new connections; letting requests in flight finish");
    if !engine.server().shutdown(timeout).await {
        tracing::warn!("stop timeout reached with requests still in flight");
    }
    if let Some(supervisor) = engine.server().supervisor() {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        supervisor.shutdown(left).await;
    }
}

/// Where the first configuration came from.
enum Origin {
    File,
    Saved,
    /// The fleet's document, read from etcd.
    Fleet,
    /// The embedded default, its one listener on this address.
    Default {
        listen: String,
    },
}

impl Origin {
    /// How the history records the first document.
    fn source(&self) -> Source {
        match self {
            Origin::File => Source::File,
            Origin::Fleet => Source::Fleet,
            Origin::Saved | Origin::Default { .. } => Source::Startup,
        }
    }
}

/// `--config` wins; else the saved configuration; else the embedded default, listening on `--listen` if given.
fn initial_document(
    config: Option<&Path>,
    listen: Option<&str>,
    state: &StateDir,
) -> Result<(Value, Origin), RunError> {
    if let Some(path) = config {
        return Ok((read_config(path)?, Origin::File));
    }
    if let Some(doc) = state.load()? {
        tracing::info!(dir = %state.path().display(), "restoring the saved configuration");
        if let Some(addr) = listen {
            tracing::warn!(
                listen = addr,
                "--listen applies to the default configuration only: the saved one is served as it is"
            );
        }
        return Ok((doc, Origin::Saved));
    }
    let mut doc = default_document(state.path()).map_err(|source| RunError::Welcome {
        path: state.path().to_owned(),
        source,
    })?;
    let listen = match listen {
        Some(addr) => {
            set_default_listener(&mut doc, addr);
            addr.to_owned()
        }
        None => DEFAULT_LISTEN.to_owned(),
    };
    Ok((doc, Origin::Default { listen }))
}

/// How long a node waits for etcd at start before it starts from its local copy.
const FLEET_START_WAIT: Duration = Duration::from_secs(3);

/// In a fleet, the first document is the fleet's when etcd answers and holds one; otherwise the local one
/// (which the node publishes if the fleet has none, and replaces by the fleet's once etcd answers). With the
/// fleet revision of the document, when known.
async fn fleet_document(
    fleet: &Fleet,
    state: &StateDir,
    local: Value,
    origin: Origin,
) -> (Value, Origin, Option<i64>) {
    match fleet.fetch(FLEET_START_WAIT).await {
        Ok(Some((doc, revision))) => {
            if matches!(origin, Origin::File) && doc != local {
                tracing::warn!("the fleet has a configuration: serving it, not --config's");
            }
            tracing::info!(
                fleet = fleet.name(),
                revision,
                "serving the fleet's configuration"
            );
            (doc, Origin::Fleet, Some(revision))
        }
        Ok(None) => (local, origin, None),
        Err(e) => {
            let revision = match origin {
                Origin::Saved => state.load_revision(fleet.name()),
                _ => None,
            };
            tracing::warn!(error = %e, "etcd is unreachable: starting from this node's copy; writes are refused until etcd answers");
            (local, origin, revision)
        }
    }
}

/// The embedded default's listener, as `config/default.json` spells it.
const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// Moves the default document's one listener to `addr` (validated with the rest of the document).
fn set_default_listener(doc: &mut Value, addr: &str) {
    if let Some(listeners) = doc.get_mut("listeners").and_then(Value::as_object_mut)
        && let Some(listener) = listeners.remove(DEFAULT_LISTEN)
    {
        listeners.insert(addr.to_owned(), listener);
    }
}

/// A refused start; when the default configuration's listener is what failed (the port is taken, or needs
/// privileges), the error names `--listen`, the way to choose another without writing a file.
fn start_error(error: ChangeError, origin: &Origin) -> RunError {
    if let Origin::Default { listen } = origin
        && let Some(e) = match &error {
            ChangeError::Apply(e) => Some(e),
            ChangeError::Invalid(errors) => Some(errors.first()),
            _ => None,
        }
        && e.path.as_str() == format!("listeners/{listen}")
    {
        return RunError::DefaultListener {
            addr: listen.clone(),
            detail: e.message.clone(),
        };
    }
    RunError::Start(error)
}

fn read_config(path: &Path) -> Result<Value, ConfigFileError> {
    let text = std::fs::read(path).map_err(|source| ConfigFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    crate::config::text::parse(&text).map_err(|source| ConfigFileError::Json {
        path: path.to_owned(),
        source,
    })
}

/// Serves signals until one asks to stop: SIGHUP reloads `--config`, SIGUSR1 reopens the logs.
async fn wait_for_stop(
    engine: &Arc<Engine>,
    config: Option<&Path>,
    own_log: Option<&Reopenable>,
    mut signals: Signals,
) {
    loop {
        match signals.next().await {
            Asked::Stop => return,
            Asked::Reload => reload(engine, config).await,
            Asked::ReopenLogs => reopen_logs(engine, own_log),
        }
    }
}

/// SIGUSR1: rein's own log, the access log and the applications' logs are opened again at their paths.
fn reopen_logs(engine: &Engine, own_log: Option<&Reopenable>) {
    if let Some(log) = own_log
        && let Err(e) = log.reopen()
    {
        tracing::error!(path = %log.path().display(), error = %e, "SIGUSR1: cannot reopen rein's log; writing to the old file");
    }
    engine.server().reopen_access_log();
    for e in crate::supervisor::logs::reopen_all() {
        tracing::error!(error = %e, "SIGUSR1: cannot reopen an application's log");
    }
    tracing::info!("SIGUSR1: log files reopened");
}

/// SIGHUP: re-reads `--config` (if given), then reloads every application once: one that the re-read changed
/// or added was already reloaded (or started) by the change, so it is not reloaded a second time. A file that
/// cannot be read or is refused changes nothing at all: no application is reloaded either.
async fn reload(engine: &Arc<Engine>, config: Option<&Path>) {
    let before = applications(engine);
    notify(Status::Reloading);
    let reread = reread(engine, config).await;
    notify(Status::Ready);
    if reread.is_err() {
        return;
    }
    if engine.server().supervisor().is_none() {
        return;
    }
    tracing::info!("SIGHUP: rolling reload of every application");
    for (name, conf) in applications(engine) {
        if before.get(&name) != Some(&conf) {
            continue;
        }
        let engine = engine.clone();
        // Not awaited here: SIGTERM must still be heard while the reloads run.
        tokio::spawn(async move {
            let report = match engine.server().supervisor() {
                Some(supervisor) => supervisor.restart(&name).await,
                None => None,
            };
            if let Some(report) = report.filter(|r| !r.ok) {
                tracing::warn!(app = %name, reason = ?report.reason, "SIGHUP: reload abandoned");
            }
        });
    }
}

/// The applications of the configuration being served, as compiled.
fn applications(engine: &Engine) -> BTreeMap<String, AppConf> {
    engine
        .server()
        .shared()
        .current
        .load()
        .snapshot
        .applications
        .clone()
}

/// Applies `--config` again; `Err` when it was refused (logged here), after which nothing else may change.
async fn reread(engine: &Engine, config: Option<&Path>) -> Result<(), Refused> {
    let Some(path) = config else {
        tracing::info!("SIGHUP: no --config file to re-read");
        return Ok(());
    };
    let doc = match read_config(path) {
        Ok(doc) => doc,
        Err(e) => {
            tracing::error!("SIGHUP: {e}; nothing changed, no application reloaded");
            return Err(Refused);
        }
    };
    let result = engine
        .replace(Source::Sighup, doc, ChangeOptions::default())
        .await;
    match result {
        Ok(outcome) => {
            tracing::info!(?outcome, file = %path.display(), "SIGHUP: configuration re-read");
            Ok(())
        }
        Err(e) => {
            tracing::error!("SIGHUP: {e}; nothing changed, no application reloaded");
            Err(Refused)
        }
    }
}

/// The re-read `--config` was refused (already logged).
struct Refused;

/// rein's own log: standard error, or `--log` (which SIGUSR1 reopens); text or JSON lines. Colour codes only
/// on a terminal: a file, a pipe or the journal gets plain text.
fn init_logging(file: Option<&Path>, format: LogFormat) -> std::io::Result<Option<Reopenable>> {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("REIN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let log = file.map(Reopenable::open).transpose()?;
    match (&log, format) {
        (Some(log), LogFormat::Text) => builder.with_ansi(false).with_writer(log.clone()).init(),
        (Some(log), LogFormat::Json) => builder.json().with_writer(log.clone()).init(),
        (None, LogFormat::Text) => builder
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .init(),
        (None, LogFormat::Json) => builder.json().with_writer(std::io::stderr).init(),
    }
    Ok(log)
}
