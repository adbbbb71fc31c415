//! What the lock scripts' replies mean, read once for every kind, and the
//! one script every kind shares for a composite's final lease.

use std::cell::Cell;
use std::sync::LazyLock;
use std::time::Duration;

use redis::{ConnectionLike, Value};

use crate::lua::Lua;

use crate::error::{Error, Result};
use crate::protocol::Acquired;

static EXPIRE_IF_HELD: LazyLock<Lua> = super::lua_script!("expire_if_held.lua");

/// Sets `name`'s TTL to `lease_ms` if `field` still holds it; `false` if
/// not (MultiLock's and RedLock's final lease, docs/wire-format.md, "MultiLock and RedLock").
pub(crate) fn expire_if_held(
    con: &mut dyn ConnectionLike,
    name: &str,
    field: &str,
    lease_ms: u64,
) -> Result<bool> {
    let set: i64 = EXPIRE_IF_HELD
        .key(name)
        .arg(field)
        .arg(lease_ms)
        .invoke(con)?;
    Ok(set == 1)
}

/// The outcome of one unlock attempt (docs/wire-format.md, "Release (a guard's unlock)").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnlockOutcome {
    /// That was the last hold: the key is deleted and waiters were told.
    Released,
    /// The owner still holds the lock (reentrancy); its lease was reset.
    StillHeld,
}

/// Reads an acquire script's reply the way every RLock-like script
/// answers (docs/wire-format.md, "Acquire"): nil acquired, `-3` acquired afresh (the crate's
/// own), otherwise the holder's TTL (`-1`: no TTL).
pub(crate) fn acquire_reply(reply: Option<i64>) -> Acquired {
    match reply {
        None => Acquired::Yes {
            replaced: false,
            token: None,
        },
        Some(-3) => Acquired::Yes {
            replaced: true,
            token: None,
        },
        // A TTL of 0 ms (the key expires within the millisecond) is 1 ms:
        // zero means "free, not your turn" (see `Acquired::No`).
        Some(ttl) if ttl >= 0 => Acquired::No {
            ttl: Some(Duration::from_millis(ttl.unsigned_abs().max(1))),
        },
        // -1: the key exists without a TTL. (-2 cannot happen: the key exists.)
        Some(_) => Acquired::No { ttl: None },
    }
}

/// Reads an unlock script's reply: 1 freed, 0 holds remain, nil not held.
/// With `kept_ttl` (a reader's release), `{0, ttl}` also says that holds
/// remain, and that the hash now lives `ttl` ms (the longest-lived
/// remaining marker's): stored there, the guard's deadline follows it.
pub(crate) fn unlock_outcome(
    reply: Value,
    kept_ttl: Option<&Cell<Option<u64>>>,
) -> Result<Option<UnlockOutcome>> {
    if let Some(kept_ttl) = kept_ttl
        && let Value::Array(items) = &reply
        && let [Value::Int(0), Value::Int(ttl)] = items.as_slice()
    {
        kept_ttl.set(u64::try_from(*ttl).ok());
        return Ok(Some(UnlockOutcome::StillHeld));
    }
    let reply: Option<i64> = redis::from_redis_value(reply).map_err(redis::RedisError::from)?;
    match reply {
        None => Ok(None),
        Some(1) => Ok(Some(UnlockOutcome::Released)),
        Some(0) => Ok(Some(UnlockOutcome::StillHeld)),
        Some(other) => Err(Error::UnexpectedReply(format!(
            "unlock script returned {other}"
        ))),
    }
}
