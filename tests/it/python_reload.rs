//! Python apps whose code changes under them: a reload onto a module that no longer imports names the Python
//! error, and the throwaway import check sees the app as its instances do (the app's environment only).

use std::path::Path;

use serde_json::{Value, json};

use crate::harness::{Rein, get, wait_for};
use crate::python::python_app;

/// A Python app importing `module` from `dir`, with the tests' short timeouts; `extra` overrides top-level keys.
fn app(dir: &Path, module: &str, extra: Value) -> Value {
    let mut app = python_app(module, json!({"path": dir.display().to_string()}));
    if let Value::Object(more) = extra {
        app.as_object_mut().unwrap().extend(more);
    }
    app
}

const HELLO: &str = "def application(environ, start_response):\n    \
    start_response('200 OK', [('Content-Type', 'text/plain')])\n    \
    return [b'hello']\n";

#[test]
fn a_reload_onto_a_syntax_error_is_abandoned_with_the_python_error() {
    let rein = Rein::start();
    let dir = rein.dir.path().join("code");
    std::fs::create_dir_all(&dir).unwrap();
    let module = dir.join("edited.py");
    std::fs::write(&module, HELLO).unwrap();
    let addr = rein.serve_with(
        json!([{"action": {"pass": "applications/py"}}]),
        json!({"applications": {"py": app(&dir, "edited", json!({}))}}),
    );
    wait_for("the app to answer", || get(addr, "/").status == 200);

    // Edited on disk (no configuration change, so no import check), then reloaded by Unit's restart URL.
    std::fs::write(&module, format!("{HELLO}\ndef broken(:\n")).unwrap();
    let (code, body) = rein.api("GET", "/control/applications/py/restart", None);
    assert_eq!(code, 500, "{body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("SyntaxError"),
        "the Python error in the answer: {body}"
    );
    let (_, st) = rein.api("GET", "/status/applications/py", None);
    let reason = st["last_reload"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("SyntaxError"), "and in the status: {st}");
    assert_eq!(
        get(addr, "/").text(),
        "hello",
        "the old instance still serves"
    );
}

#[test]
fn the_import_check_sees_only_the_apps_environment_as_its_instances_do() {
    let dir = tempfile::tempdir().unwrap();
    let code = dir.path().join("code");
    std::fs::create_dir_all(&code).unwrap();
    // Reads a variable at import time: set in rein's own environment, which instances do not inherit.
    std::fs::write(
        code.join("needs_env.py"),
        format!("import os\nTOKEN = os.environ['REIN_TEST_TOKEN']\n{HELLO}"),
    )
    .unwrap();
    let rein = Rein::start_in_env(
        dir,
        &["--config", "EMPTY"],
        &[("REIN_TEST_TOKEN", "from-rein")],
    );
    rein.wait_ready();
    let put = |app: Value| {
        let apps = json!({ "py": app });
        rein.api("PUT", "/config/applications", Some(&apps.to_string()))
    };
    let (status, body) = put(app(&code, "needs_env", json!({})));
    assert_eq!(status, 400, "an instance could not import it: {body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("applications/py/module") && detail.contains("KeyError: 'REIN_TEST_TOKEN'"),
        "{body}"
    );
    let env = json!({"environment": {"REIN_TEST_TOKEN": "from-app"}});
    let (status, body) = put(app(&code, "needs_env", env));
    assert_eq!(status, 200, "given in the app's environment: {body}");
}
