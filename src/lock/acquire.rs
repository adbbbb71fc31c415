//! The one waiting loop every lock type shares (`impl Lock`, continued from
//! `mod.rs`): the first attempt, then a wait on the type's channel (or by
//! its backoff), never longer than the holder's TTL, and another attempt
//! after every wake-up, until the caller's deadline.

use std::time::{Duration, Instant};

use super::Lock;
use super::guard::LockGuard;
use crate::cancel::Stop;
use crate::engine::observe::{AcquireOutcome, Acquiring, Wakeup};
use crate::engine::replicas::Synced;
use crate::engine::waiting::{Parker, within_deadline};
use crate::error::Result;
use crate::protocol::{Kind, Queue, Spinning};

/// What one acquire attempt got: the guard, or the holder's TTL.
type Attempt<K> = std::result::Result<LockGuard<K>, Option<Duration>>;

/// How long a queued waiter that found the lock free but not its turn waits
/// before it asks again (Redis answers a TTL of 0: the fair lock's queue
/// head has not taken it yet, or is a dead waiter not yet past its
/// deadline, 5 min by default): 50 ms, doubling up to 1 s while that goes
/// on; a message (its turn) starts over. Only the head is woken by a
/// release, and this waiter is not it; a dead head leaves the queue at the
/// first script after its deadline, which these looks provide within a
/// second. Redisson asks again at once: 10,000 waiters behind a dead head
/// would ask some million times a second.
struct NotYourTurn(Duration);

impl NotYourTurn {
    const FIRST: Duration = Duration::from_millis(50);
    const MAX: Duration = Duration::from_secs(1);

    fn next(&mut self) -> Duration {
        self.0 = (self.0 * 2).clamp(Self::FIRST, Self::MAX);
        self.0
    }
}

impl<K: Kind> Lock<K> {
    /// The first attempt, then wait (on the type's channel, or by its
    /// backoff), then attempt again after every wake-up or TTL slice until
    /// `deadline`. A timed wait that gives up runs the type's give-up hook.
    /// `wait` is the caller's budget as given (Redisson's `waitTime`): a
    /// fair lock queues the thread with it in whole ms, or with its own
    /// wait timeout when that is 0, as Redisson does.
    pub(super) fn acquire(
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
        // A subscription is waited for at most the holder's TTL.
        let within = |ttl: Option<Duration>| {
            let ttl = match ttl {
                Some(ttl) if ttl.is_zero() => NotYourTurn::FIRST,
                ttl => ttl.unwrap_or(fallback),
            };
            config.subscription_timeout.min(ttl)
        };
        let wake = self.kind.wake(&self.name, field);
        let (mut parker, mut backoff) = match wake.on() {
            Some(on) => {
                let parker = Parker::subscribe(&self.engine, stop, on, within(ttl), deadline)?;
                (parker, None)
            }
            None => (
                Parker::sleeper(&self.engine, stop),
                wake.backoff().map(Spinning::new),
            ),
        };
        // Its names live on in the subscription (a fair lock's waiter has a
        // channel of its own: ~100 B a waiter, kept once).
        drop(wake);
        // One connection lost while waiting (a server restarting under the
        // waiters: the attempt right after the subscriber lost its connection
        // finds the server down) is retried once, after the retry delay; a
        // refused connection or a timeout is reported at once.
        let mut dropped = false;
        let mut not_your_turn = NotYourTurn(Duration::ZERO);
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
                    // Never zero: that would read as "not your turn".
                    Some(config.retry_delay.max(Duration::from_millis(1)))
                }
                Err(e) => return Err(e),
            };
            // In a cluster, a subscription whose slot moved or whose master
            // failed over woke its waiter to subscribe where the slot lives
            // now, and to try again once subscribed: a release meanwhile
            // was announced where nobody listened.
            if parker.refresh(within(ttl))? {
                continue;
            }
            // A key without a TTL: wait for a message, but poll now and then.
            let mut wait = match ttl {
                Some(ttl) if ttl.is_zero() => not_your_turn.next(),
                ttl => {
                    // Held by someone again: the next "not your turn" is a
                    // new one, looked at soon.
                    not_your_turn = NotYourTurn(Duration::ZERO);
                    ttl.unwrap_or(fallback).max(Duration::from_millis(1))
                }
            };
            if let Some(backoff) = &mut backoff {
                wait = wait.min(backoff.next());
            }
            let Some(wait) = within_deadline(wait, deadline) else {
                return Ok(None);
            };
            // tests/failpoints.rs: the subscription lost (and a release
            // announced) after the failed attempt, before the park.
            crate::failpoint::failpoint!("waiter-before-park");
            let woken = parker.park(wait)?;
            if matches!(woken, Wakeup::Message) {
                not_your_turn = NotYourTurn(Duration::ZERO);
            }
            observed.woken(woken);
        }
    }

    /// One acquire attempt: the guard, or the holder's TTL. With replica
    /// sync checked, an acquisition no replica acknowledged is undone and
    /// sent again (Redisson's `handleNoSync`), at most the unlock retries
    /// and only while `deadline` has not passed; then
    /// [`Error::NotReplicated`].
    pub(super) fn attempt(
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
}
