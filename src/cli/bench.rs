//! `rein bench`: load generators. `rein bench http TARGET` drives keep-alive connections against a URL or a
//! Unix socket and prints what it measured ([`crate::bench`] does the work). `rein bench reload APP` and
//! `rein bench crash APP` drive load through a running rein to one of its applications while it reloads or
//! loses an instance ([`crate::bench::reload`]).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::{ControlArgs, exit};
use crate::bench::config::{Config, Stop, Target, parse_header, seconds};
use crate::bench::reload::{self, Trigger};
use crate::bench::{http, output};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    kind: BenchKind,
}

#[derive(Subcommand, Debug)]
enum BenchKind {
    /// HTTP/1.1 load: requests per second, latency percentiles, errors by kind, longest outage
    Http(HttpArgs),
    /// Load through rein to an application during a rolling reload: failures, longest gap, p99 by phase
    Reload(AppArgs),
    /// Load through rein to an application while one instance is killed (SIGKILL): failures, time to capacity
    Crash(AppArgs),
}

#[derive(Args, Debug)]
pub struct AppArgs {
    /// The application's name (in rein's configuration)
    app: String,
    /// The URL that reaches the application through rein: http://HOST:PORT/PATH or unix:/PATH/TO.sock:/URI
    /// [default: the first listener whose pass is applications/APP]
    #[arg(long)]
    url: Option<String>,
    /// Keep-alive connections, each with one request in flight
    #[arg(short, long, default_value_t = 10)]
    connections: usize,
    /// How long to run: seconds, or a number with a unit as wrk takes it (500ms, 10s, 2m, 1h)
    #[arg(short, long, default_value = "10", value_parser = duration_secs)]
    duration: f64,
    /// How far into the run to reload or kill (seconds, or with a unit) [default: a third of the duration]
    #[arg(long, value_parser = duration_secs)]
    at: Option<f64>,
    /// How long a request may take, connecting included (seconds, or with a unit)
    #[arg(long, default_value = "10", value_parser = duration_secs)]
    timeout: f64,
    /// Print the report as one JSON object
    #[arg(long)]
    json: bool,
    /// Worker threads [default: one per core]
    #[arg(long)]
    threads: Option<usize>,
    #[command(flatten)]
    control: ControlArgs,
}

#[derive(Args, Debug)]
pub struct HttpArgs {
    /// http://HOST:PORT/PATH or unix:/PATH/TO.sock:/URI
    target: String,
    /// Keep-alive connections, each with one request in flight
    #[arg(short, long, default_value_t = 10)]
    connections: usize,
    /// How long to run: seconds, or a number with a unit as wrk takes it (500ms, 10s, 2m, 1h) [default: 10s]
    #[arg(short, long, conflicts_with = "requests", value_parser = duration_secs)]
    duration: Option<f64>,
    /// Stop after this many requests instead of after a duration
    #[arg(short = 'n', long)]
    requests: Option<u64>,
    /// Open loop: send this many requests per second in all, latency measured from each one's scheduled time
    #[arg(long)]
    rate: Option<f64>,
    /// Request method
    #[arg(short, long, default_value = "GET")]
    method: String,
    /// A request header, "Name: value" (repeatable)
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    /// Send this file as the request body
    #[arg(long, value_name = "FILE")]
    body: Option<PathBuf>,
    /// How long a request may take, connecting included (seconds, or with a unit)
    #[arg(long, default_value = "10", value_parser = duration_secs)]
    timeout: f64,
    /// Print the report as one JSON object
    #[arg(long)]
    json: bool,
    /// Worker threads [default: one per core]
    #[arg(long)]
    threads: Option<usize>,
    /// Report the longest gap among windows without a success still open this many seconds into the run
    /// (e.g. when a reload was triggered), leaving out the load's own start
    #[arg(long, value_name = "SECONDS", value_parser = duration_secs)]
    gap_from: Option<f64>,
}

/// A duration in seconds: a plain number, or one followed by `ms`, `s`, `m` or `h` (wrk's units).
fn duration_secs(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "unknown unit {unit:?}: use ms, s, m or h (10s, 2m)"
            ));
        }
    };
    match number.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 => Ok(n * scale),
        _ => Err(format!(
            "{text:?} is not a duration (10, 10s, 500ms, 2m, 1h)"
        )),
    }
}

