//! The `rein` command line: `run` starts the server; `config`, `status` talk to a running one.

mod bench;
mod client;
mod dashboard;
mod generate;
mod history;
mod notify;
mod run;
mod signals;
mod status;
mod tail;
mod top;
mod units;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use serde_json::Value;

use crate::control::ControlAddr;

/// Exit codes shared by every command.
pub mod exit {
    /// The server or the API refused: bad configuration, failed start.
    pub const FAILED: u8 = 1;
    /// The control socket could not be reached.
    pub const UNREACHABLE: u8 = 3;
}

#[derive(Parser, Debug)]
#[command(
    name = "rein",
    version,
    about = "A web application server configured live as one JSON document"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the server in the foreground.
    Run(Box<RunArgs>),
    /// Read or change the configuration of a running server.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Show a running server's applications, instances, listeners and upstreams as a table.
    Status {
        /// Print the status document (`GET /status`) as JSON instead
        #[arg(long)]
        json: bool,
        /// Show the fleet instead: each node, the revision it serves, and why it does not serve the fleet's
        #[arg(long)]
        fleet: bool,
        #[command(flatten)]
        control: ControlArgs,
    },
    /// Measure a server under load: throughput, latency percentiles, errors, longest outage.
    Bench(bench::BenchArgs),
    /// Rolling reload of an application (waits until it is done or abandoned).
    Reload {
        /// The application's name
        name: String,
        /// Replace only this instance (its id in `rein status`), by a new one started beside it
        #[arg(long, conflicts_with = "fleet")]
        instance: Option<u64>,
        /// Reload it on every node of the fleet, a batch of nodes at a time
        #[arg(long)]
        fleet: bool,
        /// With --fleet: how many nodes reload at once
        #[arg(long, default_value_t = 1, requires = "fleet", value_parser = clap::value_parser!(u16).range(1..))]
        batch: u16,
        #[command(flatten)]
        control: ControlArgs,
    },
    /// A live view of a running server: applications and their instances (CPU, memory, restarts, requests),
    /// upstream servers, requests per second; keys reload an application or show its log.
    Top {
        /// Seconds between readings
        #[arg(long, default_value_t = 1.0, value_parser = interval)]
        interval: f64,
        #[command(flatten)]
        control: ControlArgs,
    },
    /// A live web dashboard of a running server for a browser on this machine: prints a one-time link.
    Dashboard {
        /// The loopback address to serve the dashboard on (port 0: any free port)
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: std::net::SocketAddr,
        /// Seconds between readings
        #[arg(long, default_value_t = 1.0, value_parser = interval)]
        interval: f64,
        #[command(flatten)]
        control: ControlArgs,
    },
    /// Print an application's output (stdout and stderr), optionally following it. Reads STATE/logs/NAME.log:
    /// give the server's --state (--control is not used). Each line starts with the time rein wrote it (UTC)
    /// and the instance: `[3]` its stdout, `[3 err]` its stderr, `[3 rein]` rein about it.
    Logs {
        /// The application's name
        name: String,
        /// Keep printing what the application writes
        #[arg(short, long)]
        follow: bool,
        /// Print the application's output as it wrote it: no time or instance, none of rein's lines
        #[arg(long)]
        raw: bool,
        #[command(flatten)]
        control: ControlArgs,
    },
    /// Print the completion script for a shell (bash: `rein completions bash > /etc/bash_completion.d/rein`)
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print the man page, rein(1), generated from this command line's definition
    Man {
        /// Write rein.1 and a page per command (rein-run.1 …) into this directory instead
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Args, Debug)]
pub struct ControlArgs {
    /// The control API address: unix:PATH or IP:PORT [default: unix:STATE/control.sock]
    #[arg(long, env = "REIN_CONTROL", global = true)]
    control: Option<ControlAddr>,
    /// The state directory (saved configuration, control socket)
    #[arg(long, env = "REIN_STATE", global = true)]
    state: Option<PathBuf>,
    /// The control API's token over TCP [default: STATE/control.token]; a client may give the token itself
    /// in REIN_TOKEN instead
    #[arg(long, env = "REIN_TOKEN_FILE", global = true)]
    token_file: Option<PathBuf>,
}

impl ControlArgs {
    /// Absolute: applications get paths under it (Node's preload) and run in their own directories.
    fn state_dir(&self) -> PathBuf {
        let dir = self.state.clone().unwrap_or_else(default_state_dir);
        std::path::absolute(&dir).unwrap_or(dir)
    }

    fn control_addr(&self) -> ControlAddr {
        self.control
            .clone()
            .unwrap_or_else(|| ControlAddr::Unix(self.state_dir().join("control.sock")))
    }

    fn token_file(&self) -> PathBuf {
        self.token_file
            .clone()
            .unwrap_or_else(|| self.state_dir().join(crate::control::token::FILE))
    }

