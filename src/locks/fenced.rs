//! Redisson's `FencedLock` (`getFencedLock`, PROTOCOL §5): RLock's hash,
//! channel, unlock and renewal, plus a token counter
//! `redisson_lock_token:{<name>}` INCRed on every acquisition (reentry
//! included), which a protected resource can use to refuse a stale holder.

use std::borrow::Cow;
use std::sync::LazyLock;

use redis::ConnectionLike;

use crate::lua::Lua;

use super::protocol::Protocol;
use super::{AcquireRequest, Acquired, Reentrant, Wake, reentrant};
use crate::error::{Error, Result};
use crate::names;

static ACQUIRE: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/fenced_acquire.lua")));

/// The fenced lock, Redisson's `FencedLock`: see [`crate::FencedLock`].
#[derive(Debug)]
pub struct Fenced {
    rlock: Reentrant,
    token_key: String,
}

impl Fenced {
    /// The key of the token counter.
    pub(crate) fn token_key(&self) -> &str {
        &self.token_key
    }
}

impl Protocol for Fenced {
    const REDISSON: &'static str = "RedissonFencedLock";

    fn new(name: &str) -> Self {
        Fenced {
            rlock: Reentrant::new(name),
            token_key: names::prefix_name(names::TOKEN_PREFIX, name),
        }
    }

    fn wake<'a>(&'a self, name: &'a str, _field: &'a str) -> Wake<'a> {
        Wake::Channel {
            channel: Cow::Borrowed(self.rlock.channel()),
            entry: Cow::Borrowed(name),
        }
    }

    fn acquire(
        &self,
        con: &mut dyn ConnectionLike,
        request: &AcquireRequest<'_>,
    ) -> Result<Acquired> {
        let (state, value): (i64, i64) =
            reentrant::acquire_invocation(&ACQUIRE, request, &[&self.token_key]).invoke(con)?;
        let token = || {
            u64::try_from(value)
                .map_err(|_| Error::UnexpectedReply(format!("fenced token {value}")))
        };
        Ok(match state {
            1 => Acquired::Yes {
                replaced: false,
                token: Some(token()?),
            },
            3 => Acquired::Yes {
                replaced: true,
                token: Some(token()?),
            },
            _ => Acquired::No {
                ttl: u64::try_from(value)
                    .ok()
                    .map(std::time::Duration::from_millis),
            },
        })
    }

    super::rlock_unlocks!(rlock);
}

/// A fenced lock: byte-for-byte a Redisson `FencedLock` (`getFencedLock`).
///
/// It is the reentrant lock (same hash, channel, unlock and renewal, so it
/// excludes an `RLock` of the same name) plus a counter
/// `redisson_lock_token:{<name>}` that every acquisition, reentry included,
/// increments. Each guard carries the token its acquisition got
/// ([`LockGuard::token`](crate::LockGuard::token)); tokens strictly increase
/// across every holder, Java or Rust. Pass the token to the resource you
/// protect and let it refuse a token lower than one it has seen: that stops a
/// holder that was paused past its lease, which no lock alone can.
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.fenced_lock("ledger");
/// let guard = lock.lock()?;
/// let token = guard.token(); // send it along with every write
/// assert_eq!(lock.token()?, Some(token));
/// # Ok(()) }
/// ```
pub type FencedLock = crate::Lock<Fenced>;

impl crate::Lock<Fenced> {
    /// The last token handed out (`GET redisson_lock_token:{<name>}`,
    /// Redisson's `getToken`); `None` before the first acquisition. One
    /// round trip.
    pub fn token(&self) -> Result<Option<u64>> {
        self.check()?;
        self.client.with_connection(&self.name, "token", |con, _| {
            Ok(redis::cmd("GET").arg(self.kind.token_key()).query(con)?)
        })
    }
}

impl crate::LockGuard<Fenced> {
    /// The token this acquisition got: greater than every token handed out
    /// before it, to any holder. No round trip.
    pub fn token(&self) -> u64 {
        self.fencing_token().unwrap_or(0)
    }
}
