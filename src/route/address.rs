//! Unit's address patterns for the `source` and `destination` conditions.
//!
//! A pattern is `unix`, `*:<ports>`, or an IPv4/IPv6 address, CIDR block or `start-end` range, optionally
//! followed by `:<port>` or `:<start>-<end>` (IPv6 in brackets when a port follows), with `!` for negation.
//! Arrays resolve like string patterns: no negation may match, and some positive one must if any exist.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::RangeInclusive;

use serde_json::Value;

use crate::config::walk::{string, type_name};
use crate::config::{ConfigError, JsonPath};

/// A compiled `source` or `destination` condition.
#[derive(Debug)]
pub struct AddressSet {
    positive: Vec<AddrPattern>,
    negative: Vec<AddrPattern>,
}

#[derive(Debug)]
struct AddrPattern {
    target: Target,
    ports: RangeInclusive<u16>,
}

/// Addresses are kept as inclusive integer ranges: an exact address, a CIDR block and a range are all one.
#[derive(Debug)]
enum Target {
    Unix,
    AnyIp,
    V4(RangeInclusive<u32>),
    V6(RangeInclusive<u128>),
}

impl AddressSet {
    pub fn compile(v: &Value, path: &JsonPath) -> Result<Self, ConfigError> {
        let mut set = AddressSet {
            positive: Vec::new(),
            negative: Vec::new(),
        };
        match v {
            Value::String(s) => set.add(s, path)?,
            // An empty array is taken, as Unit takes it: it matches no address (see `matches`).
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let p = path.index(i);
                    set.add(string(item, &p)?, &p)?;
                }
            }
            other => {
                return Err(path.error(format!(
                    "must be an address pattern or an array of them, not {}",
                    type_name(other)
                )));
            }
        }
        Ok(set)
    }

    fn add(&mut self, text: &str, path: &JsonPath) -> Result<(), ConfigError> {
        let (negated, body) = match text.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let pattern =
            parse(body).map_err(|why| path.error(format!("{why} in address {text:?}")))?;
        if negated {
            self.negative.push(pattern);
        } else {
            self.positive.push(pattern);
        }
        Ok(())
    }

    /// `addr` is `None` for a Unix-domain socket. A set compiled from an empty array matches nothing, as in
    /// Unit (so an empty `source` matches no client, and an empty `forwarded.source` trusts no proxy).
    pub fn matches(&self, addr: Option<SocketAddr>) -> bool {
        if self.positive.is_empty() && self.negative.is_empty() {
            return false;
        }
        let addr = addr.map(unmap);
        if self.negative.iter().any(|p| p.matches(addr)) {
            return false;
        }
        self.positive.is_empty() || self.positive.iter().any(|p| p.matches(addr))
    }
}

/// A dual-stack socket reports IPv4 clients as `::ffff:a.b.c.d`; IPv4 patterns should still see them.
fn unmap(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), v6.port()),
            None => addr,
        },
        v4 => v4,
    }
}

impl AddrPattern {
    fn matches(&self, addr: Option<SocketAddr>) -> bool {
        let Some(addr) = addr else {
            return matches!(self.target, Target::Unix);
        };
        if !self.ports.contains(&addr.port()) {
            return false;
        }
        match (&self.target, addr.ip()) {
            (Target::AnyIp, _) => true,
            (Target::V4(range), IpAddr::V4(ip)) => range.contains(&u32::from(ip)),
            (Target::V6(range), IpAddr::V6(ip)) => range.contains(&u128::from(ip)),
            _ => false,
        }
    }
}

/// Why an address pattern (without its `!`) is not one.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum PatternError {
    #[error("unclosed \"[\"")]
    UnclosedBracket,
    #[error("{0:?} is not an IP address")]
    NotAnAddress(String),
    #[error("the range starts after it ends")]
    ReversedRange,
    #[error("{prefix:?} is not a CIDR prefix length (0-{bits})")]
    NotAPrefix { prefix: String, bits: u32 },
    #[error("{0:?} is not a port number (0-65535)")]
    NotAPort(String),
    #[error("the port range starts after it ends")]
    ReversedPorts,
}

