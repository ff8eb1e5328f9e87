//! Tests of `watch`, kept beside it to keep both files readable.
use super::*;
use serde_json::json;
use std::fs;
use std::sync::mpsc::{Receiver, RecvTimeoutError};

const DEBOUNCE: Duration = Duration::from_millis(200);
/// Generous: a loaded CI machine may be slow to deliver the first event.
const DEADLINE: Duration = Duration::from_secs(5);

fn conf(paths: &[&Path], ignore: &[&str]) -> WatchConf {
    WatchConf {
        paths: paths.iter().map(|p| p.to_path_buf()).collect(),
        ignore: ignore.iter().map(|s| s.to_string()).collect(),
        debounce: DEBOUNCE,
    }
}

fn watch(conf: &WatchConf) -> (Watcher, Receiver<PathBuf>) {
    let (tx, rx) = mpsc::channel();
    let w = start(conf, move |p| {
        let _ = tx.send(p);
    })
    .unwrap();
    (w, rx)
}

/// Nothing arrives within three debounces.
fn assert_quiet(rx: &Receiver<PathBuf>) {
    match rx.recv_timeout(DEBOUNCE * 3) {
        Err(RecvTimeoutError::Timeout) => {}
        other => panic!("expected no change, got {other:?}"),
    }
}

fn expect_one(rx: &Receiver<PathBuf>) -> PathBuf {
    let p = rx.recv_timeout(DEADLINE).expect("a change was reported");
    assert_quiet(rx);
    p
}

fn app(rel: &str) -> JsonPath {
    let mut p = JsonPath::root().key("applications").key("a").key("watch");
    for seg in rel.split('/').filter(|s| !s.is_empty()) {
        p = p.key(seg);
    }
    p
}

#[test]
fn write_to_watched_file_triggers_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("package.json");
    fs::write(&file, "{}").unwrap();
    let (_w, rx) = watch(&conf(&[&file], &[]));
    fs::write(&file, "{\"a\": 1}").unwrap();
    assert_eq!(expect_one(&rx), file);
}

#[test]
fn write_in_watched_dir_triggers_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.js");
    fs::write(&file, "1").unwrap();
    let (_w, rx) = watch(&conf(&[dir.path()], &[]));
    fs::write(&file, "2").unwrap();
    assert_eq!(expect_one(&rx), file);
}

#[test]
fn sibling_of_watched_file_is_not_watched() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("package.json");
    fs::write(&file, "{}").unwrap();
    let (_w, rx) = watch(&conf(&[&file], &[]));
    fs::write(dir.path().join("other.txt"), "x").unwrap();
    assert_quiet(&rx);
}

#[test]
fn burst_of_writes_gives_one_callback() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.js");
    fs::write(&file, "0").unwrap();
    let (_w, rx) = watch(&conf(&[dir.path()], &[]));
    for i in 0..20 {
        fs::write(&file, i.to_string()).unwrap();
        thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(expect_one(&rx), file);
}

#[test]
fn ignored_dir_and_pattern_give_nothing() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("node_modules/pkg")).unwrap();
    fs::create_dir_all(dir.path().join("src")).unwrap();
    let (_w, rx) = watch(&conf(&[dir.path()], &["node_modules", "*.log", ".git"]));
    fs::write(dir.path().join("node_modules/x.js"), "x").unwrap();
    fs::write(dir.path().join("node_modules/pkg/y.js"), "y").unwrap();
    fs::write(dir.path().join("app.log"), "log").unwrap();
    fs::write(dir.path().join("src/deep.log"), "log").unwrap();
    fs::create_dir(dir.path().join(".git")).unwrap();
    fs::write(dir.path().join(".git/HEAD"), "ref").unwrap();
    assert_quiet(&rx);
    // And the watch still works for what is not ignored.
    fs::write(dir.path().join("src/a.js"), "a").unwrap();
    assert_eq!(expect_one(&rx), dir.path().join("src/a.js"));
}

#[test]
fn ignored_dirs_cost_no_watch() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("node_modules/a/b")).unwrap();
    fs::create_dir_all(dir.path().join("src/lib")).unwrap();
    let c = conf(&[dir.path()], &["node_modules"]);
    let (tx, _rx) = mpsc::channel::<Msg>();
    let mut state = State {
        watcher: notify::recommended_watcher(move |res| {
            let _ = tx.send(Msg::Fs(res));
        })
        .unwrap(),
        roots: vec![Root::Dir(dir.path().to_path_buf())],
        ignore: Ignore::new(&c.ignore).unwrap(),
        watched: BTreeSet::new(),
        pinned: BTreeSet::new(),
    };
    state.add_tree(dir.path()).unwrap();
    let watched: Vec<_> = state.watched.iter().cloned().collect();
    let d = dir.path();
    assert_eq!(
        watched,
        vec![d.to_path_buf(), d.join("src"), d.join("src/lib")]
    );
}

