//! Redisson's `RLock` (`getLock`, docs/wire-format.md, "Scripts"): a hash named after the lock,
//! one field per owner holding its reentrancy count, the lease as its TTL,
//! released on `redisson_lock__channel:{<name>}` with message `0`.

use std::sync::LazyLock;

use redis::ConnectionLike;

use crate::lua::{Invocation, Lua};

use super::replies::acquire_reply;
use super::sealed::Protocol;
use super::{AcquireRequest, Acquired, UnlockScripts, Unlocking, Wake};
use crate::config::Config;
use crate::error::Result;
use crate::names::{self, UNLOCK_MESSAGE};

/// RLock's acquire, shared by the types with its acquire semantics.
pub(crate) static ACQUIRE: LazyLock<Lua> = lua_script!("rlock_acquire.lua");
static UNLOCKS: UnlockScripts = unlock_scripts!("rlock");

/// The reentrant lock, Redisson's `RLock`: the type of [`crate::Lock`] by
/// default. The types that share RLock's layout keep one and hand it their
/// wake and unlocks.
///
/// It keeps nothing of its own: its channel is made from the lock's name
/// when a wait or an unlock needs it, so that a held lock's handle (which
/// its guard keeps) carries no copy of it.
#[derive(Debug)]
pub struct Reentrant {
    _private: (),
}

impl Protocol for Reentrant {
    const REDISSON: &'static str = "RedissonLock";

    fn new(_: &str, _: &Config) -> Self {
        Reentrant { _private: () }
    }

    fn wake<'a>(&'a self, name: &'a str, _field: &'a str) -> Wake<'a> {
        Wake::Channel {
            channel: names::lock_channel(name).into(),
            entry: name.into(),
        }
    }

    fn acquire(
        &self,
        con: &mut dyn ConnectionLike,
        request: &AcquireRequest<'_>,
    ) -> Result<Acquired> {
        acquire(&ACQUIRE, con, request)
    }

    fn unlocking<'a>(&'a self, name: &'a str) -> Unlocking<'a> {
        Unlocking::new(&UNLOCKS).publishing(names::lock_channel(name), UNLOCK_MESSAGE)
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
    request.add_marker(&mut invocation);
    invocation
}
