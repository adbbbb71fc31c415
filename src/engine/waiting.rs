//! Parking a waiting thread ([`Parker`]: subscribe with a limit, subscribe
//! again when the subscription went stale, park until a message, a stop or
//! a deadline), under every waiting loop: the locks' (`crate::lock`), a
//! lock watch's and the synchronizers' ([`Engine::wait_on`], here).
//!
//! The synchronizers' loop (semaphores, latches): try, subscribe, then try
//! again after every message, never sleeping longer than a hint, a safety
//! re-poll or the caller's deadline. A message only means "try again now":
//! its value is never counted (a multi-permit waiter re-checks the counter
//! after every message, docs/synchronizers.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::Engine;
use super::observe::Wakeup;
use crate::cancel::{Registration, Stop};
use crate::error::Result;
use crate::pubsub::Subscription;
use crate::topology::Topology;

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
        if within_deadline(Duration::MAX, deadline).is_none() {
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
        let within = self.config.subscription_timeout;
        let mut parker = Parker::subscribe(self, stop, (channel, &entry), within, deadline)?;
        loop {
            stop.check()?;
            parker.refresh(within)?;
            let hint = match attempt()? {
                Attempted::Done(value) => return Ok(Some(value)),
                Attempted::Retry { hint } => hint,
            };
            let wait = hint.unwrap_or(SAFETY_REPOLL).min(SAFETY_REPOLL);
            let Some(wait) = within_deadline(wait, deadline) else {
                return Ok(None);
            };
            parker.park(wait.max(Duration::from_millis(1)))?;
        }
    }
}

/// `wait`, or less if `deadline` comes first; `None` once it has passed.
pub(crate) fn within_deadline(wait: Duration, deadline: Option<Instant>) -> Option<Duration> {
    match deadline {
        None => Some(wait),
        Some(deadline) => {
            let left = deadline.saturating_duration_since(Instant::now());
            (!left.is_zero()).then(|| wait.min(left))
        }
    }
}

/// What a waiting thread parks on: its subscription to an entry of a
/// channel, registered with its stop's tokens so that a cancel or a
/// shutdown wakes it like a message; or, for a lock kind no message wakes
/// (a spin lock), a plain sleep.
pub(crate) struct Parker<'a> {
    topology: &'a Topology,
    stop: Stop<'a>,
    /// Subscriptions are taken until this at the latest (the caller's).
    deadline: Option<Instant>,
    /// `None`: a sleeper.
    on: Option<Subscribed>,
}

/// A parker's subscription. The fields drop in order: the wake-up is
/// unregistered before the subscription leaves. Its channel's and entry's
/// names are the subscription's own (shared with the subscriber's lot): a
/// waiter keeps no copy of them.
struct Subscribed {
    _woken_by_stop: Vec<Registration>,
    subscription: Subscription,
}

impl<'a> Parker<'a> {
    /// Subscribes the calling thread to `entry` of `channel` (through the
    /// topology: sharded or classic as the locks), waiting for the
    /// subscription `within` at most and never past `deadline` (see
    /// [`Topology::subscribe`]), and registers it with `stop`'s tokens.
    /// `stop`'s error if it is set by then.
    pub fn subscribe(
        engine: &'a Engine,
        stop: Stop<'a>,
        (channel, entry): (&str, &str),
        within: Duration,
        deadline: Option<Instant>,
    ) -> Result<Parker<'a>> {
        let mut parker = Parker::sleeper(engine, stop);
        parker.deadline = deadline;
        parker.join(channel, entry, within)?;
        Ok(parker)
    }

    /// A parker that sleeps: for a kind that no message wakes.
    pub fn sleeper(engine: &'a Engine, stop: Stop<'a>) -> Parker<'a> {
        Parker {
            topology: &engine.topology,
            stop,
            deadline: None,
            on: None,
        }
    }

    fn join(&mut self, channel: &str, entry: &str, within: Duration) -> Result<()> {
        let limit = Instant::now() + within;
        let limit = self.deadline.map_or(limit, |deadline| limit.min(deadline));
        let subscription = self.topology.subscribe(channel, entry, limit)?;
        self.on = Some(Subscribed {
            _woken_by_stop: self.stop.on_stop(Arc::new(subscription.waker())),
            subscription,
        });
        // A stop set before the registration woke nobody.
        self.stop.check()
    }

    /// Whether the subscription went stale: it moved away, or in a cluster
    /// the channel's slot has another master now (see
    /// [`Topology::is_stale`]). A release meanwhile was announced where
    /// nobody listened. Never for a sleeper. Never waits for I/O.
    pub fn is_stale(&self) -> bool {
        self.on.as_ref().is_some_and(|on| {
            let subscription = &on.subscription;
            self.topology.is_stale(subscription, subscription.channel())
        })
    }

    /// When the subscription went stale ([`Parker::is_stale`]), leaves it
    /// and subscribes again where the channel lives now (as
    /// [`Parker::subscribe`] does, `within`); whether it did, so that the
    /// caller tries again once subscribed.
    pub fn refresh(&mut self, within: Duration) -> Result<bool> {
        if !self.is_stale() {
            return Ok(false);
        }
        let Some(on) = self.on.take() else {
            return Ok(false);
        };
        let (channel, entry) = on.subscription.names();
        // Left before joining again.
        drop(on);
        self.join(&channel, &entry, within)?;
        Ok(true)
    }

    /// Parks the thread for `wait` at most: until a message on the entry
    /// ([`Wakeup::Message`], or the subscription moved), `wait` passes
    /// ([`Wakeup::TtlElapsed`]), or the stop is set (either, see
    /// [`Subscription::wait`]); a sleeper sleeps `wait` ([`Wakeup::Poll`]),
    /// or returns the stop's error.
    pub fn park(&self, wait: Duration) -> Result<Wakeup> {
        match &self.on {
            Some(on) => {
                let woken = on.subscription.wait(wait, &|| self.stop.is_set())?;
                Ok(if woken {
                    Wakeup::Message
                } else {
                    Wakeup::TtlElapsed
                })
            }
            None => {
                self.stop.sleep(wait)?;
                Ok(Wakeup::Poll)
            }
        }
    }
}
