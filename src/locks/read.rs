//! The read side of Redisson's `RReadWriteLock` (`RedissonReadLock`,
//! PROTOCOL §4): readers share the hash `<name>` (`mode` = `read`, one field
//! `<client id>:<thread>` per reading thread holding its count), and each
//! read hold has a marker key `{<name>}:<field>:rwlock_timeout:<n>` with that
//! hold's lease. Whether the hash outlives a reader's unlock is decided by
//! the markers of every holder, Java's included.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use redis::ConnectionLike;

use crate::lua::Lua;

use super::protocol::Protocol;
use super::replies::{acquire_reply, unlock_outcome};
use super::{AcquireRequest, Acquired, ReleaseRequest, Renewal, UnlockOutcome, Wake};
use crate::config::Config;
use crate::error::Result;
use crate::names::{self, UNLOCK_MESSAGE, WRITE_FIELD_SUFFIX};

static ACQUIRE: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/read_acquire.lua")));
static RELEASE: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/read_release.lua")));
static UNLOCK: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/read_unlock.lua")));
static IS_LOCKED: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/read_is_locked.lua")));
pub(super) static FORCE_UNLOCK: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/rwlock_force_unlock.lua")));
static FORCE_UNLOCK_OWNED: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/rwlock_force_unlock_owned.lua")));

/// The read lock of a read/write lock, Redisson's `RedissonReadLock`: see
/// [`crate::ReadLock`].
#[derive(Debug)]
pub struct Read {
    channel: String,
    key_prefix: String,
    entry: String,
}

impl Protocol for Read {
    const REDISSON: &'static str = "RedissonReadLock";

    fn new(name: &str, _: &Config) -> Self {
        Read {
            channel: names::rwlock_channel(name),
            key_prefix: names::rwlock_key_prefix(name),
            // Readers and writers share the channel, not their permits: a
            // `0` wakes one reader and one writer, a `1` every one of both.
            entry: names::concat(&[name, ":read"]),
        }
    }

    fn wake<'a>(&'a self, _name: &'a str, _field: &'a str) -> Wake<'a> {
        Wake::Channel {
            channel: Cow::Borrowed(&self.channel),
            entry: Cow::Borrowed(&self.entry),
        }
    }

    fn acquire(
        &self,
        con: &mut dyn ConnectionLike,
        request: &AcquireRequest<'_>,
    ) -> Result<Acquired> {
        let mut invocation = ACQUIRE.key(request.name);
        invocation
            .key(names::rwlock_timeout_prefix(request.name, request.field))
            .arg(request.lease_ms)
            .arg(request.field)
            .arg(names::concat(&[request.field, WRITE_FIELD_SUFFIX]))
            .arg(request.known)
            .arg(if request.resend { "1" } else { "0" });
        match request.marker {
            Some((key, ttl_ms)) => invocation.key(key).arg(ttl_ms),
            None => invocation.arg(0),
        };
        let reply: Option<i64> = invocation.invoke(con)?;
        Ok(acquire_reply(reply))
    }

    fn release(
        &self,
        con: &mut dyn ConnectionLike,
        request: &ReleaseRequest<'_>,
    ) -> Result<Option<UnlockOutcome>> {
        let reply: redis::Value = RELEASE
            .key(request.name)
            .key(&self.channel)
            .key(names::rwlock_timeout_prefix(request.name, request.field))
            .key(&self.key_prefix)
            .arg(UNLOCK_MESSAGE)
            .arg(request.field)
            .arg(request.publish)
            .arg(request.remaining)
            .invoke(con)?;
        // {0, ttl}: holds remain, and the hash now lives `ttl` ms (the
        // longest-lived remaining marker's): the guard's deadline follows it.
        if let redis::Value::Array(items) = &reply
            && let [redis::Value::Int(0), redis::Value::Int(ttl)] = items.as_slice()
        {
            request.kept_ttl_ms.set(u64::try_from(*ttl).ok());
            return Ok(Some(UnlockOutcome::StillHeld));
        }
        let reply: Option<i64> = redis::from_redis_value(reply).map_err(redis::RedisError::from)?;
        unlock_outcome(reply)
    }

    fn unlock_latched(
        &self,
        con: &mut dyn ConnectionLike,
        request: &ReleaseRequest<'_>,
        latch: &str,
        latch_ttl_ms: u64,
    ) -> Result<Option<UnlockOutcome>> {
        let reply: Option<i64> = UNLOCK
            .key(request.name)
            .key(&self.channel)
            .key(names::rwlock_timeout_prefix(request.name, request.field))
            .key(&self.key_prefix)
            .key(latch)
            .arg(UNLOCK_MESSAGE)
            .arg(request.field)
            .arg(request.publish)
            .arg(latch_ttl_ms)
            .invoke(con)?;
        unlock_outcome(reply)
    }

    fn force_unlock(
        &self,
        con: &mut dyn ConnectionLike,
        name: &str,
        publish: &str,
    ) -> Result<bool> {
        force_unlock(con, name, &self.channel, UNLOCK_MESSAGE, publish, "read")
    }

    fn force_unlock_owned(
        &self,
        con: &mut dyn ConnectionLike,
        name: &str,
        owner: &str,
        publish: &str,
    ) -> Result<bool> {
        let side = Side {
            channel: &self.channel,
            message: UNLOCK_MESSAGE,
            mode: "read",
        };
        force_unlock_owned(con, name, owner, publish, &side)
    }

    fn is_locked(&self, con: &mut dyn ConnectionLike, name: &str) -> Result<bool> {
        let locked: i64 = IS_LOCKED.key(name).invoke(con)?;
        Ok(locked == 1)
    }

    fn renewal(&self, field: &str) -> Renewal {
        // `<key prefix>:<field>` is suffixName(<name>, <field>).
        Renewal::ReadMarkers {
            prefix: Arc::from(names::concat(&[
                &self.key_prefix,
                ":",
                field,
                ":rwlock_timeout",
            ])),
        }
    }

    fn release_sets_lease(&self) -> bool {
        false
    }
}

/// Force unlock of a read/write lock if it is in `mode`
/// (`lua/rwlock_force_unlock.lua`).
pub(super) fn force_unlock(
    con: &mut dyn ConnectionLike,
    name: &str,
    channel: &str,
    message: &str,
    publish: &str,
    mode: &str,
) -> Result<bool> {
    let deleted: i64 = FORCE_UNLOCK
        .key(name)
        .key(channel)
        .arg(message)
        .arg(publish)
        .arg(mode)
        .invoke(con)?;
    Ok(deleted == 1)
}

/// One side of a read/write lock, as its force unlock speaks it.
pub(super) struct Side<'a> {
    pub channel: &'a str,
    /// `0` for the read side, `1` for the write side.
    pub message: &'a str,
    /// `read` or `write`.
    pub mode: &'a str,
}

/// Force unlock of a read/write lock in `side`'s mode while `owner` holds
/// it (`lua/rwlock_force_unlock_owned.lua`).
pub(super) fn force_unlock_owned(
    con: &mut dyn ConnectionLike,
    name: &str,
    owner: &str,
    publish: &str,
    side: &Side<'_>,
) -> Result<bool> {
    let deleted: i64 = FORCE_UNLOCK_OWNED
        .key(name)
        .key(side.channel)
        .arg(side.message)
        .arg(publish)
        .arg(side.mode)
        .arg(owner)
        .invoke(con)?;
    Ok(deleted == 1)
}
