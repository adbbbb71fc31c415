//! [`Semaphore`], Redisson's `RSemaphore`, and [`SemaphorePermits`], the
//! permits one acquisition took.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::ConnectionLike;

use crate::cancel::CancelToken;
use crate::engine::Engine;
use crate::engine::replicas::Synced;
use crate::engine::waiting::Attempted;
use crate::error::{Error, Result};
use crate::names;
use crate::protocol::semaphore::{self as protocol, MAX_PERMITS, SemaphoreKeys};

mod permits;
pub use permits::SemaphorePermits;

/// A handle on the distributed counting semaphore called `name`: Redisson's
/// `RSemaphore` (`redisson.getSemaphore(name)`), byte for byte.
///
/// The state is Redisson's: the key `name` holds the available permits as
/// decimal text (a missing key is 0 permits, so a semaphore must be given
/// permits first, by [`Semaphore::try_set_permits`] or
/// [`Semaphore::add_permits`]), and every write that can add permits
/// publishes the new count on `redisson_sc:{name}` (with `SPUBLISH` in a
/// Redis 7+ cluster), which is what wakes Java and Rust waiters alike. Java
/// and Rust clients take and return the same permits.
///
/// Permits are not owned: any client may release any number of them,
/// including permits it never took (Redisson's rule). There is no lease and
/// no watchdog: permits taken by a process that dies are gone until
/// someone releases or adds them.
///
/// The semaphore is not fair: [`Semaphore::acquire`] takes all `n` permits
/// at once or none, so a large `n` can wait behind a stream of small
/// acquirers, as in Redisson.
///
/// Counts are Java `int`s: a count or argument beyond `i32::MAX` is
/// refused with [`Error::InvalidArgument`], and a write that would take the
/// stored count beyond it fails with a Redis error.
///
/// Writes that are not idempotent (every one but [`Semaphore::available_permits`]
/// and [`Semaphore::delete`]) are never sent twice: when their reply is
/// lost (a response timeout, a dropped connection) they fail with
/// [`Error::OutcomeUnknown`]. With replica sync on (the default in
/// Sentinel and Cluster setups, see
/// [`ClientBuilder::check_lock_synced_replicas`](crate::ClientBuilder::check_lock_synced_replicas)),
/// each write is followed by a `WAIT` in the same round trip. An acquire
/// no replica acknowledged is given back (a release, which publishes) and
/// tried again, as Redisson's; any other unacknowledged write is
/// [`Error::NotReplicated`] with the master's change kept and not sent
/// again (Redisson resends `trySetPermits`, `addPermits` and
/// `drainPermits`, which can apply them twice).
///
/// `Clone`, `Send` and `Sync`; a clone is the same handle. Creating one does
/// not talk to Redis.
#[derive(Clone)]
pub struct Semaphore {
    engine: Arc<Engine>,
    name: Arc<str>,
    channel: Arc<str>,
    /// Watched by the waits ([`Semaphore::with_cancel`]).
    cancel: Option<CancelToken>,
}

impl Semaphore {
    pub(crate) fn new(engine: Arc<Engine>, name: String) -> Semaphore {
        let channel = names::semaphore_channel(&name).into();
        Semaphore {
            engine,
            name: name.into(),
            channel,
            cancel: None,
        }
    }

    /// The same semaphore, whose waiting acquisitions ([`acquire`](Self::acquire), [`try_acquire_for`](Self::try_acquire_for)) watch `token`: once it is
    /// cancelled they return [`Error::Cancelled`](crate::Error::Cancelled)
    /// promptly holding nothing (permits whose acquisition raced the cancel are released), and later ones at once, without a round trip. The
    /// other operations ignore it. No I/O.
    #[must_use = "this returns a new handle; the original is unchanged"]
    pub fn with_cancel(&self, token: &CancelToken) -> Semaphore {
        Semaphore {
            cancel: Some(token.clone()),
            ..self.clone()
        }
    }

