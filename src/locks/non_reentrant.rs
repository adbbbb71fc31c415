//! Redisson's non-reentrant lock (`getNonReentrantLock`, since 4.4.0,
//! PROTOCOL §7): RLock's hash, channel, unlock, force unlock and renewal,
//! with an acquire that refuses the holder a second hold.

use std::sync::LazyLock;

use redis::ConnectionLike;

use crate::lua::Lua;

use super::protocol::Protocol;
use super::{AcquireRequest, Acquired, Reentrant, Wake};
use crate::error::{Error, Result};
use crate::names::NON_REENTRANT_REACQUIRE;
use crate::scripts::acquire_reply;

static ACQUIRE: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/nonreentrant_acquire.lua")));

/// The non-reentrant lock, Redisson's `NonReentrantLock`: see
/// [`crate::NonReentrantLock`].
#[derive(Debug)]
pub struct NonReentrant {
    rlock: Reentrant,
}

impl Protocol for NonReentrant {
    const REDISSON: &'static str = "RedissonNonReentrantLock";

    fn new(name: &str) -> Self {
        NonReentrant {
            rlock: Reentrant::new(name),
        }
    }

    fn wake<'a>(&'a self, name: &'a str, field: &'a str) -> Wake<'a> {
        self.rlock.wake(name, field)
    }

    fn acquire(
        &self,
        con: &mut dyn ConnectionLike,
        request: &AcquireRequest<'_>,
    ) -> Result<Acquired> {
        let reply: redis::RedisResult<Option<i64>> = ACQUIRE
            .key(request.name)
            .arg(request.lease_ms)
            .arg(request.field)
            .arg(request.known)
            .arg(NON_REENTRANT_REACQUIRE)
            .invoke(con);
        match reply {
            Ok(reply) => Ok(acquire_reply(reply)),
            // Redis 7 answers `ERR NON_REENTRANT_REACQUIRE`; older servers
            // may use the text as the error code itself.
            Err(e)
                if e.code() == Some(NON_REENTRANT_REACQUIRE)
                    || e.detail()
                        .is_some_and(|detail| detail.contains(NON_REENTRANT_REACQUIRE)) =>
            {
                Err(Error::NotReentrant {
                    name: request.name.to_owned(),
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    super::rlock_unlocks!(rlock);

    fn reentrant(&self) -> bool {
        false
    }
}

/// A non-reentrant lock: byte-for-byte a Redisson non-reentrant lock
/// (`getNonReentrantLock`, Redisson 4.4.0 and later).
///
/// The reentrant lock's hash, channel, unlock and renewal (so it excludes an
/// `RLock` of the same name and wakes and is woken like one), but a thread
/// that already holds it cannot take it again: [`lock`](crate::Lock::lock),
/// [`try_lock`](crate::Lock::try_lock) and the timed variants return
/// [`Error::NotReentrant`] at once, without a round trip, instead of
/// deadlocking on itself. Its hold count is never more than 1.
///
/// Redisson's acquire script refuses the holder with the error reply
/// `NON_REENTRANT_REACQUIRE`; this crate's answers the same to a caller that
/// counts a hold, but takes a field the calling thread counts no hold on
/// (left by an acquire whose reply was lost) afresh, so a resent acquire
/// never refuses its own first attempt.
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.non_reentrant_lock("job");
/// let guard = lock.lock()?;
/// assert!(matches!(lock.try_lock(), Err(redisson_lock::Error::NotReentrant { .. })));
/// guard.unlock()?;
/// # Ok(()) }
/// ```
pub type NonReentrantLock = crate::Lock<NonReentrant>;
