//! The public faces of the lock types: one alias per kind (as parking_lot's
//! `pub type Mutex<T> = lock_api::Mutex<RawMutex, T>`), its guard's alias,
//! the capabilities one kind alone has (a fenced guard's token, a spin
//! lock's backoff) and [`ReadWriteLock`], the pair of handles on one
//! Redisson `RReadWriteLock`. The protocol of each kind is its file in
//! `crate::protocol`.

use std::sync::Arc;
use std::time::Duration;

use super::owned::OwnedLockGuard;
use super::{Lock, LockGuard};
use crate::engine::Engine;
use crate::error::Result;
use crate::protocol::{Fair, Fenced, NonReentrant, NonReentrantFair, Read, Spin, Write};

/// A fenced lock: byte-for-byte a Redisson `FencedLock` (`getFencedLock`).
///
/// It is the reentrant lock (same hash, channel, unlock and renewal, so it
/// excludes an `RLock` of the same name) plus a counter
/// `redisson_lock_token:{<name>}` that every acquisition, reentry included,
/// increments. Each guard carries the token its acquisition got
/// ([`LockGuard::token`](crate::LockGuard::token)); tokens strictly increase
/// across every holder, Java or Rust. Pass the token to the resource you
/// protect and let it refuse a token lower than one it has seen: that stops a
/// holder that was paused past its lease, which no lock alone can.
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.fenced_lock("ledger");
/// let guard = lock.lock()?;
/// let token = guard.token(); // send it along with every write
/// assert_eq!(lock.token()?, Some(token));
/// # Ok(()) }
/// ```
pub type FencedLock = Lock<Fenced>;
/// One hold on a [`FencedLock`] (the fenced lock), released on drop.
pub type FencedLockGuard = LockGuard<Fenced>;

impl Lock<Fenced> {
    /// The last token handed out (`GET redisson_lock_token:{<name>}`,
    /// Redisson's `getToken`); `None` before the first acquisition. One
    /// round trip.
    pub fn token(&self) -> Result<Option<u64>> {
        self.check()?;
        self.engine.with_connection(&self.name, "token", |con, _| {
            Ok(redis::cmd("GET").arg(self.kind.token_key()).query(con)?)
        })
    }
}

impl LockGuard<Fenced> {
    /// The token this acquisition got: greater than every token handed out
    /// before it, to any holder. No round trip.
    pub fn token(&self) -> u64 {
        self.fencing_token().unwrap_or(0)
    }
}

impl OwnedLockGuard<Fenced> {
    /// The token this acquisition got (see [`LockGuard::token`]). No round
    /// trip.
    pub fn token(&self) -> u64 {
        self.fencing_token().unwrap_or(0)
    }
}

/// A fair lock: byte-for-byte a Redisson `FairLock` (`getFairLock`).
///
/// The reentrant lock's hash (so it excludes an `RLock` of the same name)
/// and renewal, with waiters served in arrival order: a thread that must wait
/// joins the list `redisson_lock_queue:{<name>}` and gets a deadline in the
/// zset `redisson_lock_timeout:{<name>}`; the lock goes to the queue head only,
/// and a release wakes only the head, on its own channel
/// `redisson_lock__channel:{<name>}:<its field>`. Java and Rust waiters share
/// one queue.
///
/// # How it differs from [`crate::Lock`]
///
/// - [`try_lock`](crate::Lock::try_lock) never queues; the waiting methods
///   queue the thread, and a timed wait that gives up leaves the queue (one
///   more round trip). An abandoned [`lock`](crate::Lock::lock) never gives
///   up: its entry ages out after the wait timeout.
/// - Deadlines are epoch ms of the *client's* wall clock, shifted by each
///   acquirer's wait: every client of a lock, Java or Rust, needs a roughly
///   synchronised clock and the same `fairLockWaitTimeout`
///   ([`ClientBuilder::fair_lock_wait_timeout`](crate::ClientBuilder::fair_lock_wait_timeout),
///   300 s by default).
/// - A waiter that is not the head polls at the holder's TTL (Redisson's
///   behaviour); one that finds the lock free but is not the head asks
///   again after 50 ms, doubling up to 1 s while that lasts (behind a dead
///   head: until its deadline), where Redisson asks again at once.
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.fair_lock("printer");
/// let guard = lock.lock()?; // served after everyone queued before us
/// guard.unlock()?;          // wakes the next in line
/// # Ok(()) }
/// ```
pub type FairLock = Lock<Fair>;
/// One hold on a [`FairLock`] (the fair lock), released on drop.
pub type FairLockGuard = LockGuard<Fair>;

