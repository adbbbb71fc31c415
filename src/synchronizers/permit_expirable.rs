//! [`PermitExpirableSemaphore`]: Redisson's `RPermitExpirableSemaphore`
//! (docs/synchronizers.md), its permit ids ([`PermitId`]) and the guard of
//! acquired permits ([`ExpirablePermits`]).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::ConnectionLike;

use crate::cancel::CancelToken;
use crate::engine::Engine;
use crate::engine::replicas::Synced;
use crate::engine::waiting::Attempted;
use crate::error::{Error, Result};
use crate::protocol::epoch_millis;
use crate::protocol::permit_expirable::{
    self as protocol, Count, Lease, PermitExpirableKeys, TryAcquired,
};

/// A handle on Redisson's `RPermitExpirableSemaphore` called `name`
/// (`redisson.getPermitExpirableSemaphore(name)`), from
/// [`Client::permit_expirable_semaphore`](crate::Client::permit_expirable_semaphore).
///
/// A counting semaphore whose every acquired permit has an id
/// ([`PermitId`]) and an optional lease: a permit whose lease runs out goes
/// back to the pool by itself, so a holder that crashes leaks nothing for
/// longer than its lease. Only the id's holder (whoever knows it, in any
/// language) can release it. The Redis state is Redisson's byte for byte
/// (see `docs/wire-format.md`), so Java and Rust share the same permits and
/// wake each other up: the available permits in the string `<name>`, every
/// acquired permit in the ZSET `{<name>}:timeout` (the raw 16-byte id, or
/// its hex text as Redisson up to 3.16.8 writes it, see
/// [`PermitIdEncoding`](crate::PermitIdEncoding); either is found by a
/// release; scored by its expiry), messages on `redisson_sc:{<name>}` (the channel
/// an `RSemaphore` of the same name also uses).
///
/// **Clocks.** As in Redisson, every expiry is this host's wall clock
/// (epoch ms, sent with each call), never Redis's: hosts sharing a semaphore
/// need synchronised clocks (NTP); a host whose clock runs ahead expires
/// other hosts' permits early, one running behind keeps them late.
///
/// **Lazy expiry.** An expired permit comes back only when someone runs a
/// script that reclaims it (an acquire reclaims at most what it asks for;
/// the counts, [`lease_time`](Self::lease_time),
/// [`update_lease_time`](Self::update_lease_time) and
/// [`release_all`](Self::release_all) reclaim them all). Nothing is
/// published on expiry: a waiter of either language wakes at the nearest
/// expiry by its own timer.
///
/// **Never sent twice.** An acquire, a release, `add_permits` and
/// `try_set_permits` are not idempotent: when the reply is lost (a timeout,
/// a dropped connection) they fail with [`Error::OutcomeUnknown`] instead
/// of being sent again.
///
/// **Replica sync.** With it on (see
/// [`ClientBuilder::check_lock_synced_replicas`](crate::ClientBuilder::check_lock_synced_replicas)),
/// every write is followed by a `WAIT` in the same round trip. An acquire
/// no replica acknowledged is given back (its ids released, which
/// publishes) and tried again, as Redisson's; the idempotent writes
/// (`set_permits`, `update_lease_time`, `delete`) are sent again; the
/// others (a release, `try_set_permits`, `add_permits`) are
/// [`Error::NotReplicated`] with the master's change kept (Redisson resends
/// them, which can add permits twice or report a release as failed).
///
/// Cheap to clone (`Arc`s), `Send + Sync`; no I/O until a method is called.
/// Every method checks the process ([`Error::ForkedProcess`]) and that the
/// name is not empty ([`Error::InvalidArgument`]).
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    engine: Arc<Engine>,
    keys: Arc<PermitExpirableKeys>,
    /// Watched by the waits ([`PermitExpirableSemaphore::with_cancel`]).
    cancel: Option<CancelToken>,
}

impl fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitExpirableSemaphore")
            .field("name", &self.keys.name)
            .finish_non_exhaustive()
    }
}

/// Whether `e` says the reply of a sent command was lost: the command may
/// have run.
fn reply_lost(e: &Error) -> bool {
    match e {
        Error::Timeout { .. } => true,
        Error::Redis(e) => e.is_io_error() || e.is_timeout() || e.is_connection_dropped(),
        _ => false,
    }
}

