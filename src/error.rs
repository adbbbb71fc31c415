//! The crate's one error type.

mod verdict;

use std::time::Duration;

pub(crate) use verdict::Verdict;

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when taking, holding or releasing a lock.
///
/// The variants are the decisions a caller can make: retry later
/// ([`Error::Unavailable`], [`Error::Redis`] with [`Error::is_transient`]),
/// stop trusting a critical section ([`Error::Lost`]), fix a bug in the calling
/// code ([`Error::NotHeld`], [`Error::InvalidArgument`]), fix the deployment's
/// configuration ([`Error::TlsCertificate`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An unlock found that this thread does not hold the lock: it was never
    /// taken, already released, force-unlocked, or it expired. This is what
    /// Redisson reports as `IllegalMonitorStateException`.
    #[error(
        "attempt to unlock lock `{name}`, not locked by current thread by node id: {client_id} thread-id: {thread_id}"
    )]
    NotHeld {
        /// The lock's name.
        name: String,
        /// The id of the client that tried to unlock it ([`crate::Client::id`]).
        client_id: String,
        /// The thread number in the lock's owner field (see [`crate::Client::thread_id`]).
        thread_id: u64,
    },

    /// The lock was held but is known to be no longer ours: its lease ran out
    /// before the watchdog could renew it, or its key was deleted or
    /// overwritten by someone else. Work done under it may have overlapped with
    /// another holder.
    #[error("lock `{name}` was lost: {reason}")]
    Lost {
        /// The lock's name.
        name: String,
        /// How it was lost.
        reason: LostReason,
    },

    /// No connection to Redis could be had: the server refused the
    /// connection (reported at once), did not answer within the connect
    /// timeout, or every pooled connection stayed busy for that long.
    #[error("Redis is unavailable: {reason}")]
    Unavailable {
        /// What failed, as reported by the connection pool.
        reason: String,
    },

    /// A TLS (`rediss://`) connection was refused over a certificate: the
    /// server's is not signed by a trusted CA (the one given to
    /// `ClientBuilder::tls_root_ca_pem`, or the system's), does not carry the
    /// URL's host name, has expired or is otherwise invalid; or the server
    /// refused the client's certificate or its absence (mutual TLS). A
    /// configuration error: retrying will not fix it, so it is not
    /// [transient](Error::is_transient), and it is reported on the first
    /// connection attempt, without waiting for the connect timeout. Nothing
    /// was sent to Redis. Only with the `tls-rustls` feature.
    #[error("TLS certificate rejected connecting to {server}: {reason}")]
    TlsCertificate {
        /// The server connected to (`host:port`).
        server: String,
        /// The certificate problem, as the TLS library reports it.
        reason: String,
    },

    /// An operation gave up after its time limit: most often a reply that
    /// did not come within the response timeout. Whether the server ran the
    /// command is unknown.
    #[error("{operation} timed out after {after:?}")]
    Timeout {
        /// What was being done.
        operation: &'static str,
        /// How long it was given.
        after: Duration,
    },

    /// A command failed on the connection or on the server: an I/O error or
    /// a connection dropped mid-command (after the one resend on a fresh
    /// connection), a wrong password (`WRONGPASS`, `NOAUTH`), a command or
    /// key the ACL user may not use (`NOPERM`), `WRONGTYPE` when the lock's
    /// key is not a hash, a server that is `BUSY`, `LOADING` or in
    /// `CLUSTERDOWN`/`MASTERDOWN`, a script error. [`Error::is_transient`]
    /// tells the passing ones (I/O, dropped, `BUSY`, `LOADING`, `TRYAGAIN`,
    /// `MASTERDOWN`) from the permanent ones (authentication, ACL,
    /// `WRONGTYPE`). A reply that does not come within the response timeout
    /// is never this variant: it is [`Error::Timeout`] (or, for a
    /// synchronizer's non-idempotent operation, [`Error::OutcomeUnknown`]).
    #[error("Redis error: {0}")]
    Redis(#[from] redis::RedisError),

    /// Redis answered something the Redisson protocol does not allow: a
    /// script's reply of another shape than the script returns (a server
    /// that is not Redis-compatible, or a key rewritten between two calls
    /// of one operation). Not transient; worth a bug report with the
    /// message.
    #[error("unexpected reply from Redis: {0}")]
    UnexpectedReply(String),

    /// The client was created in another process: this process is a
    /// `fork()`ed child that inherited it. The child would share the parent's
    /// client id and thread numbers, so it would "re-enter" the parent's
    /// locks while the parent holds them, and it has none of the parent's
    /// watchdog or subscriber threads. Build a new [`crate::Client`] in the
    /// child.
    #[error(
        "this client was created by process {created_by} and cannot be used in process {used_by} (a fork): build a new client in the child"
    )]
    ForkedProcess {
        /// The process that built the client.
        created_by: u32,
        /// The process trying to use it.
        used_by: u32,
    },

    /// A non-reentrant lock was taken again by the thread that holds it
    /// (Redisson throws `IllegalMonitorStateException`). Reported at once,
    /// never a deadlock.
    #[error("lock `{name}` is not reentrant and is already held by this thread")]
    NotReentrant {
        /// The lock's name.
        name: String,
    },

    /// Replica sync is on ([`crate::ClientBuilder::check_lock_synced_replicas`])
    /// and no connected replica acknowledged the lock write within the sync
    /// timeout, on every attempt: Redisson's `NoSyncedSlavesException`. After
    /// an acquire, the lock is not held (each attempt was undone); after an
    /// unlock, the master has released it but a failover now could bring it
    /// back until its lease runs out. Transient: the replicas may catch up.
    #[error(
        "{operation} of lock `{name}`: none of {replicas} connected replica(s) acknowledged the write"
    )]
    NotReplicated {
        /// What was being done (`lock`, `unlock`).
        operation: &'static str,
        /// The lock's name.
        name: String,
        /// How many replicas were connected to the master.
        replicas: u32,
    },

    /// The key inspected is not a Redisson lock: it (or one of the keys
    /// derived from its name: the fair queue, the fair deadlines, the fenced
    /// token) has a type no lock gives it, or it is a hash whose fields are
    /// not `<uuid>:<thread>`, `<uuid>:<thread>:write` and `mode`. Reported
    /// by [`crate::Client::inspect`]; never a guess at what the key is.
    #[error("`{name}` is not a Redisson lock: {found}")]
    NotALock {
        /// The name inspected.
        name: String,
        /// What was found instead, e.g. "`name` is a string".
        found: String,
    },

    /// A synchronizer's operation that is not idempotent (a semaphore's
    /// acquire or release, a latch's count-down) may or may not have run:
    /// its reply was lost (a timeout, a dropped connection). It is never sent
    /// again, since running it twice would take or return permits twice; the
    /// caller decides (for an acquire: the permits may be held, release
    /// them if the count says so).
    #[error("{operation} on `{name}`: the outcome is unknown ({cause})")]
    OutcomeUnknown {
        /// What was being done (`acquire`, `release`, `count_down`).
        operation: &'static str,
        /// The synchronizer's name.
        name: String,
        /// Why: the lost reply's error.
        cause: String,
    },

    /// A caller-supplied value cannot be used: an empty lock name, a zero or
    /// oversized lease, an unparsable URL, TLS certificates given with a
    /// `redis://` URL, in a cluster a synchronizer name whose channel would
    /// land in another slot than its key, ... Not transient: fix the caller.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A wait was cancelled through the [`crate::CancelToken`] of the
    /// handle it went through (`with_cancel`): it gave up holding nothing
    /// (an acquisition that raced the cancel was released, a fair lock's
    /// waiter left the queue). A token already cancelled fails the call
    /// before anything is sent. Not transient: the token stays cancelled.
    #[error("the wait was cancelled")]
    Cancelled,

    /// The client was shut down ([`crate::Client::shutdown`]): a thread
    /// waiting when it began was woken with this, and every acquisition
    /// since fails with it before anything is sent. Not transient: build a
    /// new client.
    #[error("the client was shut down")]
    Closed,
}

