//! A permit's id ([`PermitId`]) and the guard of acquired permits
//! ([`ExpirablePermits`]).

use super::*;
use crate::engine::holds::Hold;

/// The id of one permit of a [`PermitExpirableSemaphore`]: 16 random bytes
/// (a v4 UUID's, from the operating system's CSPRNG: 122 random bits),
/// stored in Redis as those **raw bytes** (Redisson 3.17.0+; as the hex
/// text for Redisson up to 3.16.8 with
/// [`ClientBuilder::expirable_permit_ids`](crate::ClientBuilder::expirable_permit_ids))
/// and shown as 32 lowercase hex digits, as Redisson shows them. A Java id
/// (`acquire()`'s `String`) parses with [`str::parse`] and can be released,
/// renewed or read from Rust, stored either way, and the other way round.
///
/// ```
/// use redisson_lock::PermitId;
/// let id: PermitId = "0123456789ABCDEF0123456789abcdef".parse()?;
/// assert_eq!(id.to_string(), "0123456789abcdef0123456789abcdef");
/// assert!("0123".parse::<PermitId>().is_err());
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermitId(pub(super) [u8; 16]);

impl PermitId {
    /// A fresh random id. No round trip.
    pub fn random() -> PermitId {
        PermitId(*uuid::Uuid::new_v4().as_bytes())
    }

    /// The id whose raw bytes (the ZSET member) are `bytes`.
    pub const fn from_bytes(bytes: [u8; 16]) -> PermitId {
        PermitId(bytes)
    }

    /// The raw bytes, as stored in the semaphore's `{<name>}:timeout` ZSET
    /// (unless the client writes hex text, see
    /// [`PermitIdEncoding`](crate::PermitIdEncoding)).
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Display for PermitId {
    /// 32 lowercase hex digits, Redisson's form of the id.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PermitId({self})")
    }
}

impl FromStr for PermitId {
    type Err = Error;

    /// Parses 32 hex digits, either case (as Redisson's `decodeHexDump`
    /// accepts them); anything else is [`Error::InvalidArgument`].
    fn from_str(s: &str) -> Result<PermitId> {
        let bad = || Error::invalid(format!("`{s}` is not a permit id (32 hex digits)"));
        if s.len() != 32 {
            return Err(bad());
        }
        let mut bytes = [0u8; 16];
        for (i, pair) in s.as_bytes().chunks(2).enumerate() {
            let digit = |b: u8| (b as char).to_digit(16).ok_or_else(bad);
            let (hi, lo) = (digit(pair[0])?, digit(pair[1])?);
            bytes[i] = u8::try_from(hi * 16 + lo).map_err(|_| bad())?;
        }
        Ok(PermitId(bytes))
    }
}

/// Permits acquired from a [`PermitExpirableSemaphore`]: released when
/// dropped (a failure is logged with `log::warn!`), unless
/// [`forget`](Self::forget) hands the ids over. Renewed permits
/// ([`PermitExpirableSemaphore::acquire_renewed`]) are renewed by the
/// client's watchdog until then, and can be [lost](Self::is_lost). `Send + Sync`: unlike a
/// lock's hold, a permit belongs to whoever knows its id, in any thread or
/// process.
#[must_use = "dropping the permits releases them at once"]
#[clippy::has_significant_drop]
pub struct ExpirablePermits {
    pub(super) semaphore: PermitExpirableSemaphore,
    pub(super) ids: Vec<PermitId>,
    /// The hold of renewed permits in the client's registry; `None` for a
    /// fixed lease.
    pub(super) hold: Option<Arc<Hold>>,
}

impl ExpirablePermits {
    /// The permits' ids (one per permit), what Redisson calls the permit
    /// ids. No round trip.
    pub fn ids(&self) -> &[PermitId] {
        &self.ids
    }

    /// The semaphore they were acquired from.
    pub fn semaphore(&self) -> &PermitExpirableSemaphore {
        &self.semaphore
    }

    /// Keeps the permits acquired and returns their ids: nothing is
    /// released on drop (release them with
    /// [`PermitExpirableSemaphore::release`], from any client, or let their
    /// lease run out). Renewed permits are no longer renewed: they expire
    /// a watchdog timeout after their last renewal (renew them with
    /// [`PermitExpirableSemaphore::update_lease_time`]). No round trip.
    pub fn forget(mut self) -> Vec<PermitId> {
        if let Some(hold) = self.stop_renewal() {
            hold.hand_off();
        }
        std::mem::take(&mut self.ids)
    }

    /// Releases the permits now, all or nothing (see
    /// [`PermitExpirableSemaphore::release_all`]), reporting the outcome;
    /// renewed ones stop being renewed first. Renewed permits the client's
    /// [`shutdown`](crate::Client::shutdown) released already are `Ok`,
    /// with no round trip. One round trip.
    pub fn release(mut self) -> Result<()> {
        let ids = std::mem::take(&mut self.ids);
        let hold = self.stop_renewal();
        if renewed::released_by_shutdown(hold.as_ref()) {
            return Ok(());
        }
        self.semaphore.release_all(&ids)?;
        if let Some(hold) = hold {
            hold.end();
        }
        Ok(())
    }
}

impl Drop for ExpirablePermits {
    fn drop(&mut self) {
        let ids = std::mem::take(&mut self.ids);
        if ids.is_empty() {
            return;
        }
        let hold = self.stop_renewal();
        if renewed::released_by_shutdown(hold.as_ref()) {
            return;
        }
        let name = self.semaphore.name();
        match self.semaphore.release_all(&ids) {
            Ok(()) => {
                if let Some(hold) = hold {
                    hold.end();
                }
            }
            // All or nothing failed: some id expired; free the others.
            Err(Error::InvalidArgument(_)) if ids.len() > 1 => {
                for id in ids {
                    if let Err(e) = self.semaphore.try_release(id) {
                        log::warn!("redisson-lock: releasing permit {id} of `{name}` failed: {e}");
                    }
                }
            }
            Err(e) => log::warn!("redisson-lock: releasing permits of `{name}` failed: {e}"),
        }
    }
}

impl fmt::Debug for ExpirablePermits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExpirablePermits")
            .field("semaphore", &self.semaphore.keys.name)
            .field("ids", &self.ids)
            .field("renewed", &self.hold.is_some())
            .field("lost", &self.is_lost())
            .finish()
    }
}

pub(super) fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

pub(super) fn permit_count(n: u32) -> Result<i64> {
    if n > MOST_PERMITS {
        return Err(Error::invalid(format!(
            "{n} permits: more than Java's int can count (at most {MOST_PERMITS})"
        )));
    }
    Ok(i64::from(n))
}

pub(super) fn not_released(name: &str, ids: &[PermitId]) -> Error {
    let ids: Vec<String> = ids.iter().map(PermitId::to_string).collect();
    Error::invalid(format!(
        "permit(s) {} of semaphore `{name}` not released: unknown, already released or expired",
        ids.join(", ")
    ))
}
