//! Waiting for a hold's TTL commands to settle: what a guard that leaves
//! its lock to expire ([`LockGuard::keep_for`](crate::LockGuard::keep_for))
//! needs to know that no renewal sent around its own `PEXPIRE` ran after
//! it.

use std::time::{Duration, Instant};

use super::Hold;

/// How often [`Hold::settle`] looks again.
const SETTLE_POLL: Duration = Duration::from_millis(1);

impl Hold {
    /// The ledger's clock now: a later [`Hold::lease_may_follow`] tells
    /// whether a TTL command could have run after this moment.
    pub fn lease_clock(&self) -> u64 {
        self.ledger.lock().clock
    }

    /// Whether a TTL command other than the one begun at `mine` may have
    /// set the TTL after a command sent when the ledger's clock read
    /// `clock`: one sent since (answered with the TTL set, in flight, or of
    /// unknown outcome), or one sent before and not answered by then (in
    /// flight still, or answered since: Redis may have run it after). A
    /// command whose reply proves it did not set the TTL leaves the ledger.
    pub fn lease_may_follow(&self, clock: u64, mine: Option<u64>) -> bool {
        self.ledger.lock().entries.iter().any(|entry| {
            Some(entry.started) != mine
                && (entry.started > clock || entry.ended.is_none_or(|ended| ended.get() > clock))
        })
    }

    /// Waits until no TTL command of this hold is in flight (sent, no reply
    /// yet), at most until `limit`. Looks every millisecond: the commands
    /// in flight are those of a renewal round begun before the hold left
    /// the watchdog, one round trip.
    pub fn settle(&self, limit: Instant) {
        loop {
            let in_flight = self
                .ledger
                .lock()
                .entries
                .iter()
                .any(|entry| entry.ended.is_none());
            if !in_flight || Instant::now() >= limit {
                return;
            }
            std::thread::sleep(SETTLE_POLL);
        }
    }
}

impl super::LeaseTicket {
    /// The ledger's clock when its command was begun (what
    /// [`Hold::lease_may_follow`] excludes as `mine`).
    pub fn started(&self) -> u64 {
        self.id
    }
}
