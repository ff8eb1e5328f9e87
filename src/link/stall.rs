//! The read and send timeouts of an exchange with a server, for both transports: one fires when the proxy has
//! waited for the server with nothing moving either way, `send` long while request bytes are queued that the
//! server does not take, `read` long otherwise.
//!
//! The wait is counted from when it begins, not from the last movement: a client that stops reading for a
//! minute leaves the exchange unpolled, and the server is not to blame for that. Movement only clears a flag;
//! the clock is read and the timer set when a wait begins, so a busy exchange does not touch the timer wheel
//! at every read.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

pub struct Stall {
    read: Duration,
    send: Duration,
    /// When the current wait began, if one is under way.
    waiting_since: Option<Instant>,
    timer: Option<Pin<Box<Sleep>>>,
}

impl Stall {
    pub fn new(read: Duration, send: Duration) -> Stall {
        Stall {
            read,
            send,
            waiting_since: None,
            timer: None,
        }
    }

    /// The timeout of a wait: `send` while the server is not taking what is queued for it (`sending`).
    pub fn timeout(&self, sending: bool) -> Duration {
        if sending { self.send } else { self.read }
    }

    /// Something moved: a later wait starts afresh.
    pub fn moved(&mut self) {
        self.waiting_since = None;
    }

    /// Called when the server has nothing for us: ready once the wait has lasted its timeout (see
    /// [`Stall::timeout`]).
    pub fn poll(&mut self, cx: &mut Context<'_>, sending: bool) -> Poll<()> {
        let since = *self.waiting_since.get_or_insert_with(Instant::now);
        let deadline = since + self.timeout(sending);
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;

    #[tokio::test(start_paused = true)]
    async fn a_wait_is_counted_from_its_start_not_from_the_last_movement() {
        let mut stall = Stall::new(Duration::from_secs(10), Duration::from_secs(3));
        stall.moved();
        // Nobody polls for a minute (a client that stopped reading): no wait was under way.
        tokio::time::sleep(Duration::from_secs(60)).await;
        let waited = poll_fn(|cx| Poll::Ready(stall.poll(cx, false).is_ready())).await;
        assert!(!waited, "a wait that just began has not timed out");
        tokio::time::sleep(Duration::from_secs(5)).await;
        stall.moved();
        let start = Instant::now();
        poll_fn(|cx| stall.poll(cx, false)).await;
        assert_eq!(start.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_not_taking_the_request_gets_the_send_timeout() {
        let mut stall = Stall::new(Duration::from_secs(10), Duration::from_secs(3));
        let start = Instant::now();
        poll_fn(|cx| stall.poll(cx, true)).await;
        assert_eq!(start.elapsed(), Duration::from_secs(3));
    }
}
