//! Applications with `"user"` (and `"group"`) when rein runs as root: a Node.js app (rein's preload and
//! `unit-http`), a Python app (rein's adapter) and a PHP app (PHP-FPM's workers) run as `nobody`, read the
//! support files rein writes into its state directory, and serve; while what is private there stays out of
//! their reach: `conf.json`, the listing of the state directory, the logs, the control socket and the
//! instances' sockets by path (an instance has its socket as fd 3).
//!
//! Skipped (with a message) when the tests do not run as root or there is no user `nobody`.

use std::os::unix::fs::PermissionsExt;

use nix::unistd::{Group, Uid, User};

use super::*;

/// A rein started as root whose temp dir `nobody` can traverse, and a directory for the apps' code.
struct AsNobody {
    rein: Rein,
    code: PathBuf,
    /// The `user`/`group` keys: `nobody`, and `nogroup` where it exists.
    creds: Value,
    /// What the app must answer: `UID:GID`.
    expected: String,
}

/// `None` (after saying why) when the test cannot switch users here.
fn as_nobody() -> Option<AsNobody> {
    as_nobody_by(&[])
}

/// [`as_nobody`] with rein's own default user: `args` are extra arguments to `rein run` (`--user NAME`), and
/// apps are given no `user`.
fn as_default_user(args: &[&str]) -> Option<AsNobody> {
    let mut args = args.to_vec();
    if args.is_empty() {
        args.push("DEFAULT-USER");
    }
    let mut t = as_nobody_by(&args)?;
    t.creds = json!({});
    Some(t)
}

fn as_nobody_by(extra: &[&str]) -> Option<AsNobody> {
    if !Uid::effective().is_root() {
        eprintln!("skipped: not root, so rein cannot run an app as another user");
        return None;
    }
    let Ok(Some(nobody)) = User::from_name("nobody") else {
        eprintln!("skipped: no user nobody");
        return None;
    };
    let group = Group::from_name("nogroup").ok().flatten();
    let gid = group.as_ref().map_or(nobody.gid, |g| g.gid);
    let mut creds = json!({"user": "nobody"});
    if group.is_some() {
        creds["group"] = json!("nogroup");
    }
    let dir = tempfile::tempdir().unwrap();
    // Whatever mode the temp dir got: nobody must be able to reach the state dir and the code inside.
    open_to_all(dir.path());
    // The system's PATH: a version manager's shims under /root (a pyenv `python3`) are out of nobody's reach.
    let args = [&["--config", "EMPTY"], extra].concat();
    let rein = Rein::start_in_env(dir, &args, &[("PATH", "/usr/local/bin:/usr/bin:/bin")]);
    rein.wait_ready();
    let code = rein.dir.path().join("code");
    std::fs::create_dir(&code).unwrap();
    open_to_all(&code);
    Some(AsNobody {
        rein,
        code,
        creds,
        expected: format!("{}:{}", nobody.uid, gid),
    })
}

fn open_to_all(dir: &Path) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}

impl AsNobody {
    /// Writes `name` under the code directory, readable by all.
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.code.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        path
    }

    /// `conf` with the `user`/`group` keys and the tests' short timeouts.
    fn with_creds(&self, conf: Value) -> Value {
        let mut conf = conf;
        let map = conf.as_object_mut().unwrap();
        map.extend(self.creds.as_object().unwrap().clone());
        map.extend(
            json!({
                "stop": {"timeout": 1},
                "restart": {"min_interval": 0.2, "backoff_max": 1, "stable_after": 0.5},
            })
            .as_object()
            .unwrap()
            .clone(),
        );
        conf
    }

    /// Configures app `name`, waits for it to be ready, and returns the listener's address.
    fn serve(&self, name: &str, conf: Value) -> SocketAddr {
        let addr = serve_one(&self.rein, name, self.with_creds(conf));
        wait_ready(&self.rein, name, 1);
        addr
    }
}

/// A Node.js app (through `unit-http`, which rein supplies) that reports who it runs as and what of rein's
/// state it can reach: an error code, or `ok`.
const NODE_PROBE: &str = r#"
const http = require('unit-http');
const fs = require('fs');
const net = require('net');
const state = process.env.STATE;
const tryFs = (f) => { try { f(); return 'ok'; } catch (e) { return e.code; } };
const tryConnect = (path) => new Promise((done) => {
  const c = net.connect(path, () => { c.destroy(); done('ok'); });
  c.on('error', (e) => done(e.code));
});
http.createServer(async (req, res) => {
  res.end(JSON.stringify({
    id: process.getuid() + ':' + process.getgid(),
    conf: tryFs(() => fs.readFileSync(state + '/conf.json')),
    list_state: tryFs(() => fs.readdirSync(state)),
    logs: tryFs(() => fs.readdirSync(state + '/logs')),
    control: await tryConnect(state + '/control.sock'),
    own_socket: await tryConnect(process.env.REIN_SOCKET),
  }));
}).listen(3000);
"#;

#[test]
fn a_node_app_runs_as_nobody_and_cannot_reach_reins_private_files() {
    let Some(t) = as_nobody() else { return };
    let script = t.write("probe.js", NODE_PROBE);
    let conf = json!({
        "type": "external",
        "executable": node(),
        "arguments": [script],
        "environment": {"STATE": t.rein.state},
        "readiness": {"timeout": 5},
    });
    let addr = t.serve("web", conf);
    let r = get(addr, "/");
    assert_eq!(r.status, 200, "{}", r.text());
    let report: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(report["id"], t.expected.as_str(), "{report}");
    for private in ["conf", "list_state", "logs", "control", "own_socket"] {
        assert_eq!(report[private], "EACCES", "{private}: {report}");
    }
}

