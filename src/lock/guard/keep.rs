//! [`LockGuard::keep_for`]: leaving a held lock to expire instead of
//! releasing it.

use std::time::{Duration, Instant};

use super::LockGuard;
use crate::engine::holds::Registry;
use crate::error::{Error, Result};
use crate::protocol::Kind;

/// How often a renewal that raced the `PEXPIRE` is answered by setting it
/// again before `keep_for` gives up (each try waits out a renewal round).
const TRIES: u32 = 3;

impl<K: Kind> LockGuard<K> {
    /// Stops renewing this hold and leaves the lock held in Redis for
    /// exactly `lease` from now, then forgets the guard without releasing
    /// it: the key expires `lease` after the call (unless its owner takes or
    /// releases it meanwhile), and waiters (Java's too) get it then.
    /// `redisson-lock run --hold-at-least` holds a job's lock this way
    /// after the job ends early.
    ///
    /// One `PEXPIRE`-if-still-held round trip (Redisson's `multilock-expire`
    /// script: the key's TTL, only while this owner's field is there). A
    /// watchdog renewal already sent when the call began is waited for
    /// (one round trip at most) before it, and if one ran after it the
    /// `PEXPIRE` is sent again with what is left of `lease`, so no renewal
    /// extends the lease; the watchdog never renews the hold again. For a
    /// read lock, only the lock's hash gets the lease: the hold's timeout
    /// marker keeps its TTL, as after a MultiLock's lease.
    ///
    /// The guard is consumed. Errors found before the round trip release
    /// it as on drop: [`Error::InvalidArgument`] when `lease` is zero or
    /// over 100 years, or when this thread holds the lock through other
    /// guards too (a reentry: release them first); [`Error::Lost`] when the
    /// hold is known to be lost. Errors of the round trip leave it
    /// forgotten and no longer renewed: [`Error::NotHeld`] when Redis no
    /// longer has this owner's field, [`Error::Unavailable`] when a renewal
    /// sent before the call was still unanswered after three tries (each
    /// waits twice the response timeout for it: the lock then expires at
    /// the latest a watchdog lease after that renewal's send), a Redis
    /// error as usual (the lease may or may not have been set then).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> redisson_lock::Result<()> {
    /// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.lock("nightly-report").lock()?;
    /// // ... the job ended early: nobody runs it again for a minute.
    /// guard.keep_for(Duration::from_secs(60))?;
    /// # Ok(()) }
    /// ```
    pub fn keep_for(mut self, lease: Duration) -> Result<()> {
        crate::config::millis("lease", lease)?;
        self.lock.engine.check_process()?;
        let count = Registry::count(&self.hold);
        if count > 1 {
            return Err(Error::invalid(format!(
                "keep_for on `{}`: this thread holds it {count} times; release its other guards \
                 first",
                self.lock.name
            )));
        }
        if let Some(reason) = self.hold.lost_reason() {
            return Err(self.lock.lost(reason));
        }
        let until = Instant::now() + lease;
        // From here on the guard is forgotten, not released.
        self.released = true;
        let registry = &self.lock.engine.registry;
        registry.released(&self.hold, self.renew);
        let response = self.lock.engine.config.response_timeout;
        for _ in 0..TRIES {
            // A renewal sent before the hold left the watchdog, waited for
            // (if it is still in flight after that, the check below sees
            // it: its reply may come after the PEXPIRE ran). Not waited for
            // again after the PEXPIRE: one in flight at the clock's read is
            // a race whatever its reply, and the next try waits for it.
            self.hold.settle(Instant::now() + response * 2);
            let clock = self.hold.lease_clock();
            let left = until.saturating_duration_since(Instant::now());
            let mine = self.expire(left.max(Duration::from_millis(1)))?;
            if !self.hold.lease_may_follow(clock, Some(mine)) {
                return Ok(());
            }
        }
        Err(Error::Unavailable {
            reason: format!(
                "keep_for on `{}`: renewals kept racing the PEXPIRE",
                self.lock.name
            ),
        })
    }

    /// One `PEXPIRE`-if-held of `lease`, counted in the hold's ledger; the
    /// ledger's clock when it was begun. [`Error::NotHeld`] when the owner's
    /// field is gone.
    fn expire(&self, lease: Duration) -> Result<u64> {
        match self.expire_if_held("keep", lease)? {
            (true, mine) => Ok(mine),
            (false, _) => {
                registry_lose(self);
                Err(self.lock.not_held())
            }
        }
    }
}

/// The hold is gone from Redis: marked so for its lost signals.
fn registry_lose<K: Kind>(guard: &LockGuard<K>) {
    guard
        .lock
        .engine
        .registry
        .lose(&guard.hold, crate::error::LostReason::KeyGone);
}
