//! Waiting for a hold's TTL commands to settle: what a guard that leaves
//! its lock to expire ([`LockGuard::keep_for`](crate::LockGuard::keep_for))
//! needs to know that no renewal sent around its own `PEXPIRE` ran after
//! it.

use std::time::{Duration, Instant};

use super::Hold;

/// How often [`Hold::settle`] looks again.
const SETTLE_POLL: Duration = Duration::from_millis(1);

impl Hold {
    /// The ledger's clock now: a later [`Hold::lease_begun_since`] tells
    /// whether a TTL command was sent after this moment.
    pub fn lease_clock(&self) -> u64 {
        self.ledger.lock().clock
    }

    /// Whether a TTL command other than the one begun at `mine` was sent
    /// after the ledger's clock read `clock` and may have set the TTL:
    /// answered with it set, in flight, or of unknown outcome. (A command
    /// whose reply proves it did not set the TTL leaves the ledger.)
    pub fn lease_begun_since(&self, clock: u64, mine: Option<u64>) -> bool {
        self.ledger
            .lock()
            .entries
            .iter()
            .any(|entry| entry.started > clock && Some(entry.started) != mine)
    }

    /// Waits until no TTL command of this hold is in flight (sent, no reply
    /// yet), at most until `limit`; `false` if one still is then. Looks
    /// every millisecond: the commands in flight are those of a renewal
    /// round begun before the hold left the watchdog, one round trip.
    pub fn settle(&self, limit: Instant) -> bool {
        loop {
            let in_flight = self
                .ledger
                .lock()
                .entries
                .iter()
                .any(|entry| entry.ended.is_none());
            if !in_flight {
                return true;
            }
            if Instant::now() >= limit {
                return false;
            }
            std::thread::sleep(SETTLE_POLL);
        }
    }
}

impl super::LeaseTicket {
    /// The ledger's clock when its command was begun (what
    /// [`Hold::lease_begun_since`] excludes as `mine`).
    pub fn started(&self) -> u64 {
        self.id
    }
}
