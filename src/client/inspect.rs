//! Introspection: [`Client::inspect`] (who holds a lock, who waits for it,
//! its TTL and fencing token, in one atomic snapshot; a synchronizer's
//! counter and a permit-expirable semaphore's permits) and
//! [`Client::scan_locks`] (every lock whose name matches a glob, on every
//! master). The script and its reading are `crate::protocol::inspect`'s; here
//! are the public types.

use std::sync::Arc;
use std::time::Duration;

use super::Client;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::names::WRITE_FIELD_SUFFIX;
use crate::protocol::inspect::{Snapshot, SnapshotKind, SnapshotSide};

/// The version of the JSON shape [`LockInfo`] and [`LockSummary`] serialise
/// to with the `serde` feature (the `"version"` field; see "Lock info JSON"
/// in docs/operating.md). Raised when a field changes meaning or goes away;
/// new fields may be added within a version.
pub const LOCK_INFO_JSON_VERSION: u32 = 1;

/// What kind of lock the keys say a name is, as far as they tell it: the
/// reentrant, spin and non-reentrant locks share one layout, so do a fair
/// lock and a non-reentrant fair lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// Nothing in Redis tells: no lock hash, no fair queue, no fenced token
    /// (a free lock of any kind, or no lock at all).
    Unknown,
    /// A hash of `<client id>:<thread>` fields and nothing else: Redisson's
    /// `RLock`, spin lock or non-reentrant lock (their keys are the same).
    Reentrant,
    /// The reentrant layout with a fair queue (`redisson_lock_queue:{name}`)
    /// or its deadlines (`redisson_lock_timeout:{name}`): a fair lock or a
    /// non-reentrant fair lock, held or not.
    Fair,
    /// The reentrant layout with a fencing token
    /// (`redisson_lock_token:{name}`): a fenced lock, held or not.
    Fenced,
    /// A read/write lock: its hash has a `mode` field.
    ReadWrite {
        /// The lock's `mode`.
        mode: RwMode,
    },
    /// Not a lock but a synchronizer's counter: a string holding an integer,
    /// Redisson's `RSemaphore` (the available permits) or `RCountDownLatch`
    /// (the count); the key alone does not tell which.
    Counter {
        /// The integer (may be negative for a semaphore).
        value: i64,
    },
    /// Not a lock but Redisson's `RPermitExpirableSemaphore`: a counter with
    /// a `{name}:timeout` ZSET of acquired permits (see
    /// [`LockInfo::permits`]).
    PermitExpirableSemaphore {
        /// The available permits (the counter). Permits that expired but
        /// were not yet reclaimed are still in [`LockInfo::permits`], not
        /// here.
        available: i64,
    },
}

/// The mode of a read/write lock (its hash's `mode` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RwMode {
    /// `read`: readers hold it (and no writer).
    Read,
    /// `write`: a writer holds it (and maybe read holds of the same thread).
    Write,
}

/// Which side of a lock a [`Holder`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HolderSide {
    /// The one holder of a lock without sides (reentrant, fair, fenced,
    /// spin, non-reentrant): the field `<client id>:<thread>`.
    Exclusive,
    /// A reader of a read/write lock: the field `<client id>:<thread>`.
    Read,
    /// The writer of a read/write lock: the field
    /// `<client id>:<thread>:write`.
    Write,
}

/// One holder of a lock: one hash field.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The holding client's id: a Redisson client's UUID, or this crate's
    /// [`Client::id`].
    pub client_id: String,
    /// The holding thread: Java's `Thread.getId()`, or this crate's
    /// [`Client::thread_id`].
    pub thread_id: u64,
    /// How many times this thread holds it (its reentrancy count, or its
    /// read holds).
    pub count: u64,
    /// Which side it holds.
    pub side: HolderSide,
    /// A reader's markers `{name}:<client id>:<thread>:rwlock_timeout:<n>`,
    /// n = 1..=count, in order: each one's remaining TTL, `None` when the
    /// marker is gone or has no expiry. Empty for other sides. A read lock
    /// stays alive while any reader's marker does.
    pub marker_ttls: Vec<Option<Duration>>,
}

impl Holder {
    /// A reader whose count says it holds but some of whose markers are
    /// gone (or have no expiry): what Redisson 3.44.0–3.52.0 readers leave
    /// behind (their renewal misses the markers, docs/compat.md). Under
    /// Redisson 4.x's read-unlock rule another reader's unlock deletes such
    /// a lock; see
    /// [`ClientBuilder::read_unlock_keeps_unmarked_readers`](crate::ClientBuilder::read_unlock_keeps_unmarked_readers).
    /// `false` for other sides. No round trip.
    pub fn lacks_live_marker(&self) -> bool {
        self.side == HolderSide::Read && self.marker_ttls.iter().any(Option::is_none)
    }

    /// The hash field of this hold: `<client id>:<thread>`, with `:write`
    /// for a writer. What [`Lock::force_unlock_owned_by`](crate::Lock::force_unlock_owned_by)
    /// takes. No round trip.
    pub fn field(&self) -> String {
        let mut field = format!("{}:{}", self.client_id, self.thread_id);
        if self.side == HolderSide::Write {
            field.push_str(WRITE_FIELD_SUFFIX);
        }
        field
    }
}

