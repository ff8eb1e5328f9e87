//! The Prometheus text exposition format (version 0.0.4) of [`Metrics`]: `# HELP` and `# TYPE` before each
//! family, every sample of a family together, label values escaped. Labels are bounded by the configuration
//! (listener, target, upstream, server, application, certificate names, instance ids of live instances),
//! the status class and fixed enumerations; never a client or a URL.
//!
//! Rendered by hand from the typed snapshot: the families are fixed and few, and a client library would
//! keep a second copy of every counter in its own registry.

use std::fmt::Write as _;

use super::Metrics;
use super::counters::{DURATION_BUCKETS, RequestTotals, RestartCause, STATUS_CLASSES};
use super::snapshot::{AppStatus, ServerStatus, Status};

/// The media type of the format.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The text of every metric.
pub(crate) fn render(m: &Metrics) -> String {
    let mut out = Exposition::default();
    out.build_info();
    connections(&mut out, &m.status);
    requests(&mut out, m);
    upstreams(&mut out, &m.status);
    apps(&mut out, m);
    config(&mut out, &m.status);
    certificates(&mut out, m);
    process(&mut out, m);
    out.text
}

#[derive(Default)]
struct Exposition {
    text: String,
}

type Labels<'a> = &'a [(&'a str, &'a str)];

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: Labels<'_>, value: impl Value) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                self.text.push_str(k);
                self.text.push_str("=\"");
                escape(&mut self.text, v);
                self.text.push('"');
            }
            self.text.push('}');
        }
        self.text.push(' ');
        value.write(&mut self.text);
        self.text.push('\n');
    }

    /// A one-sample family.
    fn single(&mut self, name: &str, kind: &str, help: &str, value: impl Value) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    fn build_info(&mut self) {
        self.family(
            "rein_build_info",
            "gauge",
            "rein's version, as a label; always 1.",
        );
        self.sample(
            "rein_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))],
            1u64,
        );
    }

    /// The `_bucket`, `_sum` and `_count` samples of one histogram of request durations.
    fn histogram(&mut self, name: &str, labels: Labels<'_>, t: &RequestTotals) {
        let bucket = format!("{name}_bucket");
        let bounds = DURATION_BUCKETS.iter().map(f64::to_string);
        let counts = t.buckets.iter().copied();
        for (le, count) in bounds
            .chain(["+Inf".to_owned()])
            .zip(counts.chain([t.count]))
        {
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, count);
        }
        self.sample(&format!("{name}_sum"), labels, t.seconds);
        self.sample(&format!("{name}_count"), labels, t.count);
    }
}

fn connections(out: &mut Exposition, s: &Status) {
    let c = &s.connections;
    out.single(
        "rein_connections_accepted_total",
        "counter",
        "Client connections accepted, over every listener.",
        c.accepted,
    );
    out.single(
        "rein_connections_closed_total",
        "counter",
        "Client connections closed.",
        c.closed,
    );
    out.single(
        "rein_connections_refused_total",
        "counter",
        "Client connections closed on arrival for a connection limit.",
        c.refused,
    );
    out.family(
        "rein_connections",
        "gauge",
        "Client connections open: active ones handle a request, idle ones wait for the next.",
    );
    out.sample("rein_connections", &[("state", "active")], c.active);
    out.sample("rein_connections", &[("state", "idle")], c.idle);
}

fn requests(out: &mut Exposition, m: &Metrics) {
    let name = "rein_listener_connections_accepted_total";
    out.family(name, "counter", "Client connections accepted, by listener.");
    for (l, t) in &m.listeners {
        out.sample(name, &[("listener", l)], t.accepted);
    }
    let name = "rein_tls_handshakes_total";
    out.family(
        name,
        "counter",
        "TLS handshakes on a listener, completed or failed (timed out included).",
    );
    for (l, t) in &m.listeners {
        out.sample(
            name,
            &[("listener", l), ("outcome", "completed")],
            t.handshakes,
        );
        out.sample(
            name,
            &[("listener", l), ("outcome", "failed")],
            t.handshake_failures,
        );
    }
    let name = "rein_http_requests_total";
    out.family(
        name,
        "counter",
        "Requests answered, by listener and status class.",
    );
    for (l, t) in &m.listeners {
        for (class, n) in STATUS_CLASSES.iter().zip(t.requests.by_class) {
            out.sample(name, &[("listener", l), ("code", class)], n);
        }
    }
    let name = "rein_http_request_duration_seconds";
    out.family(
        name,
        "histogram",
        "Time from a request's first byte to the end of its response, by listener.",
    );
    for (l, t) in &m.listeners {
        out.histogram(name, &[("listener", l)], &t.requests);
    }
    let name = "rein_http_request_body_bytes_total";
    out.family(
        name,
        "counter",
        "Request body bytes read from clients, by listener.",
    );
    for (l, t) in &m.listeners {
        out.sample(name, &[("listener", l)], t.requests.received);
    }
    let name = "rein_http_response_body_bytes_total";
    out.family(
        name,
        "counter",
        "Response body bytes sent to clients, by listener.",
    );
    for (l, t) in &m.listeners {
        out.sample(name, &[("listener", l)], t.requests.sent);
    }
    targets(out, m);
}

