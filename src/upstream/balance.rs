//! Choosing a server of an upstream for one request.
//!
//! Pure logic, no I/O: the caller describes each server as a [`Candidate`]
//! (weight, requests in flight, whether it may be used for this request) and
//! asks the upstream's [`Balancer`] for an index.
//!
//! - [`Balance::RoundRobin`] is nginx's *smooth weighted round-robin*: every
//!   pick adds each available server's weight to its current weight, chooses
//!   the largest current weight (the lowest index on a tie) and takes the
//!   total of the available weights off the chosen one. Weights 5:1:1 give
//!   `a a b a c a a`, spread evenly rather than in bursts; weights may be
//!   fractional. Unavailable servers are skipped and their current weight is
//!   left as it is (as nginx does), so the sum of all current weights stays 0.
//! - [`Balance::LeastConnections`] takes the available server with the
//!   smallest `active / weight`; servers tied on that load are chosen among by
//!   the same smooth round-robin, so equal idle servers alternate.
//! - [`Balance::Packed`] takes the same least loaded servers, but ties go to
//!   the first in the list: light traffic stays on the first servers and the
//!   last ones fall idle. Not offered in configuration; it is how an
//!   application that scales (`processes` with `spare` below `max`) spreads
//!   requests, so that the instances it grew can go idle and be retired.
//! - [`Balance::IpHash`] is weighted rendezvous (highest-random-weight)
//!   hashing: each available server scores `-weight / ln(u)` with `u` in
//!   (0, 1) drawn from a stable hash of (client address, server index), and
//!   the highest score wins. A client keeps its server while that server is
//!   available; when one is removed only its clients move, and a server gets
//!   a share of the clients proportional to its weight. IPv4-mapped IPv6
//!   addresses hash as the IPv4 address they carry. Without a client address
//!   (a Unix-socket client) it falls back to round-robin.
//!
//! The hash is FNV-1a 64 over the address bytes, mixed with the index by
//! splitmix64: it never changes between runs, builds or platforms.
//!
//! A candidate whose weight is not a finite number above 0 is never chosen.

use std::net::IpAddr;

/// How an upstream spreads requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Balance {
    #[default]
    RoundRobin,
    LeastConnections,
    IpHash,
    Packed,
}

/// What the balancer sees of one server at the moment of choosing.
#[derive(Debug, Clone, Copy)]
pub struct Candidate {
    /// Relative share of requests, above 0 (servers with weight 0 are never offered).
    pub weight: f64,
    /// Requests in flight to this server now.
    pub active: u32,
    /// Healthy, not excluded by this request's earlier tries, under its connection limit.
    pub available: bool,
}

impl Candidate {
    /// A placeholder that is never chosen.
    pub const NONE: Candidate = Candidate {
        weight: 0.0,
        active: 0,
        available: false,
    };

    /// Whether it may be chosen at all.
    pub fn is_usable(&self) -> bool {
        self.usable()
    }

    /// Requests in flight per unit of weight.
    fn load(&self) -> f64 {
        f64::from(self.active) / self.weight
    }

    fn usable(&self) -> bool {
        self.available && self.weight.is_finite() && self.weight > 0.0
    }
}

/// Per-upstream balancer state: the current weights of smooth weighted
/// round-robin (also used to break least-connections ties). One per
/// upstream, behind a lock held by the caller while it picks.
#[derive(Debug, Default, Clone)]
pub struct Balancer {
    /// One current weight per candidate. Sized lazily: when `pick` is given a
    /// list of another length (the upstream was reconfigured), it starts over
    /// from zeros.
    current: Vec<f64>,
}

impl Balancer {
    /// A balancer for an upstream of `n` servers.
    pub fn new(n: usize) -> Self {
        Balancer {
            current: vec![0.0; n],
        }
    }

    /// Like [`Balancer::pick`], leaving the state as it was: a retry after a failed server is not a turn of
    /// the rotation, so the failed server keeps its share and the server that takes the retry keeps its own
    /// (as Unit's, whose round robin a retry does not advance).
    pub fn peek(
        &self,
        how: Balance,
        candidates: &[Candidate],
        client: Option<IpAddr>,
    ) -> Option<usize> {
        self.clone().pick(how, candidates, client)
    }

