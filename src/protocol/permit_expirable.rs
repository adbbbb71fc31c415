//! Redisson's `RPermitExpirableSemaphore` on the wire (docs/synchronizers.md):
//! its keys, its eleven scripts (`lua/permit_expirable_*.lua`, Redisson's semantics in
//! this crate's text, KEYS in Redisson's order) and how their replies read.
//!
//! * `<name>`: a STRING, the available permits;
//! * `{<name>}:timeout`: a ZSET of every acquired permit, member = the raw
//!   16-byte id (Redisson 3.17.0+) or its 32-character lowercase hex text
//!   (up to 3.16.8; [`PermitIdEncoding`]), score = its expiry in the
//!   caller's epoch ms, or [`PES_PERMANENT_SCORE`] for a permit without a
//!   lease. Acquires write the encoding they are given; every call that
//!   looks an id up sends both forms and finds either.
//! * `redisson_sc:{<name>}`: the channel, shared with `RSemaphore`; every
//!   payload is decimal integer text.
//!
//! Every function here is one script call (one round trip) on `con`;
//! whether it may be sent again, and how it waits, is the api layer's.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{ConnectionLike, Value};

use crate::config::PermitIdEncoding;
use crate::error::{Error, Result};
use crate::lua::{Invocation, Lua};
use crate::names::{self, PES_PERMANENT_SCORE};

static TRY_ACQUIRE: LazyLock<Lua> = lua_script!("permit_expirable_try_acquire.lua");
static TRY_RELEASE_ONE: LazyLock<Lua> = lua_script!("permit_expirable_try_release_one.lua");
static TRY_RELEASE_MANY: LazyLock<Lua> = lua_script!("permit_expirable_try_release_many.lua");
static AVAILABLE: LazyLock<Lua> = lua_script!("permit_expirable_available.lua");
static GET_PERMITS: LazyLock<Lua> = lua_script!("permit_expirable_get_permits.lua");
static ACQUIRED: LazyLock<Lua> = lua_script!("permit_expirable_acquired.lua");
static SET_PERMITS: LazyLock<Lua> = lua_script!("permit_expirable_set_permits.lua");
static TRY_SET_PERMITS: LazyLock<Lua> = lua_script!("permit_expirable_try_set_permits.lua");
static ADD_PERMITS: LazyLock<Lua> = lua_script!("permit_expirable_add_permits.lua");
static UPDATE_LEASE: LazyLock<Lua> = lua_script!("permit_expirable_update_lease.lua");
static GET_LEASE_TIME: LazyLock<Lua> = lua_script!("permit_expirable_get_lease_time.lua");

/// The keys of the permit-expirable semaphore `name`.
#[derive(Clone, Debug)]
pub(crate) struct PermitExpirableKeys {
    /// `<name>`: the available permits.
    pub name: String,
    /// `{<name>}:timeout`: the acquired permits' expiries.
    pub timeout: String,
    /// `redisson_sc:{<name>}`.
    pub channel: String,
}

impl PermitExpirableKeys {
    pub fn new(name: &str) -> PermitExpirableKeys {
        PermitExpirableKeys {
            name: name.to_owned(),
            timeout: names::permit_expirable_timeout_key(name),
            channel: names::semaphore_channel(name),
        }
    }

    /// A call of `script` with KEYS `[name, timeout, channel]`.
    fn timeout_first<'s>(&self, script: &'s Lua) -> Invocation<'s> {
        let mut invocation = script.key(&self.name);
        invocation.key(&self.timeout).key(&self.channel);
        invocation
    }

    /// A call of `script` with KEYS `[name, channel, timeout]`.
    fn channel_first<'s>(&self, script: &'s Lua) -> Invocation<'s> {
        let mut invocation = script.key(&self.name);
        invocation.key(&self.channel).key(&self.timeout);
        invocation
    }
}

