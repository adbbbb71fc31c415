//! The read side of Redisson's `RReadWriteLock` (`RedissonReadLock`,
//! docs/wire-format.md, "Read/write lock"): readers share the hash `<name>` (`mode` = `read`,
//! one field
//! `<client id>:<thread>` per reading thread holding its count), and each
//! read hold has a marker key `{<name>}:<field>:rwlock_timeout:<n>` with that
//! hold's lease. Whether the hash outlives a reader's unlock is decided by
//! the markers of every holder, Java's included; with Redisson 3.x's rule
//! (`Config::read_unlock_keeps_unmarked`), a reader that counts holds
//! without a live marker also keeps it, to its TTL.

use std::sync::{Arc, LazyLock};

use redis::ConnectionLike;

use crate::lua::Lua;

use super::replies::acquire_reply;
use super::sealed::Protocol;
use super::{AcquireRequest, Acquired, Renewal, UnlockScripts, Unlocking, Wake};
use crate::config::Config;
use crate::error::Result;
use crate::names::{self, UNLOCK_MESSAGE, WRITE_FIELD_SUFFIX};

static ACQUIRE: LazyLock<Lua> = lua_script!("read_acquire.lua");
static IS_LOCKED: LazyLock<Lua> = lua_script!("read_is_locked.lua");
static UNLOCKS: UnlockScripts = unlock_scripts!("read", "rwlock");
/// Redisson 3.x's read unlock (`lua/read_3x_*.lua`): a lock with another
/// reader that counts holds without a live marker is left to its TTL.
static UNLOCKS_3X: UnlockScripts = unlock_scripts!("read_3x", "rwlock");

/// The read lock of a read/write lock, Redisson's `RedissonReadLock`: see
/// [`crate::ReadLock`].
#[derive(Debug)]
pub struct Read {
    side: Side,
    key_prefix: String,
    /// Unlocks with [`UNLOCKS_3X`] rather than [`UNLOCKS`]
    /// ([`Config::read_unlock_keeps_unmarked`]).
    keeps_unmarked: bool,
}

impl Protocol for Read {
    const REDISSON: &'static str = "RedissonReadLock";

    fn new(name: &str, config: &Config) -> Self {
        Read {
            side: Side::new(name, "read"),
            key_prefix: names::rwlock_key_prefix(name),
            keeps_unmarked: config.read_unlock_keeps_unmarked,
        }
    }

    fn acquire(
        &self,
        con: &mut dyn ConnectionLike,
        request: &AcquireRequest<'_>,
    ) -> Result<Acquired> {
        let marker_prefix = names::rwlock_timeout_prefix(request.name, request.field);
        let write_field = names::concat(&[request.field, WRITE_FIELD_SUFFIX]);
        acquire(&ACQUIRE, con, request, Some((&marker_prefix, &write_field)))
    }

    fn unlocking<'a>(&'a self, _name: &'a str) -> Unlocking<'a> {
        self.side
            .unlocking(
                if self.keeps_unmarked {
                    &UNLOCKS_3X
                } else {
                    &UNLOCKS
                },
                UNLOCK_MESSAGE,
            )
            .reader(&self.key_prefix)
    }

    fn wake<'a>(&'a self, _name: &'a str, _field: &'a str) -> Wake<'a> {
        self.side.wake()
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

/// What each side of a read/write lock knows of it.
#[derive(Debug)]
pub(super) struct Side {
    /// The channel both sides' releases publish on.
    channel: String,
    /// The side's permits in the subscriber's parking lot, `<name>:<mode>`:
    /// readers and writers share the channel, not their permits (a `0`
    /// wakes one reader and one writer, a `1` every one of both).
    entry: String,
    /// `read` or `write`: the lock's mode while this side holds it.
    mode: &'static str,
}

impl Side {
    pub(super) fn new(name: &str, mode: &'static str) -> Side {
        Side {
            channel: names::rwlock_channel(name),
            entry: names::concat(&[name, ":", mode]),
            mode,
        }
    }

    pub(super) fn wake(&self) -> Wake<'_> {
        Wake::channel(&self.channel, &self.entry)
    }

    /// A release publishes `message` on the shared channel; a force unlock
    /// deletes the lock only in this side's mode.
    pub(super) fn unlocking(
        &self,
        scripts: &'static UnlockScripts,
        message: &'static str,
    ) -> Unlocking<'_> {
        Unlocking::new(scripts)
            .publishing(self.channel.as_str(), message)
            .in_mode(self.mode)
    }
}

/// A read/write lock's acquire (`lua/read_acquire.lua`,
/// `lua/write_acquire.lua`): KEYS `[name, marker prefix?, marker?]`, ARGV
/// `[lease, field, write field?, known, resend, marker TTL (0: none)]`;
/// `reader` is a reader's marker prefix and its thread's write field.
pub(super) fn acquire(
    script: &Lua,
    con: &mut dyn ConnectionLike,
    request: &AcquireRequest<'_>,
    reader: Option<(&str, &str)>,
) -> Result<Acquired> {
    let mut invocation = script.key(request.name);
    if let Some((marker_prefix, _)) = reader {
        invocation.key(marker_prefix);
    }
    invocation.arg(request.lease_ms).arg(request.field);
    if let Some((_, write_field)) = reader {
        invocation.arg(write_field);
    }
    invocation.arg(request.known);
    request.add_marker_args(&mut invocation);
    let reply: Option<i64> = invocation.invoke(con)?;
    Ok(acquire_reply(reply))
}
