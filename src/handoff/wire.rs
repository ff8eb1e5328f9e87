//! Node.js's IPC channel as its parent speaks it (`NODE_CHANNEL_FD`, JSON serialization): one JSON document
//! per line; a passed descriptor rides on the line that announces it (`{"cmd":"NODE_HANDLE", ...}`) and is
//! acknowledged with `NODE_HANDLE_ACK` (or `NODE_HANDLE_NACK` when it was lost) before the next is sent, as
//! Node's own senders wait. Linux never lets one read cross a message that carries descriptors, so
//! descriptors and the `NODE_HANDLE` lines read pair up in order.

use std::collections::VecDeque;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use serde_json::Value;

/// Acknowledges a descriptor the instance passed.
pub(super) const ACK: &[u8] = b"{\"cmd\":\"NODE_HANDLE_ACK\"}\n";

/// Asks the instance to hand back its idle connections and take no more.
pub(super) const DRAIN: &[u8] = b"{\"rein\":\"drain\"}\n";

/// The line that passes a client connection accepted on the listener `listener` (rein's number for the
/// accept loop, echoed when the connection comes back).
pub(super) fn connection(listener: u64) -> Vec<u8> {
    format!(
        "{{\"cmd\":\"NODE_HANDLE\",\"type\":\"net.Socket\",\"msg\":{{\"rein\":\"connection\",\"listener\":{listener}}}}}\n"
    )
    .into_bytes()
}

/// A message from the instance.
#[derive(Debug)]
pub(super) enum Incoming {
    /// The connection last passed arrived.
    Ack,
    /// The connection last passed was lost on the way (the instance saw no descriptor).
    Nack,
    /// A connection handed back, idle, with the listener it was accepted on; `None` when the line came
    /// without its descriptor.
    Back {
        listener: Option<u64>,
        fd: Option<OwnedFd>,
    },
    /// The instance holds none of the connections it took, `taken` in all.
    Drained { taken: u64 },
    /// Anything else: the app's own `process.send(...)` messages.
    Other,
}

/// Cuts the bytes read into lines and pairs the descriptors read with them.
#[derive(Default)]
pub(super) struct Reader {
    partial: Vec<u8>,
    fds: VecDeque<OwnedFd>,
}

/// The longest line kept while waiting for its end: rein's messages and Node's are far shorter; an app's own
/// message may be longer and is skipped.
const MAX_LINE: usize = 64 * 1024;

impl Reader {
    /// The messages completed by `bytes`, read together with `fds`.
    pub(super) fn push(&mut self, bytes: &[u8], fds: Vec<OwnedFd>) -> Vec<Incoming> {
        self.fds.extend(fds);
        self.partial.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(end) = self.partial[start..].iter().position(|&b| b == b'\n') {
            let line = &self.partial[start..start + end];
            let message = parse(line);
            start += end + 1;
            out.push(match message {
                Parsed::Handle(listener) => Incoming::Back {
                    listener,
                    fd: self.fds.pop_front(),
                },
                Parsed::Ack => Incoming::Ack,
                Parsed::Nack => Incoming::Nack,
                Parsed::Drained(taken) => Incoming::Drained { taken },
                Parsed::Other => Incoming::Other,
            });
        }
        self.partial.drain(..start);
        if self.partial.len() > MAX_LINE {
            self.partial.clear();
        }
        out
    }
}

enum Parsed {
    Handle(Option<u64>),
    Ack,
    Nack,
    Drained(u64),
    Other,
}

fn parse(line: &[u8]) -> Parsed {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return Parsed::Other;
    };
    match v.get("cmd").and_then(Value::as_str) {
        Some("NODE_HANDLE") => Parsed::Handle(
            v.pointer("/msg/listener")
                .and_then(Value::as_u64)
                .filter(|_| v.pointer("/msg/rein").and_then(Value::as_str) == Some("back")),
        ),
        Some("NODE_HANDLE_ACK") => Parsed::Ack,
        Some("NODE_HANDLE_NACK") => Parsed::Nack,
        _ if v.get("rein").and_then(Value::as_str) == Some("drained") => {
            match v.get("taken").and_then(Value::as_u64) {
                Some(taken) => Parsed::Drained(taken),
                None => Parsed::Other,
            }
        }
        _ => Parsed::Other,
    }
}

/// One `sendmsg` of `bytes`, with `fd` attached when given; how many bytes went.
pub(super) fn send(socket: RawFd, bytes: &[u8], fd: Option<BorrowedFd<'_>>) -> io::Result<usize> {
    let iov = [IoSlice::new(bytes)];
    let raw;
    let cmsgs: &[ControlMessage<'_>] = match fd {
        Some(fd) => {
            raw = [fd.as_raw_fd()];
            &[ControlMessage::ScmRights(&raw)]
        }
        None => &[],
    };
    sendmsg::<()>(
        socket,
        &iov,
        cmsgs,
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .map_err(io::Error::from)
}

/// One `recvmsg` into `buf`: the bytes read (0 at the end) and the descriptors that came with them, owned
/// and close-on-exec.
pub(super) fn receive(socket: RawFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut space = nix::cmsg_space!([RawFd; 8]);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(
        socket,
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(io::Error::from)?;
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(received) = cmsg {
            // SAFETY: the kernel just installed these descriptors in this process; nothing else owns them.
            fds.extend(
                received
                    .into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    Ok((msg.bytes, fds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_pair_with_descriptors_in_order() {
        let mut r = Reader::default();
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let first = r.push(
            b"{\"cmd\":\"NODE_HANDLE_ACK\"}\n{\"cmd\":\"NODE_HA",
            vec![OwnedFd::from(a)],
        );
        assert!(matches!(first.as_slice(), [Incoming::Ack]));
        let line = b"NDLE\",\"type\":\"net.Socket\",\"msg\":{\"rein\":\"back\",\"listener\":7}}\n{\"rein\":\"drained\",\"taken\":2}\n\"ready\"\n";
        let rest = r.push(line, vec![OwnedFd::from(b)]);
        assert!(matches!(
            rest.as_slice(),
            [
                Incoming::Back {
                    listener: Some(7),
                    fd: Some(_)
                },
                Incoming::Drained { taken: 2 },
                Incoming::Other
            ]
        ));
    }

    #[test]
    fn the_connection_line_is_what_node_parses() {
        let line = connection(3);
        let v: Value = serde_json::from_slice(&line[..line.len() - 1]).unwrap();
        assert_eq!(v["cmd"], "NODE_HANDLE");
        assert_eq!(v["type"], "net.Socket");
        assert_eq!(v["msg"]["listener"], 3);
        assert_eq!(line.last(), Some(&b'\n'));
    }
}
