//! What `rein top` shows, computed from two readings of `/status`: rates and CPU shares are differences
//! between the previous reading and this one, so the first screen shows counts and the second adds rates.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::Value;

/// One reading: the server's `/status` and the CPU time of each instance's process at that moment.
pub(super) struct Reading {
    pub(super) at: Instant,
    pub(super) status: Value,
    /// CPU seconds (user + system) per process id, read from `/proc` on this machine.
    pub(super) cpu: HashMap<u64, f64>,
}

impl Reading {
    pub(super) fn new(status: Value) -> Reading {
        let cpu = instance_pids(&status)
            .filter_map(|pid| Some((pid, cpu_seconds(pid)?)))
            .collect();
        Reading {
            at: Instant::now(),
            status,
            cpu,
        }
    }
}

/// Everything on one screen.
#[derive(Debug, Default)]
pub(super) struct Screen {
    pub(super) requests_per_s: Option<f64>,
    pub(super) requests_total: u64,
    pub(super) connections_active: u64,
    pub(super) connections_idle: u64,
    pub(super) apps: Vec<App>,
    pub(super) upstreams: Vec<Server>,
}

#[derive(Debug)]
pub(super) struct App {
    pub(super) name: String,
    pub(super) state: String,
    pub(super) generation: u64,
    pub(super) errored: Option<String>,
    pub(super) instances: Vec<Instance>,
}

#[derive(Debug)]
pub(super) struct Instance {
    pub(super) id: u64,
    pub(super) pid: Option<u64>,
    pub(super) state: String,
    pub(super) restarts: u64,
    pub(super) uptime_s: Option<f64>,
    pub(super) cpu_percent: Option<f64>,
    pub(super) rss_bytes: Option<u64>,
    pub(super) requests: u64,
    pub(super) requests_per_s: Option<f64>,
    pub(super) in_flight: u64,
}

/// One server of a named upstream.
#[derive(Debug)]
pub(super) struct Server {
    pub(super) upstream: String,
    pub(super) address: String,
    pub(super) state: String,
    pub(super) active: u64,
    pub(super) failures: u64,
    pub(super) requests_per_s: Option<f64>,
}

/// The screen for `now`, with rates since `before` when there is an earlier reading.
pub(super) fn screen(before: Option<&Reading>, now: &Reading) -> Screen {
    let s = &now.status;
    let elapsed = before.map(|b| now.at.duration_since(b.at).as_secs_f64());
    let rate = |then: Option<u64>, count: u64| -> Option<f64> {
        let secs = elapsed.filter(|e| *e > 0.0)?;
        Some(count.saturating_sub(then?) as f64 / secs)
    };
    let total = u(&s["requests"]["total"]);
    Screen {
        requests_per_s: rate(before.map(|b| u(&b.status["requests"]["total"])), total),
        requests_total: total,
        connections_active: u(&s["connections"]["active"]),
        connections_idle: u(&s["connections"]["idle"]),
        apps: apps(before, now, elapsed),
        upstreams: servers(before, now, &rate),
    }
}

fn apps(before: Option<&Reading>, now: &Reading, elapsed: Option<f64>) -> Vec<App> {
    let Some(apps) = now.status["applications"].as_object() else {
        return Vec::new();
    };
    apps.iter()
        .map(|(name, app)| App {
            name: name.clone(),
            state: text(&app["state"]).unwrap_or("starting").to_owned(),
            generation: u(&app["generation"]),
            errored: text(&app["errored"]).map(str::to_owned),
            instances: app["instances"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| instance(before, now, name, i, elapsed))
                .collect(),
        })
        .collect()
}

fn instance(
    before: Option<&Reading>,
    now: &Reading,
    app: &str,
    i: &Value,
    elapsed: Option<f64>,
) -> Instance {
    let id = u(&i["id"]);
    let pid = i["pid"].as_u64();
    let requests = u(&i["requests"]);
    let secs = elapsed.filter(|e| *e > 0.0);
    let earlier = before.and_then(|b| find_instance(&b.status, app, id));
    let cpu_percent = (|| {
        let (b, pid, secs) = (before?, pid?, secs?);
        let (then, spent) = (b.cpu.get(&pid)?, now.cpu.get(&pid)?);
        Some(100.0 * (spent - then).max(0.0) / secs)
    })();
    Instance {
        id,
        pid,
        state: text(&i["state"]).unwrap_or("").to_owned(),
        restarts: u(&i["restarts"]),
        uptime_s: i["uptime"].as_f64(),
        cpu_percent,
        rss_bytes: i["rss_bytes"].as_u64(),
        requests,
        requests_per_s: earlier
            .zip(secs)
            .map(|(e, s)| requests.saturating_sub(u(&e["requests"])) as f64 / s),
        in_flight: u(&i["in_flight"]),
    }
}

