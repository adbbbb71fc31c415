//! [`Lock`], the handle on a Redisson `RLock`, and [`LockGuard`], one hold on it.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Commands;

use crate::client::Client;
use crate::error::{Error, LostReason, Result};
use crate::holds::{Hold, LeaseOutcome, Registry};
use crate::keys;
use crate::owner;
use crate::scripts::{self, Acquire, UnlockArgs, UnlockOutcome, lease_millis};

/// A reentrant distributed lock, byte-for-byte a Redisson `RLock`.
///
/// The lock is a Redis hash named after the lock, with one field
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
#[derive(Clone)]
pub struct Lock {
    client: Client,
    name: Arc<str>,
    channel: Arc<str>,
    lease: Option<Duration>,
}

/// One hold on a [`Lock`] by the thread that took it; dropping it releases
/// that hold.
///
/// A guard is `!Send`: a lock belongs to the thread that took it (Redisson
/// enforces the same at run time with `IllegalMonitorStateException`). Dropping
/// the guard logs an unlock error instead of panicking; call
/// [`unlock`](LockGuard::unlock) to see the error.
///
/// ```compile_fail
/// fn assert_send<T: Send>(_: T) {}
/// # fn f(lock: redisson_lock::Lock) -> redisson_lock::Result<()> {
/// let guard = lock.lock()?;
/// assert_send(guard); // error: a guard cannot cross threads
/// # Ok(()) }
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LockGuard {
    lock: Lock,
    hold: Arc<Hold>,
    /// Taken without an explicit lease: one of the hold's watchdog renewers.
    renew: bool,
    released: bool,
    /// `MutexGuard` is `!Send` and `Sync`, which is exactly what a guard is.
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

/// Identifies one unlock request. Redisson's unlock latch keys the outcome of
/// an unlock by it, so sending the same request again (after a lost reply)
/// returns the first outcome instead of releasing twice.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RequestId(String);

impl RequestId {
    /// A fresh id: 16 random bytes as 32 lowercase hex digits, like Redisson's.
    pub fn new() -> Self {
        RequestId(uuid::Uuid::new_v4().simple().to_string())
    }

    pub(crate) fn from_parts(prefix: u64, seq: u64) -> Self {
        RequestId(format!("{prefix:016x}{seq:016x}"))
    }

    /// The id as sent in the latch key.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for RequestId {
    fn default() -> Self {
        RequestId::new()
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequestId({})", self.0)
    }
}

impl Lock {
    pub(crate) fn new(client: Client, name: String) -> Lock {
        let channel = keys::lock_channel(&name).into();
        Lock {
            client,
            name: name.into(),
            channel,
            lease: None,
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
    pub fn with_lease(&self, lease: Duration) -> Lock {
        Lock {
            lease: Some(lease),
            ..self.clone()
        }
    }

    /// Takes the lock, waiting as long as it takes.
    ///
    /// Returns at once on a reentry. Errors are Redis errors (the server is
    /// unreachable, the key is not a lock hash) and bad arguments; they end the
    /// wait.
    pub fn lock(&self) -> Result<LockGuard> {
        // Without a deadline, `acquire` returns a guard or an error, never `None`.
        self.acquire(None)?.ok_or(Error::Timeout {
            operation: "lock",
            after: Duration::MAX,
        })
    }

    /// Takes the lock if it is free or already held by this thread: one
    /// attempt, one round trip, never waits for the holder. (It may wait up to
    /// the connect timeout for a pooled connection.)
    pub fn try_lock(&self) -> Result<Option<LockGuard>> {
        let (lease, lease_ms) = self.lease()?;
        let field = self.owner_field();
        Ok(self.attempt(&field, lease, lease_ms)?.ok())
    }

    /// Takes the lock, waiting at most `wait` for it; `Ok(None)` when the time
    /// is up. A `wait` too large to add to the current time waits as long as it
    /// takes.
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.acquire(Instant::now().checked_add(wait))
    }

    /// Takes the lock, waiting until `deadline` at the latest; `Ok(None)` when
    /// the deadline passes. A deadline in the past makes one attempt.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<LockGuard>> {
        self.acquire(Some(deadline))
    }

    /// Deletes the lock whoever holds it and wakes one waiter; `true` if there
    /// was a lock to delete. Guards of this client on it become lost.
    pub fn force_unlock(&self) -> Result<bool> {
        self.check()?;
        let registry = &self.client.inner.registry;
        // Only holds taken before the delete are lost; one taken by another
        // thread right after it is not.
        let before = registry.holds_on(&self.name);
        let deleted = self.client.with_connection("force unlock", |con, _| {
            scripts::force_unlock(con, &self.name, &self.channel, self.client.inner.publish)
        })?;
        for hold in &before {
            registry.lose(hold, LostReason::ForceUnlocked);
        }
        Ok(deleted)
    }

    /// Whether anyone holds the lock (`EXISTS`).
    pub fn is_locked(&self) -> Result<bool> {
        self.check()?;
        self.client
            .with_connection("is_locked", |con, _| Ok(con.exists(&*self.name)?))
    }

    /// Whether the calling thread holds the lock (`HEXISTS`).
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.check()?;
        let field = self.owner_field();
        self.client
            .with_connection("is_held_by_current_thread", |con, _| {
                Ok(con.hexists(&*self.name, &field)?)
            })
    }

    /// The calling thread's reentrancy count, 0 when it does not hold the lock.
    pub fn hold_count(&self) -> Result<u64> {
        self.check()?;
        let field = self.owner_field();
        let count: Option<u64> = self
            .client
            .with_connection("hold_count", |con, _| Ok(con.hget(&*self.name, &field)?))?;
        Ok(count.unwrap_or(0))
    }

    /// The lock's remaining lease (`PTTL`); `None` when it is not locked or
    /// has no expiry.
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.check()?;
        let ttl: i64 = self
            .client
            .with_connection("remaining_ttl", |con, _| Ok(con.pttl(&*self.name)?))?;
        Ok(u64::try_from(ttl).ok().map(Duration::from_millis))
    }

    /// Releases one hold of the calling thread with an explicit request id,
    /// outside of any guard: the low-level unlock. Sending the same `request_id`
    /// again within the latch TTL returns the first outcome without touching the
    /// lock, so a caller that lost a reply can retry safely. The latch is
    /// kept for its whole TTL (the unlock retry budget, 14 s by default), also
    /// after a successful reply.
    ///
    /// Prefer dropping or [`unlock`](LockGuard::unlock)ing a guard. A guard
    /// whose hold was released this way reports [`Error::NotHeld`] or
    /// [`Error::Lost`] when it is dropped later.
    pub fn unlock_with_request_id(&self, request_id: &RequestId) -> Result<UnlockOutcome> {
        self.check()?;
        let field = self.owner_field();
        let registry = &self.client.inner.registry;
        let hold = registry.live(&self.name, &field);
        // It sets the TTL when holds remain: a command the hold must count.
        let lease = self.lease()?.0;
        let ticket = hold.as_ref().map(|hold| hold.begin_lease(lease));
        // The caller knows this id and may send it again: the latch stays.
        let result = self.unlock_raw(&field, Unlock::Latched(request_id));
        if let (Some(hold), Some(ticket)) = (&hold, ticket) {
            let outcome = match &result {
                Ok(Some(UnlockOutcome::StillHeld)) => LeaseOutcome::Set,
                Err(e) => LeaseOutcome::of_error(e),
                _ => LeaseOutcome::Untouched,
            };
            hold.end_lease(ticket, outcome);
        }
        match result? {
            Some(outcome) => {
                if outcome == UnlockOutcome::Released {
                    // Any guard of this thread on the lock now holds nothing.
                    for hold in registry.holds_on(&self.name) {
                        if *hold.field == *field {
                            registry.lose(&hold, LostReason::Released);
                        }
                    }
                }
                Ok(outcome)
            }
            None => Err(self.not_held()),
        }
    }

    /// The first attempt, then subscribe, then attempt again after every
    /// wake-up or TTL slice until `deadline`.
    fn acquire(&self, deadline: Option<Instant>) -> Result<Option<LockGuard>> {
        let (lease, lease_ms) = self.lease()?;
        let field = self.owner_field();
        let mut ttl = match self.attempt(&field, lease, lease_ms)? {
            Ok(guard) => return Ok(Some(guard)),
            Err(ttl) => ttl,
        };
        let config = &self.client.inner.config;
        let now = Instant::now();
        if deadline.is_some_and(|deadline| now >= deadline) {
            return Ok(None);
        }
        let fallback = config.watchdog_timeout / 3;
        let mut limit = now + config.subscription_timeout.min(ttl.unwrap_or(fallback));
        if let Some(deadline) = deadline {
            limit = limit.min(deadline);
        }
        let subscriber = &self.client.inner.subscriber;
        let subscription = subscriber.subscribe(&self.channel, &self.name, limit)?;
        loop {
            ttl = match self.attempt(&field, lease, lease_ms)? {
                Ok(guard) => return Ok(Some(guard)),
                Err(ttl) => ttl,
            };
            // A key without a TTL: wait for a message, but poll now and then.
            let mut wait = ttl.unwrap_or(fallback).max(Duration::from_millis(1));
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(None);
                }
                wait = wait.min(left);
            }
            subscription.wait(wait)?;
        }
    }

    /// One acquire attempt: the guard, or the holder's TTL.
    fn attempt(
        &self,
        field: &str,
        lease: Duration,
        lease_ms: u64,
    ) -> Result<Result<LockGuard, Option<Duration>>> {
        let inner = &self.client.inner;
        let registry = &inner.registry;
        // This thread's own count is the truth about its field: whatever else
        // Redis has there was left by an acquire whose reply was lost.
        let live = registry.live(&self.name, field);
        let known = live
            .as_ref()
            .map_or(0, |hold| crate::holds::Registry::count(hold));
        // A reentry sets the TTL of a hold that a renewal may be setting too.
        let ticket = live.as_ref().map(|hold| hold.begin_lease(lease));
        let marker = live.as_ref().map(|_| {
            let id = self.client.next_request_id();
            keys::replaced_marker(&self.name, id.as_str())
        });
        let marker = marker
            .as_deref()
            .map(|key| (key, inner.config.latch_ttl_ms()));
        let sent = Instant::now();
        let acquired = self.client.with_connection("lock", |con, resend| {
            scripts::acquire(con, &self.name, lease_ms, field, known, marker, resend)
        });
        if let (Some(hold), Some(ticket)) = (&live, ticket) {
            let outcome = match &acquired {
                Ok(Acquire::Acquired { replaced: false }) => LeaseOutcome::Set,
                Err(e) => LeaseOutcome::of_error(e),
                _ => LeaseOutcome::Untouched,
            };
            hold.end_lease(ticket, outcome);
        }
        let replaced = match acquired? {
            Acquire::Held { ttl } => {
                if let Some(hold) = &live {
                    // Someone else holds what this thread counted as its own.
                    registry.lose(hold, LostReason::KeyGone);
                }
                return Ok(Err(ttl));
            }
            Acquire::Acquired { replaced } => replaced,
        };
        if replaced && let Some(hold) = &live {
            registry.lose(hold, LostReason::Replaced);
        }
        let renew = self.lease.is_none();
        let reentered = live.as_ref().filter(|_| !replaced);
        let hold = registry.acquired(&self.name, field, lease, renew, sent, reentered);
        Ok(Ok(LockGuard {
            lock: self.clone(),
            hold,
            renew,
            released: false,
            _not_send: PhantomData,
        }))
    }

    /// Sends an unlock, retrying transport failures (never when no
    /// connection could be had); `Ok(None)` when `field` does not hold the
    /// lock.
    ///
    /// - [`Unlock::Latched`] is Redisson's unlock with the caller's request
    ///   id: a retry within the latch TTL returns the first outcome.
    /// - [`Unlock::Release`] is the guards' own, which sets the count to
    ///   what the thread keeps: a retry sets the same count or finds the
    ///   field gone, so it needs no latch. When an earlier attempt may have
    ///   run, a field found gone means that attempt freed the lock.
    fn unlock_raw(&self, field: &str, unlock: Unlock<'_>) -> Result<Option<UnlockOutcome>> {
        let inner = &self.client.inner;
        let config = &inner.config;
        let (_, lease_ms) = self.lease()?;
        let latch = match unlock {
            Unlock::Latched(request_id) => keys::unlock_latch(&self.name, request_id.as_str()),
            Unlock::Release { .. } => String::new(),
        };
        let args = UnlockArgs {
            name: &self.name,
            channel: &self.channel,
            latch: &latch,
            lease_ms,
            field,
            publish: inner.publish,
            latch_ttl_ms: config.latch_ttl_ms(),
        };
        // A latched retry must reach Redis while the first attempt's latch
        // lives, or it could release a second hold.
        let retry_window = match unlock {
            Unlock::Latched(_) => Duration::from_millis(args.latch_ttl_ms)
                .saturating_sub(config.response_timeout.saturating_add(config.retry_delay)),
            Unlock::Release { .. } => Duration::MAX,
        };
        let first_sent = Instant::now();
        let mut retries = 0;
        loop {
            let result = self.client.with_connection("unlock", |con, resend| {
                let outcome = match unlock {
                    Unlock::Latched(_) => scripts::unlock(con, &args)?,
                    Unlock::Release { remaining } => scripts::release(con, &args, remaining)?,
                };
                // A resend of a release that finds the field gone: the
                // first one freed it (its reply was lost).
                let may_have_run = resend || retries > 0;
                Ok(match (unlock, outcome) {
                    (Unlock::Release { remaining: 0 }, None) if may_have_run => {
                        Some(UnlockOutcome::Released)
                    }
                    (_, outcome) => outcome,
                })
            });
            match result {
                // No connection to be had (refused, silent, pool busy) is an
                // answer: the lock expires by its lease, and waiting here for
                // the server would only stall the caller (a thread unwinding
                // through its guards, say).
                Err(e @ Error::Unavailable { .. }) => return Err(e),
                Err(e)
                    if e.is_transient()
                        && retries < config.retry_attempts
                        && first_sent.elapsed() < retry_window =>
                {
                    retries += 1;
                    log::debug!(
                        "redisson-lock: unlock of `{}` failed ({e}), retry {retries}",
                        self.name
                    );
                    std::thread::sleep(config.retry_delay);
                }
                other => return other,
            }
        }
    }

    fn lease(&self) -> Result<(Duration, u64)> {
        self.check()?;
        let lease = self
            .lease
            .unwrap_or(self.client.inner.config.watchdog_timeout);
        Ok((lease, lease_millis("lease", lease)?))
    }

    /// The checks every operation starts with: a usable name, and a client
    /// built in this process.
    fn check(&self) -> Result<()> {
        self.client.check_process()?;
        if self.name.is_empty() {
            return Err(Error::invalid("lock name must not be empty"));
        }
        Ok(())
    }

    fn owner_field(&self) -> String {
        owner::owner_field(self.client.id(), owner::current_thread_id())
    }

    fn lost(&self, reason: LostReason) -> Error {
        Error::Lost {
            name: self.name.to_string(),
            reason,
        }
    }

    fn not_held(&self) -> Error {
        Error::NotHeld {
            name: self.name.to_string(),
            client_id: self.client.id().to_owned(),
            thread_id: owner::current_thread_id(),
        }
    }
}

