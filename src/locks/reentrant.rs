//! Redisson's `RLock` (`getLock`, PROTOCOL §2): a hash named after the lock,
//! one field per owner holding its reentrancy count, the lease as its TTL,
//! released on `redisson_lock__channel:{<name>}` with message `0`.

use std::borrow::Cow;
use std::sync::LazyLock;

use redis::ConnectionLike;

use crate::lua::{Invocation, Lua};

use super::protocol::Protocol;
use super::replies::{acquire_reply, unlock_outcome};
use super::{AcquireRequest, Acquired, ReleaseRequest, UnlockOutcome, Wake};
use crate::config::Config;
use crate::error::Result;
use crate::names::{self, UNLOCK_MESSAGE};

/// RLock's acquire, shared by the types with its acquire semantics.
pub(crate) static ACQUIRE: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/rlock_acquire.lua")));
static RELEASE: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/rlock_release.lua")));
static UNLOCK: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/rlock_unlock.lua")));
static FORCE_UNLOCK: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/rlock_force_unlock.lua")));
static FORCE_UNLOCK_OWNED: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../../lua/rlock_force_unlock_owned.lua")));

/// The reentrant lock, Redisson's `RLock`: the type of [`crate::Lock`] by
/// default.
#[derive(Debug)]
pub struct Reentrant {
    channel: String,
}

impl Reentrant {
    /// The unlock channel, for the lock types that share RLock's layout.
    pub(crate) fn channel(&self) -> &str {
        &self.channel
    }
}

impl Protocol for Reentrant {
    const REDISSON: &'static str = "RedissonLock";

    fn new(name: &str, _: &Config) -> Self {
        Reentrant {
            channel: names::lock_channel(name),
        }
    }

    fn wake<'a>(&'a self, name: &'a str, _field: &'a str) -> Wake<'a> {
        Wake::Channel {
            channel: Cow::Borrowed(&self.channel),
            entry: Cow::Borrowed(name),
        }
    }

    fn acquire(
        &self,
        con: &mut dyn ConnectionLike,
        request: &AcquireRequest<'_>,
    ) -> Result<Acquired> {
        acquire(&ACQUIRE, con, request)
    }

    fn release(
        &self,
        con: &mut dyn ConnectionLike,
        request: &ReleaseRequest<'_>,
    ) -> Result<Option<UnlockOutcome>> {
        release(&self.channel, con, request)
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
            .arg(UNLOCK_MESSAGE)
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
        force_unlock(&self.channel, con, name, publish)
    }

    fn force_unlock_owned(
        &self,
        con: &mut dyn ConnectionLike,
        name: &str,
        owner: &str,
        publish: &str,
    ) -> Result<bool> {
        force_unlock_owned(&self.channel, con, name, owner, publish)
    }
}

/// An RLock-layout acquire script (`lua/rlock_acquire.lua` and its
/// variants): KEYS `[name, marker?]`, ARGV `[lease, field, known, resend?,
/// marker TTL?]`.
pub(crate) fn acquire(
    script: &Lua,
    con: &mut dyn ConnectionLike,
    request: &AcquireRequest<'_>,
) -> Result<Acquired> {
    let reply: Option<i64> = acquire_invocation(script, request, &[]).invoke(con)?;
    Ok(acquire_reply(reply))
}

/// The invocation of an RLock-layout acquire: KEYS `[name, extra_keys...,
/// marker?]`, ARGV `[lease, field, known, resend?, marker TTL?]` (the
/// fenced lock adds its token key).
pub(crate) fn acquire_invocation<'a>(
    script: &'a Lua,
    request: &AcquireRequest<'_>,
    extra_keys: &[&str],
) -> Invocation<'a> {
    let mut invocation = script.key(request.name);
    for key in extra_keys {
        invocation.key(*key);
    }
    invocation
        .arg(request.lease_ms)
        .arg(request.field)
        .arg(request.known);
    if let Some((key, ttl_ms)) = request.marker {
        invocation
            .key(key)
            .arg(if request.resend { "1" } else { "0" })
            .arg(ttl_ms);
    }
    invocation
}

/// A guard's release of an RLock-layout lock (`lua/rlock_release.lua`).
pub(crate) fn release(
    channel: &str,
    con: &mut dyn ConnectionLike,
    request: &ReleaseRequest<'_>,
) -> Result<Option<UnlockOutcome>> {
    let reply: Option<i64> = RELEASE
        .key(request.name)
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(request.lease_ms)
        .arg(request.field)
        .arg(request.publish)
        .arg(request.remaining)
        .invoke(con)?;
    unlock_outcome(reply)
}

/// Force unlock of an RLock-layout lock (`lua/rlock_force_unlock.lua`).
pub(crate) fn force_unlock(
    channel: &str,
    con: &mut dyn ConnectionLike,
    name: &str,
    publish: &str,
) -> Result<bool> {
    let deleted: i64 = FORCE_UNLOCK
        .key(name)
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(publish)
        .invoke(con)?;
    Ok(deleted == 1)
}

/// Force unlock of an RLock-layout lock while `owner` holds it
/// (`lua/rlock_force_unlock_owned.lua`); an empty `publish` publishes
/// nothing (the spin lock).
pub(crate) fn force_unlock_owned(
    channel: &str,
    con: &mut dyn ConnectionLike,
    name: &str,
    owner: &str,
    publish: &str,
) -> Result<bool> {
    let deleted: i64 = FORCE_UNLOCK_OWNED
        .key(name)
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(publish)
        .arg(owner)
        .invoke(con)?;
    Ok(deleted == 1)
}
