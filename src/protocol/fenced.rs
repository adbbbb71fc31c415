//! Redisson's `FencedLock` (`getFencedLock`, docs/wire-format.md, "Fenced lock"): RLock's hash,
//! channel, unlock and renewal, plus a token counter
//! `redisson_lock_token:{<name>}` INCRed on every acquisition (reentry
//! included), which a protected resource can use to refuse a stale holder.

use std::sync::LazyLock;

use redis::ConnectionLike;

use crate::lua::Lua;

use super::sealed::Protocol;
use super::{AcquireRequest, Acquired, Reentrant, reentrant};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::names;

static ACQUIRE: LazyLock<Lua> = lua_script!("fenced_acquire.lua");

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

    fn new(name: &str, config: &Config) -> Self {
        Fenced {
            rlock: Reentrant::new(name, config),
            token_key: names::prefix_name(names::TOKEN_PREFIX, name),
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
            // 0 ms is 1 ms: zero means "free, not your turn" (`Acquired::No`).
            _ => Acquired::No {
                ttl: u64::try_from(value)
                    .ok()
                    .map(|ms| std::time::Duration::from_millis(ms.max(1))),
            },
        })
    }

    rlock_layout!(rlock);
}
