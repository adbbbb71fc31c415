//! [`CountDownLatch`], Redisson's `RCountDownLatch` (docs/synchronizers.md).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cancel::CancelToken;
use crate::engine::Engine;
use crate::engine::waiting::Attempted;
use crate::error::{Error, Result};
use crate::names::latch_channel;
use crate::protocol::latch;
use crate::topology::cluster::slot::key_slot;

/// A handle on one distributed count-down latch, byte-for-byte Redisson's
/// `RCountDownLatch` (`redisson.getCountDownLatch(name)`): a Java service
/// and a Rust service counting down and awaiting the same name see one
/// latch, and each side's count-down to 0 wakes the other side's waiters.
///
/// The latch is a Redis string `<name>` holding the count (no TTL, no
/// expiry API, as in Java); a missing key is a count of 0, i.e. an open
/// latch. Count-downs that reach exactly 0 delete the key and publish `0`
/// on `redisson_countdownlatch__channel__{<name>}` (`SPUBLISH` in a Redis 7+
/// cluster, as Redisson chooses); setting a count and deleting publish `1`.
/// See `docs/wire-format.md`.
///
/// Cheap to clone (an `Arc` and the name), `Send + Sync`: any thread may
/// count down a latch another thread waits on. Creating one does not talk to
/// Redis. Every call blocks the calling thread.
///
/// | Redisson (`RCountDownLatch`) | redisson-lock |
/// |---|---|
/// | `redisson.getCountDownLatch(name)` | [`Client::count_down_latch`](crate::Client::count_down_latch) |
/// | `trySetCount(n)` | [`CountDownLatch::try_set_count`] |
/// | `countDown()` | [`CountDownLatch::count_down`] |
/// | `getCount()` | [`CountDownLatch::count`] |
/// | `await()` | [`CountDownLatch::wait`] |
/// | `await(time, unit)` | [`CountDownLatch::wait_for`] |
/// | `delete()` | [`CountDownLatch::delete`] |
/// | `getName()` | [`CountDownLatch::name`] |
///
/// **Replica sync:** none. Redisson sends every latch operation as a plain
/// write on the master (`evalWrite`, no `WAIT`), and so does this crate,
/// whatever [`ClientBuilder::check_lock_synced_replicas`](crate::ClientBuilder::check_lock_synced_replicas)
/// says: a failover right after a count-down can lose it.
///
/// **Cluster:** a name containing `}` puts the channel (whose braces wrap
/// the whole name) in another slot than the key, and Redis refuses the
/// scripts with `CROSSSLOT`, for Redisson too. In a cluster, the three
/// scripted operations refuse such a name with [`Error::InvalidArgument`]
/// before sending anything (only when the two slots actually differ).
#[derive(Clone)]
pub struct CountDownLatch {
    engine: Arc<Engine>,
    name: String,
    /// Watched by the waits ([`CountDownLatch::with_cancel`]).
    cancel: Option<CancelToken>,
}

impl fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl CountDownLatch {
    pub(crate) fn new(engine: Arc<Engine>, name: String) -> Self {
        CountDownLatch {
            engine,
            name,
            cancel: None,
        }
    }

    /// The same latch, whose waits ([`wait`](Self::wait), [`wait_for`](Self::wait_for)) watch `token`: once it is
    /// cancelled they return [`Error::Cancelled`](crate::Error::Cancelled)
    /// promptly, and later ones at once, without a round trip. The
    /// other operations ignore it. No I/O.
    #[must_use = "this returns a new handle; the original is unchanged"]
    pub fn with_cancel(&self, token: &CancelToken) -> CountDownLatch {
        CountDownLatch {
            cancel: Some(token.clone()),
            ..self.clone()
        }
    }