fn parse(text: &str) -> Result<AddrPattern, PatternError> {
    const ALL_PORTS: RangeInclusive<u16> = 0..=u16::MAX;
    if text == "unix" {
        return Ok(AddrPattern {
            target: Target::Unix,
            ports: ALL_PORTS,
        });
    }
    if let Some(ports) = text.strip_prefix("*:") {
        return Ok(AddrPattern {
            target: Target::AnyIp,
            ports: parse_ports(ports)?,
        });
    }
    let (addr, ports) = split_port(text)?;
    let ports = match ports {
        Some(p) => parse_ports(p)?,
        None => ALL_PORTS,
    };
    let target = if addr.contains(':') {
        Target::V6(parse_range::<Ipv6Addr, u128>(addr, 128)?)
    } else {
        Target::V4(parse_range::<Ipv4Addr, u32>(addr, 32)?)
    };
    Ok(AddrPattern { target, ports })
}

/// Separates the port part: after `]:` for bracketed IPv6, after the single `:` for IPv4; bare IPv6 has none.
fn split_port(text: &str) -> Result<(&str, Option<&str>), PatternError> {
    if let Some(inner) = text.strip_prefix('[') {
        return match inner.rsplit_once("]:") {
            Some((addr, port)) => Ok((addr, Some(port))),
            None => inner
                .strip_suffix(']')
                .map(|addr| (addr, None))
                .ok_or(PatternError::UnclosedBracket),
        };
    }
    match text.matches(':').count() {
        0 => Ok((text, None)),
        1 => Ok(text
            .split_once(':')
            .map_or((text, None), |(a, p)| (a, Some(p)))),
        _ => Ok((text, None)),
    }
}

/// An address, `start-end` range or CIDR block as an inclusive range of integers.
fn parse_range<A, N>(text: &str, bits: u32) -> Result<RangeInclusive<N>, PatternError>
where
    A: std::str::FromStr + Into<N>,
    N: Copy + Ord + Cidr,
{
    let ip = |s: &str| -> Result<N, PatternError> {
        s.parse::<A>()
            .map(Into::into)
            .map_err(|_| PatternError::NotAnAddress(s.to_owned()))
    };
    if let Some((start, end)) = text.split_once('-') {
        let (start, end) = (ip(start)?, ip(end)?);
        if start > end {
            return Err(PatternError::ReversedRange);
        }
        return Ok(start..=end);
    }
    if let Some((base, prefix)) = text.split_once('/') {
        let prefix: u32 =
            prefix
                .parse()
                .ok()
                .filter(|&p| p <= bits)
                .ok_or_else(|| PatternError::NotAPrefix {
                    prefix: prefix.to_owned(),
                    bits,
                })?;
        return Ok(N::block(ip(base)?, bits - prefix));
    }
    let single = ip(text)?;
    Ok(single..=single)
}

/// The range of addresses sharing `addr`'s leading bits, `host_bits` low bits free.
trait Cidr: Sized {
    fn block(addr: Self, host_bits: u32) -> RangeInclusive<Self>;
}

impl Cidr for u32 {
    fn block(addr: u32, host_bits: u32) -> RangeInclusive<u32> {
        let host = u32::MAX.checked_shr(32 - host_bits).unwrap_or(0);
        (addr & !host)..=(addr | host)
    }
}

impl Cidr for u128 {
    fn block(addr: u128, host_bits: u32) -> RangeInclusive<u128> {
        let host = u128::MAX.checked_shr(128 - host_bits).unwrap_or(0);
        (addr & !host)..=(addr | host)
    }
}

fn parse_ports(text: &str) -> Result<RangeInclusive<u16>, PatternError> {
    let port = |s: &str| -> Result<u16, PatternError> {
        s.parse::<u16>()
            .map_err(|_| PatternError::NotAPort(s.to_owned()))
    };
    match text.split_once('-') {
        Some((start, end)) => {
            let (start, end) = (port(start)?, port(end)?);
            if start > end {
                return Err(PatternError::ReversedPorts);
            }
            Ok(start..=end)
        }
        None => port(text).map(|p| p..=p),
    }
}

#[cfg(test)]
#[path = "address_tests.rs"]
mod tests;