fn targets(out: &mut Exposition, m: &Metrics) {
    let name = "rein_target_requests_total";
    out.family(
        name,
        "counter",
        "Requests answered through a route target (upstream, application, proxy or FastCGI server), by status class.",
    );
    for (target, t) in &m.targets {
        for (class, n) in STATUS_CLASSES.iter().zip(t.requests.by_class) {
            out.sample(name, &[("target", target), ("code", class)], n);
        }
    }
    let name = "rein_target_request_duration_seconds";
    out.family(
        name,
        "histogram",
        "Duration of the requests answered through a route target.",
    );
    for (target, t) in &m.targets {
        out.histogram(name, &[("target", target)], &t.requests);
    }
    let name = "rein_target_retries_total";
    out.family(
        name,
        "counter",
        "Requests tried again on another server of a route target.",
    );
    for (target, t) in &m.targets {
        out.sample(name, &[("target", target)], t.retries);
    }
}

/// A family of upstream servers' samples: name, help, and how to read a server's value.
type ServerFamily = (&'static str, &'static str, fn(&ServerStatus) -> u64);

fn upstreams(out: &mut Exposition, s: &Status) {
    let servers = || {
        s.upstreams.iter().flat_map(|(u, status)| {
            status
                .servers
                .iter()
                .map(move |(addr, server)| (u, addr, server))
        })
    };
    let gauges: [ServerFamily; 3] = [
        (
            "rein_upstream_server_up",
            "Whether the server takes requests (healthy): 1, or 0 when failed or unhealthy.",
            |s| u64::from(s.state == "healthy"),
        ),
        (
            "rein_upstream_server_active_requests",
            "Requests in flight on the server.",
            |s| u64::from(s.active),
        ),
        (
            "rein_upstream_server_idle_connections",
            "Idle connections kept open to the server (its pool).",
            |s| s.idle_connections as u64,
        ),
    ];
    for (name, help, read) in gauges {
        out.family(name, "gauge", help);
        for (u, addr, server) in servers() {
            out.sample(name, &[("upstream", u), ("server", addr)], read(server));
        }
    }
    let counters: [ServerFamily; 3] = [
        (
            "rein_upstream_server_requests_total",
            "Requests sent to the server.",
            |s| s.requests,
        ),
        (
            "rein_upstream_server_failures_total",
            "Requests that failed on the server (counted by passive health).",
            |s| s.failures,
        ),
        (
            "rein_upstream_server_connections_opened_total",
            "Connections opened to the server.",
            |s| s.connections_opened,
        ),
    ];
    for (name, help, read) in counters {
        out.family(name, "counter", help);
        for (u, addr, server) in servers() {
            out.sample(name, &[("upstream", u), ("server", addr)], read(server));
        }
    }
}

const INSTANCE_STATES: [&str; 4] = ["starting", "ready", "draining", "stopping"];

fn apps(out: &mut Exposition, m: &Metrics) {
    let apps = &m.status.applications;
    let name = "rein_app_instances";
    out.family(name, "gauge", "An application's instances, by state.");
    for (app, status) in apps {
        for state in INSTANCE_STATES {
            let n = status.instances.iter().filter(|i| i.state == state).count();
            out.sample(name, &[("app", app), ("state", state)], n as u64);
        }
    }
    let name = "rein_app_errored";
    out.family(
        name,
        "gauge",
        "1 while an application keeps failing to start (retried with back-off).",
    );
    for (app, status) in apps {
        out.sample(
            name,
            &[("app", app)],
            u64::from(status.state == Some("errored")),
        );
    }
    let name = "rein_app_queued_requests";
    out.family(
        name,
        "gauge",
        "Requests waiting for an instance of an application.",
    );
    for (app, status) in apps {
        out.sample(name, &[("app", app)], u64::from(status.queued));
    }
    instances(out, apps);
    app_counters(out, m);
}