/// The largest permit count Java can read (`int`).
const MOST_PERMITS: u32 = i32::MAX as u32;

impl PermitExpirableSemaphore {
    pub(crate) fn new(engine: Arc<Engine>, name: String) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore {
            keys: Arc::new(PermitExpirableKeys::new(&name)),
            engine,
            cancel: None,
        }
    }

    /// The same semaphore, whose waiting acquisitions ([`acquire`](Self::acquire), [`try_acquire_for`](Self::try_acquire_for) and their `_n` forms) watch `token`: once it is
    /// cancelled they return [`Error::Cancelled`](crate::Error::Cancelled)
    /// promptly holding nothing (permits whose acquisition raced the cancel are released), and later ones at once, without a round trip. The
    /// other operations ignore it. No I/O.
    #[must_use = "this returns a new handle; the original is unchanged"]
    pub fn with_cancel(&self, token: &CancelToken) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore {
            cancel: Some(token.clone()),
            ..self.clone()
        }
    }

    /// The semaphore's name: the key of its available permits.
    pub fn name(&self) -> &str {
        &self.keys.name
    }

    fn check(&self) -> Result<()> {
        self.engine.check_process()?;
        if self.keys.name.is_empty() {
            return Err(Error::invalid("semaphore name must not be empty"));
        }
        Ok(())
    }

    fn unknown(&self, operation: &'static str, cause: String) -> Error {
        Error::OutcomeUnknown {
            operation,
            name: self.keys.name.clone(),
            cause,
        }
    }

    /// `command` on the name's connection, followed by a `WAIT` with
    /// replica sync on, and that `WAIT`'s verdict: sent again after a
    /// dropped connection only when `resendable`; else never sent twice
    /// ([`Error::OutcomeUnknown`] on a lost reply).
    fn synced<T>(
        &self,
        operation: &'static str,
        resendable: bool,
        mut command: impl FnMut(&mut dyn ConnectionLike) -> Result<T>,
    ) -> Result<(T, Synced)> {
        self.engine
            .with_synced_connection(&self.keys.name, operation, |con, resend| {
                if resend && !resendable {
                    return Err(self.unknown(
                        operation,
                        "the connection dropped after the request was sent".to_owned(),
                    ));
                }
                command(con)
            })
            .map_err(|e| match e {
                e if !resendable && reply_lost(&e) => self.unknown(operation, e.to_string()),
                e => e,
            })
    }

    /// A write whose `WAIT` verdict counts (replica sync on): a resendable
    /// one is sent again on a missing acknowledgement (at most the client's
    /// retry attempts), then [`Error::NotReplicated`]; one that is not is
    /// never sent twice ([`Error::OutcomeUnknown`] on a lost reply) and
    /// fails at once when unacknowledged.
    fn write<T>(
        &self,
        operation: &'static str,
        resendable: bool,
        mut command: impl FnMut(&mut dyn ConnectionLike) -> Result<T>,
    ) -> Result<T> {
        let mut tries = 0;
        loop {
            let (value, synced) = self.synced(operation, resendable, &mut command)?;
            match synced.error(operation, &self.keys.name) {
                None => return Ok(value),
                Some(e) if !self.engine.checks_replicas() => {
                    log::warn!("redisson-lock: {e}");
                    return Ok(value);
                }
                Some(_) if resendable && tries < self.engine.config.retry_attempts => {
                    tries += 1;
                    std::thread::sleep(self.engine.config.retry_delay);
                }
                Some(e) => return Err(e),
            }
        }
    }

    /// A [`write`](Self::write) of the counter by `command`, given the
    /// keys, `n` and the publish command; `n`'s error is reported after the
    /// handle's own.
    fn write_counter<T>(
        &self,
        operation: &'static str,
        resendable: bool,
        n: Result<i64>,
        command: fn(&mut dyn ConnectionLike, &PermitExpirableKeys, i64, &str) -> Result<T>,
    ) -> Result<T> {
        self.check()?;
        let n = n?;
        let publish = self.engine.publish;
        self.write(operation, resendable, |con| {
            command(con, &self.keys, n, publish)
        })
    }

    /// A read (it may reclaim expired permits and publish, which is safe to
    /// repeat): sent again after a dropped connection, no `WAIT`.
    fn read<T>(
        &self,
        operation: &'static str,
        mut command: impl FnMut(&mut dyn ConnectionLike) -> Result<T>,
    ) -> Result<T> {
        self.check()?;
        self.engine
            .with_connection(&self.keys.name, operation, |con, _| command(con))
    }

    /// Sets the total number of permits to `permits` only if the semaphore
    /// has no counter yet (Redisson's `trySetPermits`): `true` if it was
    /// set, which publishes `permits`. Acquired permits in the timeout ZSET
    /// are ignored, as in Redisson: a counter deleted or expired while
    /// permits are out is set again. `permits` above `i32::MAX` (Java's
    /// `int`) is [`Error::InvalidArgument`]. One round trip (a `WAIT` in
    /// the same round trip with replica sync); never sent twice.
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        let n = permit_count(permits);
        self.write_counter("try_set_permits", false, n, protocol::try_set_permits)
    }

    /// Makes the total (available + acquired) equal `permits`, adding or
    /// removing available permits (Redisson's `setPermits`, which publishes
    /// `permits` when it changed anything). Expired permits not yet
    /// reclaimed count as acquired. Idempotent: sent again after a lost
    /// reply. One round trip.
    pub fn set_permits(&self, permits: u32) -> Result<()> {
        let n = permit_count(permits);
        self.write_counter("set_permits", true, n, protocol::set_permits)
    }

    /// Adds `delta` available permits (negative: removes them, down to a
    /// negative count) (Redisson's `addPermits`, which publishes `delta`
    /// when it is positive). Like Redisson's, it rewrites the counter with
    /// `SET`, dropping a TTL. One round trip; never sent twice.
    pub fn add_permits(&self, delta: i32) -> Result<()> {
        let n = Ok(i64::from(delta));
        self.write_counter("add_permits", false, n, protocol::add_permits)
    }

    /// The available permits, after returning every expired permit to the
    /// pool (Redisson's `availablePermits`); may be negative after
    /// `add_permits(-n)`. One round trip.
    pub fn available_permits(&self) -> Result<i64> {
        self.count(Count::Available)
    }

    /// The total permits, available + acquired, after reclaiming expired
    /// ones (Redisson's `getPermits`); 0 when the counter does not exist.
    /// One round trip.
    pub fn permits(&self) -> Result<i64> {
        self.count(Count::Total)
    }

    /// The acquired (unexpired) permits, after reclaiming expired ones
    /// (Redisson's `acquiredPermits`). One round trip.
    pub fn acquired_permits(&self) -> Result<u64> {
        Ok(self.count(Count::Acquired)?.max(0).unsigned_abs())
    }

    fn count(&self, which: Count) -> Result<i64> {
        let publish = self.engine.publish;
        self.read("count", |con| {
            protocol::count(con, &self.keys, which, epoch_millis(), publish)
        })
    }

    /// Takes one permit, waiting as long as it takes (Redisson's
    /// `acquire()` / `acquire(leaseTime, unit)`). `lease`: how long the
    /// permit lives from the moment it is granted; `None`: until released
    /// (the sentinel score `922337203685477`). A zero lease is
    /// [`Error::InvalidArgument`].
    ///
    /// Waits on `redisson_sc:{<name>}` through the client's subscriber:
    /// each message means "try again"; it also tries again at the nearest
    /// expiry of an acquired permit (so a permit that expires reaches a
    /// waiter though nothing is published) and at least every 3 s. One round
    /// trip when permits are available.
    ///
    /// A lost reply is [`Error::OutcomeUnknown`] (the permit may be held,
    /// under an id the caller does not know: it comes back when its lease
    /// runs out, or never for a permanent one). With replica sync on, an
    /// acquire no replica acknowledged is undone (its ids released) and
    /// tried again, up to the client's retry attempts (`retry_delay`
    /// apart, and for the timed forms while their wait lasts; a
    /// [`try_acquire`](Self::try_acquire) makes one attempt), then
    /// [`Error::NotReplicated`].
    pub fn acquire(&self, lease: Option<Duration>) -> Result<ExpirablePermits> {
        self.acquire_n(1, lease)
    }

    /// Takes `n` permits at once, waiting as long as it takes (Redisson's
    /// `acquire(permits, leaseTime, unit)`): all or none, re-checking the
    /// count after every message (a single message may carry fewer than
    /// `n`). `n == 0` is [`Error::InvalidArgument`] (Redisson's
    /// `acquire(0)` never returns). See [`acquire`](Self::acquire).
    pub fn acquire_n(&self, n: u32, lease: Option<Duration>) -> Result<ExpirablePermits> {
        crate::cancel::without_deadline(|| self.acquire_until(n, lease, false, None))
    }

    /// One attempt at one permit (Redisson's `tryAcquire()` /
    /// `tryAcquire(-1, leaseTime, unit)`): `None` if none is available. One
    /// round trip. See [`acquire`](Self::acquire).
    pub fn try_acquire(&self, lease: Option<Duration>) -> Result<Option<ExpirablePermits>> {
        self.acquire_until(1, lease, false, Some(Instant::now()))
    }

    /// One permit, waiting at most `wait` (Redisson's
    /// `tryAcquire(waitTime, leaseTime, unit)`): `None` if none came in
    /// time. See [`acquire`](Self::acquire).
    pub fn try_acquire_for(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<ExpirablePermits>> {
        self.try_acquire_n_for(1, wait, lease)
    }

    /// `n` permits at once, waiting at most `wait` (Redisson's
    /// `tryAcquire(permits, waitTime, leaseTime, unit)`): `None` if they
    /// did not come in time. See [`acquire_n`](Self::acquire_n).
    pub fn try_acquire_n_for(
        &self,
        n: u32,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<ExpirablePermits>> {
        let deadline = Instant::now().checked_add(wait);
        self.acquire_until(n, lease, false, Some(deadline.unwrap_or_else(far_future)))
    }

    /// `n` permits with `lease`, waiting until `deadline` (`None`: as long
    /// as it takes); `renewed`: the lease is the watchdog timeout and a
    /// renewed hold is registered for them ([`renewed`]).
    fn acquire_until(
        &self,
        n: u32,
        lease: Option<Duration>,
        renewed: bool,
        deadline: Option<Instant>,
    ) -> Result<Option<ExpirablePermits>> {
        self.check()?;
        if n == 0 {
            return Err(Error::invalid(
                "acquiring 0 permits: ask for at least one (Redisson's acquire(0) never returns)",
            ));
        }
        permit_count(n)?;
        if lease.is_some_and(|lease| lease.as_millis() == 0) {
            return Err(Error::invalid(
                "a permit's lease must be at least 1 ms (None: permanent)",
            ));
        }
        let stop = self.engine.stop(self.cancel.as_ref());
        let ids = self
            .engine
            .wait_on(&self.keys.channel, deadline, stop, || {
                self.attempt(n, lease, deadline)
            })?;
        let permits = ids.map(|(ids, sent)| {
            let hold = renewed.then(|| self.renewed_hold(&ids, sent));
            ExpirablePermits {
                semaphore: self.clone(),
                ids,
                hold,
            }
        });
        // Taken as the wait was stopped: released on the way out.
        stop.check()?;
        Ok(permits)
    }

    fn release_raw(&self, raw: &[[u8; 16]]) -> Result<i64> {
        let publish = self.engine.publish;
        self.write("release", false, |con| {
            protocol::try_release_many(con, &self.keys, raw, epoch_millis(), publish)
        })
    }

    /// Returns the permit `id` to the pool (Redisson's `release(id)`);
    /// [`Error::InvalidArgument`] if it was not released: unknown, already
    /// released, or expired (an expired permit not yet reclaimed goes back
    /// to the pool all the same, as in Redisson). See
    /// [`try_release`](Self::try_release).
    pub fn release(&self, id: PermitId) -> Result<()> {
        if self.try_release(id)? {
            Ok(())
        } else {
            Err(not_released(&self.keys.name, &[id]))
        }
    }

    /// Returns the permit `id` to the pool (Redisson's `tryRelease(id)`):
    /// `true` if it was held and unexpired. Publishes the new count, which
    /// wakes waiters of both languages. One round trip; never sent twice (a
    /// lost reply is [`Error::OutcomeUnknown`]). With replica sync on, an
    /// unacknowledged release is [`Error::NotReplicated`] (the master has
    /// released it).
    pub fn try_release(&self, id: PermitId) -> Result<bool> {
        self.check()?;
        let publish = self.engine.publish;
        self.write("release", false, |con| {
            protocol::try_release_one(con, &self.keys, &id.0, epoch_millis(), publish)
        })
    }

    /// Returns every permit of `ids` to the pool, all or nothing (Redisson
    /// 3.41.0+'s `release(ids)`): if any is unknown, released or expired,
    /// nothing changes and the call is [`Error::InvalidArgument`]; so are
    /// duplicate ids. Reclaims every expired permit first and publishes the
    /// number released. An empty slice does nothing (no round trip).
    /// Otherwise as [`try_release`](Self::try_release).
    pub fn release_all(&self, ids: &[PermitId]) -> Result<()> {
        self.check()?;
        if ids.is_empty() {
            return Ok(());
        }
        let mut raw: Vec<[u8; 16]> = ids.iter().map(|id| id.0).collect();
        raw.sort_unstable();
        raw.dedup();
        if raw.len() != ids.len() {
            return Err(Error::invalid("the permit ids to release repeat an id"));
        }
        let raw: Vec<[u8; 16]> = ids.iter().map(|id| id.0).collect();
        let released = self.release_raw(&raw)?;
        if released == i64::try_from(ids.len()).unwrap_or(i64::MAX) {
            Ok(())
        } else {
            Err(not_released(&self.keys.name, ids))
        }
    }

    /// Sets the permit `id`'s lease to `lease` from now (`None`: permanent)
    /// (Redisson's `updateLeaseTime(id, lease, unit)`, `-1` for `None`):
    /// `true` if the permit was held and unexpired. An expired permit is
    /// reclaimed first, never revived. A zero lease is
    /// [`Error::InvalidArgument`]. One round trip; sent again after a lost
    /// reply (the new expiry is fixed before the first send).
    pub fn update_lease_time(&self, id: PermitId, lease: Option<Duration>) -> Result<bool> {
        self.check()?;
        if lease.is_some_and(|lease| lease.as_millis() == 0) {
            return Err(Error::invalid(
                "a permit's lease must be at least 1 ms (None: permanent)",
            ));
        }
        let now = epoch_millis();
        let expiry = protocol::expiry_score(now, lease);
        let publish = self.engine.publish;
        self.write("update_lease_time", true, |con| {
            protocol::update_lease(con, &self.keys, &id.0, expiry, now, publish)
        })
    }

    /// The permit `id`'s remaining lease, `None` for a permanent one
    /// (Redisson 3.41.0+'s `getLeaseTime(id)`, `-1` for permanent). An
    /// unknown, released or expired id is [`Error::InvalidArgument`], as
    /// Java's `IllegalArgumentException`. Reclaims expired permits. One
    /// round trip.
    pub fn lease_time(&self, id: PermitId) -> Result<Option<Duration>> {
        let publish = self.engine.publish;
        let lease = self.read("lease_time", |con| {
            protocol::lease_time(con, &self.keys, &id.0, epoch_millis(), publish)
        })?;
        match lease {
            Lease::Permanent => Ok(None),
            Lease::Left(ms) => Ok(Some(Duration::from_millis(ms))),
            Lease::Unknown => Err(Error::invalid(format!(
                "permit {id} of semaphore `{}` does not exist, was released or has expired",
                self.keys.name
            ))),
        }
    }

    /// Deletes the semaphore: its counter and its timeout ZSET (Redisson's
    /// `delete`): `true` if either existed. Publishes nothing, as Redisson:
    /// waiters keep waiting until permits are set again. One round trip.
    pub fn delete(&self) -> Result<bool> {
        self.check()?;
        self.write("delete", true, |con| protocol::delete(con, &self.keys))
    }
}

mod acquire;
mod permits;
mod renewed;
pub use permits::{ExpirablePermits, PermitId};
use permits::{far_future, not_released, permit_count};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permit_ids_print_and_parse_as_hex() {
        let id = PermitId::from_bytes([0xab; 16]);
        assert_eq!(id.to_string(), "ab".repeat(16));
        assert_eq!("AB".repeat(16).parse::<PermitId>().ok(), Some(id));
        for bad in [
            "",
            "ab",
            &"ab".repeat(17),
            &"zz".repeat(16),
            &"é".repeat(16),
        ] {
            assert!(
                matches!(bad.parse::<PermitId>(), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
        assert_ne!(PermitId::random(), PermitId::random());
    }
}