fn servers(
    before: Option<&Reading>,
    now: &Reading,
    rate: &dyn Fn(Option<u64>, u64) -> Option<f64>,
) -> Vec<Server> {
    let Some(upstreams) = now.status["upstreams"].as_object() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, upstream) in upstreams {
        for (address, server) in upstream["servers"].as_object().into_iter().flatten() {
            let then = before.map(|b| &b.status["upstreams"][name]["servers"][address]["requests"]);
            out.push(Server {
                upstream: name.clone(),
                address: address.clone(),
                state: text(&server["state"]).unwrap_or("").to_owned(),
                active: u(&server["active"]),
                failures: u(&server["failures"]),
                requests_per_s: rate(then.and_then(Value::as_u64), u(&server["requests"])),
            });
        }
    }
    out
}

fn find_instance<'a>(status: &'a Value, app: &str, id: u64) -> Option<&'a Value> {
    status["applications"][app]["instances"]
        .as_array()?
        .iter()
        .find(|i| i["id"].as_u64() == Some(id))
}

fn instance_pids(status: &Value) -> impl Iterator<Item = u64> + '_ {
    status["applications"]
        .as_object()
        .into_iter()
        .flat_map(|apps| apps.values())
        .flat_map(|app| app["instances"].as_array().into_iter().flatten())
        .filter_map(|i| i["pid"].as_u64())
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn text(v: &Value) -> Option<&str> {
    v.as_str()
}

/// A process's CPU time (user + system) from `/proc/PID/stat`, in seconds; `None` once it is gone or on a
/// system without `/proc` (the column then stays empty).
fn cpu_seconds(pid: u64) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_cpu_ticks(&stat).map(|ticks| ticks as f64 / clock_ticks_per_second())
}

/// utime + stime: the 14th and 15th fields, counted after the command name, which may hold spaces and
/// parentheses itself (so the fields start after its last `)`).
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(user + system)
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn reading(status: Value, at: Instant, cpu: &[(u64, f64)]) -> Reading {
        Reading {
            at,
            status,
            cpu: cpu.iter().copied().collect(),
        }
    }

    fn status(total: u64, instance_requests: u64, upstream_requests: u64) -> Value {
        json!({
            "connections": {"active": 2, "idle": 5},
            "requests": {"total": total},
            "applications": {"api": {"state": "running", "generation": 3, "instances": [
                {"id": 7, "pid": 4242, "state": "ready", "restarts": 1, "uptime": 12.5,
                 "rss_bytes": 3_145_728, "requests": instance_requests, "in_flight": 1}
            ]}},
            "upstreams": {"back": {"servers": {"127.0.0.1:9000": {
                "state": "up", "active": 0, "failures": 2, "requests": upstream_requests}}}}
        })
    }

    #[test]
    fn the_first_reading_shows_counts_and_no_rates() {
        let s = screen(None, &reading(status(100, 40, 10), Instant::now(), &[]));
        assert_eq!(s.requests_total, 100);
        assert_eq!(s.requests_per_s, None);
        assert_eq!((s.connections_active, s.connections_idle), (2, 5));
        let app = &s.apps[0];
        assert_eq!(
            (app.name.as_str(), app.state.as_str(), app.generation),
            ("api", "running", 3)
        );
        let i = &app.instances[0];
        assert_eq!(
            (i.id, i.pid, i.restarts, i.requests),
            (7, Some(4242), 1, 40)
        );
        assert_eq!((i.requests_per_s, i.cpu_percent), (None, None));
        assert_eq!(s.upstreams[0].address, "127.0.0.1:9000");
        assert_eq!(s.upstreams[0].failures, 2);
    }

    #[test]
    fn rates_are_differences_over_the_time_between_readings() {
        let t0 = Instant::now();
        let before = reading(status(100, 40, 10), t0, &[(4242, 1.0)]);
        let now = reading(
            status(300, 140, 30),
            t0 + Duration::from_secs(2),
            &[(4242, 1.5)],
        );
        let s = screen(Some(&before), &now);
        assert_eq!(s.requests_per_s, Some(100.0));
        let i = &s.apps[0].instances[0];
        assert_eq!(i.requests_per_s, Some(50.0));
        assert_eq!(i.cpu_percent, Some(25.0));
        assert_eq!(s.upstreams[0].requests_per_s, Some(10.0));
    }

    #[test]
    fn a_new_instance_has_no_rate_until_its_second_reading() {
        let t0 = Instant::now();
        let mut old = status(100, 40, 10);
        old["applications"]["api"]["instances"][0]["id"] = json!(6);
        let s = screen(
            Some(&reading(old, t0, &[])),
            &reading(status(150, 5, 10), t0 + Duration::from_secs(1), &[]),
        );
        assert_eq!(s.apps[0].instances[0].requests_per_s, None);
        assert_eq!(s.requests_per_s, Some(50.0));
    }

    #[test]
    fn cpu_ticks_are_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (node (a) b) S 1 4242 4242 0 -1 4194560 5000 0 0 0 250 75 0 0 20 0 11 0";
        assert_eq!(parse_cpu_ticks(stat), Some(325));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }
}