/// One waiter in a fair lock's queue.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Waiter {
    /// The waiting client's id.
    pub client_id: String,
    /// The waiting thread.
    pub thread_id: u64,
    /// Its deadline, the score in `redisson_lock_timeout:{name}`: ms since
    /// the Unix epoch by the clock of the client that queued it (not the
    /// server's). `None` when the queue entry has no score.
    pub deadline_ms: Option<i64>,
    /// `deadline_ms` minus the server's time at the snapshot, in ms; negative
    /// when the deadline has passed (the next operation on the lock purges a
    /// passed head). Compares client and server clocks: skew shows here.
    pub remaining_ms: Option<i64>,
}

impl Waiter {
    /// The waiter's owner field `<client id>:<thread>`, the name of its own
    /// wake-up channel's suffix. No round trip.
    pub fn field(&self) -> String {
        format!("{}:{}", self.client_id, self.thread_id)
    }
}

/// One acquired permit of a permit-expirable semaphore (see
/// [`LockInfo::permits`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitInfo {
    /// The permit's id, as Redisson and [`crate::PermitId`] print it (32
    /// lowercase hex digits of the raw 16-byte member).
    pub id: crate::PermitId,
    /// Its expiry, the ZSET score: ms since the Unix epoch by the clock of
    /// the client that acquired or renewed it; `None` for a permanent
    /// permit (the sentinel score `922337203685477`).
    pub expiry_ms: Option<i64>,
    /// The member is the id's 32-character hex text, as Redisson up to
    /// 3.16.8 writes it (and this crate with
    /// [`PermitIdEncoding::Hex`](crate::PermitIdEncoding::Hex)); `false`:
    /// the 16 raw bytes (3.17.0+).
    pub stored_as_hex: bool,
    /// `expiry_ms` minus the server's time at the snapshot, in ms;
    /// negative when the lease has passed (the permit is reclaimed by the
    /// next acquire or count). Compares client and server clocks.
    pub remaining_ms: Option<i64>,
}

/// One atomic snapshot of a lock of any kind: see [`Client::inspect`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// The lock's name (its hash's key).
    pub name: String,
    /// Whether the lock's hash exists: someone holds it.
    pub locked: bool,
    /// What the keys say the lock is.
    pub kind: LockKind,
    /// The lock's remaining lease (`PTTL` of its hash, or of a counter's
    /// string); `None` when it is not locked or has no expiry (see
    /// [`LockInfo::persistent`]).
    pub ttl: Option<Duration>,
    /// The hash exists without an expiry: it will never free itself.
    pub persistent: bool,
    /// Every holder, in the hash's field order (one for an exclusive lock;
    /// readers and the writer of a read/write lock).
    pub holders: Vec<Holder>,
    /// A fair lock's waiters in queue order, the head first (empty for
    /// other kinds).
    pub queue: Vec<Waiter>,
    /// A fenced lock's last token handed out (`redisson_lock_token:{name}`),
    /// `None` when there is none.
    pub token: Option<u64>,
    /// A permit-expirable semaphore's acquired permits, the nearest expiry
    /// first (permanent ones last); at most 10 000 are read. Empty for
    /// other kinds.
    pub permits: Vec<PermitInfo>,
    /// The server's clock (`TIME`) when the snapshot was taken, ms since the
    /// Unix epoch.
    pub server_time_ms: u64,
}

/// A lock found by [`Client::scan_locks`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockSummary {
    /// The lock's name.
    pub name: String,
    /// What the keys say the lock is.
    pub kind: LockKind,
    /// Whether it is held (always `true` for a scanned lock unless it was
    /// released between the `SCAN` and its snapshot).
    pub locked: bool,
    /// How many hash fields hold it (readers and writer count one each).
    pub holders: usize,
    /// Its remaining lease; `None` when free or without expiry.
    pub ttl: Option<Duration>,
}

impl From<&LockInfo> for LockSummary {
    fn from(info: &LockInfo) -> Self {
        LockSummary {
            name: info.name.clone(),
            kind: info.kind,
            locked: info.locked,
            holders: info.holders.len(),
            ttl: info.ttl,
        }
    }
}