#[test]
fn ignore_matches_components_and_relative_paths() {
    let ig = Ignore::new(&[
        "node_modules".into(),
        "*.log".into(),
        "build/*.js".into(),
        "**/tmp".into(),
        "?.bak".into(),
    ])
    .unwrap();
    assert!(ig.matches(Path::new("node_modules")));
    assert!(ig.matches(Path::new("a/node_modules/b/c.js")));
    assert!(ig.matches(Path::new("x.log")));
    assert!(ig.matches(Path::new("deep/er/x.log")));
    assert!(ig.matches(Path::new("build/out.js")));
    assert!(!ig.matches(Path::new("build/sub/out.js")));
    assert!(!ig.matches(Path::new("src/build/out.js")));
    assert!(ig.matches(Path::new("a/b/tmp/file")));
    assert!(ig.matches(Path::new("a.bak")));
    assert!(!ig.matches(Path::new("ab.bak")));
    assert!(!ig.matches(Path::new("src/app.js")));
    assert!(!Ignore::new(&[]).unwrap().matches(Path::new("anything")));
}

#[test]
fn new_file_in_watched_dir_triggers() {
    let dir = tempfile::tempdir().unwrap();
    let (_w, rx) = watch(&conf(&[dir.path()], &[]));
    let file = dir.path().join("new.js");
    fs::write(&file, "new").unwrap();
    assert_eq!(expect_one(&rx), file);
}

#[test]
fn new_subdirectory_is_watched() {
    let dir = tempfile::tempdir().unwrap();
    let (_w, rx) = watch(&conf(&[dir.path()], &[]));
    let sub = dir.path().join("lib");
    fs::create_dir(&sub).unwrap();
    assert_eq!(expect_one(&rx), sub);
    fs::write(sub.join("mod.js"), "x").unwrap();
    assert_eq!(expect_one(&rx), sub.join("mod.js"));
}

#[test]
fn save_by_rename_triggers_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("package.json");
    fs::write(&file, "{}").unwrap();
    // Watching the file alone: the rename replaces its inode, and the watch must survive it.
    let (_w, rx) = watch(&conf(&[&file], &[]));
    for round in 0..2 {
        let tmp = dir.path().join(".package.json.swp");
        fs::write(&tmp, format!("{{\"round\": {round}}}")).unwrap();
        fs::rename(&tmp, &file).unwrap();
        assert_eq!(expect_one(&rx), file);
    }
}

#[test]
fn save_by_rename_in_watched_dir_triggers_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.js");
    fs::write(&file, "1").unwrap();
    let (_w, rx) = watch(&conf(&[dir.path()], &[]));
    let tmp = dir.path().join("app.js~");
    fs::write(&tmp, "2").unwrap();
    fs::rename(&tmp, &file).unwrap();
    assert_eq!(expect_one(&rx), tmp);
}

#[test]
fn dropping_the_watcher_stops_callbacks() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.js");
    fs::write(&file, "1").unwrap();
    let (w, rx) = watch(&conf(&[dir.path()], &[]));
    fs::write(&file, "2").unwrap();
    expect_one(&rx);
    // A change pending at the drop is not reported either.
    fs::write(&file, "3").unwrap();
    drop(w);
    fs::write(&file, "4").unwrap();
    assert!(matches!(
        rx.recv_timeout(DEBOUNCE * 3),
        Err(RecvTimeoutError::Disconnected)
    ));
}

#[test]
fn reading_files_triggers_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.js");
    fs::write(&file, "1").unwrap();
    let (_w, rx) = watch(&conf(&[dir.path()], &[]));
    for _ in 0..3 {
        fs::read(&file).unwrap();
        fs::read_dir(dir.path()).unwrap().for_each(drop);
    }
    assert_quiet(&rx);
}

