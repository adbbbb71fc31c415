//! Renewed permits (docs/synchronizers.md, "Renewed permits"): permits
//! whose lease is the client's watchdog timeout, renewed by its one
//! watchdog with the locks, tracked by a [`Hold`] of the client's registry
//! like a lock's (deadline, lost signal, events).

use super::*;
use crate::engine::Engine;
use crate::engine::holds::{Hold, HoldKind};
use crate::protocol::Renewal;
use crate::protocol::lease::PermitRenewal;

/// The holds of renewed permits: the Redisson class they report in
/// events, and their release at a shutdown when their holder did not
/// release them in time: all the set's permits still held, in one round
/// trip.
static KIND: HoldKind = HoldKind {
    class: "RPermitExpirableSemaphore",
    release: release_set,
};

/// Releases the permits of `hold` (a renewed set) on `engine`'s client.
fn release_set(engine: &Arc<Engine>, hold: &Hold) -> Result<()> {
    let Renewal::Permits(permits) = &hold.renewal else {
        return Ok(());
    };
    let keys = PermitExpirableKeys::new(&hold.name);
    let publish = engine.publish;
    engine
        .with_connection(&keys.name, "release", |con, _| {
            protocol::try_release_many(con, &keys, &permits.ids, epoch_millis(), publish)
        })
        .map(|_| ())
}

/// The owner field of the hold of the permit set `ids`: `permits:` and the
/// first id's hex text (random, so one set per field).
pub(super) fn hold_field(ids: &[PermitId]) -> String {
    match ids.first() {
        Some(id) => format!("permits:{id}"),
        None => "permits:".to_owned(),
    }
}

impl PermitExpirableSemaphore {
    /// Takes `n` permits at once, waiting as long as it takes (as
    /// [`acquire_n`](Self::acquire_n)), with a lease that the client keeps
    /// renewing until they are released: their lease is the client's
    /// watchdog timeout
    /// ([`ClientBuilder::watchdog_timeout`](crate::ClientBuilder::watchdog_timeout)),
    /// and the client's one watchdog thread sets it again (`now + lease`)
    /// every third of it, batched with the locks' renewals. A holder that
    /// crashes or is cut off leaks them for at most one lease; a long job
    /// keeps them as long as it runs.
    ///
    /// Java sees ordinary expirable permits: `availablePermits` counts them
    /// out, `getLeaseTime(id)` shows the renewed lease, `tryRelease(id)`
    /// releases them (the renewal then finds them gone: lost, with
    /// [`LostReason::KeyGone`](crate::LostReason::KeyGone)).
    ///
    /// A renewal never revives a permit that expired (score at or before
    /// now, as Redisson's `updateLeaseTime` decides); it keeps the id's stored
    /// form (raw bytes or hex text). When a renewal finds any id of the set
    /// gone or expired, or the lease runs out by the local clock before a
    /// renewal got through (a paused or unreachable server), the permits are
    /// lost: [`ExpirablePermits::is_lost`] turns `true` and their
    /// [`lost_signal`](ExpirablePermits::lost_signal) fires no later than
    /// the permits can have expired in Redis.
    ///
    /// Cost: one round trip to acquire when permits are available; the
    /// renewal rides the watchdog's tick (no round trip of its own).
    /// Dropping or [`release`](ExpirablePermits::release)-ing the permits
    /// stops the renewal and releases them; [`forget`](ExpirablePermits::forget)
    /// stops the renewal and leaves them to their lease. Errors as
    /// [`acquire_n`](Self::acquire_n).
    pub fn acquire_renewed(&self, n: u32) -> Result<ExpirablePermits> {
        let lease = self.engine.config.watchdog_timeout;
        crate::cancel::without_deadline(|| self.acquire_until(n, Some(lease), true, None))
    }

