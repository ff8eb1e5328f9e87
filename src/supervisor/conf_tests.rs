//! The application settings parser: a table of good values and what they compile to, and a table of bad ones,
//! each refused with the JSON path of the value to blame.

use serde_json::{Value, json};

use super::*;

/// An external app with `extra` merged in, compiled as `applications/app`.
fn compiled(extra: Value) -> Result<AppConf, ConfigError> {
    let mut v = json!({"type": "external", "executable": "/bin/true"});
    v.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    compile(&v, &JsonPath::root().key("applications").key("app"))
}

fn ok(extra: Value) -> AppConf {
    compiled(extra.clone()).unwrap_or_else(|e| panic!("{extra} refused: {e}"))
}

#[test]
fn good_values_compile_to_what_they_say() {
    let secs = Duration::from_secs_f64;
    let c = ok(json!({}));
    assert_eq!((c.processes, c.scale), (1, None));
    assert_eq!(
        (c.stop_signal, c.stop_timeout),
        (Signal::SIGTERM, secs(10.0))
    );
    assert_eq!((c.max_failures, c.backoff_max), (5, secs(30.0)));
    assert_eq!(
        (c.readiness.clone(), c.ready_timeout),
        (Readiness::Connect, secs(30.0))
    );

    assert_eq!(ok(json!({"processes": 4})).processes, 4);
    let c = ok(json!({"processes": {"max": 4, "spare": 2, "idle_timeout": 5}}));
    let scale = Scale {
        max: 4,
        spare: 2,
        idle_timeout: secs(5.0),
    };
    assert_eq!((c.processes, c.scale), (2, Some(scale)));
    let c = ok(json!({"processes": {"max": 3}}));
    let scale = Scale {
        max: 3,
        spare: 1,
        idle_timeout: secs(15.0),
    };
    assert_eq!(
        (c.processes, c.scale),
        (1, Some(scale)),
        "always one running"
    );

    for (limit, bytes) in [
        (json!(1024), 1024),
        (json!("512M"), 512 << 20),
        (json!("2G"), 2 << 30),
        (json!("64 kb"), 64 << 10),
    ] {
        assert_eq!(
            ok(json!({"memory_limit": limit})).memory_limit,
            Some(bytes),
            "{limit}"
        );
    }
    let c = ok(json!({"limits": {"timeout": 2.5, "requests": 100}}));
    assert_eq!(
        (c.request_timeout, c.max_requests),
        (Some(secs(2.5)), Some(100))
    );

    let c = ok(json!({"readiness": {"http": "/health", "timeout": 3}}));
    assert_eq!(
        (c.readiness, c.ready_timeout),
        (Readiness::Http("/health".into()), secs(3.0))
    );
    let c = ok(json!({"readiness": {"connect": true}}));
    assert_eq!(c.readiness, Readiness::Connect);
    let c = ok(json!({"stop": {"signal": "INT", "timeout": 2}}));
    assert_eq!((c.stop_signal, c.stop_timeout), (Signal::SIGINT, secs(2.0)));
    assert_eq!(
        ok(json!({"stop": {"signal": "SIGQUIT"}})).stop_signal,
        Signal::SIGQUIT
    );
    let c = ok(
        json!({"restart": {"min_interval": 0.5, "backoff_max": 4, "max_failures": 0, "stable_after": 2}}),
    );
    assert_eq!(
        (
            c.min_restart_interval,
            c.backoff_max,
            c.max_failures,
            c.stable_after
        ),
        (secs(0.5), secs(4.0), 1, secs(2.0)),
        "max_failures 0 counts as 1"
    );

    let c = ok(json!({"user": "www-data", "group": "www-data"}));
    assert_eq!(
        (c.user.as_deref(), c.group.as_deref()),
        (Some("www-data"), Some("www-data"))
    );
    let c = ok(json!({"stdout": "/dev/null", "stderr": "/var/log/app.err"}));
    assert_eq!(c.stdout, Some(Output::Discard));
    assert_eq!(c.stderr, Some(Output::Log("/var/log/app.err".into())));
    let c = ok(json!({"environment": {"A": "1", "B": ""}, "socket": "tcp"}));
    assert_eq!(
        c.environment,
        [("A".into(), "1".into()), ("B".into(), String::new())]
    );
    assert_eq!(c.socket, SocketKind::Tcp);
}

