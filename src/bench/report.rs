//! Counting a run: each worker records into its own [`Recorder`] (latency histogram, errors by kind, runs of
//! successes); the recorders are merged into one [`Report`] at the end.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::gap::Runs;

/// Why a request did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No connection: refused, unreachable, name not resolved.
    Connect,
    /// The connection was reset or closed before the response was complete.
    Reset,
    /// No complete response within the timeout.
    Timeout,
    /// A response that was not HTTP: malformed status line or headers.
    Other,
    /// A complete response, but not 2xx.
    Status(u16),
}

/// Errors by kind; `status` by status code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Errors {
    pub total: u64,
    pub connect: u64,
    pub reset: u64,
    pub timeout: u64,
    pub other: u64,
    pub status: BTreeMap<u16, u64>,
}

impl Errors {
    pub fn count(&mut self, failure: Failure) {
        self.total += 1;
        match failure {
            Failure::Connect => self.connect += 1,
            Failure::Reset => self.reset += 1,
            Failure::Timeout => self.timeout += 1,
            Failure::Other => self.other += 1,
            Failure::Status(code) => *self.status.entry(code).or_default() += 1,
        }
    }

    fn merge(&mut self, other: &Errors) {
        self.total += other.total;
        self.connect += other.connect;
        self.reset += other.reset;
        self.timeout += other.timeout;
        self.other += other.other;
        for (code, n) in &other.status {
            *self.status.entry(*code).or_default() += n;
        }
    }
}

/// One worker's counts.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Latency of every complete response (2xx or not), in µs.
    pub latency: Histogram<u64>,
    pub requests: u64,
    pub successes: u64,
    pub errors: Errors,
    pub runs: Runs,
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder {
            latency: Histogram::new(3).expect("3 significant figures is valid"),
            requests: 0,
            successes: 0,
            errors: Errors::default(),
            runs: Runs::default(),
        }
    }
}

impl Recorder {
    /// A complete response after `latency`, finished `at` (µs from the start of the run).
    pub fn response(&mut self, status: u16, latency: Duration, at: u64) {
        self.requests += 1;
        // Auto-resizing: `record` only fails past i64::MAX / 2 µs.
        let _ = self.latency.record(micros(latency).max(1));
        if (200..300).contains(&status) {
            self.successes += 1;
            self.runs.record(at);
        } else {
            self.errors.count(Failure::Status(status));
        }
    }

    /// A request that got no complete response.
    pub fn failure(&mut self, failure: Failure) {
        self.requests += 1;
        self.errors.count(failure);
    }

    pub fn merge(&mut self, other: Recorder) {
        self.latency
            .add(&other.latency)
            .expect("auto-resizing histograms always add");
        self.requests += other.requests;
        self.successes += other.successes;
        self.errors.merge(&other.errors);
        self.runs.merge(other.runs);
    }

    /// The report for a run that lasted `elapsed`.
    pub fn report(
        &self,
        target: String,
        connections: usize,
        rate: Option<f64>,
        elapsed: Duration,
        bytes_read: u64,
    ) -> Report {
        let secs = elapsed.as_secs_f64();
        let (gap_start, gap) = self.runs.longest_gap(micros(elapsed));
        let h = &self.latency;
        let q = |q: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(q)
            }
        };
        Report {
            target,
            connections,
            rate,
            duration_s: round3(secs),
            requests: self.requests,
            successes: self.successes,
            errors: self.errors.clone(),
            rps: if secs > 0.0 {
                round3(self.successes as f64 / secs)
            } else {
                0.0
            },
            latency_us: Latency {
                p50: q(0.50),
                p90: q(0.90),
                p99: q(0.99),
                p99_9: q(0.999),
                max: if h.is_empty() { 0 } else { h.max() },
                mean: if h.is_empty() { 0.0 } else { round3(h.mean()) },
            },
            bytes_read,
            longest_gap_us: gap,
            longest_gap_start_s: round3(gap_start as f64 / 1e6),
            gap_from_s: None,
        }
    }
}

