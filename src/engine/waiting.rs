//! The one waiting loop of the synchronizers (semaphores, latches): try,
//! subscribe, then try again after every message, never sleeping longer
//! than a hint, a safety re-poll or the caller's deadline. A message only
//! means "try again now": its value is never counted (a multi-permit waiter
//! re-checks the counter after every message, docs/synchronizers.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::Engine;
use crate::cancel::Stop;
use crate::error::Result;

/// The longest a synchronizer waiter sleeps without a message before it
/// tries again: the safety net Java's unbounded `acquire()`/`await()` lack.
pub const SAFETY_REPOLL: Duration = Duration::from_secs(3);

/// Numbers each call of [`Engine::wait_on`], so that each has its own entry
/// on the channel.
static WAITS: AtomicU64 = AtomicU64::new(0);

/// What one attempt found.
#[derive(Debug)]
pub enum Attempted<T> {
    /// Done: stop waiting with this.
    Done(T),
    /// Not yet; try again after a message, or after `hint` at the latest
    /// (a permit-expirable semaphore's nearest expiry).
    Retry { hint: Option<Duration> },
}

impl Engine {
    /// Calls `attempt` until it is [`Attempted::Done`] or `deadline`
    /// passes (`Ok(None)`; `None`: no deadline). The first attempt is made
    /// before subscribing (free: one round trip); then the thread subscribes
    /// to `channel` (through the topology: sharded or classic as the locks;
    /// one entry per call, so that every message wakes every waiting thread),
    /// tries again, and waits for a message before each further attempt, at
    /// most the attempt's hint, [`SAFETY_REPOLL`] and the deadline. An error
    /// of an attempt or of the subscription ends the wait; so does `stop`
    /// (its error: before the first attempt, or parked, woken by its
    /// tokens). A value got by an attempt that raced `stop` is returned:
    /// the caller, which knows how, gives it back.
    pub fn wait_on<T>(
        &self,
        channel: &str,
        deadline: Option<Instant>,
        stop: Stop<'_>,
        mut attempt: impl FnMut() -> Result<Attempted<T>>,
    ) -> Result<Option<T>> {
        let _active = self.enter()?;
        stop.check()?;
        if let Attempted::Done(value) = attempt()? {
            return Ok(Some(value));
        }
        let left = |now: Instant| deadline.map(|deadline| deadline.saturating_duration_since(now));
        if left(Instant::now()).is_some_and(|left| left.is_zero()) {
            return Ok(None);
        }
        // Its own entry on the channel: every entry gets a wake-up from
        // every message (an unlock-style `0` gives one permit per entry, see
        // `pubsub::entries`), so each waiting thread retries after each
        // message; with one entry shared by the threads, a latch's `0` would
        // wake one of them and leave the others to the safety re-poll. A
        // message that comes between two attempts stays as the entry's
        // permit, so it is not missed either.
        let seq = WAITS.fetch_add(1, Ordering::Relaxed);
        let entry = crate::names::concat(&[channel, "#", &seq.to_string()]);
        let limit = Instant::now() + self.config.subscription_timeout;
        let limit = deadline.map_or(limit, |deadline| limit.min(deadline));
        let mut subscription = self.topology.subscribe(channel, &entry, limit)?;
        let mut woken_by_stop = stop.on_stop(Arc::new(subscription.waker()));
        loop {
            stop.check()?;
            if self.topology.is_stale(&subscription, channel) {
                drop(woken_by_stop);
                drop(subscription); // leaves before joining again
                let limit = Instant::now() + self.config.subscription_timeout;
                let limit = deadline.map_or(limit, |deadline| limit.min(deadline));
                subscription = self.topology.subscribe(channel, &entry, limit)?;
                woken_by_stop = stop.on_stop(Arc::new(subscription.waker()));
                stop.check()?;
            }
            let hint = match attempt()? {
                Attempted::Done(value) => return Ok(Some(value)),
                Attempted::Retry { hint } => hint,
            };
            let mut wait = hint.unwrap_or(SAFETY_REPOLL).min(SAFETY_REPOLL);
            if let Some(left) = left(Instant::now()) {
                if left.is_zero() {
                    return Ok(None);
                }
                wait = wait.min(left);
            }
            subscription.wait(wait.max(Duration::from_millis(1)), &|| stop.is_set())?;
        }
    }
}
