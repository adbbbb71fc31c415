//! [`MultiLock`] and [`RedLock`]: compositions of locks, each member from
//! any client (one per Redis master, typically), with no keys of their own
//! (docs/wire-format.md, "MultiLock and RedLock").
//!
//! A `MultiLock` needs every member; a `RedLock` a majority (N/2 + 1)
//! within a validity time: the lease, less the time the acquisition took,
//! less a clock drift allowance of 1 % of the lease plus 2 ms.
//!
//! An acquisition first tries every member at once, none waiting: each
//! member's command is written on its own connection before any reply is
//! read, so free members on N servers cost about one round trip, not N.
//! When that falls short, what it took is released (a member whose reply
//! was lost too: it may have been taken) before the next step, as Redisson
//! does: all at once, one round trip when the servers answer, and a member
//! whose server does not answer within the caller's budget is left to a
//! background thread, so that a frozen or vanished server costs the caller
//! no more than that. Then the members are taken in order, each waiting its
//! share, as Redisson does, while the budget lasts. An unlock releases every
//! member at once the same way.

mod acquire;
mod batch;

use std::fmt;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::lock::Lock;
use crate::lock::guard::{self, LockGuard};
use crate::protocol::{Kind, Reentrant};
use acquire::validity;

/// Redisson's `lock()` on a composite: `tryLock` in rounds of this many ms
/// per member (docs/wire-format.md, "MultiLock and RedLock").
const ROUND_PER_MEMBER: Duration = Duration::from_millis(1500);

/// A lock over several locks that is held only when every member is held:
/// Redisson's `RedissonMultiLock` (`getMultiLock`).
///
/// The members may come from different [`Client`](crate::Client)s (one per
/// master). A Java `RedissonMultiLock` over the same names on the same
/// masters excludes it, and the reverse: the state in Redis is the members'
/// own.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// use std::time::Duration;
/// use redisson_lock::{Client, MultiLock};
///
/// let orders = Client::open("redis://10.0.0.1:6379")?;
/// let stock = Client::open("redis://10.0.0.2:6379")?;
/// let both = MultiLock::new([orders.lock("order:42"), stock.lock("sku:7")]);
/// if let Some(guard) = both.try_lock_for(Duration::from_secs(2))? {
///     // ... both are held ...
///     guard.unlock()?;
/// }
/// # Ok(()) }
/// ```
pub struct MultiLock<K: Kind = Reentrant> {
    inner: Composite<K>,
}

/// A lock held when a majority of its members are held: Redisson's
/// (deprecated) `RedissonRedLock` (`getRedLock`), with the validity check
/// that Redisson leaves out and rslock and redsync make.
///
/// Each member should be on an independent master. The lock is taken when
/// N/2 + 1 members were acquired and the validity left (lease − elapsed −
/// drift, drift = 1 % of the lease + 2 ms) is positive; each member waits
/// at most `max(remaining / N, 1 ms)`, its reply included (a frozen master
/// costs that share, not the response timeout). Free members cost about one
/// round trip to lock and one to unlock: every member's command is written
/// on its own connection before any reply is read, on the calling thread.
/// Without an explicit lease each member
/// is renewed by its own client's watchdog, and the watchdog timeout counts
/// as the lease for validity. See the README's "Choosing a lock", "For
/// correctness", for what RedLock does and does not guarantee.
pub struct RedLock<K: Kind = Reentrant> {
    inner: Composite<K>,
}

/// The members held by one [`MultiLock`] acquisition; releases them all on
/// drop. `!Send`, like every guard.
#[must_use = "the locks are released as soon as the guard is dropped"]
#[clippy::has_significant_drop]
pub struct MultiLockGuard<K: Kind = Reentrant> {
    guards: Vec<LockGuard<K>>,
}

/// The members held by one [`RedLock`] acquisition (a majority at least);
/// releases them all on drop. `!Send`, like every guard.
#[must_use = "the locks are released as soon as the guard is dropped"]
#[clippy::has_significant_drop]
pub struct RedLockGuard<K: Kind = Reentrant> {
    guards: Vec<LockGuard<K>>,
    quorum: usize,
    started: Instant,
    lease: Duration,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

/// What both composites share: the members, the lease, the quorum.
struct Composite<K: Kind> {
    members: Vec<Lock<K>>,
    lease: Option<Duration>,
    /// Members that must be held: all of them, or a majority.
    quorum: usize,
    /// RedLock: each member waits a share of the budget, and the validity
    /// left must be positive.
    red: bool,
}

/// A successful acquisition.
struct Taken<K: Kind> {
    guards: Vec<LockGuard<K>>,
    started: Instant,
    lease: Duration,
}

impl<K: Kind> MultiLock<K> {
    /// A lock over `locks`, held only when every one of them is. No round
    /// trip. An empty list is reported by the first acquisition.
    pub fn new(locks: impl IntoIterator<Item = Lock<K>>) -> Self {
        MultiLock {
            inner: Composite::new(locks, false),
        }
    }

