//! `"type": "perl"` applications: Unit's schema (`script`, `threads`, `thread_stack_size`), hosted by rein's
//! adapter (`perl/rein_adapter.pl`, core Perl only), which serves the `.psgi` file's PSGI app over FastCGI on
//! the socket rein passes it.
//!
//! Before a configuration with a new or changed Perl app is accepted, rein runs the adapter with `--check`
//! (load the `.psgi` file as `plackup` would): a file that does not compile, dies while it loads or does not
//! return a code reference is refused with Perl's own error, and nothing changes.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{Check, Kind, Launch, LaunchError, Launching, SupportFiles, adapter};
use crate::config::walk::{integer, string};
use crate::config::{ConfigError, JsonPath};
use crate::snapshot::AppTransport;

/// The adapter, written to the state directory when rein starts.
pub(crate) const ADAPTER: adapter::Adapter = adapter::Adapter {
    dir: "perl",
    file: "rein_adapter.pl",
    source: include_str!("perl/rein_adapter.pl"),
};

/// The keys of a Perl application besides the common ones.
pub const KEYS: &[&str] = &["script", "threads", "thread_stack_size"];

#[derive(Debug, Clone, PartialEq)]
pub struct PerlApp {
    /// The `.psgi` file; a relative path is taken from the app's `working_directory`.
    pub script: PathBuf,
    /// Requests one instance runs at once: above 1, as many worker threads, each with its own interpreter.
    pub threads: usize,
    /// Unit's `thread_stack_size`: bytes of stack for each worker thread.
    pub thread_stack_size: Option<u64>,
}

impl PerlApp {
    /// The adapter's command line, after the interpreter.
    pub fn arguments(&self, adapter: &Path) -> Vec<String> {
        let mut args = vec![
            adapter.display().to_string(),
            "--script".to_owned(),
            self.script.display().to_string(),
            "--threads".to_owned(),
            self.threads.to_string(),
        ];
        if let Some(bytes) = self.thread_stack_size {
            args.extend(["--thread-stack-size".to_owned(), bytes.to_string()]);
        }
        args
    }
}

impl Kind for PerlApp {
    /// The CGI variables PSGI's environment holds; no `prefix`: `SCRIPT_NAME` is empty, as in Unit.
    fn transport(&self) -> AppTransport {
        adapter::mounted("")
    }

    fn concurrency(&self) -> Option<u32> {
        Some(self.threads as u32)
    }

    fn pipelining(&self) -> u32 {
        adapter::PIPELINING
    }

    /// One thread: the adapter serves every connection from one loop, and a connection of each of rein's
    /// worker threads spares them waking each other (see the Python adapter's WSGI side).
    fn fastcgi_per_worker(&self) -> bool {
        self.threads == 1
    }

    /// `perl` from `PATH`: Unit has no option naming the interpreter.
    fn program(&self) -> Option<PathBuf> {
        Some(PathBuf::from("perl"))
    }

    fn launch(&self, at: &Launching<'_>) -> Result<Launch, LaunchError> {
        Ok(ADAPTER.launch(at, |adapter| self.arguments(adapter)))
    }

    fn support_file(&self, files: &SupportFiles) -> Option<PathBuf> {
        Some(files.adapter(&ADAPTER))
    }

    /// Perl runs, and the `.psgi` file loads and returns an app.
    fn check(&self, check: &Check<'_>) -> Result<(), ConfigError> {
        check.executable(&check.conf.executable, "type")?;
        adapter::check_loads(check, "script")
    }
}

pub fn compile(map: &Map<String, Value>, path: &JsonPath) -> Result<PerlApp, ConfigError> {
    let script = match map.get("script") {
        None => return Err(path.error("needs a \"script\": the .psgi file")),
        Some(v) => string(v, &path.key("script"))?,
    };
    if script.is_empty() || script.contains('\0') {
        return Err(path.key("script").error("must be the path of a .psgi file"));
    }
    let threads = adapter::threads(map, path)?;
    let thread_stack_size = map
        .get("thread_stack_size")
        .map(|v| stack_size(v, &path.key("thread_stack_size")))
        .transpose()?;
    Ok(PerlApp {
        script: PathBuf::from(script),
        threads,
        thread_stack_size,
    })
}

/// A stack size the system takes for a thread: at least 16 KiB (`PTHREAD_STACK_MIN`), whole 4 KiB pages.
fn stack_size(v: &Value, path: &JsonPath) -> Result<u64, ConfigError> {
    match integer(v, path, 1 << 30)? {
        n if n >= 16 * 1024 && n % 4096 == 0 => Ok(n),
        _ => Err(path.error("must be at least 16384 bytes, in whole 4096-byte pages")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn at() -> JsonPath {
        JsonPath::root().key("applications").key("pl")
    }

    fn conf(v: Value) -> Result<PerlApp, ConfigError> {
        compile(v.as_object().unwrap(), &at())
    }

    #[test]
    fn the_options_reach_the_adapter() {
        let app = conf(json!({"script": "app.psgi"})).unwrap();
        assert_eq!(
            (app.threads, app.thread_stack_size),
            (1, None),
            "Unit's defaults"
        );
        let args = app.arguments(Path::new("/state/rein_adapter.pl"));
        assert_eq!(
            args,
            [
                "/state/rein_adapter.pl",
                "--script",
                "app.psgi",
                "--threads",
                "1"
            ]
        );
        let app =
            conf(json!({"script": "/srv/app.psgi", "threads": 4, "thread_stack_size": 262144}))
                .unwrap();
        let args = app.arguments(Path::new("/a.pl")).join(" ");
        assert_eq!(
            args,
            "/a.pl --script /srv/app.psgi --threads 4 --thread-stack-size 262144"
        );
    }

    #[test]
    fn bad_values_are_refused_at_their_path() {
        let cases = [
            (json!({}), "applications/pl"),
            (json!({"script": 1}), "applications/pl/script"),
            (json!({"script": ""}), "applications/pl/script"),
            (
                json!({"script": "a.psgi", "threads": 0}),
                "applications/pl/threads",
            ),
            (
                json!({"script": "a.psgi", "threads": "2"}),
                "applications/pl/threads",
            ),
            (
                json!({"script": "a.psgi", "threads": 5000}),
                "applications/pl/threads",
            ),
            (
                json!({"script": "a.psgi", "thread_stack_size": 1000}),
                "applications/pl/thread_stack_size",
            ),
            (
                json!({"script": "a.psgi", "thread_stack_size": 20000}),
                "applications/pl/thread_stack_size",
            ),
            (
                json!({"script": "a.psgi", "thread_stack_size": "1M"}),
                "applications/pl/thread_stack_size",
            ),
        ];
        for (v, want) in cases {
            let err = conf(v.clone()).unwrap_err();
            assert_eq!(err.path.as_str(), want, "{v}: {err}");
        }
        let err = conf(json!({})).unwrap_err();
        assert!(err.to_string().contains("\"script\""), "{err}");
    }

    #[test]
    fn the_adapter_is_the_file_beside_this_module() {
        assert!(ADAPTER.source.starts_with("#!/usr/bin/perl"));
        assert_eq!((ADAPTER.dir, ADAPTER.file), ("perl", "rein_adapter.pl"));
    }
}