pub fn run(args: BenchArgs) -> ExitCode {
    match args.kind {
        BenchKind::Http(args) => bench_http(args),
        BenchKind::Reload(args) => bench_app(Trigger::Reload, args),
        BenchKind::Crash(args) => bench_app(Trigger::Crash, args),
    }
}

fn bench_app(trigger: Trigger, args: AppArgs) -> ExitCode {
    let config = match app_config(trigger, &args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rein bench {trigger}: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    match reload::run(&config) {
        Ok(report) => {
            if args.json {
                println!("{}", reload::json(&report));
            } else {
                print!("{}", reload::human(&report));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rein bench {trigger}: {e}");
            ExitCode::from(if e.is_unreachable() {
                exit::UNREACHABLE
            } else {
                exit::FAILED
            })
        }
    }
}

fn app_config(trigger: Trigger, args: &AppArgs) -> Result<reload::Config, String> {
    let mut config = reload::Config::new(trigger, &args.app, args.control.control_addr());
    config.control_headers = args.control.client().headers().map_err(|e| e.to_string())?;
    config.target = args.url.as_deref().map(str::parse).transpose()?;
    config.connections = args.connections;
    config.duration = seconds(args.duration, "--duration")?;
    config.at = args.at.map(|a| seconds(a, "--at")).transpose()?;
    config.timeout = seconds(args.timeout, "--timeout")?;
    if let Some(threads) = args.threads {
        config.threads = threads;
    }
    config.validate()?;
    Ok(config)
}

fn bench_http(args: HttpArgs) -> ExitCode {
    let config = match http_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rein bench: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let terminal = std::io::stderr().is_terminal();
    let result = http::run_with_progress(&config, |p| {
        if terminal {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{}", output::progress(p));
            let _ = err.flush();
        }
    });
    if terminal {
        eprint!("\r\x1b[2K");
    }
    match result {
        Ok(report) => {
            if args.json {
                println!("{}", output::json(&report));
            } else {
                print!("{}", output::human(&report));
            }
            ExitCode::SUCCESS
        }
        Err(e @ http::Error::Unreachable { .. }) => {
            eprintln!("rein bench: {e}");
            ExitCode::from(exit::UNREACHABLE)
        }
        Err(e) => {
            eprintln!("rein bench: {e}");
            ExitCode::from(exit::FAILED)
        }
    }
}

fn http_config(args: &HttpArgs) -> Result<Config, String> {
    let target: Target = args.target.parse()?;
    let mut config = Config::new(target);
    config.connections = args.connections;
    config.stop = match (args.requests, args.duration) {
        (Some(n), _) => Stop::Requests(n),
        (None, d) => Stop::Duration(seconds(d.unwrap_or(10.0), "--duration")?),
    };
    config.rate = args.rate;
    config.method = args
        .method
        .parse()
        .map_err(|_| format!("{:?} is not a request method", args.method))?;
    for h in &args.headers {
        let (name, value) = parse_header(h)?;
        config.headers.append(name, value);
    }
    if let Some(file) = &args.body {
        config.body = std::fs::read(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?
            .into();
    }
    config.timeout = seconds(args.timeout, "--timeout")?;
    if let Some(threads) = args.threads {
        config.threads = threads;
    }
    if let Some(from) = args.gap_from {
        config.gap_from = seconds(from, "--gap-from")?;
    }
    config.validate()?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::duration_secs;

    #[test]
    fn durations_take_wrks_units() {
        assert_eq!(duration_secs("10"), Ok(10.0));
        assert_eq!(duration_secs("2.5"), Ok(2.5));
        assert_eq!(duration_secs("10s"), Ok(10.0));
        assert_eq!(duration_secs("500ms"), Ok(0.5));
        assert_eq!(duration_secs("2m"), Ok(120.0));
        assert_eq!(duration_secs("1h"), Ok(3600.0));
        assert!(duration_secs("10x").is_err());
        assert!(duration_secs("s").is_err());
        assert!(duration_secs("-1s").is_err());
    }
}
