//! [`Lock`], the handle on one named lock of any type of the family, and the
//! one waiting loop every type shares.
//!
//! `impl Lock` is split across this module's children by what the methods
//! do:
//!
//! | file | its `Lock` methods |
//! |---|---|
//! | `mod.rs` | `name`, `with_lease`, `with_cancel`; `lock`, `try_lock`, `try_lock_for`, `try_lock_until` |
//! | `acquire.rs` | the waiting loop behind them: attempt, wait on the type's channel (or its backoff), attempt again |
//! | `attempt.rs` | one acquire attempt split at its command (`begin_attempt`, `finish_attempt`), which MultiLock and RedLock share |
//! | `owned.rs` | `lock_owned`, `try_lock_owned`, `try_lock_owned_for` (and [`OwnedLockGuard`](crate::OwnedLockGuard)) |
//! | `handoff.rs` | `adopt` (and [`HoldToken`](crate::HoldToken), the guards' `hold_token` and `detach`) |
//! | `unlock.rs` | `unlock_with_request_id`, and the unlock every guard's release sends, with its retries |
//! | `queries.rs` | `force_unlock`, `force_unlock_owned_by`, `is_locked`, `is_held_by_current_thread`, `hold_count`, `remaining_ttl` |
//! | `kinds.rs` | one kind's own: `token` (fenced), `with_backoff` and `backoff` (spin); the public aliases, and [`ReadWriteLock`](crate::ReadWriteLock) |
//!
//! The rest are the types around it: the guard in `guard.rs` (its
//! `keep_for` in `guard/keep.rs`), [`LostSignal`](crate::LostSignal) in
//! `signal.rs`, [`LockWatch`](crate::LockWatch) in `watch.rs`,
//! [`LeaderElection`](crate::LeaderElection) in `election.rs`.

mod acquire;
pub(crate) mod attempt;
pub(crate) mod election;
pub(crate) mod guard;
pub(crate) mod handoff;
pub(crate) mod kinds;
pub(crate) mod owned;
mod queries;
pub(crate) mod signal;
pub(crate) mod unlock;
pub(crate) mod watch;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cancel::CancelToken;
use crate::config::millis as lease_millis;
use crate::engine::Engine;
use crate::engine::observe::{AcquireOutcome, Acquiring};
use crate::error::{Error, LostReason, Result};
use crate::owner;
use crate::protocol::{Kind, Reentrant};
use guard::LockGuard;

/// A handle on one named lock of the Redisson family; `Lock` alone (the
/// default type parameter) is the reentrant lock, byte-for-byte a Redisson
/// `RLock`, and the other types ([`crate::FairLock`], [`crate::ReadLock`],
/// [`crate::WriteLock`], [`crate::FencedLock`], [`crate::SpinLock`],
/// [`crate::NonReentrantLock`], [`crate::NonReentrantFairLock`]) have the
/// same methods.
///
/// The reentrant lock is a Redis hash named after the lock, with one field
/// `<client id>:<thread>` holding the owner's reentrancy count, and a TTL: the
/// lease. Taking it without an explicit lease ([`Lock::with_lease`]) sets the
/// lease to the client's watchdog timeout (30 s) and lets the client's watchdog
/// renew it every third of that until the last hold is released, exactly as
/// Redisson does. A Java thread holding `RLock` `"orders"` and a Rust thread
/// holding `Lock` `"orders"` on the same Redis exclude each other.
///
/// Ownership is per thread, as in Redisson: a thread that holds the lock can
/// take it again (each [`LockGuard`] is one more hold), and only that thread can
/// release it. A `Lock` is a cheap handle (`Clone + Send + Sync`); cloning it
/// or making another one with the same name from the same client gives the same
/// lock.
///
/// # Thread pools that share threads between tasks
///
/// Because the owner is the OS thread, two *tasks* that run on one thread
/// are one owner: on a work-stealing pool (rayon: a thread blocked in
/// `join` or `scope` runs stolen tasks meanwhile) or an async executor's
/// worker (a guard held across an `.await`), task B run on the thread where
/// task A holds `"orders"` **re-enters A's hold** instead of waiting,
/// and both run the critical section at once. Redisson has the same hazard
/// with its thread-id owners (virtual threads on one carrier, executor
/// callbacks). A guard is `!Send`, so a hold cannot move between threads,
/// but nothing stops another task from taking the lock on the same thread.
/// When the unit of work is a task or a job rather than a thread, take the
/// lock with [`Lock::lock_owned`] (or [`Lock::try_lock_owned`],
/// [`Lock::try_lock_owned_for`]): the [`crate::OwnedLockGuard`] has an owner
/// id of its own, never a thread's, so a second task waits for it like any
/// other owner, and the guard is `Send + 'static`, released by whichever
/// thread drops it.
///
/// # Waiting
///
/// [`lock`](Lock::lock), [`try_lock_for`](Lock::try_lock_for) and
/// [`try_lock_until`](Lock::try_lock_until) park the thread on the client's
/// subscriber and are woken by the holder's unlock message, whether the holder
/// is Rust or Java. A wait never lasts longer than the holder's remaining TTL
/// or the caller's budget before the thread tries again, so a lost message
/// costs at most one TTL slice.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.lock("orders");
/// {
///     let _guard = lock.lock()?;           // HINCRBY orders <id>:<thread> 1
///     let _again = lock.lock()?;           // reentry: count 2
///     assert_eq!(lock.hold_count()?, 2);
/// }                                        // both holds released on drop
/// assert!(!lock.is_locked()?);
/// # Ok(()) }
/// ```
pub struct Lock<K: Kind = Reentrant> {
    pub(crate) engine: Arc<Engine>,
    pub(crate) name: Arc<str>,
    pub(crate) kind: Arc<K>,
    pub(crate) lease: Option<Duration>,
    /// Watched by the blocking acquisitions ([`Lock::with_cancel`]).
    pub(crate) cancel: Option<CancelToken>,
}

