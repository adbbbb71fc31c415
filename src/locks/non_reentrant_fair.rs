//! Redisson's non-reentrant fair lock (`getNonReentrantFairLock`, PROTOCOL
//! §7, since 4.4.0): the fair lock's keys, queue and scripts, with a reentry
//! refused. This crate refuses it before sending anything
//! ([`Error::NotReentrant`](crate::Error::NotReentrant)) when the thread's own
//! registry has a live hold; the scripts carry Redisson's reentry error text
//! as well. A field found with no hold counted by the thread was left by an
//! acquire whose reply was lost: it is taken afresh, not refused.

use std::time::Duration;

use redis::ConnectionLike;

use super::fair::{FairCore, fair_protocol};
use super::protocol::Protocol;
use super::{AcquireRequest, Acquired, ReleaseRequest, UnlockOutcome, Wake};
use crate::error::Result;
use crate::names;

/// The non-reentrant fair lock, Redisson's `NonReentrantFairLock`: see
/// [`crate::NonReentrantFairLock`].
#[derive(Debug)]
pub struct NonReentrantFair {
    core: FairCore,
}

impl NonReentrantFair {
    pub(crate) fn with_wait_timeout(name: &str, wait_timeout: Duration) -> Self {
        NonReentrantFair {
            core: FairCore::new(name, wait_timeout, names::NON_REENTRANT_REACQUIRE),
        }
    }
}

fair_protocol!(NonReentrantFair, "RedissonNonReentrantFairLock", false);

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
pub type NonReentrantFairLock = crate::Lock<NonReentrantFair>;
