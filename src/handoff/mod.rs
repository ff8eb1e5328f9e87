//! Client connections handed to Node.js instances: on a listener that passes straight to an application
//! with `"handoff": true`, rein accepts each connection and passes the socket itself to an instance over
//! Node's IPC channel, as Node's cluster primary does, so the instance serves it with no proxy hop. When the
//! instance is withdrawn (a reload, a stop), it hands its idle keep-alive connections back instead of
//! closing them, and rein passes them on to another instance: no client meets a closed socket.
//!
//! One [`Channel`] per instance: the supervisor creates it with the process (the child's end of a socket
//! pair becomes its `NODE_CHANNEL_FD`), the listener's accept loop gives it connections, and a task of its
//! own speaks the channel's protocol ([`wire`]) with rein's preload in the instance.

mod wire;

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use tokio::io::Interest;
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use wire::Incoming;

/// Where a connection goes when it comes back from an instance, or when it could not be passed: the accept
/// loop it came from, which serves it or passes it on.
pub(crate) trait Returner: Send + Sync {
    /// The accept loop's number, echoed by the instance when the connection comes back.
    fn id(&self) -> u64;
    /// Takes the connection (idle: no request begun on it) back.
    fn take_back(self: Arc<Self>, fd: OwnedFd);
}

/// One instance's end of the channel, as the data plane and the supervisor see it.
pub(crate) struct Channel {
    commands: mpsc::UnboundedSender<Command>,
    state: Arc<State>,
}

/// What the channel's task and its holders share.
struct State {
    /// After a drain: the instance said it holds none of the connections it took, and how many it had
    /// taken then (`u64::MAX` until it says so).
    drained_at: AtomicU64,
    /// The task ended: the instance exited or closed its channel.
    closed: AtomicBool,
    /// Connections given and not yet taken by the instance (queued, or sent and not acknowledged).
    pending: AtomicU64,
    /// Connections the instance took, and those it handed back.
    handed: AtomicU64,
    returned: AtomicU64,
}

impl Default for State {
    fn default() -> State {
        State {
            drained_at: AtomicU64::new(u64::MAX),
            closed: AtomicBool::new(false),
            pending: AtomicU64::new(0),
            handed: AtomicU64::new(0),
            returned: AtomicU64::new(0),
        }
    }
}

enum Command {
    Give(OwnedFd, Arc<dyn Returner>),
    Drain,
}

impl Channel {
    /// Starts the task that speaks to the instance over `stream` (rein's end of the pair).
    pub(crate) fn start(stream: UnixStream) -> Arc<Channel> {
        let (commands, rx) = mpsc::unbounded_channel();
        let state = Arc::new(State::default());
        tokio::spawn(Task::new(stream, rx, state.clone()).run());
        Arc::new(Channel { commands, state })
    }

    /// Queues `fd` for the instance; gives it back if the channel is closed.
    pub(crate) fn give(&self, fd: OwnedFd, back: Arc<dyn Returner>) -> Result<(), OwnedFd> {
        if self.state.closed.load(Ordering::Acquire) {
            return Err(fd);
        }
        self.state.pending.fetch_add(1, Ordering::AcqRel);
        match self.commands.send(Command::Give(fd, back)) {
            Ok(()) => Ok(()),
            Err(mpsc::error::SendError(Command::Give(fd, _))) => {
                self.state.pending.fetch_sub(1, Ordering::AcqRel);
                Err(fd)
            }
            Err(_) => unreachable!("only a Give was sent"),
        }
    }

    /// Asks the instance to hand back its idle connections and report when it holds none.
    pub(crate) fn drain(&self) {
        let _ = self.commands.send(Command::Drain);
    }

    /// The instance holds no connection rein passed, and none is on its way to it (drained, or gone): it may
    /// be stopped without closing a client's connection.
    pub(crate) fn is_drained(&self) -> bool {
        let state = &self.state;
        state.closed.load(Ordering::Acquire)
            || (state.pending.load(Ordering::Acquire) == 0
                && state.drained_at.load(Ordering::Acquire) == state.handed.load(Ordering::Acquire))
    }