    /// `n` renewed permits at once, waiting at most `wait` (as
    /// [`try_acquire_n_for`](Self::try_acquire_n_for)): `None` if they did
    /// not come in time. See [`acquire_renewed`](Self::acquire_renewed).
    pub fn try_acquire_renewed_for(
        &self,
        n: u32,
        wait: Duration,
    ) -> Result<Option<ExpirablePermits>> {
        let lease = self.engine.config.watchdog_timeout;
        let deadline = Instant::now().checked_add(wait);
        self.acquire_until(
            n,
            Some(lease),
            true,
            Some(deadline.unwrap_or_else(far_future)),
        )
    }

    /// Registers the hold of the permits `ids`, taken by an acquire sent
    /// at `sent` with the watchdog timeout as their lease: the watchdog
    /// renews it from now on. No I/O.
    pub(super) fn renewed_hold(&self, ids: &[PermitId], sent: Instant) -> Arc<Hold> {
        let renewal = Renewal::Permits(Arc::new(PermitRenewal {
            timeout: self.keys.timeout.as_str().into(),
            ids: ids.iter().map(|id| id.0).collect(),
        }));
        let name: Arc<str> = self.keys.name.as_str().into();
        let lease = self.engine.config.watchdog_timeout;
        let field = hold_field(ids);
        // The expiry was `epoch ms + lease`, the epoch rounded down (up to
        // 1 ms earlier than `sent`): the deadline counts from 1 ms before.
        let sent = sent.checked_sub(Duration::from_millis(1)).unwrap_or(sent);
        let registry = &self.engine.registry;
        registry.acquired(&name, &field, &KIND, renewal, lease, true, sent, None)
    }
}

impl ExpirablePermits {
    /// Whether these permits are known to be lost: only renewed permits
    /// ([`PermitExpirableSemaphore::acquire_renewed`]) can be, when a
    /// renewal found one gone or expired, or their lease ran out by the
    /// local clock before a renewal got through (then they may have been
    /// taken by someone else). `false` for permits with a fixed lease. An
    /// atomic load and a clock read, no round trip.
    pub fn is_lost(&self) -> bool {
        self.hold.as_ref().is_some_and(|hold| hold.is_lost())
    }

    /// A [`LostSignal`](crate::LostSignal) for renewed permits, as a lock
    /// guard's: it fires when they are lost (see [`is_lost`](Self::is_lost)),
    /// no later than the moment before which they cannot have expired in
    /// Redis, and never after a normal release; it outlives the permits.
    /// `None` for permits with a fixed lease (nothing renews them). The
    /// first one makes the client watch the deadline (its `rlock-deadline`
    /// thread). No round trip.
    pub fn lost_signal(&self) -> Option<crate::lock::signal::LostSignal> {
        let hold = self.hold.as_ref()?;
        self.semaphore.engine.registry.watch(hold);
        Some(crate::lock::signal::LostSignal::new(Arc::clone(hold)))
    }

    /// Whether the client's watchdog renews these permits (acquired with
    /// [`PermitExpirableSemaphore::acquire_renewed`] and not lost). No
    /// round trip.
    pub fn is_renewed(&self) -> bool {
        self.hold.is_some() && !self.is_lost()
    }

    /// Stops the renewal, if any, before a release or a hand-over: the
    /// hold, out of the registry (the watchdog no longer renews it).
    pub(super) fn stop_renewal(&mut self) -> Option<Arc<Hold>> {
        let hold = self.hold.take()?;
        self.semaphore.engine.registry.released(&hold, true);
        Some(hold)
    }
}

/// Whether the client's shutdown released the permits of `hold` already.
pub(super) fn released_by_shutdown(hold: Option<&Arc<Hold>>) -> bool {
    hold.is_some_and(|hold| hold.lost_reason() == Some(crate::error::LostReason::Shutdown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permit_sets_field_names_its_first_id() {
        let ids = [PermitId::from_bytes([1; 16]), PermitId::from_bytes([2; 16])];
        assert_eq!(hold_field(&ids), format!("permits:{}", "01".repeat(16)));
    }
}
