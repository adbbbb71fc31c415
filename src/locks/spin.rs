//! Redisson's `SpinLock` (`getSpinLock`, PROTOCOL §6): RLock's hash and
//! owner fields (so it excludes an RLock of the same name) and RLock's
//! acquire, but no pub/sub at all: releases publish nothing and waiters
//! poll with an exponential backoff.

use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::ConnectionLike;

use crate::lua::Lua;

use super::protocol::Protocol;
use super::replies::unlock_outcome;
use super::{AcquireRequest, Acquired, Backoff, ReleaseRequest, UnlockOutcome, Wake, reentrant};
use crate::config::Config;
use crate::error::Result;
use crate::names::{SPIN_INITIAL_DELAY_MS, SPIN_MAX_DELAY_MS};

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

    fn new(_: &str, _: &Config) -> Self {
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

    fn force_unlock_owned(
        &self,
        con: &mut dyn ConnectionLike,
        name: &str,
        owner: &str,
        _publish: &str,
    ) -> Result<bool> {
        // No channel: the lock's own key stands in for it, unused.
        super::reentrant::force_unlock_owned(name, con, name, owner, "")
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
