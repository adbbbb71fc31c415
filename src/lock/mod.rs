//! [`Lock`], the handle on one named lock of any type of the family, and the
//! one waiting loop every type shares.
//!
//! `impl Lock` is split across this module's children by what the methods
//! do:
//!
//! | file | its `Lock` methods |
//! |---|---|
//! | `mod.rs` | `name`, `with_lease`, `with_cancel`; `lock`, `try_lock`, `try_lock_for`, `try_lock_until` and the waiting loop behind them |
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

use crate::cancel::{CancelToken, Stop};
use crate::config::millis as lease_millis;
use crate::engine::Engine;
use crate::engine::observe::{AcquireOutcome, Acquiring, Wakeup};
use crate::engine::replicas::Synced;
use crate::error::{Error, LostReason, Result};
use crate::owner;
use crate::protocol::{Kind, Queue, Reentrant, Spinning, Wake};
use guard::LockGuard;

/// What one acquire attempt got: the guard, or the holder's TTL.
type Attempt<K> = std::result::Result<LockGuard<K>, Option<Duration>>;

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

    /// The first attempt, then wait (on the type's channel, or by its
    /// backoff), then attempt again after every wake-up or TTL slice until
    /// `deadline`. A timed wait that gives up runs the type's give-up hook.
    /// `wait` is the caller's budget as given (Redisson's `waitTime`): a
    /// fair lock queues the thread with it in whole ms, or with its own
    /// wait timeout when that is 0, as Redisson does.
    fn acquire(
        &self,
        deadline: Option<Instant>,
        wait: Option<Duration>,
    ) -> Result<Option<LockGuard<K>>> {
        self.acquire_as(deadline, wait, self.owner_field())
    }

    /// [`Lock::acquire`] for the owner `field`.
    pub(crate) fn acquire_as(
        &self,
        deadline: Option<Instant>,
        wait: Option<Duration>,
        field: String,
    ) -> Result<Option<LockGuard<K>>> {
        self.check()?;
        let _active = self.engine.enter()?;
        let stop = self.engine.stop(self.cancel.as_ref());
        stop.check()?;
        let (lease, lease_ms) = self.lease()?;
        let wait_ms = wait.map_or(0, |wait| {
            u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)
        });
        let mut observed = self.observe_acquire(wait, lease);
        let result = self.wait_for(
            &field,
            lease,
            lease_ms,
            (deadline, stop),
            wait_ms,
            &mut observed,
        );
        observed.left_wait();
        // A wait that ends without the lock leaves the queue (a fair lock's
        // place would otherwise hold up everyone behind it until its
        // deadline, 5 min by default). Redisson gives up after a timed wait
        // and, since 4.7.0, a response timeout; this crate also after any
        // error, of `lock()` too: the place is of no use to anyone then.
        let gave_up = match &result {
            Ok(found) => found.is_none(),
            Err(_) => true,
        };
        if K::GIVES_UP && gave_up {
            let give_up = self
                .engine
                .with_logged_sync("give up", &self.name, |con, _| {
                    self.kind.give_up(con, &field, wait_ms)
                });
            if let Err(e) = give_up {
                log::debug!("redisson-lock: giving up on `{}` failed: {e}", self.name);
            }
        }
        Self::observed(observed, &result, AcquireOutcome::Timeout);
        result
    }

    /// The waiting loop every lock type shares. It ends when `stop` is
    /// set (its error), woken like by a message; a guard got as it was set
    /// is released on the way out.
    fn wait_for(
        &self,
        field: &str,
        lease: Duration,
        lease_ms: u64,
        (deadline, stop): (Option<Instant>, Stop<'_>),
        wait_ms: u64,
        observed: &mut Acquiring,
    ) -> Result<Option<LockGuard<K>>> {
        let queue = || Some(Queue { wait_ms });
        // A guard got as the wait was stopped is dropped: released.
        let unless_stopped = |guard: LockGuard<K>| stop.check().map(|()| Some(guard));
        observed.attempted();
        let mut ttl = match self.attempt(field, lease, lease_ms, queue(), deadline)? {
            Ok(guard) => return unless_stopped(guard),
            Err(ttl) => ttl,
        };
        observed.contended();
        let config = &self.engine.config;
        let now = Instant::now();
        if deadline.is_some_and(|deadline| now >= deadline) {
            return Ok(None);
        }
        observed.waiting();
        let fallback = config.watchdog_timeout / 3;
        let subscription_limit = |ttl: Option<Duration>| {
            let limit = Instant::now() + config.subscription_timeout.min(ttl.unwrap_or(fallback));
            deadline.map_or(limit, |deadline| limit.min(deadline))
        };
        let subscribers = &*self.engine.topology;
        let (channel, mut subscription, mut backoff) = match self.kind.wake(&self.name, field) {
            Wake::Channel { channel, entry } => {
                let subscription =
                    subscribers.subscribe(&channel, &entry, subscription_limit(ttl))?;
                (Some((channel, entry)), Some(subscription), None)
            }
            Wake::Backoff(backoff) => (None, None, Some(Spinning::new(backoff))),
        };
        // Registered with the tokens for as long as the subscription lasts.
        let mut woken_by_stop = subscription
            .as_ref()
            .map(|subscription| stop.on_stop(Arc::new(subscription.waker())));
        // One connection lost while waiting (a server restarting under the
        // waiters: the attempt right after the subscriber lost its connection
        // finds the server down) is retried once, after the retry delay; a
        // refused connection or a timeout is reported at once.
        let mut dropped = false;
        loop {
            stop.check()?;
            observed.attempted();
            ttl = match self.attempt(field, lease, lease_ms, queue(), deadline) {
                Ok(Ok(guard)) => return unless_stopped(guard),
                Ok(Err(ttl)) => {
                    dropped = false;
                    ttl
                }
                Err(e) if e.is_connection_dropped() && !dropped => {
                    dropped = true;
                    log::debug!("redisson-lock: waiting for `{}`: {e}; retrying", self.name);
                    Some(config.retry_delay)
                }
                Err(e) => return Err(e),
            };
            // In a cluster, a subscription whose slot moved or whose master
            // failed over woke its waiter to subscribe where the slot lives
            // now, and to try again once subscribed: a release meanwhile
            // was announced where nobody listened.
            if let (Some(current), Some((channel, entry))) = (&subscription, &channel)
                && subscribers.is_stale(current, channel)
            {
                drop(woken_by_stop.take());
                drop(subscription.take()); // leaves before joining again
                let joined = subscribers.subscribe(channel, entry, subscription_limit(ttl))?;
                woken_by_stop = Some(stop.on_stop(Arc::new(joined.waker())));
                subscription = Some(joined);
                continue;
            }
            // A key without a TTL: wait for a message, but poll now and then.
            let mut wait = ttl.unwrap_or(fallback).max(Duration::from_millis(1));
            if let Some(backoff) = &mut backoff {
                wait = wait.min(backoff.next());
            }
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(None);
                }
                wait = wait.min(left);
            }
            // tests/failpoints.rs: the subscription lost (and a release
            // announced) after the failed attempt, before the park.
            crate::failpoint::failpoint!("waiter-before-park");
            match &subscription {
                Some(subscription) => {
                    let woken = subscription.wait(wait, &|| stop.is_set())?;
                    observed.woken(if woken {
                        Wakeup::Message
                    } else {
                        Wakeup::TtlElapsed
                    });
                }
                None => {
                    stop.sleep(wait)?;
                    observed.woken(Wakeup::Poll);
                }
            }
        }
    }

    /// One acquire attempt: the guard, or the holder's TTL. With replica
    /// sync checked, an acquisition no replica acknowledged is undone and
    /// sent again (Redisson's `handleNoSync`), at most the unlock retries
    /// and only while `deadline` has not passed; then
    /// [`Error::NotReplicated`].
    fn attempt(
        &self,
        field: &str,
        lease: Duration,
        lease_ms: u64,
        queue: Option<Queue>,
        deadline: Option<Instant>,
    ) -> Result<Attempt<K>> {
        let config = &self.engine.config;
        let mut retries = 0;
        loop {
            let (acquired, synced) = self.attempt_once(field, lease, lease_ms, queue)?;
            let guard = match acquired {
                Ok(guard) => guard,
                Err(ttl) => return Ok(Err(ttl)),
            };
            let Some(error) = synced.error("lock", &self.name) else {
                return Ok(Ok(guard));
            };
            if !self.engine.checks_replicas() {
                log::warn!("redisson-lock: {error}");
                return Ok(Ok(guard));
            }
            // One release, whose own acknowledgement is not waited on
            // again: the replicas that did not take the lock need not see
            // it go, and the caller's budget is spent on the next attempt.
            if let Err(e) = guard.undo() {
                log::debug!(
                    "redisson-lock: undoing an unreplicated `{}` failed: {e}",
                    self.name
                );
            }
            let past = |at: Instant| deadline.is_some_and(|deadline| at >= deadline);
            if retries >= config.retry_attempts || past(Instant::now() + config.retry_delay) {
                return Err(error);
            }
            retries += 1;
            std::thread::sleep(config.retry_delay);
        }
    }

    /// [`Lock::attempt`] without the replica check.
    fn attempt_once(
        &self,
        field: &str,
        lease: Duration,
        lease_ms: u64,
        queue: Option<Queue>,
    ) -> Result<(Attempt<K>, Synced)> {
        let begun = self.begin_attempt(field, lease)?;
        // The lease counts from the last send that may have set the TTL: a
        // command sent again after a reply that proves it did not run (in a
        // cluster: `CLUSTERDOWN`, `BUSY`, a refused connection, a redirect;
        // up to seconds) starts it afresh, a flagged resend (the first may
        // have run) does not.
        let mut sent = None;
        let acquired = self
            .engine
            .with_synced_connection(&self.name, "lock", |con, resend| {
                if !resend || sent.is_none() {
                    sent = Some(Instant::now());
                }
                if resend {
                    begun.resending();
                }
                let request = begun.request(self, lease_ms, field, resend, queue);
                self.kind.acquire(con, &request)
            });
        let (acquired, synced) = match acquired {
            Ok((acquired, synced)) => (Ok(acquired), synced),
            Err(e) => (Err(e), Synced::Yes),
        };
        Ok((
            // Never sent: the lease would count from now.
            self.finish_attempt(
                begun,
                field,
                lease,
                sent.unwrap_or_else(Instant::now),
                acquired,
            )?,
            synced,
        ))
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