    /// Connections passed to the instance and taken by it.
    pub(crate) fn handed(&self) -> u64 {
        self.state.handed.load(Ordering::Relaxed)
    }

    /// Connections the instance handed back.
    pub(crate) fn returned(&self) -> u64 {
        self.state.returned.load(Ordering::Relaxed)
    }
}

/// A connection on its way: sent, waiting for the instance's acknowledgement.
struct InFlight {
    fd: OwnedFd,
    back: Arc<dyn Returner>,
    tries: u8,
}

/// Node retransmits a handle its peer missed up to three times; so does rein.
const MAX_TRIES: u8 = 3;

struct Task {
    stream: UnixStream,
    commands: mpsc::UnboundedReceiver<Command>,
    state: Arc<State>,
    queue: VecDeque<(OwnedFd, Arc<dyn Returner>)>,
    in_flight: Option<InFlight>,
    /// The accept loops connections came from, by number, for those that come back.
    returners: HashMap<u64, Weak<dyn Returner>>,
    reader: wire::Reader,
}

impl Task {
    fn new(
        stream: UnixStream,
        commands: mpsc::UnboundedReceiver<Command>,
        state: Arc<State>,
    ) -> Task {
        Task {
            stream,
            commands,
            state,
            queue: VecDeque::new(),
            in_flight: None,
            returners: HashMap::new(),
            reader: wire::Reader::default(),
        }
    }

    async fn run(mut self) {
        let mut buf = vec![0u8; 4096];
        let result: std::io::Result<()> = async {
            loop {
                tokio::select! {
                    command = self.commands.recv() => match command {
                        Some(Command::Give(fd, back)) => {
                            self.returners.entry(back.id()).or_insert_with(|| Arc::downgrade(&back));
                            self.queue.push_back((fd, back));
                        }
                        Some(Command::Drain) => self.write(wire::DRAIN, None).await?,
                        None => return Ok(()),
                    },
                    ready = self.stream.ready(Interest::READABLE) => {
                        ready?;
                        if !self.read(&mut buf).await? {
                            return Ok(());
                        }
                    }
                }
                self.send_next().await?;
            }
        }
        .await;
        if let Err(e) = result {
            tracing::debug!(error = %e, "handoff channel ended");
        }
        self.close();
    }

    /// Reads what the instance sent; false at the end of the channel.
    async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<bool> {
        let fd = self.stream.as_raw_fd();
        let (n, fds) = match self
            .stream
            .try_io(Interest::READABLE, || wire::receive(fd, buf))
        {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(false);
        }
        for message in self.reader.push(&buf[..n], fds) {
            self.handle(message).await?;
        }
        Ok(true)
    }

    async fn handle(&mut self, message: Incoming) -> std::io::Result<()> {
        match message {
            Incoming::Ack => {
                if self.in_flight.take().is_some() {
                    self.state.handed.fetch_add(1, Ordering::AcqRel);
                    self.state.pending.fetch_sub(1, Ordering::AcqRel);
                }
            }
            Incoming::Nack => {
                if let Some(f) = self.in_flight.take() {
                    match f.tries < MAX_TRIES {
                        true => self.resend(f).await?,
                        false => {
                            self.state.pending.fetch_sub(1, Ordering::AcqRel);
                            f.back.take_back(f.fd);
                        }
                    }
                }
            }
            Incoming::Back { listener, fd } => {
                self.write(wire::ACK, None).await?;
                if let Some(fd) = fd {
                    self.state.returned.fetch_add(1, Ordering::Relaxed);
                    let back = listener
                        .and_then(|id| self.returners.get(&id))
                        .and_then(Weak::upgrade);
                    // A connection from a listener that is gone is closed: it is idle.
                    if let Some(back) = back {
                        back.take_back(fd);
                    }
                }
            }
            Incoming::Drained { taken } => self.state.drained_at.store(taken, Ordering::Release),
            Incoming::Other => {}
        }
        Ok(())
    }

