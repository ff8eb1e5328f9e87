//! `"type": "ruby"` applications: Unit's schema (`script`, `threads`, `hooks`), hosted by rein's adapter
//! (`ruby/rein_adapter.rb`, Ruby's standard library and the `rack` gem), which serves the Rack app of a rackup
//! file over FastCGI on the socket rein passes it.
//!
//! `script` and `hooks` are taken as Unit takes them: a relative path is relative to the app's
//! `working_directory`, the directory the adapter runs in. Before a configuration with a new or changed Ruby app
//! is accepted, rein runs the adapter with `--check` (Bundler, the hooks file, the rackup file loaded; no hook
//! called), so that an app that cannot boot is refused with Ruby's own error.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{Check, Kind, Launch, LaunchError, Launching, SupportFiles, adapter};
use crate::config::walk::string;
use crate::config::{ConfigError, JsonPath};
use crate::snapshot::AppTransport;

/// The adapter, written to the state directory when rein starts.
pub(crate) const ADAPTER: adapter::Adapter = adapter::Adapter {
    dir: "ruby",
    file: "rein_adapter.rb",
    source: include_str!("ruby/rein_adapter.rb"),
};

/// The keys of a Ruby application besides the common ones.
pub const KEYS: &[&str] = &["script", "threads", "hooks", "prefix"];

#[derive(Debug, Clone, PartialEq)]
pub struct RubyApp {
    /// The rackup file (`config.ru`).
    pub(crate) script: PathBuf,
    /// Threads running requests in each instance.
    pub(crate) threads: usize,
    /// A Ruby file of `on_worker_boot` / `on_worker_shutdown` / `on_thread_boot` / `on_thread_shutdown` blocks.
    pub(crate) hooks: Option<PathBuf>,
    /// rein's `prefix`, as Python apps have it: the path the app is mounted at (`SCRIPT_NAME`).
    pub(crate) prefix: String,
}

impl RubyApp {
    /// The interpreter: `ruby` from the app's `PATH`.
    pub(crate) fn interpreter(&self) -> PathBuf {
        PathBuf::from("ruby")
    }

    /// The adapter's command line, after the interpreter.
    pub(crate) fn arguments(&self, adapter: &Path) -> Vec<String> {
        let mut args = vec![
            adapter.display().to_string(),
            "--script".to_owned(),
            self.script.display().to_string(),
            "--threads".to_owned(),
            self.threads.to_string(),
        ];
        if let Some(hooks) = &self.hooks {
            args.extend(["--hooks".to_owned(), hooks.display().to_string()]);
        }
        args
    }
}

pub fn compile(map: &Map<String, Value>, path: &JsonPath) -> Result<RubyApp, ConfigError> {
    let script = map
        .get("script")
        .ok_or_else(|| path.error("needs a \"script\" (the rackup file, such as \"config.ru\")"))?;
    let threads = adapter::threads(map, path)?;
    Ok(RubyApp {
        script: file(script, &path.key("script"))?,
        threads,
        hooks: map
            .get("hooks")
            .map(|h| file(h, &path.key("hooks")))
            .transpose()?,
        prefix: adapter::prefix(map, path)?,
    })
}

impl Kind for RubyApp {
    /// FastCGI with the CGI variables; the app is mounted at its `prefix` (`SCRIPT_NAME`), else at the path its
    /// route passes it (Unit's Ruby schema has no `prefix`).
    fn transport(&self) -> AppTransport {
        adapter::mounted(&self.prefix)
    }

    /// The adapter's `threads` run requests; rein queues the rest, where they can still go to another instance.
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

    fn program(&self) -> Option<PathBuf> {
        Some(self.interpreter())
    }

    fn launch(&self, at: &Launching<'_>) -> Result<Launch, LaunchError> {
        Ok(ADAPTER.launch(at, |adapter| self.arguments(adapter)))
    }

    fn support_file(&self, files: &SupportFiles) -> Option<PathBuf> {
        Some(files.adapter(&ADAPTER))
    }

    /// `ruby` runs, and the rackup file (with the hooks file and Bundler) loads.
    fn check(&self, check: &Check<'_>) -> Result<(), ConfigError> {
        check.executable(&check.conf.executable, "type")?;
        adapter::check_loads(check, "script")
    }
}

/// A file name: a non-empty string without NUL bytes (which no path can hold).
fn file(v: &Value, path: &JsonPath) -> Result<PathBuf, ConfigError> {
    match string(v, path)? {
        "" => Err(path.error("must not be empty")),
        s if s.contains('\0') => Err(path.error("must not contain a NUL byte")),
        s => Ok(PathBuf::from(s)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn conf(v: Value) -> Result<RubyApp, ConfigError> {
        compile(
            v.as_object().expect("an object"),
            &JsonPath::root().key("applications").key("rb"),
        )
    }

    #[test]
    fn defaults_and_arguments() {
        let rb = conf(json!({"script": "config.ru"})).unwrap();
        assert_eq!(rb.threads, 1);
        assert_eq!(rb.hooks, None);
        assert_eq!(rb.interpreter(), PathBuf::from("ruby"));
        assert_eq!(
            rb.arguments(Path::new("/state/run/ruby/rein_adapter.rb")),
            [
                "/state/run/ruby/rein_adapter.rb",
                "--script",
                "config.ru",
                "--threads",
                "1"
            ]
        );
        let rb = conf(json!({"script": "/srv/app/config.ru", "threads": 4, "hooks": "hooks.rb"}))
            .unwrap();
        let args = rb.arguments(Path::new("/a.rb")).join(" ");
        assert_eq!(
            args,
            "/a.rb --script /srv/app/config.ru --threads 4 --hooks hooks.rb"
        );
    }

    #[test]
    fn errors_name_their_path() {
        let cases = [
            (json!({}), "applications/rb"),
            (json!({"script": 1}), "applications/rb/script"),
            (json!({"script": ""}), "applications/rb/script"),
            (json!({"script": "a\u{0}b"}), "applications/rb/script"),
            (
                json!({"script": "c.ru", "threads": 0}),
                "applications/rb/threads",
            ),
            (
                json!({"script": "c.ru", "threads": 1025}),
                "applications/rb/threads",
            ),
            (
                json!({"script": "c.ru", "threads": "2"}),
                "applications/rb/threads",
            ),
            (
                json!({"script": "c.ru", "hooks": ""}),
                "applications/rb/hooks",
            ),
            (
                json!({"script": "c.ru", "hooks": ["h.rb"]}),
                "applications/rb/hooks",
            ),
        ];
        for (v, at) in cases {
            let err = conf(v.clone()).unwrap_err();
            assert_eq!(err.path.as_str(), at, "{v}: {err}");
        }
    }

    #[test]
    fn one_thread_pipelines_on_a_connection_per_worker() {
        let one = conf(json!({"script": "config.ru"})).unwrap();
        assert_eq!((one.pipelining(), one.fastcgi_per_worker()), (7, true));
        let four = conf(json!({"script": "config.ru", "threads": 4})).unwrap();
        assert_eq!((four.pipelining(), four.fastcgi_per_worker()), (7, false));
    }

    #[test]
    fn the_adapter_is_the_file_beside_this_module() {
        assert!(ADAPTER.source.starts_with("#!/usr/bin/env ruby"));
        assert!(ADAPTER.source.contains("on_thread_boot"));
    }
}
