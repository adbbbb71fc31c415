//! Redisson's `SpinLock` (`getSpinLock`, PROTOCOL §6): RLock's hash and
//! owner fields (so it excludes an RLock of the same name) and RLock's
//! acquire, but no pub/sub at all: releases publish nothing and waiters
//! poll with an exponential backoff.

use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::ConnectionLike;

use crate::lua::Lua;

use super::protocol::Protocol;
use super::{AcquireRequest, Acquired, Backoff, ReleaseRequest, UnlockOutcome, Wake, reentrant};
use crate::error::Result;
use crate::names::{SPIN_INITIAL_DELAY_MS, SPIN_MAX_DELAY_MS};
use crate::scripts::unlock_outcome;

static RELEASE: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/spin_release.lua")));
static UNLOCK: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/spin_unlock.lua")));
static FORCE_UNLOCK: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/spin_force_unlock.lua")));

/// The spin lock, Redisson's `SpinLock`: see [`crate::SpinLock`].
#[derive(Debug)]
pub struct Spin {
    backoff: Backoff,
}

impl Protocol for Spin {
    const REDISSON: &'static str = "RedissonSpinLock";

    fn new(_name: &str) -> Self {
        Spin {
            backoff: Backoff {
                initial: Duration::from_millis(SPIN_INITIAL_DELAY_MS),
                max: Duration::from_millis(SPIN_MAX_DELAY_MS),
            },
        }
    }

    fn wake<'a>(&'a self, _name: &'a str, _field: &'a str) -> Wake<'a> {
        Wake::Backoff(self.backoff)
    }

    fn acquire(
        &self,
        con: &mut dyn ConnectionLike,
        request: &AcquireRequest<'_>,
    ) -> Result<Acquired> {
        reentrant::acquire(&reentrant::ACQUIRE, con, request)
    }

    fn release(
        &self,
        con: &mut dyn ConnectionLike,
        request: &ReleaseRequest<'_>,
    ) -> Result<Option<UnlockOutcome>> {
        let reply: Option<i64> = RELEASE
            .key(request.name)
            .arg(request.lease_ms)
            .arg(request.field)
            .arg(request.remaining)
            .invoke(con)?;
        unlock_outcome(reply)
    }

    fn unlock_latched(
        &self,
        con: &mut dyn ConnectionLike,
        request: &ReleaseRequest<'_>,
        latch: &str,
        latch_ttl_ms: u64,
    ) -> Result<Option<UnlockOutcome>> {
        let reply: Option<i64> = UNLOCK
            .key(request.name)
            .key(latch)
            .arg(request.lease_ms)
            .arg(request.field)
            .arg(latch_ttl_ms)
            .invoke(con)?;
        unlock_outcome(reply)
    }

    fn force_unlock(
        &self,
        con: &mut dyn ConnectionLike,
        name: &str,
        _publish: &str,
    ) -> Result<bool> {
        let deleted: i64 = FORCE_UNLOCK.key(name).invoke(con)?;
        Ok(deleted == 1)
    }
}

/// A spin lock: byte-for-byte a Redisson `SpinLock` (`getSpinLock`).
///
/// The same hash, owner fields and reentrancy as the reentrant lock, so a
/// spin lock and an `RLock` of the same name exclude each other, but no
/// pub/sub: acquiring never subscribes, and unlock and force unlock publish
/// nothing. A waiting thread polls instead, sleeping between attempts by
/// Redisson's exponential backoff: 1 ms first, then twice the last sleep
/// plus a jitter of 0 to (failures − 1) ms, at most 128 ms (never longer
/// than the holder's remaining lease or the caller's budget). So a release
/// is noticed up to the cap late, and each waiter costs one round trip per
/// sleep; in exchange a spin lock uses no subscriber connection, which suits
/// locks held briefly by many clients. Change the backoff with
/// [`with_backoff`](crate::Lock::with_backoff).
///
/// An `RLock` waiting behind a spin lock holder gets no unlock message and
/// waits out its TTL slice instead (as it would in Redisson).
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.spin_lock("cache-refresh");
/// let guard = lock.lock()?; // polls while someone else holds it
/// guard.unlock()?;          // DEL, no PUBLISH
/// # Ok(()) }
/// ```
pub type SpinLock = crate::Lock<Spin>;

impl crate::Lock<Spin> {
    /// The same spin lock, whose waiters sleep `initial` after their first
    /// failed attempt, then twice the previous sleep plus a jitter of 0 to
    /// (failures − 1) ms, up to `max` (Redisson's `LockOptions`
    /// exponential backoff; the default is 1 ms to 128 ms). An `initial`
    /// equal to `max` is Redisson's constant backoff. `initial` is raised
    /// to 1 ms and `max` to `initial` if lower, so a waiter never busy-polls
    /// Redis. No round trip.
    pub fn with_backoff(&self, initial: Duration, max: Duration) -> SpinLock {
        let initial = initial.max(Duration::from_millis(1));
        let mut lock = self.clone();
        lock.kind = Arc::new(Spin {
            backoff: Backoff {
                initial,
                max: max.max(initial),
            },
        });
        lock
    }

    /// The backoff this handle's waiters sleep by: `(initial, max)`.
    pub fn backoff(&self) -> (Duration, Duration) {
        (self.kind.backoff.initial, self.kind.backoff.max)
    }
}

/// Where a spinning waiter is in Redisson's exponential backoff: the
/// initial sleep, doubled after each failure plus a jitter of 0 to
/// (failures − 1) ms, up to the cap.
pub(crate) struct Spinning {
    backoff: Backoff,
    next: Duration,
    failures: u64,
}

impl Spinning {
    pub(crate) fn new(backoff: Backoff) -> Self {
        Spinning {
            next: backoff.initial,
            backoff,
            failures: 0,
        }
    }

    pub(crate) fn next(&mut self) -> Duration {
        let now = self.next;
        self.failures = self.failures.saturating_add(1);
        // The clock's low bits are jitter enough for a few milliseconds.
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| u64::from(since.subsec_nanos()));
        let jitter = Duration::from_millis(nanos % self.failures);
        self.next = now
            .saturating_mul(2)
            .saturating_add(jitter)
            .min(self.backoff.max);
        now
    }
}