#[test]
fn bad_values_are_refused_with_their_json_path() {
    for (extra, at) in [
        (json!({"type": "java"}), "type"),
        (json!({"type": 1}), "type"),
        (json!({"colour": "red"}), "colour"),
        (json!({"processes": 0}), "processes"),
        (json!({"processes": -1}), "processes"),
        (json!({"processes": 257}), "processes"),
        (json!({"processes": "2"}), "processes"),
        (json!({"processes": 1.5}), "processes"),
        (json!({"processes": {"max": 0}}), "processes/max"),
        (
            json!({"processes": {"max": 1, "spare": 2}}),
            "processes/max",
        ),
        (json!({"processes": {"spare": -1}}), "processes/spare"),
        (
            json!({"processes": {"idle_timeout": "x"}}),
            "processes/idle_timeout",
        ),
        (json!({"processes": {"min": 1}}), "processes/min"),
        (json!({"memory_limit": "12X"}), "memory_limit"),
        (json!({"memory_limit": "M"}), "memory_limit"),
        (json!({"memory_limit": -5}), "memory_limit"),
        (json!({"memory_limit": true}), "memory_limit"),
        (json!({"memory_limit": "99999999999G"}), "memory_limit"),
        (json!({"limits": []}), "limits"),
        (json!({"limits": {"timeout": -1}}), "limits/timeout"),
        (json!({"limits": {"timeout": "60"}}), "limits/timeout"),
        (json!({"limits": {"requests": 0}}), "limits/requests"),
        (json!({"limits": {"requests": "5"}}), "limits/requests"),
        (json!({"limits": {"size": 1}}), "limits/size"),
        (json!({"readiness": "/health"}), "readiness"),
        (json!({"readiness": {"http": "health"}}), "readiness/http"),
        (json!({"readiness": {"http": 1}}), "readiness/http"),
        (
            json!({"readiness": {"http": "/a", "connect": true}}),
            "readiness",
        ),
        (
            json!({"readiness": {"connect": false}}),
            "readiness/connect",
        ),
        (
            json!({"readiness": {"connect": "yes"}}),
            "readiness/connect",
        ),
        (json!({"readiness": {"timeout": "x"}}), "readiness/timeout"),
        (json!({"readiness": {"tcp": 1}}), "readiness/tcp"),
        (json!({"stop": {"signal": "SIGFOO"}}), "stop/signal"),
        (json!({"stop": {"signal": 15}}), "stop/signal"),
        (json!({"stop": {"timeout": -1}}), "stop/timeout"),
        (json!({"stop": {"grace": 1}}), "stop/grace"),
        (
            json!({"restart": {"min_interval": -1}}),
            "restart/min_interval",
        ),
        (
            json!({"restart": {"backoff_max": "1"}}),
            "restart/backoff_max",
        ),
        (
            json!({"restart": {"max_failures": 1.5}}),
            "restart/max_failures",
        ),
        (
            json!({"restart": {"stable_after": null}}),
            "restart/stable_after",
        ),
        (json!({"restart": {"retries": 1}}), "restart/retries"),
        (json!({"user": 5}), "user"),
        (json!({"group": []}), "group"),
        (json!({"stdout": "relative.log"}), "stdout"),
        (json!({"stderr": 1}), "stderr"),
        (json!({"environment": {"A=B": "x"}}), "environment/A=B"),
        (json!({"environment": {"A": 1}}), "environment/A"),
        (json!({"environment": ["A=1"]}), "environment"),
        (json!({"socket": "udp"}), "socket"),
        (json!({"arguments": [1]}), "arguments/0"),
        (json!({"arguments": {"a": 1}}), "arguments"),
    ] {
        let err = compiled(extra.clone()).expect_err(&format!("{extra} accepted"));
        assert_eq!(
            err.path.as_str(),
            format!("applications/app/{at}"),
            "{extra}: {err}"
        );
    }
}
