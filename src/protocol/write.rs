//! The write side of Redisson's `RReadWriteLock` (`RedissonWriteLock`,
//! docs/wire-format.md, "Read/write lock"): the hash `<name>` with `mode` = `write` and the
//! writer's
//! field `<client id>:<thread>:write`; a reentry adds the lease to the
//! remaining TTL; the last release publishes `1` (wake every waiter) on
//! `redisson_rwlock:{<name>}`, or, when the writer thread still holds read
//! holds, turns the lock into a read lock without a message.

use std::sync::LazyLock;

use redis::ConnectionLike;

use crate::lua::Lua;

use super::read::{self, Side};
use super::sealed::Protocol;
use super::{AcquireRequest, Acquired, UnlockScripts, Unlocking, Wake};
use crate::config::Config;
use crate::error::Result;
use crate::names::{READ_UNLOCK_MESSAGE, RWLOCK_MODE_FIELD, WRITE_FIELD_SUFFIX};

static ACQUIRE: LazyLock<Lua> = lua_script!("write_acquire.lua");
static UNLOCKS: UnlockScripts = unlock_scripts!("write", "rwlock");

/// The write lock of a read/write lock, Redisson's `RedissonWriteLock`: see
/// [`crate::WriteLock`].
#[derive(Debug)]
pub struct Write(Side);

impl Protocol for Write {
    const REDISSON: &'static str = "RedissonWriteLock";

    fn new(name: &str, _: &Config) -> Self {
        Write(Side::new(name, "write"))
    }

    fn owner_field(&self, mut base: String) -> String {
        base.push_str(WRITE_FIELD_SUFFIX);
        base
    }

    fn acquire(
        &self,
        con: &mut dyn ConnectionLike,
        request: &AcquireRequest<'_>,
    ) -> Result<Acquired> {
        read::acquire(&ACQUIRE, con, request, None)
    }

    fn unlocking<'a>(&'a self, _name: &'a str) -> Unlocking<'a> {
        self.0.unlocking(&UNLOCKS, READ_UNLOCK_MESSAGE)
    }

    fn wake<'a>(&'a self, _name: &'a str, _field: &'a str) -> Wake<'a> {
        self.0.wake()
    }

    fn is_locked(&self, con: &mut dyn ConnectionLike, name: &str) -> Result<bool> {
        let mode: Option<String> = redis::cmd("HGET")
            .arg(name)
            .arg(RWLOCK_MODE_FIELD)
            .query(con)?;
        Ok(mode.as_deref() == Some("write"))
    }
}