    /// The latch's name: its Redis key (Redisson's `getName()`). No round
    /// trip.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the count to `count` if the latch has none (its key does not
    /// exist): `true` if it did, and then `1` is published (Java waiters
    /// close their local latch; Rust waiters re-check). `false`, changing
    /// nothing, while a count is set, i.e. until it is counted down to 0 or
    /// deleted. Redisson's `trySetCount(count)`. One round trip.
    ///
    /// As in Java, `count == 0` is accepted and creates a key holding `0`:
    /// the latch reads as open ([`count`](Self::count) is 0, waiters return)
    /// but later `try_set_count` calls fail until it is
    /// [deleted](Self::delete). A count above `i64::MAX` (Java's `long`) is
    /// [`Error::InvalidArgument`], sent nowhere.
    ///
    /// Sent like Redisson's `evalWriteAsync`: a reply lost with a dropped
    /// connection makes the client send it once more. The script is
    /// conditional, so a resend after a first attempt that did set the count
    /// answers `false` although the count is now this call's: on `false`,
    /// read [`count`](Self::count) if that matters.
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        self.check_scripted()?;
        if i64::try_from(count).is_err() {
            return Err(Error::invalid(format!(
                "latch count {count} exceeds i64::MAX (Redisson's long)"
            )));
        }
        let channel = latch_channel(&self.name);
        self.engine
            .with_connection(&self.name, "try_set_count", |con, _resend| {
                latch::try_set_count(con, &self.name, &channel, count, self.engine.publish)
            })
    }

    /// Decrements the count; the decrement that reaches exactly 0 deletes
    /// the key and publishes `0`, which wakes every waiter, Java's and
    /// Rust's. On a latch that is already open (no key) it does nothing and
    /// publishes nothing. Redisson's `countDown()`. One round trip.
    ///
    /// Never sent twice (Redisson's `evalWriteNoRetry`): two decrements
    /// would count down twice. When the reply is lost (the response timeout
    /// passes, or the connection drops after the request went out), the
    /// decrement may or may not have happened, and the call fails with
    /// [`Error::OutcomeUnknown`]; read [`count`](Self::count) to decide.
    pub fn count_down(&self) -> Result<()> {
        self.check_scripted()?;
        let channel = latch_channel(&self.name);
        self.engine
            .with_connection(&self.name, "count_down", |con, resend| {
                if resend {
                    // The first attempt's connection dropped: it may have run.
                    return Err(self.outcome_unknown("the connection dropped before the reply"));
                }
                latch::count_down(con, &self.name, &channel, self.engine.publish)
            })
            .map_err(|e| match e {
                Error::Timeout { .. } => self.outcome_unknown(&e.to_string()),
                Error::Redis(ref redis)
                    if redis.is_io_error()
                        || redis.is_timeout()
                        || redis.is_connection_dropped() =>
                {
                    self.outcome_unknown(&e.to_string())
                }
                other => other,
            })
    }

    /// The current count: `GET <name>`, a missing key reading as 0
    /// (Redisson's `getCount()`). One round trip, no script, no publish.
    ///
    /// A negative count (Java's `trySetCount(-n)` stores one; Java's
    /// `await` treats it as open) reads as 0. A key of another type is
    /// [`Error::Redis`] (`WRONGTYPE`); a string that is not an integer is
    /// [`Error::UnexpectedReply`].
    pub fn count(&self) -> Result<u64> {
        self.check()?;
        Ok(u64::try_from(self.raw_count()?).unwrap_or(0))
    }

    /// Blocks until the count is 0 (the key is gone or holds 0 or less),
    /// however long that takes. Redisson's `await()`. Returns at once, after
    /// one round trip, if the latch is open.
    ///
    /// Otherwise it subscribes to the latch channel (one subscription per
    /// client and name, shared by its waiting threads) and re-reads the
    /// count after every message, `0` and `1` alike, and at least every
    /// 3 s even if no message comes: a latch [deleted](Self::delete) while
    /// it waits, or counted down by a writer whose publish was lost, still
    /// releases it. Java's `await()` does neither: it re-reads only on `0`,
    /// so a deleted latch strands Java waiters forever (docs/synchronizers.md).
    /// An error (Redis unreachable, the subscription not confirmed within
    /// the subscription timeout) ends the wait.
    pub fn wait(&self) -> Result<()> {
        crate::cancel::without_deadline(|| self.wait_until(None))
    }

    /// [`wait`](Self::wait) for at most `timeout`: `true` when the count
    /// reached 0, `false` when `timeout` passed first. A zero timeout makes
    /// one read (one round trip). Redisson's `await(time, unit)`.
    pub fn wait_for(&self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now().checked_add(timeout);
        self.wait_until(deadline).map(|done| done.is_some())
    }

    /// Deletes the latch (its count): `true` if there was one, and then `1`
    /// is published. Rust waiters re-check and return (the count is now 0);
    /// **Java waiters are not released**: `1` closes their local latch, so
    /// Java's `await()` stays blocked and `await(t)` returns `true` only
    /// when its timeout passes (docs/synchronizers.md). Redisson's `delete()`.
    /// One round trip.
    ///
    /// Sent like Redisson's `evalWriteAsync` (a lost reply on a dropped
    /// connection is sent once more): a resend after a delete that ran
    /// answers `false`.
    pub fn delete(&self) -> Result<bool> {
        self.check_scripted()?;
        let channel = latch_channel(&self.name);
        self.engine
            .with_connection(&self.name, "delete", |con, _resend| {
                latch::delete(con, &self.name, &channel, self.engine.publish)
            })
    }

    /// Waits for an open latch until `deadline` (`None`: forever); `None`
    /// when the deadline passed.
    fn wait_until(&self, deadline: Option<Instant>) -> Result<Option<()>> {
        self.check()?;
        let channel = latch_channel(&self.name);
        let stop = self.engine.stop(self.cancel.as_ref());
        self.engine.wait_on(&channel, deadline, stop, || {
            Ok(if self.raw_count()? <= 0 {
                Attempted::Done(())
            } else {
                Attempted::Retry { hint: None }
            })
        })
    }

    fn raw_count(&self) -> Result<i64> {
        self.engine
            .with_connection(&self.name, "count", |con, _resend| {
                latch::count(con, &self.name)
            })
    }

    fn check(&self) -> Result<()> {
        self.engine.check_process()?;
        if self.name.is_empty() {
            return Err(Error::invalid("latch name must not be empty"));
        }
        Ok(())
    }

    /// [`check`](Self::check), and in a cluster, that the name's key and
    /// channel share a slot (the scripts take both as KEYS).
    fn check_scripted(&self) -> Result<()> {
        self.check()?;
        if self.engine.topology.cluster().is_some() {
            let channel = latch_channel(&self.name);
            let (key, chan) = (key_slot(self.name.as_bytes()), key_slot(channel.as_bytes()));
            if key != chan {
                return Err(Error::invalid(format!(
                    "latch `{}`: in a cluster its key (slot {key}) and its channel `{channel}` \
                     (slot {chan}) differ, so Redis would refuse it with CROSSSLOT, as it does \
                     Redisson's; use a name without `}}`",
                    self.name
                )));
            }
        }
        Ok(())
    }

    fn outcome_unknown(&self, cause: &str) -> Error {
        Error::OutcomeUnknown {
            operation: "count_down",
            name: self.name.clone(),
            cause: cause.to_owned(),
        }
    }
}