    /// The same lock with an explicit lease, no watchdog. The first attempt
    /// (every member at once) takes the members with `lease`; an ordered
    /// attempt with a wait takes them with twice the wait and sets `lease`
    /// once all are held (Redisson's rule; one more round trip per member).
    #[must_use = "this returns a new handle; the original is unchanged"]
    pub fn with_lease(&self, lease: Duration) -> Self {
        MultiLock {
            inner: self.inner.with_lease(lease),
        }
    }

    /// The members, in the order they are taken.
    pub fn members(&self) -> &[Lock<K>] {
        &self.inner.members
    }

    /// Takes every member, waiting as long as it takes (in rounds of 1.5 s
    /// per member, as Redisson's `lock()`).
    pub fn lock(&self) -> Result<MultiLockGuard<K>> {
        self.inner.lock(MultiLockGuard::from)
    }

    /// One attempt at every member at once, none of them waiting: about one
    /// round trip (every member's command is written before any reply is
    /// read), each reply awaited for the response timeout at most. When not
    /// every member was taken, what was is released before this returns
    /// (one more round trip; a member whose server does not answer within
    /// the response timeout is released in the background).
    pub fn try_lock(&self) -> Result<Option<MultiLockGuard<K>>> {
        self.inner.try_until(Instant::now(), MultiLockGuard::from)
    }

    /// Takes every member within `wait`; `Ok(None)` when the time is up
    /// (whatever was taken is released). About one round trip when every
    /// member is free; otherwise the members are taken in order, each
    /// waiting for the rest of the budget (Redisson's algorithm).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiLockGuard<K>>> {
        self.inner.try_for(wait, MultiLockGuard::from)
    }

    /// Takes every member before `deadline`; `Ok(None)` when it passes.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<MultiLockGuard<K>>> {
        self.inner.try_until(deadline, MultiLockGuard::from)
    }
}

impl<K: Kind> RedLock<K> {
    /// A lock over `locks`, held when a majority (N/2 + 1) of them are. No
    /// round trip. An empty list is reported by the first acquisition.
    pub fn new(locks: impl IntoIterator<Item = Lock<K>>) -> Self {
        RedLock {
            inner: Composite::new(locks, true),
        }
    }

    /// The same lock with an explicit lease (see [`MultiLock::with_lease`]);
    /// the validity is counted against it.
    #[must_use = "this returns a new handle; the original is unchanged"]
    pub fn with_lease(&self, lease: Duration) -> Self {
        RedLock {
            inner: self.inner.with_lease(lease),
        }
    }

    /// The members, in the order they are taken.
    pub fn members(&self) -> &[Lock<K>] {
        &self.inner.members
    }

    /// How many members must be held: N/2 + 1.
    pub fn quorum(&self) -> usize {
        self.inner.quorum
    }

    /// Takes a majority, waiting as long as it takes (in rounds of 1.5 s per
    /// member, as Redisson's `lock()`).
    pub fn lock(&self) -> Result<RedLockGuard<K>> {
        self.inner.lock(|taken| self.guard(taken))
    }

    /// One attempt at every member at once, none of them waiting: about one
    /// round trip, each reply awaited for the response timeout at most.
    pub fn try_lock(&self) -> Result<Option<RedLockGuard<K>>> {
        self.inner
            .try_until(Instant::now(), |taken| self.guard(taken))
    }

    /// Takes a majority with validity left within `wait`; `Ok(None)` when
    /// the time is up (whatever was taken is released). About one round
    /// trip when a majority is free; each member's reply is awaited for its
    /// share, `max(remaining / N, 1 ms)`, at most, so a frozen master costs
    /// that share. Otherwise the members are taken in order, each waiting
    /// its share (Redisson's algorithm).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<RedLockGuard<K>>> {
        self.inner.try_for(wait, |taken| self.guard(taken))
    }

    /// Takes a majority with validity left before `deadline`.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<RedLockGuard<K>>> {
        self.inner.try_until(deadline, |taken| self.guard(taken))
    }

    fn guard(&self, taken: Taken<K>) -> RedLockGuard<K> {
        RedLockGuard {
            guards: taken.guards,
            quorum: self.inner.quorum,
            started: taken.started,
            lease: taken.lease,
            _not_send: PhantomData,
        }
    }
}

impl<K: Kind> From<Taken<K>> for MultiLockGuard<K> {
    fn from(taken: Taken<K>) -> Self {
        MultiLockGuard {
            guards: taken.guards,
        }
    }
}

/// The body both composites share: each public method is one of these
/// with the type's own guard.
impl<K: Kind> Composite<K> {
    /// All of `locks` (`red`: a majority of them) must be held.
    fn new(locks: impl IntoIterator<Item = Lock<K>>, red: bool) -> Self {
        let members: Vec<Lock<K>> = locks.into_iter().collect();
        let quorum = if red {
            members.len() / 2 + 1
        } else {
            members.len()
        };
        Composite {
            members,
            lease: None,
            quorum,
            red,
        }
    }