#[test]
fn directory_moved_out_is_no_longer_watched() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("lib/sub")).unwrap();
    let (_w, rx) = watch(&conf(&[dir.path()], &[]));
    let moved = outside.path().join("lib");
    fs::rename(dir.path().join("lib"), &moved).unwrap();
    assert_eq!(expect_one(&rx), dir.path().join("lib"));
    fs::write(moved.join("sub/x.js"), "x").unwrap();
    fs::write(moved.join("y.js"), "y").unwrap();
    assert_quiet(&rx);
}

#[test]
fn watch_limit_error_is_clear() {
    let err = watch_error(
        Path::new("/srv/app/src"),
        notify::Error::new(notify::ErrorKind::MaxFilesWatch),
    );
    let msg = err.to_string();
    assert!(msg.contains("/srv/app/src"), "{msg}");
    assert!(msg.contains("fs.inotify.max_user_watches"), "{msg}");
}

#[test]
fn missing_path_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = start(&conf(&[dir.path(), &missing], &[]), |_| {}).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    assert!(
        err.to_string().contains(&missing.display().to_string()),
        "{err}"
    );
}

#[test]
fn compile_full_object() {
    let v = json!({"paths": ["/srv/app/src", "/srv/app/package.json"], "ignore": ["node_modules", "*.log", ".git"], "debounce": 0.25});
    let c = compile(&v, &app(""), None).unwrap();
    assert_eq!(
        c,
        WatchConf {
            paths: vec!["/srv/app/src".into(), "/srv/app/package.json".into()],
            ignore: vec!["node_modules".into(), "*.log".into(), ".git".into()],
            debounce: Duration::from_millis(250),
        }
    );
}

#[test]
fn compile_defaults_and_single_string() {
    let c = compile(&json!({"paths": "/srv/app"}), &app(""), None).unwrap();
    assert_eq!(c.paths, vec![PathBuf::from("/srv/app")]);
    assert!(c.ignore.is_empty());
    assert_eq!(c.debounce, DEFAULT_DEBOUNCE);
    let c = compile(&json!({"paths": "/a", "ignore": "*.log"}), &app(""), None).unwrap();
    assert_eq!(c.ignore, vec!["*.log".to_string()]);
    let c = compile(&json!({"paths": "/a", "ignore": []}), &app(""), None).unwrap();
    assert!(c.ignore.is_empty());
}

#[test]
fn relative_paths_resolve_against_working_directory() {
    let v = json!({"paths": ["src", "./package.json", "/abs"]});
    let c = compile(&v, &app(""), Some(Path::new("/srv/app"))).unwrap();
    assert_eq!(
        c.paths,
        vec![
            PathBuf::from("/srv/app/src"),
            PathBuf::from("/srv/app/package.json"),
            PathBuf::from("/abs")
        ]
    );
    let err = compile(&v, &app(""), None).unwrap_err();
    assert_eq!(err.path, app("paths/0"));
    assert!(err.message.contains("working_directory"), "{err}");
}

#[test]
fn compile_errors_name_the_path() {
    let cases = [
        (
            json!({"paths": "/a", "debounce": "fast"}),
            "applications/a/watch/debounce",
        ),
        (
            json!({"paths": "/a", "debounce": -1}),
            "applications/a/watch/debounce",
        ),
        (json!({"debounce": 1}), "applications/a/watch/paths"),
        (json!({"paths": []}), "applications/a/watch/paths"),
        (json!({"paths": ["/a", 3]}), "applications/a/watch/paths/1"),
        (json!({"paths": ""}), "applications/a/watch/paths"),
        (
            json!({"paths": "/a", "ignore": ["ok", "[bad"]}),
            "applications/a/watch/ignore/1",
        ),
        (
            json!({"paths": "/a", "ignore": 5}),
            "applications/a/watch/ignore",
        ),
        (
            json!({"paths": "/a", "debounse": 1}),
            "applications/a/watch/debounse",
        ),
        (json!(["/a"]), "applications/a/watch"),
    ];
    for (v, want) in cases {
        let err = compile(&v, &app(""), None).unwrap_err();
        assert_eq!(err.path.as_str(), want, "{v}: {err}");
        assert!(err.to_string().starts_with(want), "{err}");
    }
}

#[test]
fn relative_path_within_relative_root() {
    // The path of a change is reported as seen under the configured root.
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("src")).unwrap();
    let c = compile(
        &json!({"paths": "src", "debounce": 0.2}),
        &app(""),
        Some(dir.path()),
    )
    .unwrap();
    let (_w, rx) = watch(&c);
    fs::write(dir.path().join("src/x.js"), "x").unwrap();
    assert_eq!(expect_one(&rx), dir.path().join("src/x.js"));
}
