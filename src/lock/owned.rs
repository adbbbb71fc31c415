//! [`OwnedLockGuard`]: a hold that belongs to no thread (Redisson's
//! `lock(threadId)` overloads), for a job taken on one thread and finished
//! on another.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Lock;
use super::guard::{LockGuard, guard_common};
use super::signal::LostSignal;
use crate::engine::holds::Hold;
use crate::error::{LostReason, Result};
use crate::owner;
use crate::protocol::{Kind, Reentrant};

/// One hold on a [`Lock`] that belongs to no thread: `Send + 'static`,
/// released on drop (or by [`unlock`](Self::unlock)) from whichever thread
/// has it then.
///
/// Its owner field is `<client id>:<fresh id>`, the id drawn from the same
/// counter as thread numbers, so it is never a live thread's: Java sees an
/// ordinary holder (as after Redisson's `lock(threadId)`), the watchdog
/// renews it like any hold, and a second owned acquisition of the same lock
/// waits like any other owner (owned holds do not reenter).
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.lock("job:42").lock_owned()?;
/// std::thread::spawn(move || {
///     // ... finish the job here ...
///     guard.unlock() // released by this thread
/// })
/// .join()
/// .expect("worker")?;
/// # Ok(()) }
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
#[clippy::has_significant_drop]
pub struct OwnedLockGuard<K: Kind = Reentrant> {
    lock: Lock<K>,
    hold: Arc<Hold>,
    token: Option<u64>,
    renew: bool,
    released: bool,
}

guard_common!(OwnedLockGuard, "lock_owned");

impl<K: Kind> OwnedLockGuard<K> {
    /// The hash field this hold is written under: `<client id>:<id>` (a
    /// write lock adds `:write`). No round trip.
    pub fn owner_field(&self) -> &str {
        &self.hold.field
    }

    /// The token the acquisition got, for the lock types that hand out one.
    pub(crate) fn fencing_token(&self) -> Option<u64> {
        self.token
    }

    fn from_guard(guard: LockGuard<K>) -> Self {
        let (lock, hold, token, renew) = guard.into_parts();
        Self::from_parts(lock, hold, token, renew)
    }

    /// A guard over `hold`, to be released by it.
    pub(super) fn from_parts(
        lock: Lock<K>,
        hold: Arc<Hold>,
        token: Option<u64>,
        renew: bool,
    ) -> Self {
        OwnedLockGuard {
            lock,
            hold,
            token,
            renew,
            released: false,
        }
    }

    /// The guard's parts, its release now the caller's (see
    /// [`LockGuard::into_parts`]).
    pub(super) fn into_parts(mut self) -> (Lock<K>, Arc<Hold>, Option<u64>, bool) {
        self.released = true;
        (
            self.lock.clone(),
            Arc::clone(&self.hold),
            self.token,
            self.renew,
        )
    }
}

impl<K: Kind> Lock<K> {
    /// [`Lock::lock`] for an owner that is no thread: returns an
    /// [`OwnedLockGuard`], which may be sent to and released by any thread.
    /// Waits as long as it takes, as `lock` does (one round trip when the
    /// lock is free).
    pub fn lock_owned(&self) -> Result<OwnedLockGuard<K>> {
        crate::cancel::without_deadline(|| self.try_lock_owned_until_opt(None, None))
    }

    /// [`Lock::try_lock`] for an owner that is no thread: one attempt, one
    /// round trip, never waits.
    pub fn try_lock_owned(&self) -> Result<Option<OwnedLockGuard<K>>> {
        Ok(self
            .try_lock_as(self.fresh_owner_field())?
            .map(OwnedLockGuard::from_guard))
    }

    /// [`Lock::try_lock_for`] for an owner that is no thread: waits at most
    /// `wait`; `Ok(None)` when the time is up.
    pub fn try_lock_owned_for(&self, wait: Duration) -> Result<Option<OwnedLockGuard<K>>> {
        self.try_lock_owned_until_opt(Instant::now().checked_add(wait), Some(wait))
    }

    fn try_lock_owned_until_opt(
        &self,
        deadline: Option<Instant>,
        wait: Option<Duration>,
    ) -> Result<Option<OwnedLockGuard<K>>> {
        let field = self.fresh_owner_field();
        Ok(self
            .acquire_as(deadline, wait, field)?
            .map(OwnedLockGuard::from_guard))
    }

    fn fresh_owner_field(&self) -> String {
        self.kind
            .owner_field(owner::owner_field(&self.engine.id, owner::fresh_owner_id()))
    }
}
