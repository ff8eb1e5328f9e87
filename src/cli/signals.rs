//! The signals `rein run` answers, and the ones it outlives.
//!
//! | signal | what rein does |
//! |---|---|
//! | TERM, INT, QUIT | stops gracefully |
//! | HUP | re-reads `--config`, reloads every application |
//! | USR1 | reopens its log files: `--log`, the access log, the applications' logs (logrotate's `postrotate`) |
//! | USR2, WINCH, ALRM, IO, PWR, VTALRM, PROF, XFSZ | logs it and carries on |
//! | PIPE | ignored (a write to a closed socket or pipe is an error where it happens) |
//!
//! Left at their default action, all but PIPE would end rein on the spot and orphan its applications (nginx
//! and Unit reopen logs on USR1; service managers and operators send the rest). A caught signal, unlike an
//! ignored one, goes back to its default in an application rein starts (exec resets handlers). The handlers
//! are installed first thing, before anything is bound or served: a signal that came while rein starts would
//! otherwise meet its default action.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// What a signal asks of rein.
pub(super) enum Asked {
    Stop,
    Reload,
    ReopenLogs,
}

pub(super) struct Signals {
    term: Signal,
    int: Signal,
    quit: Signal,
    hup: Signal,
    usr1: Signal,
}

/// Caught only so that they do not end rein.
const OUTLIVED: [(&str, libc::c_int); 8] = [
    ("SIGUSR2", libc::SIGUSR2),
    ("SIGWINCH", libc::SIGWINCH),
    ("SIGALRM", libc::SIGALRM),
    ("SIGIO", libc::SIGIO),
    ("SIGPWR", libc::SIGPWR),
    ("SIGVTALRM", libc::SIGVTALRM),
    ("SIGPROF", libc::SIGPROF),
    ("SIGXFSZ", libc::SIGXFSZ),
];

impl Signals {
    /// Installs the handlers; must run inside the runtime that will serve them.
    pub(super) fn install() -> std::io::Result<Signals> {
        let sig = signal;
        for (name, number) in OUTLIVED {
            let mut outlived = sig(SignalKind::from_raw(number))?;
            tokio::spawn(async move {
                while outlived.recv().await.is_some() {
                    tracing::info!(
                        signal = name,
                        "signal received: it asks nothing of rein; carrying on"
                    );
                }
            });
        }
        Ok(Signals {
            term: sig(SignalKind::terminate())?,
            int: sig(SignalKind::interrupt())?,
            quit: sig(SignalKind::quit())?,
            hup: sig(SignalKind::hangup())?,
            usr1: sig(SignalKind::user_defined1())?,
        })
    }

    /// The next signal that asks something.
    pub(super) async fn next(&mut self) -> Asked {
        tokio::select! {
            _ = self.term.recv() => Asked::Stop,
            _ = self.int.recv() => Asked::Stop,
            _ = self.quit.recv() => Asked::Stop,
            _ = self.hup.recv() => Asked::Reload,
            _ = self.usr1.recv() => Asked::ReopenLogs,
        }
    }
}