    /// Redisson's `lock()`: `tryLock` in rounds while it says no.
    fn lock<G>(&self, guard: impl Fn(Taken<K>) -> G) -> Result<G> {
        loop {
            if let Some(taken) = self.try_for(self.round(), &guard)? {
                return Ok(taken);
            }
        }
    }

    /// Attempts for `wait` (too large to add to now: as long as it takes).
    fn try_for<G>(&self, wait: Duration, guard: impl Fn(Taken<K>) -> G) -> Result<Option<G>> {
        let deadline = Instant::now().checked_add(wait).unwrap_or_else(far_future);
        self.try_until(deadline, guard)
    }

    fn try_until<G>(&self, deadline: Instant, guard: impl Fn(Taken<K>) -> G) -> Result<Option<G>> {
        Ok(self.acquire(deadline)?.map(guard))
    }

    fn with_lease(&self, lease: Duration) -> Self {
        Composite {
            members: self.members.clone(),
            lease: Some(lease),
            quorum: self.quorum,
            red: self.red,
        }
    }

    fn round(&self) -> Duration {
        ROUND_PER_MEMBER.saturating_mul(u32::try_from(self.members.len()).unwrap_or(u32::MAX))
    }
}

fn far_future() -> Instant {
    // About 30 years: "as long as it takes" without overflowing Instant.
    Instant::now() + Duration::from_secs(30 * 365 * 24 * 3600)
}

impl<K: Kind> MultiLockGuard<K> {
    /// Releases every member, even after a failure, and reports the first
    /// error. (Redisson's synchronous unlock stops at the first error and
    /// leaves the rest held.) About one round trip: every release is
    /// written before any reply is read; a server that does not answer
    /// costs its response timeout and the release's retries.
    pub fn unlock(mut self) -> Result<()> {
        unlock_all(&mut self.guards)
    }

    /// `true` when any member is known to be lost. No round trip.
    pub fn is_lost(&self) -> bool {
        self.guards.iter().any(LockGuard::is_lost)
    }

    /// The member guards, in the order they were taken.
    pub fn guards(&self) -> &[LockGuard<K>] {
        &self.guards
    }
}

impl<K: Kind> RedLockGuard<K> {
    /// Releases every member that was taken, even after a failure, and
    /// reports the first error; about one round trip, as
    /// [`MultiLockGuard::unlock`].
    pub fn unlock(mut self) -> Result<()> {
        unlock_all(&mut self.guards)
    }

    /// `true` when fewer than a majority of the members are still held (by
    /// the members' own lost detection). No round trip.
    pub fn is_lost(&self) -> bool {
        self.guards.iter().filter(|guard| !guard.is_lost()).count() < self.quorum
    }

    /// The validity left: lease − time since the acquisition started −
    /// drift (1 % of the lease + 2 ms), zero once spent. Without an explicit
    /// lease the watchdog timeout counts as the lease (the members' own
    /// watchdogs keep renewing them). No round trip.
    pub fn validity(&self) -> Duration {
        validity(self.started, self.lease)
    }

    /// The member guards that were taken, in order.
    pub fn guards(&self) -> &[LockGuard<K>] {
        &self.guards
    }
}

/// Releases every member at once (one round trip when the servers answer)
/// and reports the first error.
fn unlock_all<K: Kind>(guards: &mut Vec<LockGuard<K>>) -> Result<()> {
    guard::release_all(
        std::mem::take(guards)
            .into_iter()
            .map(LockGuard::detach)
            .collect(),
    )
}

impl<K: Kind> Drop for MultiLockGuard<K> {
    fn drop(&mut self) {
        if let Err(e) = unlock_all(&mut self.guards) {
            log::warn!("redisson-lock: releasing a MultiLock failed: {e}");
        }
    }
}

impl<K: Kind> Drop for RedLockGuard<K> {
    fn drop(&mut self) {
        if let Err(e) = unlock_all(&mut self.guards) {
            log::warn!("redisson-lock: releasing a RedLock failed: {e}");
        }
    }
}

impl<K: Kind> fmt::Debug for MultiLock<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt("MultiLock", f)
    }
}

impl<K: Kind> fmt::Debug for RedLock<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt("RedLock", f)
    }
}

impl<K: Kind> Composite<K> {
    fn fmt(&self, what: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(what)
            .field("members", &self.members)
            .field("quorum", &self.quorum)
            .field("lease", &self.lease)
            .finish()
    }
}

impl<K: Kind> fmt::Debug for MultiLockGuard<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLockGuard")
            .field("members", &self.guards)
            .finish()
    }
}

impl<K: Kind> fmt::Debug for RedLockGuard<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedLockGuard")
            .field("members", &self.guards)
            .field("validity", &self.validity())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_is_lease_less_elapsed_less_drift() {
        let started = Instant::now();
        let left = validity(started, Duration::from_secs(10));
        // drift: 100 ms + 2 ms
        assert!(left <= Duration::from_millis(9898));
        assert!(left > Duration::from_millis(9800));
        assert_eq!(validity(started, Duration::from_millis(2)), Duration::ZERO);
    }
}