/// `id` as 32 lowercase hex digits: how Redisson up to 3.16.8 stores it.
pub(crate) fn hex_id(id: &[u8; 16]) -> [u8; 32] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = [0; 32];
    for (i, byte) in id.iter().enumerate() {
        text[2 * i] = DIGITS[usize::from(byte >> 4)];
        text[2 * i + 1] = DIGITS[usize::from(byte & 0xf)];
    }
    text
}

/// Adds `id` to `invocation` as `encoding` stores it.
fn id_arg(invocation: &mut Invocation<'_>, id: &[u8; 16], encoding: PermitIdEncoding) {
    match encoding {
        PermitIdEncoding::Hex => invocation.arg(&hex_id(id)[..]),
        _ => invocation.arg(&id[..]),
    };
}

/// The expiry score of a permit granted at `now_ms` for `lease` (`None`:
/// permanent, the sentinel).
pub(crate) fn expiry_score(now_ms: u64, lease: Option<Duration>) -> u64 {
    match lease {
        None => PES_PERMANENT_SCORE,
        Some(lease) => now_ms.saturating_add(u64::try_from(lease.as_millis()).unwrap_or(u64::MAX)),
    }
}

/// What one acquire attempt found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TryAcquired {
    /// The ids were added: the permits are the caller's.
    Acquired,
    /// Not enough permits; the nearest finite expiry (client epoch ms), or
    /// `None` when every acquired permit is permanent (or none is).
    No { nearest_expiry_ms: Option<i64> },
}

/// One try-acquire of `ids.len()` permits, each expiring at `expiry`
/// (epoch ms or the sentinel), with the caller's clock `now_ms`; the ids
/// are stored as `encoding` says.
pub(crate) fn try_acquire(
    con: &mut dyn ConnectionLike,
    keys: &PermitExpirableKeys,
    ids: &[[u8; 16]],
    expiry: u64,
    now_ms: u64,
    publish: &str,
    encoding: PermitIdEncoding,
) -> Result<TryAcquired> {
    let mut invocation = keys.timeout_first(&TRY_ACQUIRE);
    invocation
        .arg(ids.len())
        .arg(expiry)
        .arg(now_ms)
        .arg(PES_PERMANENT_SCORE)
        .arg(publish);
    for id in ids {
        id_arg(&mut invocation, id, encoding);
    }
    let reply: Value = invocation.invoke(con)?;
    acquire_reply(&reply)
}

/// Reads a try-acquire reply tolerantly (docs/synchronizers.md): `OK` as a
/// bulk or status string, `:<ms>` as a bulk string (an integer or a float's
/// text), or nil.
pub(crate) fn acquire_reply(reply: &Value) -> Result<TryAcquired> {
    let text = match reply {
        Value::Nil => {
            return Ok(TryAcquired::No {
                nearest_expiry_ms: None,
            });
        }
        Value::Okay => return Ok(TryAcquired::Acquired),
        Value::SimpleString(s) => s.as_bytes(),
        Value::BulkString(bytes) => bytes.as_slice(),
        other => {
            return Err(Error::UnexpectedReply(format!(
                "permit-expirable semaphore acquire: {other:?}"
            )));
        }
    };
    let text = std::str::from_utf8(text).unwrap_or_default().trim();
    if text == "OK" {
        return Ok(TryAcquired::Acquired);
    }
    let bad = || Error::UnexpectedReply(format!("permit-expirable semaphore acquire: `{text}`"));
    let score = text.strip_prefix(':').ok_or_else(bad)?.trim();
    let ms = parse_int(score).ok_or_else(bad)?;
    Ok(TryAcquired::No {
        nearest_expiry_ms: Some(ms),
    })
}

/// An integer in text, or a float's text truncated (a score formatted as
/// `1.7e+12` by some server).
fn parse_int(text: &str) -> Option<i64> {
    text.parse::<i64>().ok().or_else(|| {
        let f = text.parse::<f64>().ok()?;
        f.is_finite().then_some(f as i64)
    })
}