/// Which unlock [`Lock::unlock_raw`] sends.
#[derive(Clone, Copy)]
enum Unlock<'a> {
    /// Redisson's, with the caller's request id and its latch.
    Latched(&'a RequestId),
    /// The guards' own: `remaining` holds are kept (0: free the lock).
    Release { remaining: u32 },
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.name)
            .field("lease", &self.lease)
            .field("client", &self.client.id())
            .finish()
    }
}

impl LockGuard {
    /// Releases this hold and reports how that went.
    ///
    /// `Ok` when the hold was released (the lock is free if it was the last
    /// one). [`Error::Lost`] when the lock was already known to be lost (see
    /// [`is_lost`](Self::is_lost)); [`Error::NotHeld`] when Redis says this
    /// thread does not hold it, which also means it was lost. Either way, the
    /// hold is gone from the watchdog and nothing else's lock is touched.
    pub fn unlock(mut self) -> Result<()> {
        self.release()
    }

    /// `true` when the lock is known to be no longer ours: a renewal found
    /// our field gone, the lease ran out by the local monotonic clock before a
    /// renewal succeeded, or this client force-unlocked it. Once `true`, it
    /// stays `true`. For a lock taken with an explicit lease, this turns `true`
    /// when that lease has run out. No round trip.
    pub fn is_lost(&self) -> bool {
        self.hold.is_lost()
    }