impl LockInfo {
    fn from_snapshot(name: &str, snap: Snapshot) -> LockInfo {
        let kind = match snap.kind {
            SnapshotKind::Unknown => LockKind::Unknown,
            SnapshotKind::Reentrant => LockKind::Reentrant,
            SnapshotKind::Fair => LockKind::Fair,
            SnapshotKind::Fenced => LockKind::Fenced,
            SnapshotKind::Read => LockKind::ReadWrite { mode: RwMode::Read },
            SnapshotKind::Write => LockKind::ReadWrite {
                mode: RwMode::Write,
            },
            SnapshotKind::Counter => LockKind::Counter {
                value: snap.counter.unwrap_or_default(),
            },
            SnapshotKind::ExpirableSemaphore => LockKind::PermitExpirableSemaphore {
                available: snap.counter.unwrap_or_default(),
            },
        };
        let ms = |n: i64| u64::try_from(n).ok().map(Duration::from_millis);
        let now = i64::try_from(snap.server_ms).unwrap_or(i64::MAX);
        LockInfo {
            name: name.to_owned(),
            locked: snap.locked,
            kind,
            ttl: ms(snap.pttl),
            persistent: snap.locked && snap.pttl == -1,
            holders: snap
                .holders
                .into_iter()
                .map(|h| Holder {
                    client_id: h.client_id,
                    thread_id: h.thread_id,
                    count: h.count,
                    side: match h.side {
                        SnapshotSide::Exclusive => HolderSide::Exclusive,
                        SnapshotSide::Read => HolderSide::Read,
                        SnapshotSide::Write => HolderSide::Write,
                    },
                    marker_ttls: h.markers.into_iter().map(ms).collect(),
                })
                .collect(),
            queue: snap
                .queue
                .into_iter()
                .map(|w| Waiter {
                    client_id: w.client_id,
                    thread_id: w.thread_id,
                    deadline_ms: w.deadline_ms,
                    remaining_ms: w.deadline_ms.map(|d| d.saturating_sub(now)),
                })
                .collect(),
            token: snap.token,
            permits: snap
                .permits
                .into_iter()
                .map(|p| PermitInfo {
                    id: crate::PermitId::from_bytes(p.id),
                    expiry_ms: p.expiry_ms,
                    stored_as_hex: p.hex,
                    remaining_ms: p.expiry_ms.map(|e| e.saturating_sub(now)),
                })
                .collect(),
            server_time_ms: snap.server_ms,
        }
    }
}

/// Reads `name` in one script (see [`Client::inspect`]).
fn inspect(engine: &Engine, name: &str) -> Result<LockInfo> {
    engine.check_process()?;
    if name.is_empty() {
        return Err(Error::invalid("lock name must not be empty"));
    }
    let snap = engine.with_connection(name, "inspect", |con, _| {
        crate::protocol::inspect::inspect(con, name)
    })?;
    Ok(LockInfo::from_snapshot(name, snap))
}

impl Client {
    /// One atomic, read-only snapshot of the lock `name` of any kind, held
    /// by this crate or by Redisson (the layout is the same): whether it is
    /// locked, its kind as far as its keys tell, its TTL, every holder
    /// (client id, thread id, hold count, side) with a reader's marker
    /// TTLs, a fair lock's queue in order with each waiter's deadline, a
    /// fenced lock's token, and the server's time.
    ///
    /// One round trip: one script in the name's slot (in a cluster, on its
    /// master) reads the hash, the fair queue and deadlines, the token and
    /// the read markers; it writes nothing, so no replica `WAIT` follows.
    /// The script's work is proportional to the holders, markers and
    /// queue length.
    ///
    /// A free lock is `Ok` with `locked == false` (its queue or token, if
    /// any, still reported). A string holding an integer is a
    /// synchronizer's counter ([`LockKind::Counter`]: a semaphore's permits
    /// or a latch's count), and with a `{name}:timeout` ZSET a
    /// permit-expirable semaphore ([`LockKind::PermitExpirableSemaphore`],
    /// each acquired permit in [`LockInfo::permits`]); both are
    /// `locked == false`. A key that is neither (a string that is not an
    /// integer, a list, a hash with other fields, a permit ZSET whose
    /// members are not 16-byte ids; or a derived key of the wrong type) is
    /// [`Error::NotALock`]. An empty name is [`Error::InvalidArgument`].
    ///
    /// ```no_run
    /// # fn main() -> redisson_lock::Result<()> {
    /// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
    /// let info = client.inspect("orders")?;
    /// for holder in &info.holders {
    ///     println!("{} holds it {} time(s)", holder.field(), holder.count);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn inspect(&self, name: &str) -> Result<LockInfo> {
        inspect(&self.engine, name)
    }

    /// Every lock whose name matches the glob `pattern` (Redis `MATCH`
    /// syntax: `*`, `?`, `[..]`), on every master (the one server of a
    /// single or Sentinel client; each master of a cluster), lazily, as an
    /// iterator of summaries.
    ///
    /// Each step sends `SCAN <cursor> MATCH <pattern> COUNT <n> TYPE hash`
    /// (Redis 6.0+; never `KEYS`; one round trip per page, `n` = 100 by default, see
    /// [`LockScan::page_size`]) to one master, then takes one
    /// [`Client::inspect`] snapshot (one round trip) per hash found.
    /// Hashes that are not locks are skipped, as are locks released between
    /// the page and their snapshot; the derived keys (fair queues and
    /// deadlines, tokens, read markers) are never hashes, so never reported
    /// as locks. `SCAN`'s guarantees apply: a lock present for the whole
    /// scan is reported, at least once (in a cluster, a slot that moves
    /// during the scan may be missed or reported twice). After an error the
    /// iterator ends. No I/O until the first `next`.
    pub fn scan_locks(&self, pattern: impl Into<String>) -> LockScan {
        LockScan::new(Arc::clone(&self.engine), pattern.into())
    }
}

#[cfg(feature = "serde")]
mod json;
mod scan;

pub use scan::LockScan;