/// An integer reply, as an integer or its text.
fn int_reply(reply: &Value, what: &str) -> Result<i64> {
    let n = match reply {
        Value::Int(n) => Some(*n),
        Value::Nil => Some(0),
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok().and_then(parse_int),
        Value::SimpleString(s) => parse_int(s),
        _ => None,
    };
    n.ok_or_else(|| Error::UnexpectedReply(format!("permit-expirable semaphore {what}: {reply:?}")))
}

/// Sends `invocation` and reads its integer reply ([`int_reply`]).
fn int_call(
    invocation: &mut Invocation<'_>,
    con: &mut dyn ConnectionLike,
    what: &str,
) -> Result<i64> {
    let reply: Value = invocation.invoke(con)?;
    int_reply(&reply, what)
}

/// Try-release of one id: `true` if it was held and unexpired. An id that
/// had expired but was not yet reclaimed goes back to the pool and reads
/// `false`, as in Redisson. Finds the id stored raw or as hex text.
pub(crate) fn try_release_one(
    con: &mut dyn ConnectionLike,
    keys: &PermitExpirableKeys,
    id: &[u8; 16],
    now_ms: u64,
    publish: &str,
) -> Result<bool> {
    let mut invocation = keys.channel_first(&TRY_RELEASE_ONE);
    invocation.arg(&id[..]).arg(1).arg(now_ms).arg(publish);
    invocation.arg(&hex_id(id)[..]);
    Ok(int_call(&mut invocation, con, "release")? == 1)
}

/// Try-release of several ids, all or nothing (Redisson 3.41.0+): the
/// number released, 0 when any id was missing or expired. Finds each id
/// stored raw or as hex text (both forms are sent, in pairs).
pub(crate) fn try_release_many(
    con: &mut dyn ConnectionLike,
    keys: &PermitExpirableKeys,
    ids: &[[u8; 16]],
    now_ms: u64,
    publish: &str,
) -> Result<i64> {
    let mut invocation = keys.channel_first(&TRY_RELEASE_MANY);
    invocation.arg(ids.len()).arg(now_ms).arg(publish);
    for id in ids {
        invocation.arg(&id[..]).arg(&hex_id(id)[..]);
    }
    int_call(&mut invocation, con, "release")
}

/// Which count [`count`] reads.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Count {
    /// `availablePermits`.
    Available,
    /// `getPermits`: available + acquired.
    Total,
    /// `acquiredPermits`.
    Acquired,
}

/// One of the three counts, after reclaiming every expired id.
pub(crate) fn count(
    con: &mut dyn ConnectionLike,
    keys: &PermitExpirableKeys,
    which: Count,
    now_ms: u64,
    publish: &str,
) -> Result<i64> {
    let script = match which {
        Count::Available => &AVAILABLE,
        Count::Total => &GET_PERMITS,
        Count::Acquired => &ACQUIRED,
    };
    let mut invocation = keys.timeout_first(script);
    invocation.arg(now_ms).arg(publish);
    int_call(&mut invocation, con, "count")
}

/// `setPermits`: available + acquired becomes `total`.
pub(crate) fn set_permits(
    con: &mut dyn ConnectionLike,
    keys: &PermitExpirableKeys,
    total: i64,
    publish: &str,
) -> Result<()> {
    let mut invocation = keys.channel_first(&SET_PERMITS);
    let _: Value = invocation.arg(total).arg(publish).invoke(con)?;
    Ok(())
}

/// `trySetPermits`: `true` if the counter did not exist and is now `n`.
pub(crate) fn try_set_permits(
    con: &mut dyn ConnectionLike,
    keys: &PermitExpirableKeys,
    n: i64,
    publish: &str,
) -> Result<bool> {
    let mut invocation = TRY_SET_PERMITS.key(&keys.name);
    invocation.key(&keys.channel).arg(n).arg(publish);
    Ok(int_call(&mut invocation, con, "try_set_permits")? == 1)
}

/// `addPermits`: the counter plus `delta` (may be negative).
pub(crate) fn add_permits(
    con: &mut dyn ConnectionLike,
    keys: &PermitExpirableKeys,
    delta: i64,
    publish: &str,
) -> Result<()> {
    let mut invocation = ADD_PERMITS.key(&keys.name);
    let _: Value = invocation
        .key(&keys.channel)
        .arg(delta)
        .arg(publish)
        .invoke(con)?;
    Ok(())
}