impl<K: Kind> Clone for Lock<K> {
    fn clone(&self) -> Self {
        Lock {
            engine: Arc::clone(&self.engine),
            name: Arc::clone(&self.name),
            kind: Arc::clone(&self.kind),
            lease: self.lease,
            cancel: self.cancel.clone(),
        }
    }
}

impl<K: Kind> Lock<K> {
    /// A handle on the lock `name` of `engine`'s client: the kind derives
    /// its view of the lock (its keys, the settings it needs) once, here.
    pub(crate) fn new(engine: Arc<Engine>, name: String) -> Lock<K> {
        Lock {
            kind: Arc::new(K::new(&name, &engine.config)),
            engine,
            name: name.into(),
            lease: None,
            cancel: None,
        }
    }

    /// The lock's name: the Redis key of its hash.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The same lock, taken with an explicit lease: the key expires `lease`
    /// after each acquire and the watchdog never renews it (Redisson's
    /// `lock(leaseTime, unit)`). The lease is checked when the lock is taken:
    /// it must be between 1 ms and 100 years.
    #[must_use = "this returns a new handle; the original is unchanged"]
    pub fn with_lease(&self, lease: Duration) -> Lock<K> {
        Lock {
            lease: Some(lease),
            ..self.clone()
        }
    }

    /// The same lock, whose blocking acquisitions ([`lock`](Lock::lock),
    /// [`try_lock_for`](Lock::try_lock_for),
    /// [`try_lock_until`](Lock::try_lock_until), [`lock_owned`](Lock::lock_owned)
    /// and [`try_lock_owned_for`](Lock::try_lock_owned_for)) watch `token`:
    /// once it is cancelled, a waiting thread is woken as by an unlock
    /// message and returns [`Error::Cancelled`], holding nothing (a hold
    /// whose acquisition raced the cancel is released, a fair lock's
    /// waiter leaves the queue as a timed-out one does, its subscription
    /// is dropped), and every later acquisition through this handle
    /// returns it at once, without a round trip. A thread still being
    /// subscribed (one round trip on a healthy server) sees the cancel
    /// when the subscription is confirmed. [`try_lock`](Lock::try_lock),
    /// which never waits, ignores the token. No I/O.
    #[must_use = "this returns a new handle; the original is unchanged"]
    pub fn with_cancel(&self, token: &CancelToken) -> Lock<K> {
        Lock {
            cancel: Some(token.clone()),
            ..self.clone()
        }
    }