    /// Index of the chosen candidate, or `None` when none is available.
    ///
    /// `client` is the client's address, used by [`Balance::IpHash`]; with
    /// `None` that method falls back to round-robin.
    pub fn pick(
        &mut self,
        how: Balance,
        candidates: &[Candidate],
        client: Option<IpAddr>,
    ) -> Option<usize> {
        if self.current.len() != candidates.len() {
            self.current.clear();
            self.current.resize(candidates.len(), 0.0);
        }
        match (how, client) {
            (Balance::RoundRobin, _) | (Balance::IpHash, None) => {
                self.smooth(candidates, |c| c.usable())
            }
            (Balance::LeastConnections, _) => {
                let load = Candidate::load;
                let least = candidates
                    .iter()
                    .filter(|c| c.usable())
                    .map(load)
                    .min_by(f64::total_cmp)?;
                // A relative tolerance, so that e.g. 3/0.3 and 1/0.1 count as equal.
                let limit = least + least * 1e-9;
                self.smooth(candidates, |c| c.usable() && load(c) <= limit)
            }
            (Balance::Packed, _) => candidates
                .iter()
                .enumerate()
                .filter(|(_, c)| c.usable())
                .min_by(|(_, a), (_, b)| a.load().total_cmp(&b.load()))
                .map(|(i, _)| i),
            (Balance::IpHash, Some(ip)) => {
                let key = client_key(ip);
                let mut best: Option<(usize, f64)> = None;
                for (i, c) in candidates.iter().enumerate() {
                    if !c.usable() {
                        continue;
                    }
                    let score = -c.weight / unit(key, i).ln();
                    if best.is_none_or(|(_, s)| score > s) {
                        best = Some((i, score));
                    }
                }
                best.map(|(i, _)| i)
            }
        }
    }