/// A non-reentrant fair lock: byte-for-byte a Redisson
/// `NonReentrantFairLock` (`getNonReentrantFairLock`, Redisson 4.4.0+).
///
/// Everything [`crate::FairLock`] is (same keys, queue, per-waiter channel,
/// renewal; it excludes a fair lock or an `RLock` of the same name), except
/// that the thread holding it cannot take it again: a second `lock`,
/// `try_lock` or `try_lock_for` by the holder fails at once with
/// [`Error::NotReentrant`](crate::Error::NotReentrant), without a round trip,
/// instead of deadlocking or counting a second hold.
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.non_reentrant_fair_lock("batch");
/// let guard = lock.lock()?;
/// assert!(matches!(lock.try_lock(), Err(redisson_lock::Error::NotReentrant { .. })));
/// guard.unlock()?;
/// # Ok(()) }
/// ```
pub type NonReentrantFairLock = Lock<NonReentrantFair>;
/// One hold on a [`NonReentrantFairLock`] (the non-reentrant fair lock), released on drop.
pub type NonReentrantFairLockGuard = LockGuard<NonReentrantFair>;

/// A non-reentrant lock: byte-for-byte a Redisson non-reentrant lock
/// (`getNonReentrantLock`, Redisson 4.4.0 and later).
///
/// The reentrant lock's hash, channel, unlock and renewal (so it excludes an
/// `RLock` of the same name and wakes and is woken like one), but a thread
/// that already holds it cannot take it again: [`lock`](crate::Lock::lock),
/// [`try_lock`](crate::Lock::try_lock) and the timed variants return
/// [`Error::NotReentrant`](crate::Error::NotReentrant) at once, without a round trip, instead of
/// deadlocking on itself. Its hold count is never more than 1.
///
/// Redisson's acquire script refuses the holder with the error reply
/// `NON_REENTRANT_REACQUIRE`; this crate's answers the same to a caller that
/// counts a hold, but takes a field the calling thread counts no hold on
/// (left by an acquire whose reply was lost) afresh, so a resent acquire
/// never refuses its own first attempt.
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.non_reentrant_lock("job");
/// let guard = lock.lock()?;
/// assert!(matches!(lock.try_lock(), Err(redisson_lock::Error::NotReentrant { .. })));
/// guard.unlock()?;
/// # Ok(()) }
/// ```
pub type NonReentrantLock = Lock<NonReentrant>;
/// One hold on a [`NonReentrantLock`] (the non-reentrant lock), released on drop.
pub type NonReentrantLockGuard = LockGuard<NonReentrant>;

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
pub type SpinLock = Lock<Spin>;
/// One hold on a [`SpinLock`] (the spin lock), released on drop.
pub type SpinLockGuard = LockGuard<Spin>;

impl Lock<Spin> {
    /// The same spin lock, whose waiters sleep `initial` after their first
    /// failed attempt, then twice the previous sleep plus a jitter of 0 to
    /// (failures − 1) ms, up to `max` (Redisson's `LockOptions`
    /// exponential backoff; the default is 1 ms to 128 ms). An `initial`
    /// equal to `max` is Redisson's constant backoff. `initial` is raised
    /// to 1 ms and `max` to `initial` if lower, so a waiter never busy-polls
    /// Redis. No round trip.
    #[must_use = "this returns a new handle; the original is unchanged"]
    pub fn with_backoff(&self, initial: Duration, max: Duration) -> SpinLock {
        let mut lock = self.clone();
        lock.kind = Arc::new(Spin::with_backoff(initial, max));
        lock
    }

    /// The backoff this handle's waiters sleep by: `(initial, max)`.
    pub fn backoff(&self) -> (Duration, Duration) {
        let backoff = self.kind.backoff();
        (backoff.initial, backoff.max)
    }
}

