//! Numbers and addresses as text, written without `core::fmt`: a proxied request carries the client's
//! address (`X-Forwarded-For`), a FastCGI one two addresses and two ports, and the formatting machinery cost
//! more per request than writing the rest of the request head (callgrind: 1,600 instructions for one IPv4
//! address, against about 60 here).

use std::fmt::{self, Write as _};
use std::net::IpAddr;

/// Room for the longest address (`ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255`) and any `u64`.
const ROOM: usize = 46;

/// A short text held on the stack.
pub struct Text {
    buf: [u8; ROOM],
    len: usize,
}

impl Text {
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn new() -> Text {
        Text {
            buf: [0; ROOM],
            len: 0,
        }
    }

    fn push(&mut self, byte: u8) {
        self.buf[self.len] = byte;
        self.len += 1;
    }

    /// An octet: the common case, without the division loop of `push_u64`.
    fn push_u8(&mut self, n: u8) {
        if n >= 100 {
            self.push(b'0' + n / 100);
        }
        if n >= 10 {
            self.push(b'0' + n / 10 % 10);
        }
        self.push(b'0' + n % 10);
    }

    fn push_u64(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for &d in &digits[at..] {
            self.push(d);
        }
    }
}

impl fmt::Write for Text {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self
            .buf
            .get_mut(self.len..self.len + s.len())
            .ok_or(fmt::Error)?;
        room.copy_from_slice(s.as_bytes());
        self.len += s.len();
        Ok(())
    }
}

/// `n` in decimal.
pub fn number(n: u64) -> Text {
    let mut t = Text::new();
    t.push_u64(n);
    t
}

/// `ip` as `Display` writes it (IPv6 through `fmt`: rare enough).
pub fn ip(ip: IpAddr) -> Text {
    let mut t = Text::new();
    match ip {
        IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    t.push(b'.');
                }
                t.push_u8(octet);
            }
        }
        IpAddr::V6(v6) => {
            // Never longer than ROOM.
            let _ = write!(t, "{v6}");
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_as_display_writes_them() {
        let mut ips: Vec<IpAddr> = [
            "::1",
            "::",
            "2001:db8::8a2e:370:7334",
            "::ffff:10.0.0.1",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        for octet in [0u8, 1, 9, 10, 42, 99, 100, 101, 199, 200, 255] {
            ips.push(IpAddr::from([octet, 255 - octet, octet / 2, 7]));
        }
        for ip in ips {
            assert_eq!(super::ip(ip).as_bytes(), ip.to_string().as_bytes(), "{ip}");
        }
    }

    #[test]
    fn numbers_read_as_display_writes_them() {
        for n in [0, 7, 10, 65535, 1_000_000, u64::MAX] {
            assert_eq!(number(n).as_bytes(), n.to_string().as_bytes());
        }
    }
}