/// The state directory under a directory nobody cannot enter (as root's default, `~/.local/state/rein`, is):
/// rein's support files are out of the app's reach, and the change is refused naming `user` and the
/// directory, instead of an app that fails to start.
#[test]
fn an_app_whose_user_cannot_reach_the_state_dir_is_refused_naming_user() {
    let Some(t) = as_nobody() else { return };
    let script = t.write(
        "hello.js",
        "require('http').createServer((q, s) => s.end('hi')).listen(3000);",
    );
    t.write("whoami.py", "def application(e, s): pass\n");
    let rein = Rein::start();
    let closed = rein.dir.path().canonicalize().unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
    for (name, conf) in [
        (
            "web",
            json!({"type": "external", "executable": node(), "arguments": [script]}),
        ),
        (
            "py",
            json!({"type": "python", "path": t.code, "module": "whoami"}),
        ),
    ] {
        let app = json!({name: t.with_creds(conf)});
        let (status, body) = rein.api("PUT", "/config/applications", Some(&app.to_string()));
        assert_eq!(status, 400, "{body}");
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(
            detail.starts_with(&format!(
                "applications/{name}/user: user \"nobody\" cannot read "
            )) && detail.contains(&format!("{} is mode 700", closed.display())),
            "{body}"
        );
    }
    let (_, config) = rein.api("GET", "/config", None);
    assert!(
        config["applications"]
            .as_object()
            .is_none_or(|a| a.is_empty()),
        "nothing applied: {config}"
    );
}

#[test]
fn a_python_app_runs_as_nobody() {
    let Some(t) = as_nobody() else { return };
    t.write(
        "whoami.py",
        "import os\n\
         def application(environ, start_response):\n    \
             start_response('200 OK', [('Content-Type', 'text/plain')])\n    \
             return [f'{os.getuid()}:{os.getgid()}'.encode()]\n",
    );
    let conf = json!({"type": "python", "path": t.code, "module": "whoami"});
    let addr = t.serve("py", conf);
    let r = get(addr, "/");
    assert_eq!((r.status, r.text()), (200, t.expected.clone()));
}

const WHOAMI_PY: &str = "import os\n\
     def application(environ, start_response):\n    \
         start_response('200 OK', [('Content-Type', 'text/plain')])\n    \
         return [f'{os.getuid()}:{os.getgid()}'.encode()]\n";

/// Unit runs applications as its `--user` (`nobody` by default), never as the root it runs as: an app
/// without `user` (Python, and PHP-FPM's workers) runs as `nobody` and its primary group.
#[test]
fn an_app_without_user_runs_as_nobody_when_rein_is_root() {
    let Some(t) = as_default_user(&[]) else {
        return;
    };
    let nobody = User::from_name("nobody").unwrap().unwrap();
    let expected = format!("{}:{}", nobody.uid, nobody.gid);
    t.write("whoami.py", WHOAMI_PY);
    let addr = t.serve(
        "py",
        json!({"type": "python", "path": t.code, "module": "whoami"}),
    );
    assert_eq!(get(addr, "/").text(), expected);
    if !has_fpm() {
        eprintln!("skipped the PHP half: no php-fpm in /usr/sbin");
        return;
    }
    t.write(
        "php/index.php",
        "<?php echo posix_getuid(), ':', posix_getgid();\n",
    );
    open_to_all(&t.code.join("php"));
    let addr = t.serve("php", json!({"type": "php", "root": t.code.join("php")}));
    assert_eq!(get(addr, "/").text(), expected);
}

/// `rein run --user NAME` names that default; an app's own `user` still wins.
#[test]
fn rein_run_user_names_the_default_user() {
    let Ok(Some(daemon)) = User::from_name("daemon") else {
        eprintln!("skipped: no user daemon");
        return;
    };
    let Some(t) = as_default_user(&["--user", "daemon"]) else {
        return;
    };
    t.write("whoami.py", WHOAMI_PY);
    let addr = t.serve(
        "py",
        json!({"type": "python", "path": t.code, "module": "whoami"}),
    );
    assert_eq!(
        get(addr, "/").text(),
        format!("{}:{}", daemon.uid, daemon.gid)
    );
    let root = json!({"type": "python", "path": t.code, "module": "whoami", "user": "root"});
    let addr = t.serve("asroot", root);
    assert_eq!(get(addr, "/").text(), "0:0");
}

fn has_fpm() -> bool {
    std::fs::read_dir("/usr/sbin")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("php-fpm"))
}

#[test]
fn a_php_apps_workers_run_as_nobody() {
    let Some(t) = as_nobody() else { return };
    let has_fpm = std::fs::read_dir("/usr/sbin")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("php-fpm"));
    if !has_fpm {
        eprintln!("skipped: no php-fpm in /usr/sbin");
        return;
    }
    t.write(
        "php/index.php",
        "<?php echo posix_getuid(), ':', posix_getgid();\n",
    );
    open_to_all(&t.code.join("php"));
    let addr = t.serve("php", json!({"type": "php", "root": t.code.join("php")}));
    let r = get(addr, "/");
    assert_eq!((r.status, r.text()), (200, t.expected.clone()));
}