    /// Why the lock is known to be lost; `None` while [`is_lost`](Self::is_lost)
    /// is `false`. No round trip.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.hold.lost_reason()
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    fn release(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.released, true) {
            return Ok(());
        }
        let lock = &self.lock;
        // Before anything else: a forked child must not touch the parent's
        // bookkeeping, whose mutexes may have been held at the fork.
        lock.client.check_process()?;
        let registry = &lock.client.inner.registry;
        let hold = &self.hold;
        // Unregister first so that a renewal racing with this unlock does not
        // report a lock we are giving up as lost.
        let remaining = Registry::count(hold).saturating_sub(1);
        let last = registry.released(hold, self.renew);
        if let Some(reason) = hold.lost_reason() {
            // Clean up what may be left (a renewal that landed late) once the
            // last guard of the lost hold goes, unless this thread has taken
            // the lock again since.
            if last && registry.live(&hold.name, &hold.field).is_none() {
                let _ = lock.unlock_raw(&hold.field, Unlock::Release { remaining: 0 });
            }
            return Err(lock.lost(reason));
        }
        // A partial unlock resets the TTL: a command the hold must count.
        let ticket = (!last)
            .then(|| lock.lease().ok())
            .flatten()
            .map(|(lease, _)| hold.begin_lease(lease));
        let remaining = if last { 0 } else { remaining.max(1) };
        let result = lock.unlock_raw(&hold.field, Unlock::Release { remaining });
        if let Some(ticket) = ticket {
            let outcome = match &result {
                Ok(Some(UnlockOutcome::StillHeld)) => LeaseOutcome::Set,
                Err(e) => LeaseOutcome::of_error(e),
                _ => LeaseOutcome::Untouched,
            };
            hold.end_lease(ticket, outcome);
        }
        match result {
            Ok(Some(UnlockOutcome::StillHeld)) => Ok(()),
            Ok(Some(UnlockOutcome::Released)) => {
                if !last {
                    // Redis had fewer holds than this thread counts: the
                    // other guards of this hold hold nothing any more.
                    registry.lose(hold, LostReason::Released);
                }
                // A thread of this client is waiting for this lock and is being
                // woken by the unlock message, one hop (the subscriber thread)
                // behind our reply. Give it the CPU before this thread can
                // come back for the lock, or on a busy CPU it nearly always
                // finds the lock taken again and waits for the next release.
                // With a free core this returns at once.
                let subscriber = &lock.client.inner.subscriber;
                if subscriber.has_waiters(&lock.channel, &lock.name) {
                    std::thread::yield_now();
                }
                Ok(())
            }
            Ok(None) => {
                registry.lose(hold, LostReason::KeyGone);
                Err(lock.not_held())
            }
            Err(e) if e.code() == Some("WRONGTYPE") => {
                registry.lose(hold, LostReason::Overwritten);
                Err(lock.lost(LostReason::Overwritten))
            }
            Err(e) => Err(e),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            log::warn!("redisson-lock: releasing `{}` failed: {e}", self.lock.name);
        }
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock.name)
            .field("owner", &self.hold.field)
            .field("lost", &self.hold.is_lost())
            .finish()
    }
}
