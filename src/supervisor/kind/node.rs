//! Node.js apps: an `"external"` app whose program is `node` (or a script run by it). rein gives it its
//! preload (`--require`, through `NODE_OPTIONS`): `listen()` takes the socket rein passes, Unit's `unit-http`
//! module resolves to rein's stand-in, and with `"handoff": true` the instance takes client connections rein
//! accepted, over Node's IPC channel ([`crate::handoff`]).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{Kind, Launch, LaunchError, Launching, SupportFiles};
use crate::config::walk::boolean;
use crate::config::{ConfigError, JsonPath};

#[derive(Debug, Clone, PartialEq)]
pub struct NodeApp {
    /// rein's `handoff`: instances take client connections themselves, passed by rein over Node's IPC
    /// channel, on listeners that pass straight to the app.
    pub handoff: bool,
}

impl NodeApp {
    pub(super) fn compile(
        map: &Map<String, Value>,
        path: &JsonPath,
    ) -> Result<NodeApp, ConfigError> {
        let handoff = match map.get("handoff") {
            Some(v) => boolean(v, &path.key("handoff"))?,
            None => false,
        };
        Ok(NodeApp { handoff })
    }
}

impl Kind for NodeApp {
    fn launch(&self, at: &Launching<'_>) -> Result<Launch, LaunchError> {
        let mut launch = Launch::as_configured(at.conf);
        if let Some((_, modules)) = &at.files.node {
            launch.arguments = unit_loader_arguments(launch.arguments, modules);
        }
        Ok(launch)
    }

    fn support_file(&self, files: &SupportFiles) -> Option<PathBuf> {
        files.node.as_ref().map(|(preload, _)| preload.clone())
    }
}

/// Node.js gets rein's preload (its `listen()` takes the passed socket) and the `unit-http` alias. Node
/// runs as `node`, as Unit's loader setup does (`/usr/bin/env node ...`), or as Unit's documentation
/// shows a Node.js app: a `.js` script with a `#!/usr/bin/env node` shebang as the executable.
pub(crate) fn is_node(
    executable: &Path,
    arguments: &[String],
    working_directory: Option<&Path>,
) -> bool {
    let named_node = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n == "node" || n == "nodejs")
    };
    if named_node(executable) {
        return true;
    }
    if executable.file_name().is_some_and(|n| n == "env") {
        let first = arguments.iter().find(|a| !a.starts_with('-'));
        return first.is_some_and(|a| named_node(Path::new(a)));
    }
    let script = match working_directory {
        Some(dir) if executable.is_relative() => dir.join(executable),
        _ => executable.to_path_buf(),
    };
    shebang_is_node(&script)
}

/// Unit's Node.js loader setup names `--loader unit-http/loader.mjs`, which Node resolves without
/// `NODE_PATH`: it becomes the absolute path of rein's stand-in (`--require unit-http/loader` resolves
/// through `NODE_PATH` as it is).
fn unit_loader_arguments(arguments: Vec<String>, modules: &Path) -> Vec<String> {
    arguments
        .into_iter()
        .map(|a| match a.as_str() {
            "unit-http/loader.mjs" => modules.join(&a).display().to_string(),
            _ => a,
        })
        .collect()
}

/// Whether the file starts with a `#!` line whose interpreter, or `env`'s program, is `node`.
fn shebang_is_node(script: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 128];
    let Ok(n) = std::fs::File::open(script).and_then(|mut f| f.read(&mut head)) else {
        return false;
    };
    let Some(line) = head[..n].strip_prefix(b"#!") else {
        return false;
    };
    let line = String::from_utf8_lossy(line);
    let mut words = line.lines().next().unwrap_or("").split_whitespace();
    let interpreter = words.next().map(Path::new);
    match interpreter {
        Some(i) if i.file_name().is_some_and(|n| n == "env") => {
            let args: Vec<String> = words.map(str::to_owned).collect();
            is_node(i, &args, None)
        }
        Some(i) => i
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n == "node" || n == "nodejs"),
        None => false,
    }
}

/// The Node.js support files embedded in rein.
const NODE_PRELOAD: &str = include_str!("node/preload.js");
const NODE_HOOKS: &str = include_str!("node/hooks.mjs");
const UNIT_HTTP_INDEX: &str = include_str!("node/unit-http/index.js");
const UNIT_HTTP_MODULE: &str = include_str!("node/unit-http/index.mjs");
const UNIT_HTTP_PACKAGE: &str = include_str!("node/unit-http/package.json");
const UNIT_HTTP_LOADER: &str = include_str!("node/unit-http/loader.js");
const UNIT_HTTP_LOADER_MODULE: &str = include_str!("node/unit-http/loader.mjs");

/// Writes the Node.js support files under `dir` (`dir/node/preload.js`, the ES-module hook it registers
/// `dir/node/hooks.mjs`, `dir/node/modules/unit-http/`), each atomically (temp file + rename), world-readable
/// in world-readable directories, and returns `(preload.js, NODE_PATH dir)` for [`super::super::spawn::SpawnSpec::node`]. `dir`
/// must be traversable by the apps' users ([`super::super::layout`]).
pub fn install_node_support(dir: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
    let base = dir.join("node");
    let modules = base.join("modules");
    let unit_http = modules.join("unit-http");
    for d in [&base, &modules, &unit_http] {
        super::super::layout::dir(d, super::super::layout::READABLE)?;
    }
    let preload = base.join("preload.js");
    for (path, text) in [
        (&preload, NODE_PRELOAD),
        (&base.join("hooks.mjs"), NODE_HOOKS),
        (&unit_http.join("index.js"), UNIT_HTTP_INDEX),
        (&unit_http.join("index.mjs"), UNIT_HTTP_MODULE),
        (&unit_http.join("package.json"), UNIT_HTTP_PACKAGE),
        (&unit_http.join("loader.js"), UNIT_HTTP_LOADER),
        (&unit_http.join("loader.mjs"), UNIT_HTTP_LOADER_MODULE),
    ] {
        super::super::layout::write_readable(path, text)?;
    }
    Ok((preload, modules))
}
