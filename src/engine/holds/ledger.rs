//! A hold's ledger: the commands that may have set the key's TTL last, and
//! the earliest expiry among them (the rules are the parent module's docs,
//! "When the lease runs out"). Plain data under the hold's ledger mutex:
//! the hold publishes the earliest expiry and wakes its waiters.

use std::num::NonZeroU64;

use smallvec::SmallVec;

use crate::sync::atomic::{AtomicBool, Ordering};

/// The commands that may have set the key's TTL last (see the module docs).
#[derive(Default)]
pub(super) struct Ledger {
    /// Orders the starts and ends of commands.
    pub(super) clock: u64,
    pub(super) entries: Entries,
}

/// A held lock's ledger has one entry at rest and two while a renewal or a
/// reentry is in flight: both inline in the hold, no allocation per lock
/// (BENCHMARKS.md, "Watchdog curve").
pub(super) type Entries = SmallVec<[LeaseEntry; 2]>;

pub(super) struct LeaseEntry {
    /// `sent + lease`, ns since [`EPOCH`]; for an unknown outcome, raised by
    /// the commands answered after it.
    pub(super) expires: u64,
    /// The lease it sets, in ns (`u64::MAX`: not known when sent).
    pub(super) lease: u64,
    /// When it was sent, ns since [`EPOCH`].
    pub(super) sent: u64,
    /// `clock` when it was sent (also the ticket's id), and when its reply
    /// came (`None`: in flight; the clock is at least 1 by then).
    pub(super) started: u64,
    pub(super) ended: Option<NonZeroU64>,
    /// It got no reply that says whether it ran: it may still run.
    pub(super) unknown: bool,
}

/// One command that sets the TTL, from send to reply; see [`Hold::begin_lease`].
#[must_use = "a lease command must be ended"]
pub(crate) struct LeaseTicket {
    pub(super) id: u64,
    pub(super) resent: AtomicBool,
}

impl LeaseTicket {
    /// The command is being sent once more after a first send whose fate
    /// is unknown (a dropped connection, a retried unlock): whatever the
    /// last reply says, the first send may have run, so an outcome that
    /// would prove it did not counts as unknown.
    pub fn resending(&self) {
        self.resent.store(true, Ordering::Relaxed);
    }
}

/// What a TTL-setting command turned out to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeaseOutcome {
    /// It ran and set the TTL: it ran after every command answered before
    /// it was sent, which no longer count.
    Set,
    /// It may have run (no reply: a timeout, a dropped connection), and may
    /// still run after any later command: it counts for good, raised by
    /// each later answered command (see the module docs).
    Unknown,
    /// It surely did not touch the TTL (the server answered otherwise, or
    /// refused it).
    Untouched,
}

impl LeaseOutcome {
    /// The outcome of a command that failed with `error`: an error reply
    /// from the server proves the command did not set the TTL (our scripts
    /// check before they write); anything else leaves it unknown.
    pub fn of_error(error: &crate::error::Error) -> LeaseOutcome {
        match error {
            crate::error::Error::Redis(e) if e.code().is_some() => LeaseOutcome::Untouched,
            crate::error::Error::ForkedProcess { .. } => LeaseOutcome::Untouched,
            _ => LeaseOutcome::Unknown,
        }
    }
}

impl Ledger {
    /// The ledger of a hold just acquired by a command sent at `sent` that
    /// set the TTL to `lease` (ns), expiring at `expires`: answered, so at
    /// rest (clock 2: the acquire's start and end).
    pub(super) fn acquired(sent: u64, lease: u64, expires: u64) -> Ledger {
        Ledger {
            clock: 2,
            entries: smallvec::smallvec![LeaseEntry {
                expires,
                lease,
                sent,
                started: 0,
                ended: Some(NonZeroU64::MIN),
                unknown: false,
            }],
        }
    }

    /// A command setting the TTL to `lease` ns is sent at `sent` (ns since
    /// the epoch): it counts from now on.
    pub(super) fn begin(&mut self, sent: u64, lease: u64) -> LeaseTicket {
        self.clock += 1;
        let started = self.clock;
        self.entries.push(LeaseEntry {
            expires: sent.saturating_add(lease),
            lease,
            sent,
            started,
            ended: None,
            unknown: false,
        });
        LeaseTicket {
            id: started,
            resent: AtomicBool::new(false),
        }
    }

    /// The command begun as `id` turned out `outcome` (its expiry set to
    /// `expires` first, when its reply said what TTL it left).
    pub(super) fn finish(&mut self, id: u64, outcome: LeaseOutcome, expires: Option<u64>) {
        self.clock += 1;
        // Never 0: it was incremented from at least 2.
        let now = NonZeroU64::new(self.clock);
        let Some(index) = self.entries.iter().position(|e| e.started == id) else {
            return;
        };
        if let Some(expires) = expires {
            self.entries[index].expires = expires;
        }
        match outcome {
            LeaseOutcome::Untouched => {
                self.entries.swap_remove(index);
            }
            LeaseOutcome::Unknown => {
                let entry = &mut self.entries[index];
                entry.ended = now;
                entry.unknown = true;
            }
            LeaseOutcome::Set => {
                let LeaseEntry { started, sent, .. } = self.entries[index];
                self.entries[index].ended = now;
                supersede(&mut self.entries, started, sent);
            }
        }
        if self.entries.spilled() && self.entries.len() <= 1 {
            // Back inline after a burst (a reentry beside a renewal). Not
            // while a command of unknown outcome still counts (it does for
            // good): every renewal would spill again.
            self.entries.shrink_to_fit();
        }
    }

    /// The earliest moment the key may expire, if a command counts.
    pub(super) fn earliest(&self) -> Option<u64> {
        self.entries.iter().map(|e| e.expires).min()
    }
}

/// A command sent at `sent` (ledger clock `started`) was answered: the
/// commands answered before it was sent ran before it and stop counting,
/// except those whose outcome is unknown, which may run after it: their
/// bound rises to `sent + their lease`. Unknown ones of equal lease then
/// have equal bounds: one of them is kept.
fn supersede(entries: &mut Entries, started: u64, sent: u64) {
    entries.retain_mut(|e| match e.ended.map(NonZeroU64::get) {
        Some(ended) if ended <= started && e.unknown => {
            e.expires = e.expires.max(sent.saturating_add(e.lease));
            true
        }
        Some(ended) => ended > started,
        None => true,
    });
    let mut seen = Vec::new();
    entries.retain(|e| {
        if !e.unknown || e.ended.is_none_or(|ended| ended.get() > started) {
            return true;
        }
        let first = !seen.contains(&(e.lease, e.expires));
        seen.push((e.lease, e.expires));
        first
    });
}
