//! The crate's one error type.

use std::time::Duration;

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when taking, holding or releasing a lock.
///
/// The variants are the decisions a caller can make: retry later
/// ([`Error::Unavailable`], [`Error::Redis`] with [`Error::is_transient`]),
/// stop trusting a critical section ([`Error::Lost`]), fix a bug in the calling
/// code ([`Error::NotHeld`], [`Error::InvalidArgument`]).
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
    #[error("lock `{name}` was lost: its lease ran out or its key was removed")]
    Lost {
        /// The lock's name.
        name: String,
    },

    /// No connection to Redis could be had in time (server down, pool exhausted).
    #[error("Redis is unavailable: {reason}")]
    Unavailable {
        /// What failed, as reported by the connection pool.
        reason: String,
    },

    /// An operation gave up after its time limit.
    #[error("{operation} timed out after {after:?}")]
    Timeout {
        /// What was being done.
        operation: &'static str,
        /// How long it was given.
        after: Duration,
    },

    /// A command failed on the connection or on the server (I/O error, response
    /// timeout, `WRONGTYPE` when the lock's key is not a hash, ...).
    #[error("Redis error: {0}")]
    Redis(#[from] redis::RedisError),

    /// Redis answered something the Redisson protocol does not allow.
    #[error("unexpected reply from Redis: {0}")]
    UnexpectedReply(String),

    /// A caller-supplied value cannot be used: an empty lock name, a zero or
    /// oversized lease, an unparsable URL, ...
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl Error {
    /// `true` for failures that may go away by themselves: the server was
    /// unreachable, busy, loading, or a reply timed out. Retrying such an
    /// operation later is reasonable; retrying anything else is not.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Unavailable { .. } | Error::Timeout { .. } => true,
            Error::Redis(e) => {
                e.is_io_error()
                    || e.is_timeout()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || matches!(
                        e.code(),
                        Some("BUSY" | "LOADING" | "TRYAGAIN" | "MASTERDOWN")
                    )
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

impl From<r2d2::Error> for Error {
    fn from(e: r2d2::Error) -> Self {
        Error::Unavailable {
            reason: e.to_string(),
        }
    }
}