    /// Where a client finds the API and what it presents.
    fn client(&self) -> client::Target {
        client::Target {
            addr: self.control_addr(),
            token_file: self.token_file(),
        }
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Start with this configuration file (JSON) instead of the saved one; SIGHUP re-reads it
    #[arg(long)]
    config: Option<PathBuf>,
    /// The address the embedded default configuration listens on (used when there is neither --config nor a
    /// saved configuration) [default: 127.0.0.1:8080]
    #[arg(long, value_name = "ADDR", conflicts_with = "config")]
    listen: Option<String>,
    /// Append rein's own log here instead of standard error
    #[arg(long)]
    log: Option<PathBuf>,
    /// rein's own log as text lines or as JSON objects, one a line (for a log collector)
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Write rein's process id to this file
    #[arg(long)]
    pid: Option<PathBuf>,
    /// Seconds to let in-flight requests finish on SIGTERM, SIGINT or SIGQUIT
    #[arg(long, default_value_t = 30.0)]
    stop_timeout: f64,
    /// Threads serving requests, each with its own connections [default: one per CPU]
    #[arg(long, env = "REIN_WORKERS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    workers: Option<u16>,
    /// The user an application without "user" runs as, when rein runs as root (as Unit's --user)
    #[arg(long, default_value = "nobody")]
    user: String,
    /// How many applied configurations to keep in STATE/history (0 keeps none)
    #[arg(long, default_value_t = crate::history::DEFAULT_SIZE)]
    history_size: u16,
    #[command(flatten)]
    fleet: run::FleetArgs,
    #[command(flatten)]
    control: ControlArgs,
}

/// How rein writes its own log.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Print the configuration, or the value at PATH (e.g. listeners/*:8080)
    Get {
        path: Option<String>,
        #[command(flatten)]
        control: ControlArgs,
    },
    /// Replace the value at PATH with the JSON in FILE (`-` reads standard input)
    Set {
        path: String,
        file: PathBuf,
        /// Only validate; change nothing
        #[arg(long)]
        dry_run: bool,
        /// Refuse the change if the configuration's ETag is no longer this one
        #[arg(long)]
        if_match: Option<String>,
        #[command(flatten)]
        control: ControlArgs,
    },
    /// Delete the value at PATH
    Delete {
        path: String,
        #[command(flatten)]
        control: ControlArgs,
    },
    /// List the applied configurations kept (newest first, * the running one), or print one
    History(history::HistoryArgs),
    /// Show the paths added, removed and changed between two applied configurations
    Diff(history::DiffArgs),
    /// Make an earlier applied configuration the running one (validated like any change)
    Rollback(history::RollbackArgs),
}

/// Root's state directory, where a system service keeps its state.
const ROOT_STATE_DIR: &str = "/var/lib/rein";

/// The system's `/var/lib/rein` for root (as a packaged server keeps its state, not under `/root`); for other
/// users `$XDG_STATE_HOME/rein`, else `~/.local/state/rein`, else `./rein-state`.
fn default_state_dir() -> PathBuf {
    if nix::unistd::geteuid().is_root() {
        return PathBuf::from(ROOT_STATE_DIR);
    }
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("rein");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => PathBuf::from(home).join(".local/state/rein"),
        None => PathBuf::from("rein-state"),
    }
}

pub fn main() -> ExitCode {
    // `rein __exec -- PROGRAM ARGS...`: the hidden exec shim between fork and an app process; kept out of clap
    // so nothing is parsed or rewritten on the way (see supervisor::spawn::exec_shim).
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == "__exec") {
        return crate::supervisor::spawn::exec_shim(args.collect());
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run::run(*args),
        Command::Status {
            json: true,
            fleet,
            control,
        } => client::show(&control.client(), if fleet { "/fleet" } else { "/status" }),
        Command::Status {
            fleet: true,
            control,
            ..
        } => show_fleet(&control),
        Command::Status { control, .. } => status(&control),
        Command::Config(cmd) => config(cmd),
        Command::Bench(args) => bench::run(args),
        Command::Reload {
            name,
            instance,
            fleet,
            batch,
            control,
        } => {
            let app = format!("/control/applications/{}", encode_segment(&name));
            let path = match instance {
                Some(id) => format!("{app}/instances/{id}/restart"),
                None if fleet => format!(
                    "/fleet/applications/{}/restart?batch={batch}",
                    encode_segment(&name)
                ),
                None => format!("{app}/restart"),
            };
            client::show(&control.client(), &path)
        }
        Command::Logs {
            name,
            follow,
            raw,
            control,
        } => logs(&control.state_dir(), &name, follow, raw),
        Command::Dashboard {
            listen,
            interval,
            control,
        } => dashboard::run(
            control.client(),
            control.state_dir(),
            listen,
            std::time::Duration::from_secs_f64(interval),
        ),
        Command::Top { interval, control } => top::run(
            control.client(),
            control.state_dir(),
            std::time::Duration::from_secs_f64(interval),
        ),
        Command::Completions { shell } => generate::completions(shell),
        Command::Man { dir } => generate::man(dir.as_deref()),
    }
}