impl Error {
    /// `true` for failures that may go away by themselves: the server was
    /// unreachable, busy, loading, or a reply timed out. Retrying such an
    /// operation later is reasonable; retrying anything else is not.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Unavailable { .. } | Error::Timeout { .. } | Error::NotReplicated { .. } => true,
            Error::Redis(e) => {
                e.is_io_error()
                    || e.is_timeout()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || Verdict::of_redis(e).is_transient()
            }
            _ => false,
        }
    }

    /// The connection the command went out on was closed or reset.
    pub(crate) fn is_connection_dropped(&self) -> bool {
        matches!(self, Error::Redis(e) if e.is_connection_dropped())
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument(message.into())
    }
}

/// Why a held lock is known to be no longer held (see [`Error::Lost`] and
/// [`crate::LockGuard::lost_reason`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReason {
    /// The lease ran out by the local monotonic clock before a renewal (or
    /// a reentry) got through, e.g. while Redis was unreachable.
    LeaseExpired,
    /// Redis no longer has this owner's field: the key expired, was deleted
    /// (`DEL`, eviction, `FLUSHALL`, another client's force unlock, Java's
    /// `forceUnlock()` included) or now belongs to another owner. A holder
    /// learns it at the watchdog's next renewal: within a third of the
    /// watchdog timeout (10 s with the defaults) plus a round trip.
    KeyGone,
    /// The lock's key now holds a value of another type (`WRONGTYPE`).
    Overwritten,
    /// This client force-unlocked it ([`crate::Lock::force_unlock`]).
    ForceUnlocked,
    /// When this thread took the lock again, Redis said its earlier holds
    /// were gone: the lock had been lost (and maybe held by someone else)
    /// in between, and the new acquisition is a fresh hold.
    Replaced,
    /// This thread released it by another way: an unlock with an explicit
    /// request id, or the release of another guard of the same hold found
    /// fewer holds in Redis than this thread counted.
    Released,
    /// The client was shut down ([`crate::Client::shutdown`]) while this
    /// guard was still held: the shutdown released the lock itself.
    Shutdown,
}

impl LostReason {
    pub(crate) fn from_code(code: u8) -> Option<LostReason> {
        Some(match code {
            1 => LostReason::LeaseExpired,
            2 => LostReason::KeyGone,
            3 => LostReason::Overwritten,
            4 => LostReason::ForceUnlocked,
            5 => LostReason::Replaced,
            6 => LostReason::Released,
            7 => LostReason::Shutdown,
            _ => return None,
        })
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            LostReason::LeaseExpired => 1,
            LostReason::KeyGone => 2,
            LostReason::Overwritten => 3,
            LostReason::ForceUnlocked => 4,
            LostReason::Replaced => 5,
            LostReason::Released => 6,
            LostReason::Shutdown => 7,
        }
    }
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LostReason::LeaseExpired => "its lease ran out before it could be renewed",
            LostReason::KeyGone => "its key or owner field is gone from Redis",
            LostReason::Overwritten => "its key was replaced by a value of another type",
            LostReason::ForceUnlocked => "it was force-unlocked by this client",
            LostReason::Replaced => {
                "it was gone when this thread took the lock again (a fresh hold replaced it)"
            }
            LostReason::Released => "this thread released it by another way",
            LostReason::Shutdown => "the client was shut down and released it",
        })
    }
}
