//! The write side of Redisson's `RReadWriteLock` (`RedissonWriteLock`,
//! PROTOCOL §4): the hash `<name>` with `mode` = `write` and the writer's
//! field `<client id>:<thread>:write`; a reentry adds the lease to the
//! remaining TTL; the last release publishes `1` (wake every waiter) on
//! `redisson_rwlock:{<name>}`, or, when the writer thread still holds read
//! holds, turns the lock into a read lock without a message.

use std::borrow::Cow;
use std::sync::LazyLock;

use redis::ConnectionLike;

use crate::lua::Lua;

use super::protocol::Protocol;
use super::replies::{acquire_reply, unlock_outcome};
use super::{AcquireRequest, Acquired, ReleaseRequest, UnlockOutcome, Wake, read};
use crate::config::Config;
use crate::error::Result;
use crate::names::{self, READ_UNLOCK_MESSAGE, RWLOCK_MODE_FIELD, WRITE_FIELD_SUFFIX};

static ACQUIRE: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/write_acquire.lua")));
static RELEASE: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/write_release.lua")));
static UNLOCK: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/write_unlock.lua")));

/// The write lock of a read/write lock, Redisson's `RedissonWriteLock`: see
/// [`crate::WriteLock`].
#[derive(Debug)]
pub struct Write {
    channel: String,
    entry: String,
}

impl Protocol for Write {
    const REDISSON: &'static str = "RedissonWriteLock";

    fn new(name: &str, _: &Config) -> Self {
        Write {
            channel: names::rwlock_channel(name),
            entry: names::concat(&[name, ":write"]),
        }
    }

    fn owner_field(&self, mut base: String) -> String {
        base.push_str(WRITE_FIELD_SUFFIX);
        base
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
            .arg(request.lease_ms)
            .arg(request.field)
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
        let reply: Option<i64> = RELEASE
            .key(request.name)
            .key(&self.channel)
            .arg(READ_UNLOCK_MESSAGE)
            .arg(request.lease_ms)
            .arg(request.field)
            .arg(request.publish)
            .arg(request.remaining)
            .invoke(con)?;
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
            .key(latch)
            .arg(READ_UNLOCK_MESSAGE)
            .arg(request.lease_ms)
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
        read::force_unlock(
            con,
            name,
            &self.channel,
            READ_UNLOCK_MESSAGE,
            publish,
            "write",
        )
    }

    fn force_unlock_owned(
        &self,
        con: &mut dyn ConnectionLike,
        name: &str,
        owner: &str,
        publish: &str,
    ) -> Result<bool> {
        let side = read::Side {
            channel: &self.channel,
            message: READ_UNLOCK_MESSAGE,
            mode: "write",
        };
        read::force_unlock_owned(con, name, owner, publish, &side)
    }

    fn is_locked(&self, con: &mut dyn ConnectionLike, name: &str) -> Result<bool> {
        let mode: Option<String> = redis::cmd("HGET")
            .arg(name)
            .arg(RWLOCK_MODE_FIELD)
            .query(con)?;
        Ok(mode.as_deref() == Some("write"))
    }
}
