//! Redisson's non-reentrant fair lock (`getNonReentrantFairLock`, docs/wire-format.md,
//! "Non-reentrant lock", since 4.4.0): the fair lock's keys, queue and scripts, with a reentry
//! refused. This crate refuses it before sending anything
//! ([`Error::NotReentrant`](crate::Error::NotReentrant)) when the thread's own
//! registry has a live hold; the scripts carry Redisson's reentry error text
//! as well. A field found with no hold counted by the thread was left by an
//! acquire whose reply was lost: it is taken afresh, not refused.

use std::time::Duration;

use redis::ConnectionLike;

use super::fair::{FairCore, fair_protocol};
use super::sealed::Protocol;
use super::{AcquireRequest, Acquired, Unlocking, Wake};
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