fn config(cmd: ConfigCommand) -> ExitCode {
    match cmd {
        ConfigCommand::Get { path, control } => client::show(
            &control.client(),
            &config_path(path.as_deref().unwrap_or("")),
        ),
        ConfigCommand::Set {
            path,
            file,
            dry_run,
            if_match,
            control,
        } => {
            let mut target = config_path(&path);
            if dry_run {
                target.push_str("?dry_run");
            }
            client::put(&control.client(), &target, &file, if_match.as_deref())
        }
        ConfigCommand::Delete { path, control } => client::send(
            &control.client(),
            http::Method::DELETE,
            &config_path(&path),
            None,
            None,
        ),
        ConfigCommand::History(args) => history::history(args),
        ConfigCommand::Diff(args) => history::diff(args),
        ConfigCommand::Rollback(args) => history::rollback(args),
    }
}

/// A reading interval `rein top` can keep: from a tenth of a second to an hour.
fn interval(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if (0.1..=3600.0).contains(&s) => Ok(s),
        _ => Err("seconds between 0.1 and 3600".to_owned()),
    }
}

/// `rein status`: `/status` as tables.
fn status(control: &ControlArgs) -> ExitCode {
    render(control, "/status", "status", status::render)
}

fn show_fleet(control: &ControlArgs) -> ExitCode {
    render(control, "/fleet", "fleet view", status::render_fleet)
}

/// Prints what `render` makes of the JSON at `path`.
fn render(control: &ControlArgs, path: &str, what: &str, render: fn(&Value) -> String) -> ExitCode {
    let text = match client::fetch(&control.client(), http::Method::GET, path, None, None) {
        Ok(text) => text,
        Err(failure) => return failure.report(),
    };
    match serde_json::from_str(&text) {
        Ok(doc) => {
            print!("{}", render(&doc));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rein: error: the {what} is not JSON: {e}");
            ExitCode::from(exit::FAILED)
        }
    }
}

/// `rein logs NAME`: the file the supervisor writes the application's output to.
fn logs(state: &std::path::Path, name: &str, follow: bool, raw: bool) -> ExitCode {
    let path = state.join("logs").join(format!("{name}.log"));
    match crate::supervisor::logs::follow(&path, follow, raw) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "rein: cannot read the logs of {name:?} ({}): {e}",
                path.display()
            );
            ExitCode::from(exit::FAILED)
        }
    }
}

/// The API path of a configuration PATH, each segment percent-encoded (`routes/my route` is
/// `/config/routes/my%20route`). A `%` followed by two hex digits is kept as it is, so a key holding `/` is
/// written as the API takes it (`listeners/unix:%2Frun%2Fa.sock`); any other `%` stands for itself.
fn config_path(path: &str) -> String {
    let mut uri = "/config".to_owned();
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        uri.push('/');
        uri.push_str(&encode_segment(seg));
    }
    uri
}

/// What a path segment may hold as it is: RFC 3986's unreserved characters, sub-delimiters, `:` and `@`.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

fn encode_segment(seg: &str) -> String {
    let mut out = String::with_capacity(seg.len());
    let mut rest = seg;
    while let Some(at) = rest.find('%') {
        out.extend(percent_encoding::utf8_percent_encode(&rest[..at], SEGMENT));
        let escape = rest.as_bytes().get(at + 1..at + 3);
        if escape.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
            out.push_str(&rest[at..at + 3]);
            rest = &rest[at + 3..];
        } else {
            out.push_str("%25");
            rest = &rest[at + 1..];
        }
    }
    out.extend(percent_encoding::utf8_percent_encode(rest, SEGMENT));
    out
}

#[cfg(test)]
mod tests {
    use super::config_path;

    #[test]
    fn config_paths_are_percent_encoded_once() {
        assert_eq!(config_path(""), "/config");
        assert_eq!(config_path("/routes/0/"), "/config/routes/0");
        assert_eq!(config_path("listeners/*:8080"), "/config/listeners/*:8080");
        assert_eq!(
            config_path("routes/my route?#"),
            "/config/routes/my%20route%3F%23"
        );
        assert_eq!(
            config_path("listeners/unix:%2Frun%2Fa.sock"),
            "/config/listeners/unix:%2Frun%2Fa.sock"
        );
        assert_eq!(config_path("a/100%/%zz/é"), "/config/a/100%25/%25zz/%C3%A9");
    }
}