    /// The semaphore's name: its Redis key.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Gives the semaphore `permits` permits if it has none set yet
    /// (Redisson's `trySetPermits`): `true` when the key did not exist and
    /// now holds `permits` (which is then published, waking waiters),
    /// `false` when it already existed, whatever its value (`"0"`
    /// included). `trySetPermits(0)` therefore creates a key that makes
    /// later calls fail. One round trip; never sent twice
    /// ([`Error::OutcomeUnknown`] on a lost reply).
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.try_set(permits, None)
    }

    /// [`Semaphore::try_set_permits`] with a time to live: the key is set
    /// with `PX ttl` (Redisson's `trySetPermits(permits, Duration)`, 3.29.0+;
    /// older Java clients read and use such a key all the same). Note that
    /// [`Semaphore::add_permits`] and [`Semaphore::drain_permits`] rewrite
    /// the key and drop the TTL, while [`Semaphore::release`] keeps it (and
    /// recreates the key without one after it expired: see
    /// [`Semaphore::release_if_exists`]). A TTL under 1 ms is
    /// [`Error::InvalidArgument`]. One round trip; never sent twice.
    pub fn try_set_permits_with_ttl(&self, permits: u32, ttl: Duration) -> Result<bool> {
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if ttl_ms == 0 {
            return Err(Error::invalid("a semaphore's TTL must be at least 1 ms"));
        }
        self.try_set(permits, Some(ttl_ms))
    }

    fn try_set(&self, permits: u32, ttl_ms: Option<u64>) -> Result<bool> {
        let permits = checked(permits)?;
        self.check()?;
        self.write("try_set_permits", |con| {
            protocol::try_set_permits(con, &self.keys(), permits, ttl_ms)
        })
    }

    /// The permits available now (Redisson's `availablePermits`: a `GET`;
    /// 0 for a missing key; negative after releases into a negative count
    /// or [`Semaphore::add_permits`] with a negative delta). One round
    /// trip, sent again after a dropped connection (it only reads).
    pub fn available_permits(&self) -> Result<i64> {
        self.check()?;
        self.engine
            .with_connection(&self.name, "available_permits", |con, _| {
                protocol::available(con, &self.name)
            })
    }

    /// Adds `delta` permits, or removes them when negative (Redisson's
    /// `addPermits`): a missing key counts as 0, the result may be 0 or
    /// negative, is written with a plain `SET` (dropping any TTL) and is
    /// published whatever its sign (a Java waiter's listener throws on a
    /// negative value and wakes no one; Rust waiters re-check). A delta
    /// outside Java's `int`, or a result that would leave it, is refused.
    /// One round trip; never sent twice.
    pub fn add_permits(&self, delta: i64) -> Result<()> {
        if !(i64::from(i32::MIN)..=MAX_PERMITS).contains(&delta) {
            return Err(Error::invalid(format!(
                "a semaphore's permit delta must fit a Java int, got {delta}"
            )));
        }
        self.check()?;
        self.write("add_permits", |con| {
            protocol::add_permits(con, &self.keys(), delta)
        })
    }

    /// Takes every available permit (Redisson's `drainPermits`): sets the
    /// count to 0 and returns what it was (0 for a missing key, which stays
    /// missing; possibly negative). Publishes nothing; drops any TTL. The
    /// permits drained are not a [`SemaphorePermits`]: return them with
    /// [`Semaphore::release`]. One round trip; never sent twice.
    pub fn drain_permits(&self) -> Result<i64> {
        self.check()?;
        self.write("drain_permits", |con| protocol::drain(con, &self.name))
    }

    /// Waits as long as it takes for `n` permits and takes them all at once
    /// (Redisson's `acquire(n)`): the permits, released when dropped.
    ///
    /// One round trip when they are available. Otherwise the thread
    /// subscribes to the semaphore's channel, tries again, and tries again
    /// after every message on it (a message's value is a hint only: a
    /// waiter for several permits re-checks after each), and at least every
    /// 3 s without one (the safety net Java's `acquire()` lacks).
    /// `n == 0` succeeds without a round trip; `n > i32::MAX` is
    /// [`Error::InvalidArgument`]. A lost reply to an attempt is
    /// [`Error::OutcomeUnknown`] (the permits may have been taken: read
    /// [`Semaphore::available_permits`] and release them if they were).
    /// With replica sync checked, an acquisition no replica acknowledged is
    /// undone by a release (which publishes) and tried again up to the
    /// client's retry attempts, then [`Error::NotReplicated`].
    pub fn acquire(&self, n: u32) -> Result<SemaphorePermits> {
        crate::cancel::without_deadline(|| self.wait_for(n, None))
    }

    /// Takes `n` permits if they are available now, without waiting
    /// (Redisson's `tryAcquire(n)`): `None` when fewer are available. One
    /// round trip (none for `n == 0`). Lost replies as
    /// [`Semaphore::acquire`]; with replica sync checked, an acquisition no
    /// replica acknowledged is given back and is [`Error::NotReplicated`]
    /// at once, without another attempt (as a lock's `try_lock`; Redisson
    /// retries it).
    pub fn try_acquire(&self, n: u32) -> Result<Option<SemaphorePermits>> {
        let n = checked(n)?;
        self.check()?;
        self.engine.check_open()?;
        if n == 0 {
            return Ok(Some(self.permits(0)));
        }
        let once = Some(Instant::now());
        Ok(self.attempt(n, once)?.then(|| self.permits(n)))
    }

    /// [`Semaphore::acquire`] that gives up after `wait` (Redisson's
    /// `tryAcquire(n, wait, unit)`): `None` when `n` permits could not be
    /// taken within it. A `wait` of zero makes exactly one attempt. With
    /// replica sync checked, an acquisition no replica acknowledged is
    /// given back and tried again while the wait lasts (at most the
    /// client's retry attempts), then [`Error::NotReplicated`].
    pub fn try_acquire_for(&self, n: u32, wait: Duration) -> Result<Option<SemaphorePermits>> {
        let deadline = Instant::now().checked_add(wait);
        self.wait_for(n, deadline)
    }

    fn wait_for(&self, n: u32, deadline: Option<Instant>) -> Result<Option<SemaphorePermits>> {
        let n = checked(n)?;
        self.check()?;
        if n == 0 {
            return Ok(Some(self.permits(0)));
        }
        let stop = self.engine.stop(self.cancel.as_ref());
        let taken = self.engine.wait_on(&self.channel, deadline, stop, || {
            Ok(if self.attempt(n, deadline)? {
                Attempted::Done(())
            } else {
                Attempted::Retry { hint: None }
            })
        })?;
        let permits = taken.map(|()| self.permits(n));
        // Taken as the wait was stopped: released on the way out.
        stop.check()?;
        Ok(permits)
    }

    /// Returns `n` permits (Redisson's `release(n)`), whoever took them:
    /// adds `n` to the count, creating the key with `n` if it is missing
    /// (without a TTL), and publishes the new total, which wakes up to that
    /// many waiters per Java client and every Rust waiter of the semaphore.
    /// `n == 0` returns at once without a round trip; `n > i32::MAX` is
    /// [`Error::InvalidArgument`]. One round trip; never sent twice: a
    /// lost reply is [`Error::OutcomeUnknown`]. With replica sync checked,
    /// a release no replica acknowledged is [`Error::NotReplicated`] (the
    /// master has the permits; it is not sent again), otherwise it is
    /// logged.
    pub fn release(&self, n: u32) -> Result<()> {
        let n = checked(n)?;
        if n == 0 {
            return Ok(());
        }
        self.check()?;
        self.write("release", |con| protocol::release(con, &self.keys(), n))
    }

    /// [`Semaphore::release`] only if the semaphore's key exists (Redisson's
    /// `releaseIfExists`, 4.0.0+; only an `EXISTS` guard, so older Java
    /// clients see the same state): `false`, with nothing written or
    /// published, when it does not (e.g. its TTL ran out), where a plain
    /// release would recreate it. `n == 0` is `false` without a round trip.
    pub fn release_if_exists(&self, n: u32) -> Result<bool> {
        let n = checked(n)?;
        if n == 0 {
            return Ok(false);
        }
        self.check()?;
        self.write("release", |con| {
            protocol::release_if_exists(con, &self.keys(), n)
        })
    }

    /// Deletes the semaphore's key (Redisson's `delete`): `true` if it
    /// existed. Publishes nothing, like Redisson, so waiters stay waiting
    /// (Rust waiters re-check every 3 s and keep finding 0 permits). One
    /// round trip; sent again after a dropped connection, which may then
    /// report `false` for a key it did delete.
    pub fn delete(&self) -> Result<bool> {
        self.check()?;
        self.engine.with_connection(&self.name, "delete", |con, _| {
            protocol::delete(con, &self.name)
        })
    }

    fn keys(&self) -> SemaphoreKeys<'_> {
        SemaphoreKeys {
            name: &self.name,
            channel: &self.channel,
            publish: self.engine.publish,
        }
    }

    fn permits(&self, count: u32) -> SemaphorePermits {
        SemaphorePermits::new(self.clone(), count)
    }

    fn check(&self) -> Result<()> {
        self.engine.check_process()?;
        if self.name.is_empty() {
            return Err(Error::invalid("semaphore name must not be empty"));
        }
        Ok(())
    }

    /// One acquire attempt: `true` when the permits were taken. With
    /// replica sync checked, an acquisition no replica acknowledged is
    /// undone by a release of `n` (Redisson's `handleNoSync`) and sent
    /// again, at most the client's retry attempts and while `deadline` has
    /// not passed; then [`Error::NotReplicated`].
    fn attempt(&self, n: u32, deadline: Option<Instant>) -> Result<bool> {
        let config = &self.engine.config;
        let mut retries = 0;
        loop {
            let (taken, synced) = self.send_once("acquire", true, |con| {
                protocol::try_acquire(con, &self.name, n)
            })?;
            if !taken {
                return Ok(false);
            }
            let Some(error) = synced.error("acquire", &self.name) else {
                return Ok(true);
            };
            if !self.engine.checks_replicas() {
                log::warn!("redisson-lock: {error}");
                return Ok(true);
            }
            // One release (which publishes), whose own acknowledgement is
            // not waited for: the replicas that did not see the permits
            // taken need not see them returned.
            let undone = self.send_once("release", false, |con| {
                protocol::release(con, &self.keys(), n)
            });
            match undone {
                Ok(_) => {}
                Err(Error::OutcomeUnknown { cause, .. }) => {
                    return Err(Error::OutcomeUnknown {
                        operation: "acquire",
                        name: self.name.to_string(),
                        cause: format!("undoing an acquire no replica acknowledged: {cause}"),
                    });
                }
                Err(e) => {
                    log::warn!(
                        "redisson-lock: undoing an unreplicated acquire of {n} permit(s) of \
                         semaphore `{}` failed ({e}): the permits stay taken",
                        self.name
                    );
                    return Ok(true);
                }
            }
            let past = |at: Instant| deadline.is_some_and(|deadline| at >= deadline);
            if retries >= config.retry_attempts || past(Instant::now() + config.retry_delay) {
                return Err(error);
            }
            retries += 1;
            std::thread::sleep(config.retry_delay);
        }
    }

    /// A write sent once: its value, or with replica sync checked and no
    /// replica acknowledging, [`Error::NotReplicated`] (logged when not
    /// checked).
    fn write<T>(
        &self,
        operation: &'static str,
        command: impl FnMut(&mut dyn ConnectionLike) -> Result<T>,
    ) -> Result<T> {
        let (value, synced) = self.send_once(operation, true, command)?;
        if let Some(error) = synced.error(operation, &self.name) {
            if self.engine.checks_replicas() {
                return Err(error);
            }
            log::warn!("redisson-lock: {error}");
        }
        Ok(value)
    }

    /// Sends `command` (followed by a `WAIT` when `synced` and replica sync
    /// is on) and never again: a lost reply (the pool's resend after a
    /// dropped connection, a response timeout, an I/O error) is
    /// [`Error::OutcomeUnknown`].
    fn send_once<T>(
        &self,
        operation: &'static str,
        synced: bool,
        mut command: impl FnMut(&mut dyn ConnectionLike) -> Result<T>,
    ) -> Result<(T, Synced)> {
        let mut once = |con: &mut dyn ConnectionLike, resend: bool| {
            if resend {
                return Err(self.unknown(
                    operation,
                    "the connection dropped after the request was sent".to_owned(),
                ));
            }
            command(con)
        };
        let result = if synced {
            self.engine
                .with_synced_connection(&self.name, operation, once)
        } else {
            self.engine
                .with_connection(&self.name, operation, |con, resend| once(con, resend))
                .map(|value| (value, Synced::Yes))
        };
        result.map_err(|e| match e {
            Error::Timeout { .. } => self.unknown(operation, e.to_string()),
            Error::Redis(ref redis)
                if redis.is_io_error() || redis.is_timeout() || redis.is_connection_dropped() =>
            {
                self.unknown(operation, e.to_string())
            }
            other => other,
        })
    }

    fn unknown(&self, operation: &'static str, cause: String) -> Error {
        Error::OutcomeUnknown {
            operation,
            name: self.name.to_string(),
            cause,
        }
    }
}

/// `n` as a Java `int` count of permits.
fn checked(n: u32) -> Result<u32> {
    if i64::from(n) > MAX_PERMITS {
        return Err(Error::invalid(format!(
            "a semaphore counts at most {MAX_PERMITS} permits (a Java int), got {n}"
        )));
    }
    Ok(n)
}

debug_handle!(Semaphore, name);