    /// Sends the next queued connection once the last one is acknowledged.
    async fn send_next(&mut self) -> std::io::Result<()> {
        if self.in_flight.is_some() {
            return Ok(());
        }
        match self.queue.pop_front() {
            Some((fd, back)) => self.resend(InFlight { fd, back, tries: 0 }).await,
            None => Ok(()),
        }
    }

    async fn resend(&mut self, mut f: InFlight) -> std::io::Result<()> {
        f.tries += 1;
        let line = wire::connection(f.back.id());
        let sent = self.write(&line, Some(&f.fd)).await;
        self.in_flight = Some(f);
        sent
    }

    /// Writes `bytes` whole, `fd` riding on the first piece.
    async fn write(&self, mut bytes: &[u8], mut fd: Option<&OwnedFd>) -> std::io::Result<()> {
        let raw = self.stream.as_raw_fd();
        while !bytes.is_empty() {
            self.stream.writable().await?;
            let passing = fd.map(|f| f.as_fd());
            match self
                .stream
                .try_io(Interest::WRITABLE, || wire::send(raw, bytes, passing))
            {
                Ok(n) => {
                    bytes = &bytes[n..];
                    fd = None;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The channel is gone: the connections not yet taken go back to their accept loops.
    fn close(mut self) {
        self.state.closed.store(true, Ordering::Release);
        self.state.pending.store(0, Ordering::Release);
        self.commands.close();
        if let Some(f) = self.in_flight.take() {
            f.back.take_back(f.fd);
        }
        for (fd, back) in self.queue.drain(..) {
            back.take_back(fd);
        }
        while let Ok(command) = self.commands.try_recv() {
            if let Command::Give(fd, back) = command {
                back.take_back(fd);
            }
        }
    }
}

/// The next instance of `upstream`'s members to pass a connection to, in turn: those with a channel that is
/// open and not withdrawn.
pub(crate) fn pick(upstream: &crate::upstream::Upstream) -> Option<Arc<Channel>> {
    let members = upstream.members();
    let open = || {
        members
            .iter()
            .filter(|m| !m.state.is_withdrawn())
            .filter_map(|m| m.state.handoff.as_ref())
            .filter(|c| !c.state.closed.load(Ordering::Acquire))
    };
    let n = open().count();
    if n == 0 {
        return None;
    }
    open().nth(upstream.next_turn() % n).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::ServerAddr;
    use crate::upstream::conf::UpstreamConf;
    use crate::upstream::{Member, ServerState, Upstream};

    fn member(channel: Arc<Channel>) -> Member {
        Member {
            weight: 1.0,
            max_connections: None,
            pipelining: 0,
            state: Arc::new(ServerState::handing_off(
                ServerAddr::Unix("/nonexistent".into()),
                channel,
            )),
        }
    }

    #[tokio::test]
    async fn connections_go_in_turn_to_the_open_instances_not_withdrawn() {
        let mut peers = Vec::new();
        let mut channels = Vec::new();
        for _ in 0..3 {
            let (ours, theirs) = UnixStream::pair().unwrap();
            peers.push(theirs);
            channels.push(Channel::start(ours));
        }
        let members: Vec<Member> = channels.iter().cloned().map(member).collect();
        let upstream = Upstream::dynamic("applications/t", UpstreamConf::with_servers(Vec::new()));
        upstream.set_members(members.clone());
        members[1].state.withdraw();
        let picks: Vec<usize> = (0..4)
            .map(|_| {
                let c = pick(&upstream).unwrap();
                channels.iter().position(|x| Arc::ptr_eq(x, &c)).unwrap()
            })
            .collect();
        assert_eq!(picks.iter().filter(|&&i| i == 0).count(), 2, "{picks:?}");
        assert_eq!(picks.iter().filter(|&&i| i == 2).count(), 2, "{picks:?}");

        // An instance whose channel ended is passed over.
        drop(peers.remove(2));
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while !channels[2].is_drained() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
        assert!(Arc::ptr_eq(&pick(&upstream).unwrap(), &channels[0]));
    }
}