/// The read lock of a [`ReadWriteLock`](crate::ReadWriteLock):
/// byte-for-byte a Redisson `RedissonReadLock`
/// (`getReadWriteLock(name).readLock()`).
///
/// Any number of threads, of any client, Java or Rust, hold it at once while
/// no writer does; the thread holding the write lock may take it too (and
/// keeps it when it releases the write lock: a downgrade). A reader cannot
/// upgrade: asking for the write lock while holding a read hold waits for
/// ever, as in Redisson.
///
/// Every read hold has a marker key
/// `{<name>}:<client id>:<thread>:rwlock_timeout:<n>` with that hold's lease;
/// a read unlock (Java's or Rust's) keeps the shared hash alive as long as
/// any holder's marker lives. Without an explicit lease the watchdog renews
/// this client's own markers and the hash, never another holder's.
///
/// [`is_locked`](crate::Lock::is_locked) is Redisson's read-side answer:
/// `true` while readers hold it (or the writer also holds read holds), one
/// script call. [`force_unlock`](crate::Lock::force_unlock) deletes the lock
/// only while it is in read mode and wakes one reader and one writer.
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
/// let rw = client.read_write_lock("catalog");
/// let a = rw.read_lock().lock()?;
/// let b = rw.read_lock().try_lock()?; // readers share (same thread: reentry)
/// assert!(b.is_some());
/// assert!(rw.write_lock().try_lock()?.is_none()); // no writer while read
/// # drop((a, b));
/// # Ok(()) }
/// ```
pub type ReadLock = Lock<Read>;
/// One hold on a [`ReadLock`] (the read lock), released on drop.
pub type ReadLockGuard = LockGuard<Read>;

/// The write lock of a [`ReadWriteLock`](crate::ReadWriteLock):
/// byte-for-byte a Redisson `RedissonWriteLock`
/// (`getReadWriteLock(name).writeLock()`).
///
/// One thread of one client holds it, and no reader, Java or Rust, holds the
/// lock meanwhile. Its hash field is `<client id>:<thread>:write`. Unlike the
/// reentrant lock, a reentry ADDS the lease to the remaining TTL (Redisson's
/// rule). The last release wakes every waiting reader and writer (message
/// `1`); if the thread took read holds while writing, the release instead
/// downgrades the lock to read mode and publishes nothing.
///
/// [`is_locked`](crate::Lock::is_locked) is `HGET <name> mode` = `write`
/// (one round trip); [`force_unlock`](crate::Lock::force_unlock) deletes the
/// lock only while it is in write mode and wakes every waiter.
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
/// let rw = client.read_write_lock("catalog");
/// let write = rw.write_lock().lock()?;
/// let read = rw.read_lock().lock()?; // the writer may read too
/// write.unlock()?;                   // downgrade: still read-locked
/// assert!(rw.read_lock().is_locked()?);
/// # drop(read);
/// # Ok(()) }
/// ```
pub type WriteLock = Lock<Write>;
/// One hold on a [`WriteLock`] (the write lock), released on drop.
pub type WriteLockGuard = LockGuard<Write>;

/// A read/write lock: byte-for-byte a Redisson `RReadWriteLock`
/// (`getReadWriteLock`). Its two handles share one hash named after the
/// lock and the channel `redisson_rwlock:{<name>}`:
/// [`read_lock`](Self::read_lock) (many readers) and
/// [`write_lock`](Self::write_lock) (one writer, no readers). Each is a full
/// [`Lock`] with its own guards.
///
/// Making the handles does not talk to Redis. A `ReadWriteLock` is cheap to
/// clone.
#[derive(Clone)]
pub struct ReadWriteLock {
    engine: Arc<Engine>,
    name: String,
}

impl ReadWriteLock {
    pub(crate) fn new(engine: Arc<Engine>, name: String) -> Self {
        ReadWriteLock { engine, name }
    }

    /// The lock's name: the Redis key of its hash.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The read lock (Redisson's `readLock()`). No round trip.
    pub fn read_lock(&self) -> ReadLock {
        Lock::new(Arc::clone(&self.engine), self.name.clone())
    }

    /// The write lock (Redisson's `writeLock()`). No round trip.
    pub fn write_lock(&self) -> WriteLock {
        Lock::new(Arc::clone(&self.engine), self.name.clone())
    }
}

impl std::fmt::Debug for ReadWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadWriteLock")
            .field("name", &self.name)
            .field("client", &self.engine.id)
            .finish()
    }
}