/// Latency percentiles of complete responses, in microseconds (HDR histogram, 3 significant figures).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latency {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub max: u64,
    pub mean: f64,
}

/// What a run measured. Serialized as is for `--json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub target: String,
    pub connections: usize,
    /// The open-loop rate asked for, if any.
    pub rate: Option<f64>,
    /// From the start to the last answer (or timeout).
    pub duration_s: f64,
    /// Requests finished: successes plus errors.
    pub requests: u64,
    /// 2xx responses.
    pub successes: u64,
    pub errors: Errors,
    /// Successes per second.
    pub rps: f64,
    pub latency_us: Latency,
    /// Bytes read from the sockets, headers included.
    pub bytes_read: u64,
    /// The longest window with no successful response, start and end of the run included.
    pub longest_gap_us: u64,
    /// When that window began, in seconds from the start.
    pub longest_gap_start_s: f64,
    /// With `--gap-from`: the offset the longest gap was measured from (windows over before it left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap_from_s: Option<f64>,
}

impl Report {
    /// Measures the longest gap again, among the windows still open at `from` (see
    /// [`Runs::longest_gap_ending_after`]).
    pub fn gap_from(&mut self, rec: &Recorder, from: Duration, elapsed: Duration) {
        let (start, gap) = rec
            .runs
            .longest_gap_ending_after(micros(from), micros(elapsed));
        self.longest_gap_us = gap;
        self.longest_gap_start_s = round3(start as f64 / 1e6);
        self.gap_from_s = Some(round3(from.as_secs_f64()));
    }
}

pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Seconds (or a rate) to the millisecond, as reports show them.
pub(super) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merged_report_and_its_json_shape() {
        let mut a = Recorder::default();
        let mut b = Recorder::default();
        for i in 1..=100u64 {
            a.response(200, Duration::from_micros(i * 10), i * 1_000);
        }
        b.response(503, Duration::from_micros(5_000), 50_000);
        b.failure(Failure::Reset);
        b.failure(Failure::Timeout);
        b.failure(Failure::Connect);
        b.response(204, Duration::from_micros(20), 400_000);
        a.merge(b);
        let r = a.report(
            "http://127.0.0.1:1/".into(),
            2,
            None,
            Duration::from_millis(500),
            1234,
        );
        assert_eq!((r.requests, r.successes, r.errors.total), (105, 101, 4));
        assert_eq!(r.errors.status, BTreeMap::from([(503, 1)]));
        assert!(r.latency_us.p50 <= r.latency_us.p90);
        assert!(r.latency_us.p99 <= r.latency_us.p99_9 && r.latency_us.p99_9 <= r.latency_us.max);
        // 5000 µs, to the histogram's 3 significant figures.
        assert!(
            (5_000..5_005).contains(&r.latency_us.max),
            "{}",
            r.latency_us.max
        );
        assert_eq!((r.longest_gap_start_s, r.longest_gap_us), (0.1, 300_000));
        assert_eq!(r.rps, 202.0);

        let v = serde_json::to_value(&r).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "target",
                "connections",
                "rate",
                "duration_s",
                "requests",
                "successes",
                "errors",
                "rps",
                "latency_us",
                "bytes_read",
                "longest_gap_us",
                "longest_gap_start_s"
            ]
        );
        assert_eq!(
            v["errors"],
            json!({"total": 4, "connect": 1, "reset": 1, "timeout": 1, "other": 0, "status": {"503": 1}})
        );
        let lat = v["latency_us"].as_object().unwrap();
        assert_eq!(
            lat.keys().collect::<Vec<_>>(),
            ["p50", "p90", "p99", "p99_9", "max", "mean"]
        );
        assert!(v["rate"].is_null());
    }

    #[test]
    fn empty_report() {
        let r = Recorder::default().report("t".into(), 1, Some(5.0), Duration::from_secs(2), 0);
        assert_eq!(r.latency_us.max, 0);
        assert_eq!((r.longest_gap_start_s, r.longest_gap_us), (0.0, 2_000_000));
        assert_eq!(r.rps, 0.0);
    }
}
