//! The longest window with no successful response, across all connections: the headline figure when
//! measuring a reload or a crash.
//!
//! Each recorder keeps its successes as runs: successive successes at most [`JOIN`] apart are one run. A window
//! longer than `JOIN` with no success anywhere cannot lie inside any recorder's run, so the gaps of the union of
//! all runs are exactly the silent windows longer than `JOIN`; shorter ones are reported as the longest gap
//! between runs (at most `JOIN` off). Memory grows with the number of interruptions, not of requests.

/// Successes closer than this (microseconds) are joined into one run.
pub const JOIN: u64 = 1_000;

/// Successful completions, as runs of `(first, last)` microsecond offsets from the start of the run.
#[derive(Debug, Clone, Default)]
pub struct Runs {
    runs: Vec<(u64, u64)>,
}

impl Runs {
    /// Records a success at `t` µs after the start (times from one recorder need not be ordered exactly).
    pub fn record(&mut self, t: u64) {
        match self.runs.last_mut() {
            Some((first, last)) if t + JOIN >= *first && t <= *last + JOIN => {
                *first = (*first).min(t);
                *last = (*last).max(t);
            }
            _ => self.runs.push((t, t)),
        }
    }

    pub fn merge(&mut self, other: Runs) {
        self.runs.extend(other.runs);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.runs.len()
    }

    /// The longest window in `[0, end]` with no success: `(start, length)` in µs. With no success at all,
    /// the whole run.
    pub fn longest_gap(&self, end: u64) -> (u64, u64) {
        self.longest_gap_ending_after(0, end)
    }

    /// The longest window with no success among those still open at `from` µs or later: a window that began
    /// earlier counts whole. Measuring from the moment of a reload leaves out the load's own start (new
    /// connections, a cold server), which is no outage caused by the reload.
    pub fn longest_gap_ending_after(&self, from: u64, end: u64) -> (u64, u64) {
        let mut runs = self.runs.clone();
        runs.sort_unstable();
        let mut best = (0, 0);
        let mut covered = 0; // everything before this instant is inside a run or already measured
        for (first, last) in runs {
            if first > covered && first > from && first - covered > best.1 {
                best = (covered, first - covered);
            }
            covered = covered.max(last);
        }
        if end > covered && end - covered > best.1 {
            best = (covered, end - covered);
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(times: &[u64]) -> Runs {
        let mut r = Runs::default();
        for &t in times {
            r.record(t);
        }
        r
    }

    #[test]
    fn gaps_over_before_from_are_left_out() {
        // Silent 0..1000 (the start) and 5000..7000; successes closer than JOIN are one run.
        let r = runs(&[
            1_000, 2_000, 3_000, 4_000, 5_000, 7_000, 8_000, 9_000, 10_000, 10_500,
        ]);
        assert_eq!(r.longest_gap(10_500), (5_000, 2_000));
        assert_eq!(r.longest_gap_ending_after(0, 10_500), (5_000, 2_000));
        // From 6000: the 5000..7000 window is still open then, and counts whole.
        assert_eq!(r.longest_gap_ending_after(6_000, 10_500), (5_000, 2_000));
        // From 7500: only the tail is left, and it is empty.
        assert_eq!(r.longest_gap_ending_after(7_500, 10_500), (0, 0));
        // A silent tail after `from` counts.
        assert_eq!(r.longest_gap_ending_after(7_500, 12_000), (10_500, 1_500));
        // A long start is left out once `from` is past it.
        let slow_start = runs(&[50_000, 51_000, 52_000, 60_000]);
        assert_eq!(slow_start.longest_gap(60_000), (0, 50_000));
        assert_eq!(
            slow_start.longest_gap_ending_after(55_000, 60_000),
            (52_000, 8_000)
        );
    }

    #[test]
    fn no_success_is_the_whole_run() {
        assert_eq!(Runs::default().longest_gap(5_000_000), (0, 5_000_000));
    }

    #[test]
    fn start_middle_and_end_gaps() {
        // Start to first success.
        assert_eq!(
            runs(&[300_000, 300_500, 301_000]).longest_gap(400_000),
            (0, 300_000)
        );
        // Last success to the end.
        assert_eq!(runs(&[100, 900]).longest_gap(1_000_000), (900, 999_100));
        // A hole in the middle.
        let r = runs(&[100, 600, 1_000, 1_400, 250_000, 250_300]);
        assert_eq!(r.len(), 2);
        assert_eq!(r.longest_gap(251_000), (1_400, 248_600));
    }

    #[test]
    fn dense_successes_make_one_run() {
        let r = runs(&(0..10_000).map(|i| i * 100).collect::<Vec<_>>());
        assert_eq!(r.len(), 1);
        assert_eq!(r.longest_gap(1_000_000), (999_900, 100));
    }

    #[test]
    fn other_connections_fill_each_others_holes() {
        // Connection a is silent from 10ms to 50ms, b from 30ms to 80ms: neither answers only from 30ms to 50ms.
        let mut a = runs(
            &(0..=10)
                .map(|i| i * 1_000)
                .chain((50..=100).map(|i| i * 1_000))
                .collect::<Vec<_>>(),
        );
        let b = runs(
            &(0..=30)
                .map(|i| i * 1_000)
                .chain((80..=100).map(|i| i * 1_000))
                .collect::<Vec<_>>(),
        );
        a.merge(b);
        assert_eq!(a.longest_gap(100_000), (30_000, 20_000));
    }

    #[test]
    fn slightly_out_of_order_times_join() {
        let r = runs(&[5_000, 4_800, 5_900, 5_200]);
        assert_eq!(r.len(), 1);
        assert_eq!(r.longest_gap(6_000), (0, 4_800));
    }
}