/// `updateLeaseTime`: `true` if the unexpired id now expires at `expiry`.
/// Finds the id stored raw or as hex text (and keeps its form).
pub(crate) fn update_lease(
    con: &mut dyn ConnectionLike,
    keys: &PermitExpirableKeys,
    id: &[u8; 16],
    expiry: u64,
    now_ms: u64,
    publish: &str,
) -> Result<bool> {
    let mut invocation = keys.timeout_first(&UPDATE_LEASE);
    invocation.arg(&id[..]).arg(expiry).arg(now_ms).arg(publish);
    invocation.arg(&hex_id(id)[..]);
    Ok(int_call(&mut invocation, con, "update_lease_time")? == 1)
}

/// A permit's lease as `getLeaseTime` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lease {
    /// No such (unexpired) id.
    Unknown,
    /// Without expiry (the sentinel).
    Permanent,
    /// This many ms left.
    Left(u64),
}

/// `getLeaseTime` of `id`, stored raw or as hex text.
pub(crate) fn lease_time(
    con: &mut dyn ConnectionLike,
    keys: &PermitExpirableKeys,
    id: &[u8; 16],
    now_ms: u64,
    publish: &str,
) -> Result<Lease> {
    let mut invocation = keys.timeout_first(&GET_LEASE_TIME);
    invocation
        .arg(&id[..])
        .arg(PES_PERMANENT_SCORE)
        .arg(now_ms)
        .arg(publish)
        .arg(&hex_id(id)[..]);
    Ok(match int_call(&mut invocation, con, "lease_time")? {
        -1 => Lease::Permanent,
        n if n > 0 => Lease::Left(n.unsigned_abs()),
        _ => Lease::Unknown,
    })
}

/// Deletes both keys (no publish, as Redisson's `delete`): `true` if
/// either existed.
pub(crate) fn delete(con: &mut dyn ConnectionLike, keys: &PermitExpirableKeys) -> Result<bool> {
    let deleted: i64 = redis::cmd("DEL")
        .arg(&keys.name)
        .arg(&keys.timeout)
        .query(con)?;
    Ok(deleted > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_replies_read_tolerantly() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        assert_eq!(acquire_reply(&bulk("OK")).ok(), Some(TryAcquired::Acquired));
        assert_eq!(
            acquire_reply(&Value::Okay).ok(),
            Some(TryAcquired::Acquired)
        );
        assert_eq!(
            acquire_reply(&bulk(":1795690152368")).ok(),
            Some(TryAcquired::No {
                nearest_expiry_ms: Some(1_795_690_152_368)
            })
        );
        assert_eq!(
            acquire_reply(&bulk(":1.5e3")).ok(),
            Some(TryAcquired::No {
                nearest_expiry_ms: Some(1500)
            })
        );
        assert_eq!(
            acquire_reply(&Value::Nil).ok(),
            Some(TryAcquired::No {
                nearest_expiry_ms: None
            })
        );
        assert!(acquire_reply(&bulk("nope")).is_err());
        assert!(acquire_reply(&Value::Int(1)).is_err());
    }

    #[test]
    fn hex_ids_are_lowercase_digits() {
        let mut id = [0_u8; 16];
        id[0] = 0xab;
        id[15] = 0x0f;
        assert_eq!(&hex_id(&id), b"ab00000000000000000000000000000f");
    }

    #[test]
    fn keys_follow_redisson_names() {
        let keys = PermitExpirableKeys::new("s");
        assert_eq!(keys.timeout, "{s}:timeout");
        assert_eq!(keys.channel, "redisson_sc:{s}");
        assert_eq!(expiry_score(1_000, None), PES_PERMANENT_SCORE);
        assert_eq!(expiry_score(1_000, Some(Duration::from_millis(5))), 1_005);
    }
}
