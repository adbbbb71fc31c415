//! Redisson's `RCountDownLatch` on the wire (docs/synchronizers.md): a string
//! key holding the count, the channel
//! `redisson_countdownlatch__channel__{<name>}`, and three scripts, each
//! given `[<name>, <channel>]` as KEYS and the publish command (`publish`
//! or `spublish`) as an argument. Messages are `0` (the count reached 0)
//! and `1` (a count was set, or the latch deleted), decimal text as Java's
//! `LongCodec` reads them.
//!
//! The scripts are this crate's own text (so their SHA-1 is not Redisson's:
//! they do not share Redis's script cache with Java 4.x), with Redisson's
//! keys, values and publishes.

use std::sync::LazyLock;

use redis::{ConnectionLike, Value};

use crate::error::{Error, Result};
use crate::lua::Lua;
use crate::names::{LATCH_NEW_COUNT_MESSAGE, LATCH_ZERO_COUNT_MESSAGE};

static COUNT_DOWN: LazyLock<Lua> = super::lua_script!("latch_count_down.lua");
static TRY_SET_COUNT: LazyLock<Lua> = super::lua_script!("latch_try_set_count.lua");
static DELETE: LazyLock<Lua> = super::lua_script!("latch_delete.lua");

/// One call of `script`: KEYS `[<name>, <channel>]`, ARGV `[message,
/// count (when given), publish]`.
fn call(
    con: &mut dyn ConnectionLike,
    script: &Lua,
    [name, channel]: [&str; 2],
    message: &str,
    count: Option<u64>,
    publish: &str,
) -> Result<Value> {
    let mut invocation = script.key(name);
    invocation.key(channel).arg(message);
    if let Some(count) = count {
        invocation.arg(count);
    }
    Ok(invocation.arg(publish).invoke(con)?)
}

/// `trySetCount`: sets `count` and publishes `1` if `name` has no key;
/// `true` when it did. One round trip.
pub(crate) fn try_set_count(
    con: &mut dyn ConnectionLike,
    name: &str,
    channel: &str,
    count: u64,
    publish: &str,
) -> Result<bool> {
    let message = LATCH_NEW_COUNT_MESSAGE;
    let reply = call(
        con,
        &TRY_SET_COUNT,
        [name, channel],
        message,
        Some(count),
        publish,
    )?;
    flag(reply, "try-set-count")
}

/// `countDown`: decrements; the decrement that reaches exactly 0 deletes
/// the key and publishes `0`. One round trip. Not idempotent: never resend.
pub(crate) fn count_down(
    con: &mut dyn ConnectionLike,
    name: &str,
    channel: &str,
    publish: &str,
) -> Result<()> {
    let message = LATCH_ZERO_COUNT_MESSAGE;
    call(con, &COUNT_DOWN, [name, channel], message, None, publish)?;
    Ok(())
}

/// `delete`: deletes the key and, if there was one, publishes `1`; `true`
/// when it did. One round trip.
pub(crate) fn delete(
    con: &mut dyn ConnectionLike,
    name: &str,
    channel: &str,
    publish: &str,
) -> Result<bool> {
    let message = LATCH_NEW_COUNT_MESSAGE;
    let reply = call(con, &DELETE, [name, channel], message, None, publish)?;
    flag(reply, "delete")
}

/// `getCount`: `GET <name>`, a missing key reading as 0. The value is
/// Java's `long`; a negative one (Java's `trySetCount(-n)`) is returned as
/// is. One round trip. A key of another type is `WRONGTYPE`
/// ([`Error::Redis`]); a string that is not a decimal integer is
/// [`Error::UnexpectedReply`].
pub(crate) fn count(con: &mut dyn ConnectionLike, name: &str) -> Result<i64> {
    let reply: Option<Vec<u8>> = redis::cmd("GET").arg(name).query(con)?;
    let Some(bytes) = reply else {
        return Ok(0);
    };
    std::str::from_utf8(&bytes)
        .ok()
        .and_then(|text| text.parse::<i64>().ok())
        .ok_or_else(|| {
            Error::UnexpectedReply(format!(
                "latch `{name}` holds {:?}, not a count",
                String::from_utf8_lossy(&bytes)
            ))
        })
}

/// A script's 1/0 reply.
fn flag(reply: Value, script: &str) -> Result<bool> {
    match reply {
        Value::Int(1) => Ok(true),
        Value::Int(0) => Ok(false),
        other => Err(Error::UnexpectedReply(format!(
            "latch {script} script answered {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_one_and_zero_only() {
        assert!(flag(Value::Int(1), "delete").expect("1"));
        assert!(!flag(Value::Int(0), "delete").expect("0"));
        assert!(flag(Value::Int(2), "delete").is_err());
        assert!(flag(Value::Nil, "delete").is_err());
    }
}