    /// One step of smooth weighted round-robin over the candidates that
    /// `eligible` accepts.
    fn smooth(
        &mut self,
        candidates: &[Candidate],
        eligible: impl Fn(&Candidate) -> bool,
    ) -> Option<usize> {
        let mut total = 0.0;
        let mut best: Option<usize> = None;
        for (i, c) in candidates.iter().enumerate() {
            if !eligible(c) {
                continue;
            }
            self.current[i] += c.weight;
            total += c.weight;
            if best.is_none_or(|b| self.current[i] > self.current[b]) {
                best = Some(i);
            }
        }
        let b = best?;
        self.current[b] -= total;
        Some(b)
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A stable 64-bit key of a client address (family tag, then its bytes).
fn client_key(ip: IpAddr) -> u64 {
    match ip.to_canonical() {
        IpAddr::V4(a) => fnv1a(fnv1a(FNV_OFFSET, &[4]), &a.octets()),
        IpAddr::V6(a) => fnv1a(fnv1a(FNV_OFFSET, &[6]), &a.octets()),
    }
}

/// A number strictly inside (0, 1) drawn from (client key, server index).
fn unit(key: u64, index: usize) -> f64 {
    let h = splitmix64(key ^ splitmix64(index as u64));
    // The top 53 bits, centred in their step: never 0, never 1.
    ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn cands(weights: &[f64]) -> Vec<Candidate> {
        weights
            .iter()
            .map(|&weight| Candidate {
                weight,
                active: 0,
                available: true,
            })
            .collect()
    }

    fn counts(b: &mut Balancer, how: Balance, c: &[Candidate], picks: usize) -> Vec<usize> {
        let mut n = vec![0; c.len()];
        for _ in 0..picks {
            n[b.pick(how, c, None).unwrap()] += 1;
        }
        n
    }

    /// Deterministic test addresses.
    fn random_ips(n: usize, seed: u64) -> Vec<IpAddr> {
        (0..n as u64)
            .map(|i| {
                let r = splitmix64(seed ^ splitmix64(i));
                if i % 4 == 3 {
                    let lo = splitmix64(r);
                    IpAddr::V6(Ipv6Addr::from((u128::from(r) << 64) | u128::from(lo)))
                } else {
                    IpAddr::V4(Ipv4Addr::from(r as u32))
                }
            })
            .collect()
    }

    #[test]
    fn smooth_round_robin_matches_nginx_sequence() {
        let c = cands(&[5.0, 1.0, 1.0]);
        let mut b = Balancer::new(3);
        let seq: Vec<usize> = (0..7)
            .map(|_| b.pick(Balance::RoundRobin, &c, None).unwrap())
            .collect();
        assert_eq!(seq, vec![0, 0, 1, 0, 2, 0, 0]);
        // After a full cycle the state is back at zero, so it repeats.
        assert_eq!(b.current, vec![0.0, 0.0, 0.0]);
        assert_eq!(
            counts(&mut b, Balance::RoundRobin, &c, 7000),
            vec![5000, 1000, 1000]
        );
    }

    #[test]
    fn a_peek_does_not_take_a_turn() {
        let mut b = Balancer::new(2);
        let all = cands(&[1.0, 1.0]);
        let mut retry = cands(&[1.0, 1.0]);
        retry[0].available = false;
        assert_eq!(b.pick(Balance::RoundRobin, &all, None), Some(0));
        assert_eq!(b.peek(Balance::RoundRobin, &retry, None), Some(1));
        assert_eq!(b.pick(Balance::RoundRobin, &all, None), Some(1));
        assert_eq!(b.pick(Balance::RoundRobin, &all, None), Some(0));
    }

    #[test]
    fn round_robin_equal_weights_cycle() {
        let c = cands(&[1.0, 1.0, 1.0]);
        let mut b = Balancer::default();
        let seq: Vec<usize> = (0..6)
            .map(|_| b.pick(Balance::RoundRobin, &c, None).unwrap())
            .collect();
        assert_eq!(seq, vec![0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn fractional_weights() {
        let c = cands(&[0.5, 1.5]);
        let mut b = Balancer::new(2);
        let seq: Vec<usize> = (0..4)
            .map(|_| b.pick(Balance::RoundRobin, &c, None).unwrap())
            .collect();
        assert_eq!(seq, vec![1, 0, 1, 1]);
        assert_eq!(
            counts(&mut b, Balance::RoundRobin, &c, 4000),
            vec![1000, 3000]
        );

        // Weights that are not exact in binary still give the right shares.
        let c = cands(&[0.1, 0.2, 0.7]);
        let mut b = Balancer::new(3);
        assert_eq!(
            counts(&mut b, Balance::RoundRobin, &c, 10_000),
            vec![1000, 2000, 7000]
        );
    }

    #[test]
    fn unavailable_skipped_and_state_sane() {
        let mut c = cands(&[1.0, 1.0, 1.0]);
        let mut b = Balancer::new(3);
        c[1].available = false;
        let seq: Vec<usize> = (0..4)
            .map(|_| b.pick(Balance::RoundRobin, &c, None).unwrap())
            .collect();
        assert_eq!(seq, vec![0, 2, 0, 2]);
        c[1].available = true;
        assert_eq!(
            counts(&mut b, Balance::RoundRobin, &c, 3000),
            vec![1000, 1000, 1000]
        );

        // Availability flapping at random: current weights stay bounded and
        // always sum to 0, and shares are right once it settles.
        let mut c = cands(&[5.0, 1.0, 1.0, 2.0]);
        let mut b = Balancer::new(4);
        for step in 0..100_000u64 {
            let r = splitmix64(step);
            for (i, cand) in c.iter_mut().enumerate() {
                cand.available = (r >> (i * 8)) & 3 != 0;
            }
            let picked = b.pick(Balance::RoundRobin, &c, None);
            assert_eq!(picked.is_some(), c.iter().any(|x| x.available));
            if let Some(p) = picked {
                assert!(c[p].available);
            }
            assert!(
                b.current.iter().all(|w| w.abs() <= 4.0 * 9.0),
                "{:?}",
                b.current
            );
            assert!(b.current.iter().sum::<f64>().abs() < 1e-6);
        }
        for cand in &mut c {
            cand.available = true;
        }
        let n = counts(&mut b, Balance::RoundRobin, &c, 9000);
        for (got, want) in n.iter().zip([5000, 1000, 1000, 2000]) {
            assert!(got.abs_diff(want) <= 5, "{n:?}");
        }
    }

    #[test]
    fn state_restarts_when_list_changes_size() {
        let mut b = Balancer::new(3);
        let c3 = cands(&[5.0, 1.0, 1.0]);
        b.pick(Balance::RoundRobin, &c3, None);
        let c2 = cands(&[1.0, 1.0]);
        assert_eq!(b.pick(Balance::RoundRobin, &c2, None), Some(0));
        assert_eq!(b.current, vec![-1.0, 1.0]);
        assert_eq!(b.pick(Balance::RoundRobin, &c2, None), Some(1));
    }

    #[test]
    fn least_connections_picks_idlest() {
        let mut c = cands(&[1.0, 1.0, 1.0]);
        c[0].active = 3;
        c[1].active = 1;
        c[2].active = 2;
        let mut b = Balancer::new(3);
        for _ in 0..5 {
            assert_eq!(b.pick(Balance::LeastConnections, &c, None), Some(1));
        }
        c[1].available = false;
        assert_eq!(b.pick(Balance::LeastConnections, &c, None), Some(2));
    }

    #[test]
    fn least_connections_respects_weight() {
        // Loads 4/1 = 4 and 6/3 = 2: the heavier, busier server wins.
        let mut c = cands(&[1.0, 3.0]);
        c[0].active = 4;
        c[1].active = 6;
        let mut b = Balancer::new(2);
        assert_eq!(b.pick(Balance::LeastConnections, &c, None), Some(1));
        c[1].active = 13; // 13/3 > 4
        assert_eq!(b.pick(Balance::LeastConnections, &c, None), Some(0));
        // Fractional: 1/0.1 = 10 and 3/0.3 = 10 count as a tie, 2/0.1 does not.
        let mut c = cands(&[0.1, 0.3, 0.1]);
        c[0].active = 1;
        c[1].active = 3;
        c[2].active = 2;
        let mut b = Balancer::new(3);
        let mut n = [0; 3];
        for _ in 0..400 {
            n[b.pick(Balance::LeastConnections, &c, None).unwrap()] += 1;
        }
        assert_eq!(n, [100, 300, 0]);
    }

    #[test]
    fn least_connections_alternates_on_ties() {
        let mut c = cands(&[1.0, 1.0, 1.0]);
        c[0].active = 2;
        c[1].active = 2;
        c[2].active = 7;
        let mut b = Balancer::new(3);
        let seq: Vec<usize> = (0..6)
            .map(|_| b.pick(Balance::LeastConnections, &c, None).unwrap())
            .collect();
        assert_eq!(seq, vec![0, 1, 0, 1, 0, 1]);

        // All idle: plain round-robin.
        let c = cands(&[1.0, 1.0, 1.0]);
        let seq: Vec<usize> = (0..6)
            .map(|_| b.pick(Balance::LeastConnections, &c, None).unwrap())
            .collect();
        assert_eq!(seq.iter().filter(|&&i| i == 2).count(), 2);
        assert_eq!(seq.iter().filter(|&&i| i == 1).count(), 2);

        // Ties among unequal weights follow the weights: 2:1.
        let c = cands(&[2.0, 1.0]);
        let mut b = Balancer::new(2);
        let seq: Vec<usize> = (0..6)
            .map(|_| b.pick(Balance::LeastConnections, &c, None).unwrap())
            .collect();
        assert_eq!(seq, vec![0, 1, 0, 0, 1, 0]);
    }

    #[test]
    fn packed_keeps_ties_on_the_first_server() {
        let mut c = cands(&[1.0, 1.0, 1.0]);
        let mut b = Balancer::new(3);
        // All idle: always the first, so the others fall idle.
        for _ in 0..5 {
            assert_eq!(b.pick(Balance::Packed, &c, None), Some(0));
        }
        // The first busy: the next idle one; then the least loaded, ties to the earlier.
        c[0].active = 1;
        assert_eq!(b.pick(Balance::Packed, &c, None), Some(1));
        c[1].active = 1;
        assert_eq!(b.pick(Balance::Packed, &c, None), Some(2));
        c[2].active = 1;
        assert_eq!(b.pick(Balance::Packed, &c, None), Some(0));
        c[0].active = 3;
        assert_eq!(b.pick(Balance::Packed, &c, None), Some(1));
        c[1].available = false;
        assert_eq!(b.pick(Balance::Packed, &c, None), Some(2));
    }

    #[test]
    fn ip_hash_sticks() {
        let c = cands(&[1.0, 1.0, 1.0]);
        let mut b = Balancer::new(3);
        for ip in random_ips(50, 1) {
            let first = b.pick(Balance::IpHash, &c, Some(ip)).unwrap();
            for other in random_ips(5, 2) {
                b.pick(Balance::IpHash, &c, Some(other));
                b.pick(Balance::RoundRobin, &c, None);
                assert_eq!(b.pick(Balance::IpHash, &c, Some(ip)), Some(first));
            }
            // A fresh balancer agrees: no state is involved.
            assert_eq!(
                Balancer::default().pick(Balance::IpHash, &c, Some(ip)),
                Some(first)
            );
        }
    }

    #[test]
    fn ip_hash_is_stable_across_builds() {
        // Pinned values: these must never change.
        let k = client_key("192.0.2.1".parse().unwrap());
        assert_eq!(k, fnv1a(FNV_OFFSET, &[4, 192, 0, 2, 1]));
        assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        let c = cands(&[1.0; 5]);
        let got: Vec<usize> = [
            "192.0.2.1",
            "198.51.100.7",
            "2001:db8::1",
            "10.0.0.1",
            "10.0.0.2",
            "10.0.0.3",
            "172.16.5.4",
            "::1",
            "fe80::1234",
            "203.0.113.200",
        ]
        .iter()
        .map(|s| {
            Balancer::new(5)
                .pick(Balance::IpHash, &c, Some(s.parse().unwrap()))
                .unwrap()
        })
        .collect();
        assert_eq!(got, PINNED);
        assert_eq!(unit(k, 0).to_bits(), PINNED_UNIT);
    }
    const PINNED: [usize; 10] = [0, 2, 0, 2, 4, 4, 3, 3, 2, 2];
    const PINNED_UNIT: u64 = 4_603_599_108_239_293_484;

    #[test]
    fn ip_hash_mapped_v4_same_as_v4() {
        let c = cands(&[1.0; 7]);
        let mut b = Balancer::new(7);
        for ip in random_ips(200, 3) {
            if let IpAddr::V4(v4) = ip {
                let mapped = IpAddr::V6(v4.to_ipv6_mapped());
                assert_eq!(
                    b.pick(Balance::IpHash, &c, Some(ip)),
                    b.pick(Balance::IpHash, &c, Some(mapped))
                );
            }
        }
    }

    #[test]
    fn ip_hash_spreads_evenly() {
        let c = cands(&[1.0, 1.0, 1.0]);
        let mut b = Balancer::new(3);
        let mut n = [0usize; 3];
        for ip in random_ips(1000, 4) {
            n[b.pick(Balance::IpHash, &c, Some(ip)).unwrap()] += 1;
        }
        for k in n {
            assert!((283..=383).contains(&k), "{n:?}");
        }
        // Sequential addresses (one subnet) spread too.
        let mut n = [0usize; 3];
        for i in 0..1000u32 {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
            n[b.pick(Balance::IpHash, &c, Some(ip)).unwrap()] += 1;
        }
        for k in n {
            assert!((283..=383).contains(&k), "{n:?}");
        }
    }

    #[test]
    fn ip_hash_removal_moves_only_that_servers_clients() {
        let mut c = cands(&[1.0, 1.0, 1.0]);
        let mut b = Balancer::new(3);
        let ips = random_ips(1000, 5);
        let before: Vec<usize> = ips
            .iter()
            .map(|&ip| b.pick(Balance::IpHash, &c, Some(ip)).unwrap())
            .collect();
        c[1].available = false;
        let mut moved = [0usize; 3];
        for (ip, &was) in ips.iter().zip(&before) {
            let now = b.pick(Balance::IpHash, &c, Some(*ip)).unwrap();
            if was == 1 {
                assert_ne!(now, 1);
                moved[now] += 1;
            } else {
                assert_eq!(now, was, "client {ip} moved off a server that stayed");
            }
        }
        // The orphans spread over both remaining servers.
        assert!(moved[0] > 100 && moved[2] > 100, "{moved:?}");
        // And come back home when the server returns.
        c[1].available = true;
        for (ip, &was) in ips.iter().zip(&before) {
            assert_eq!(b.pick(Balance::IpHash, &c, Some(*ip)), Some(was));
        }
    }

    #[test]
    fn ip_hash_weights_bias_spread() {
        let c = cands(&[1.0, 1.0, 2.0]);
        let mut b = Balancer::new(3);
        let mut n = [0usize; 3];
        for ip in random_ips(4000, 6) {
            n[b.pick(Balance::IpHash, &c, Some(ip)).unwrap()] += 1;
        }
        assert!((1800..=2200).contains(&n[2]), "{n:?}");
        assert!((850..=1150).contains(&n[0]), "{n:?}");
        assert!((850..=1150).contains(&n[1]), "{n:?}");
    }

    #[test]
    fn ip_hash_without_client_is_round_robin() {
        let c = cands(&[5.0, 1.0, 1.0]);
        let mut b = Balancer::new(3);
        let seq: Vec<usize> = (0..7)
            .map(|_| b.pick(Balance::IpHash, &c, None).unwrap())
            .collect();
        assert_eq!(seq, vec![0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn nothing_available() {
        let client = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
        for how in [
            Balance::RoundRobin,
            Balance::LeastConnections,
            Balance::IpHash,
        ] {
            let mut b = Balancer::new(0);
            assert_eq!(b.pick(how, &[], None), None);
            assert_eq!(b.pick(how, &[], client), None);
            let mut c = cands(&[1.0, 2.0]);
            c[0].available = false;
            c[1].available = false;
            assert_eq!(b.pick(how, &c, None), None);
            assert_eq!(b.pick(how, &c, client), None);
            // Weights that are not above 0 are never chosen.
            let c = cands(&[0.0, -1.0, f64::NAN, f64::INFINITY, 1.0]);
            for _ in 0..5 {
                assert_eq!(b.pick(how, &c, None), Some(4));
                assert_eq!(b.pick(how, &c, client), Some(4));
            }
        }
    }
}