fn instances(out: &mut Exposition, apps: &std::collections::BTreeMap<String, AppStatus>) {
    let each = || {
        apps.iter()
            .flat_map(|(app, s)| s.instances.iter().map(move |i| (app, i.id.to_string(), i)))
    };
    let name = "rein_app_instance_resident_memory_bytes";
    out.family(
        name,
        "gauge",
        "Resident memory of an application's instance.",
    );
    for (app, id, i) in each() {
        if let Some(rss) = i.rss_bytes {
            out.sample(name, &[("app", app), ("instance_id", &id)], rss);
        }
    }
    let name = "rein_app_instance_cpu_seconds_total";
    out.family(
        name,
        "counter",
        "CPU time (user and system) used by an application's instance.",
    );
    for (app, id, i) in each() {
        if let Some(cpu) = i.cpu_seconds {
            out.sample(name, &[("app", app), ("instance_id", &id)], cpu);
        }
    }
    let name = "rein_app_instance_requests_total";
    out.family(
        name,
        "counter",
        "Requests sent to an application's instance.",
    );
    for (app, id, i) in each() {
        if let Some(n) = i.requests {
            out.sample(name, &[("app", app), ("instance_id", &id)], n);
        }
    }
    let name = "rein_app_instance_active_requests";
    out.family(
        name,
        "gauge",
        "Requests in flight on an application's instance.",
    );
    for (app, id, i) in each() {
        if let Some(n) = i.in_flight {
            out.sample(name, &[("app", app), ("instance_id", &id)], u64::from(n));
        }
    }
}

fn app_counters(out: &mut Exposition, m: &Metrics) {
    let name = "rein_app_restarts_total";
    out.family(
        name,
        "counter",
        "Instances of an application started again, by cause.",
    );
    for (app, t) in &m.apps {
        for (cause, n) in RestartCause::ALL.iter().zip(t.restarts) {
            out.sample(name, &[("app", app), ("cause", cause.label())], n);
        }
    }
    let name = "rein_app_reloads_total";
    out.family(
        name,
        "counter",
        "Rolling reloads of an application, by outcome.",
    );
    for (app, t) in &m.apps {
        out.sample(name, &[("app", app), ("outcome", "ok")], t.reloads_ok);
        out.sample(
            name,
            &[("app", app), ("outcome", "failed")],
            t.reloads_failed,
        );
    }
    let name = "rein_app_reload_duration_seconds";
    out.family(
        name,
        "summary",
        "Time rolling reloads of an application took.",
    );
    for (app, t) in &m.apps {
        out.sample(&format!("{name}_sum"), &[("app", app)], t.reload_seconds);
        out.sample(
            &format!("{name}_count"),
            &[("app", app)],
            t.reloads_ok + t.reloads_failed,
        );
    }
}

fn config(out: &mut Exposition, s: &Status) {
    out.single(
        "rein_config_generation",
        "gauge",
        "The configuration's generation: how many times it was applied since rein started.",
        s.config.generation,
    );
    if let Some(at) = s.config.changed_at {
        out.single(
            "rein_config_last_change_timestamp_seconds",
            "gauge",
            "When the configuration was last applied, in seconds since the epoch.",
            at,
        );
    }
}

fn certificates(out: &mut Exposition, m: &Metrics) {
    let name = "rein_certificate_expiry_timestamp_seconds";
    out.family(
        name,
        "gauge",
        "When a stored certificate bundle's leaf expires, in seconds since the epoch.",
    );
    for (cert, at) in &m.certificates {
        out.sample(name, &[("certificate", cert)], *at as f64);
    }
}

fn process(out: &mut Exposition, m: &Metrics) {
    let p = &m.process;
    out.single(
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
        p.usage.cpu_seconds,
    );
    out.single(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
        p.usage.rss_bytes,
    );
    out.single(
        "process_open_fds",
        "gauge",
        "Number of open file descriptors.",
        p.open_fds,
    );
    if let Some(max) = p.max_fds {
        out.single(
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            max,
        );
    }
    out.single(
        "process_threads",
        "gauge",
        "Number of OS threads in the process.",
        p.usage.threads,
    );
    if let Some(start) = p.start_time {
        out.single(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            start,
        );
    }
}

