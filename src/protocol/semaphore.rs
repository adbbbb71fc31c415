//! Redisson's `RSemaphore` (`getSemaphore`, docs/synchronizers.md): a counter
//! key holding the available permits as decimal text, and the channel
//! `redisson_sc:{<name>}` on which every write that adds permits publishes
//! the new count (Java's waiters have no other wake-up, §2.3).
//!
//! One function per script; each sends one `EVALSHA` (or a plain `GET` /
//! `DEL`) on the connection it is given and reads the reply. Retrying,
//! waiting and replica sync are the caller's. Counts are Java `int`s: the
//! callers keep arguments within `i32` and the scripts refuse a total that
//! would leave it.

use std::sync::LazyLock;

use redis::{ConnectionLike, FromRedisValue, ToRedisArgs, Value};

use crate::error::{Error, Result};
use crate::lua::Lua;

static TRY_ACQUIRE: LazyLock<Lua> = super::lua_script!("semaphore_try_acquire.lua");
static RELEASE: LazyLock<Lua> = super::lua_script!("semaphore_release.lua");
static RELEASE_IF_EXISTS: LazyLock<Lua> = super::lua_script!("semaphore_release_if_exists.lua");
static DRAIN: LazyLock<Lua> = super::lua_script!("semaphore_drain.lua");
static TRY_SET: LazyLock<Lua> = super::lua_script!("semaphore_try_set_permits.lua");
static TRY_SET_TTL: LazyLock<Lua> = super::lua_script!("semaphore_try_set_permits_ttl.lua");
static ADD: LazyLock<Lua> = super::lua_script!("semaphore_add_permits.lua");

/// The most permits a Redisson semaphore can count (Java's `int`).
pub(crate) const MAX_PERMITS: i64 = i32::MAX as i64;

/// The keys of the semaphore called `name`: the counter (`name` itself)
/// and the channel, plus the publish command of the client's topology.
#[derive(Clone, Debug)]
pub(crate) struct SemaphoreKeys<'a> {
    pub name: &'a str,
    pub channel: &'a str,
    /// `publish` or `spublish` (docs/wire-format.md, "Pub/sub").
    pub publish: &'static str,
}

/// One call of `script` with the keys (counter, channel) and the arguments
/// (`n`, the publish command): the shape of every script that changes the
/// count by `n` and publishes.
fn change<T: FromRedisValue>(
    con: &mut dyn ConnectionLike,
    script: &Lua,
    keys: &SemaphoreKeys<'_>,
    n: impl ToRedisArgs,
) -> Result<T> {
    Ok(script
        .key(keys.name)
        .key(keys.channel)
        .arg(n)
        .arg(keys.publish)
        .invoke(con)?)
}

/// Takes `n` permits if that many are available (`tryAcquire`; no publish).
/// `true` when taken. `n` must be 1..=`i32::MAX` (Redisson's script adds
/// permits for a negative `n`).
pub(crate) fn try_acquire(con: &mut dyn ConnectionLike, name: &str, n: u32) -> Result<bool> {
    flag(TRY_ACQUIRE.key(name).arg(n).invoke(con)?)
}

/// Adds `n` permits (`release`), creating the key if missing, and publishes
/// the new total.
pub(crate) fn release(
    con: &mut dyn ConnectionLike,
    keys: &SemaphoreKeys<'_>,
    n: u32,
) -> Result<()> {
    change::<Value>(con, &RELEASE, keys, n)?;
    Ok(())
}

/// Adds `n` permits only if the key exists (`releaseIfExists`), and then
/// publishes the new total. `true` when it existed.
pub(crate) fn release_if_exists(
    con: &mut dyn ConnectionLike,
    keys: &SemaphoreKeys<'_>,
    n: u32,
) -> Result<bool> {
    flag(change(con, &RELEASE_IF_EXISTS, keys, n)?)
}

/// Sets the counter to 0 (`drainPermits`; drops any TTL, no publish) and
/// returns what it held (0 for a missing key; may be negative).
pub(crate) fn drain(con: &mut dyn ConnectionLike, name: &str) -> Result<i64> {
    Ok(DRAIN.key(name).invoke(con)?)
}

/// Creates the counter with `n` permits if it does not exist
/// (`trySetPermits`, with a TTL in ms when given) and publishes `n`. `true`
/// when set.
pub(crate) fn try_set_permits(
    con: &mut dyn ConnectionLike,
    keys: &SemaphoreKeys<'_>,
    n: u32,
    ttl_ms: Option<u64>,
) -> Result<bool> {
    let mut invocation = match ttl_ms {
        None => TRY_SET.key(keys.name),
        Some(_) => TRY_SET_TTL.key(keys.name),
    };
    invocation.key(keys.channel).arg(n).arg(keys.publish);
    if let Some(ttl) = ttl_ms {
        invocation.arg(ttl);
    }
    flag(invocation.invoke(con)?)
}

/// Adds `delta` (may be negative) to the counter (`addPermits`; a missing
/// key is 0; drops any TTL) and publishes the new value, whatever its sign.
pub(crate) fn add_permits(
    con: &mut dyn ConnectionLike,
    keys: &SemaphoreKeys<'_>,
    delta: i64,
) -> Result<()> {
    change::<Value>(con, &ADD, keys, delta)?;
    Ok(())
}

/// The available permits (`availablePermits`: a `GET`; a missing key is 0,
/// the count may be negative).
pub(crate) fn available(con: &mut dyn ConnectionLike, name: &str) -> Result<i64> {
    let value: Option<String> = redis::cmd("GET").arg(name).query(con)?;
    match value {
        None => Ok(0),
        Some(text) => text.parse().map_err(|_| {
            Error::UnexpectedReply(format!(
                "semaphore `{name}` holds `{text}`, not a permit count"
            ))
        }),
    }
}

/// Deletes the counter (`delete`: a `DEL`, no publish). `true` if it existed.
pub(crate) fn delete(con: &mut dyn ConnectionLike, name: &str) -> Result<bool> {
    let deleted: i64 = redis::cmd("DEL").arg(name).query(con)?;
    Ok(deleted > 0)
}

/// A script's integer 1/0.
fn flag(reply: i64) -> Result<bool> {
    match reply {
        1 => Ok(true),
        0 => Ok(false),
        other => Err(Error::UnexpectedReply(format!(
            "a semaphore script answered {other}, not 1 or 0"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_parses_as_lua_text() {
        for script in [
            &TRY_ACQUIRE,
            &RELEASE,
            &RELEASE_IF_EXISTS,
            &DRAIN,
            &TRY_SET,
            &TRY_SET_TTL,
            &ADD,
        ] {
            assert_eq!(script.get_hash().len(), 40);
        }
    }

    #[test]
    fn flags_are_one_or_zero() {
        assert!(flag(1).expect("1"));
        assert!(!flag(0).expect("0"));
        assert!(flag(2).is_err());
    }
}
