//! Redisson's non-reentrant lock (`getNonReentrantLock`, since 4.4.0,
//! docs/wire-format.md, "Non-reentrant lock"): RLock's hash, channel, unlock, force unlock and
//! renewal,
//! with an acquire that refuses the holder a second hold.

use std::sync::LazyLock;

use redis::ConnectionLike;

use crate::lua::Lua;

use super::replies::acquire_reply;
use super::sealed::Protocol;
use super::{AcquireRequest, Acquired, Reentrant};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::names::NON_REENTRANT_REACQUIRE;

static ACQUIRE: LazyLock<Lua> = lua_script!("nonreentrant_acquire.lua");

/// The non-reentrant lock, Redisson's `NonReentrantLock`: see
/// [`crate::NonReentrantLock`].
#[derive(Debug)]
pub struct NonReentrant(Reentrant);

impl Protocol for NonReentrant {
    const REDISSON: &'static str = "RedissonNonReentrantLock";

    fn new(name: &str, config: &Config) -> Self {
        NonReentrant(Reentrant::new(name, config))
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

    rlock_layout!(0);

    fn reentrant(&self) -> bool {
        false
    }
}