    /// Takes the lock, waiting as long as it takes.
    ///
    /// Returns at once on a reentry. Errors are Redis errors (the server is
    /// unreachable, the key is not a lock hash) and bad arguments; they end the
    /// wait. The wait itself has no time limit: an [`Error::Timeout`] is a
    /// reply that did not come within the response timeout.
    pub fn lock(&self) -> Result<LockGuard<K>> {
        crate::cancel::without_deadline(|| self.acquire(None, None))
    }

    /// Takes the lock if it is free or already held by this thread: one
    /// attempt, one round trip, never waits for the holder. (It may wait up to
    /// the connect timeout for a pooled connection.)
    pub fn try_lock(&self) -> Result<Option<LockGuard<K>>> {
        self.try_lock_as(self.owner_field())
    }

    /// [`Lock::try_lock`] for the owner `field`.
    pub(crate) fn try_lock_as(&self, field: String) -> Result<Option<LockGuard<K>>> {
        self.check()?;
        let _active = self.engine.enter()?;
        let (lease, lease_ms) = self.lease()?;
        let mut observed = self.observe_acquire(Some(Duration::ZERO), lease);
        observed.attempted();
        let now = Some(Instant::now());
        let result = self
            .attempt(&field, lease, lease_ms, None, now)
            .map(|attempt| attempt.ok());
        if let Ok(None) = result {
            observed.contended();
        }
        Self::observed(observed, &result, AcquireOutcome::Busy);
        result
    }

    /// Starts observing an acquire call through this handle (the
    /// `lock.acquire` span, the acquire metrics; nothing without the
    /// `tracing` and `metrics` features).
    fn observe_acquire(&self, wait: Option<Duration>, lease: Duration) -> Acquiring {
        Acquiring::start(&self.engine.observe, K::REDISSON, &self.name, wait, lease)
    }

    /// Finishes observing an acquire call that returned `result`; `none`:
    /// the outcome of a call that returned without the lock.
    fn observed(observed: Acquiring, result: &Result<Option<LockGuard<K>>>, none: AcquireOutcome) {
        match result {
            Ok(Some(guard)) => {
                let outcome = if guard.is_reentry() {
                    AcquireOutcome::Reentered
                } else {
                    AcquireOutcome::Acquired
                };
                observed.finish(outcome, guard.fencing_token(), None);
            }
            Ok(None) => observed.finish(none, None, None),
            Err(e) => observed.finish(AcquireOutcome::Error, None, Some(e)),
        }
    }

    /// Takes the lock, waiting at most `wait` for it; `Ok(None)` when the time
    /// is up. A `wait` too large to add to the current time waits as long as it
    /// takes.
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard<K>>> {
        self.acquire(Instant::now().checked_add(wait), Some(wait))
    }

    /// Takes the lock, waiting until `deadline` at the latest; `Ok(None)` when
    /// the deadline passes. A deadline in the past makes one attempt.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<LockGuard<K>>> {
        let wait = deadline.saturating_duration_since(Instant::now());
        self.acquire(Some(deadline), Some(wait))
    }

    /// The lease an acquisition through this handle sets. (The caller has
    /// run [`Lock::check`].)
    pub(crate) fn lease(&self) -> Result<(Duration, u64)> {
        let lease = self.lease.unwrap_or(self.engine.config.watchdog_timeout);
        Ok((lease, lease_millis("lease", lease)?))
    }

    /// The checks every public operation starts with, once: a usable name,
    /// and a client built in this process (one `getpid`).
    pub(crate) fn check(&self) -> Result<()> {
        self.engine.check_process()?;
        if self.name.is_empty() {
            return Err(Error::invalid("lock name must not be empty"));
        }
        Ok(())
    }

    pub(crate) fn owner_field(&self) -> String {
        self.kind.owner_field(owner::owner_field(
            &self.engine.id,
            owner::current_thread_id(),
        ))
    }

    pub(crate) fn lost(&self, reason: LostReason) -> Error {
        Error::Lost {
            name: self.name.to_string(),
            reason,
        }
    }

    pub(crate) fn not_held(&self) -> Error {
        Error::NotHeld {
            name: self.name.to_string(),
            client_id: self.engine.id.to_owned(),
            thread_id: owner::current_thread_id(),
        }
    }
}

impl<K: Kind> fmt::Debug for Lock<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("type", &K::REDISSON)
            .field("name", &self.name)
            .field("lease", &self.lease)
            .field("cancel", &self.cancel)
            .field("client", &self.engine.id)
            .finish()
    }
}
