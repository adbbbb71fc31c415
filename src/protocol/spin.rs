//! Redisson's `SpinLock` (`getSpinLock`, docs/wire-format.md, "Spin lock"): RLock's hash and
//! owner fields (so it excludes an RLock of the same name) and RLock's
//! acquire, but no pub/sub at all: releases publish nothing and waiters
//! poll with an exponential backoff.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::ConnectionLike;

use super::reentrant;
use super::sealed::Protocol;
use super::{AcquireRequest, Acquired, Backoff, UnlockScripts, Unlocking, Wake};
use crate::config::Config;
use crate::error::Result;
use crate::names::{SPIN_INITIAL_DELAY_MS, SPIN_MAX_DELAY_MS};

static UNLOCKS: UnlockScripts = unlock_scripts!("spin");

/// The spin lock, Redisson's `SpinLock`: see [`crate::SpinLock`].
#[derive(Debug)]
pub struct Spin {
    backoff: Backoff,
}

impl Spin {
    /// A spin lock's view whose waiters sleep from `initial` (at least
    /// 1 ms) up to `max` (at least `initial`).
    pub(crate) fn with_backoff(initial: Duration, max: Duration) -> Self {
        let initial = initial.max(Duration::from_millis(1));
        Spin {
            backoff: Backoff {
                initial,
                max: max.max(initial),
            },
        }
    }

    /// The backoff its waiters sleep by.
    pub(crate) fn backoff(&self) -> Backoff {
        self.backoff
    }
}

impl Protocol for Spin {
    const REDISSON: &'static str = "RedissonSpinLock";

    fn new(_: &str, _: &Config) -> Self {
        Spin::with_backoff(
            Duration::from_millis(SPIN_INITIAL_DELAY_MS),
            Duration::from_millis(SPIN_MAX_DELAY_MS),
        )
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

    fn unlocking<'a>(&'a self, _name: &'a str) -> Unlocking<'a> {
        Unlocking::new(&UNLOCKS)
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