/// A sample's value as the format writes it.
trait Value {
    fn write(&self, out: &mut String);
}

impl Value for u64 {
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
}

impl Value for f64 {
    fn write(&self, out: &mut String) {
        match self {
            v if v.is_nan() => out.push_str("NaN"),
            v if v.is_infinite() && *v > 0.0 => out.push_str("+Inf"),
            v if v.is_infinite() => out.push_str("-Inf"),
            v => {
                let _ = write!(out, "{v}");
            }
        }
    }
}

/// A label value: backslash, double quote and line feed escaped.
fn escape(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::counters::{ListenerStats, TargetStats};
    use crate::stats::snapshot::{
        ConfigStatus, Connections, Empty, InstanceStatus, Requests, UpstreamStatus,
    };
    use std::time::Duration;

    fn metrics() -> Metrics {
        let listener = ListenerStats::default();
        listener.requests.finished(200, Duration::from_millis(2), 5);
        listener
            .requests
            .finished(503, Duration::from_millis(200), 0);
        let target = TargetStats::default();
        target.requests.finished(200, Duration::from_millis(2), 5);
        let app = AppStatus {
            instances: vec![InstanceStatus {
                id: 7,
                state: "ready",
                rss_bytes: Some(4096),
                cpu_seconds: Some(0.5),
                requests: Some(1),
                in_flight: Some(0),
                ..InstanceStatus::default()
            }],
            ..AppStatus::default()
        };
        let upstream = UpstreamStatus {
            servers: vec![(
                "127.0.0.1:9000".into(),
                ServerStatus {
                    state: "healthy",
                    ..ServerStatus::default()
                },
            )],
        };
        Metrics {
            status: Status {
                connections: Connections::default(),
                requests: Requests::default(),
                listeners: Default::default(),
                upstreams: [("u\"1".to_owned(), upstream)].into(),
                applications: [("api".to_owned(), app)].into(),
                certificates: Default::default(),
                config: ConfigStatus {
                    generation: 3,
                    changed_at: Some(1.7e9),
                },
                modules: Empty,
            },
            listeners: vec![("*:8080".into(), listener.totals())],
            targets: vec![("applications/api".into(), target.totals())],
            apps: vec![("api".into(), Default::default())],
            certificates: vec![("site".into(), 1_800_000_000)],
            process: crate::stats::process::own(),
        }
    }

    #[test]
    fn every_family_has_help_and_type_before_its_samples() {
        let text = render(&metrics());
        let mut declared = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap();
                assert!(declared.insert(name.to_owned()), "{name} declared twice");
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let name = line.split(['{', ' ']).next().unwrap();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| declared.contains(*f)))
                .unwrap_or(name);
            assert!(declared.contains(family), "{line} before its TYPE");
        }
    }

    #[test]
    fn samples_carry_their_labels_and_values() {
        let text = render(&metrics());
        for expected in [
            "rein_http_requests_total{listener=\"*:8080\",code=\"2xx\"} 1\n",
            "rein_http_requests_total{listener=\"*:8080\",code=\"5xx\"} 1\n",
            "rein_http_request_duration_seconds_bucket{listener=\"*:8080\",le=\"0.005\"} 1\n",
            "rein_http_request_duration_seconds_bucket{listener=\"*:8080\",le=\"+Inf\"} 2\n",
            "rein_http_response_body_bytes_total{listener=\"*:8080\"} 5\n",
            "rein_target_requests_total{target=\"applications/api\",code=\"2xx\"} 1\n",
            "rein_upstream_server_up{upstream=\"u\\\"1\",server=\"127.0.0.1:9000\"} 1\n",
            "rein_app_instances{app=\"api\",state=\"ready\"} 1\n",
            "rein_app_instance_resident_memory_bytes{app=\"api\",instance_id=\"7\"} 4096\n",
            "rein_app_instance_cpu_seconds_total{app=\"api\",instance_id=\"7\"} 0.5\n",
            "rein_app_restarts_total{app=\"api\",cause=\"exited\"} 0\n",
            "rein_config_generation 3\n",
            "rein_config_last_change_timestamp_seconds 1700000000\n",
            "rein_certificate_expiry_timestamp_seconds{certificate=\"site\"} 1800000000\n",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        assert!(text.contains("\nprocess_resident_memory_bytes "));
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = String::new();
        escape(&mut out, "a\\b\"c\nd");
        assert_eq!(out, "a\\\\b\\\"c\\nd");
    }
}
