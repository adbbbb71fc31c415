//! The Lua scripts in `lua/`, how they are sent, and what their replies mean.
//!
//! Scripts go out as `EVALSHA`; a `NOSCRIPT` reply (a restarted or flushed
//! server) loads the script and sends it again, as Redisson does (PROTOCOL §1.4).

use std::sync::LazyLock;
use std::time::Duration;

use redis::{ConnectionLike, Script, ServerErrorKind, Value};

use crate::error::{Error, Result};

struct Scripts {
    acquire: Script,
    unlock: Script,
    release: Script,
    force_unlock: Script,
    renew_batch: Script,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: Script::new(include_str!("../lua/rlock_acquire.lua")),
    unlock: Script::new(include_str!("../lua/rlock_unlock.lua")),
    release: Script::new(include_str!("../lua/rlock_release.lua")),
    force_unlock: Script::new(include_str!("../lua/rlock_force_unlock.lua")),
    renew_batch: Script::new(include_str!("../lua/rlock_renew_batch.lua")),
});

/// Redisson's UNLOCK_MESSAGE: wakes one waiter (PROTOCOL §1.6).
pub(crate) const UNLOCK_MESSAGE: &str = "0";

/// Redisson's READ_UNLOCK_MESSAGE: wakes every waiter (PROTOCOL §1.6). This
/// crate never sends it, but honours it from other clients.
pub(crate) const READ_UNLOCK_MESSAGE: &str = "1";

/// The outcome of one acquire attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquire {
    /// This owner now holds the lock (first hold or reentry). `replaced`:
    /// the holds it counted on were gone, this is a new hold.
    Acquired { replaced: bool },
    /// Someone else holds it; `ttl` is their remaining lease, `None` when the
    /// key has no expiry at all.
    Held { ttl: Option<Duration> },
}

/// The outcome of one unlock attempt (PROTOCOL §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnlockOutcome {
    /// That was the last hold: the key is deleted and waiters were told.
    Released,
    /// The owner still holds the lock (reentrancy); its lease was reset.
    StillHeld,
}

/// Everything one unlock call sends.
pub(crate) struct UnlockArgs<'a> {
    pub name: &'a str,
    pub channel: &'a str,
    pub latch: &'a str,
    pub lease_ms: u64,
    pub field: &'a str,
    pub publish: &'a str,
    pub latch_ttl_ms: u64,
}

/// One acquire attempt by `field`, which knows it already has `known` holds
/// on the lock (see `lua/rlock_acquire.lua`). With `known > 0`, `marker` is
/// the attempt's "replaced" marker key and its TTL, and `resend` says that
/// the same attempt was sent before and its reply was lost.
pub(crate) fn acquire(
    con: &mut dyn ConnectionLike,
    name: &str,
    lease_ms: u64,
    field: &str,
    known: u32,
    marker: Option<(&str, u64)>,
    resend: bool,
) -> Result<Acquire> {
    let mut invocation = SCRIPTS.acquire.key(name);
    invocation.arg(lease_ms).arg(field).arg(known);
    if let Some((key, ttl_ms)) = marker {
        invocation
            .key(key)
            .arg(if resend { "1" } else { "0" })
            .arg(ttl_ms);
    }
    let reply: Option<i64> = invocation.invoke(con)?;
    Ok(match reply {
        None => Acquire::Acquired { replaced: false },
        Some(-3) => Acquire::Acquired { replaced: true },
        Some(ttl) if ttl >= 0 => Acquire::Held {
            ttl: Some(Duration::from_millis(ttl.unsigned_abs())),
        },
        // -1: the key exists without a TTL. (-2 cannot happen: the key exists.)
        Some(_) => Acquire::Held { ttl: None },
    })
}

/// Runs the unlock script; `Ok(None)` means the owner does not hold the lock.
pub(crate) fn unlock(
    con: &mut dyn ConnectionLike,
    args: &UnlockArgs<'_>,
) -> Result<Option<UnlockOutcome>> {
    let reply: Option<i64> = SCRIPTS
        .unlock
        .key(args.name)
        .key(args.channel)
        .key(args.latch)
        .arg(UNLOCK_MESSAGE)
        .arg(args.lease_ms)
        .arg(args.field)
        .arg(args.publish)
        .arg(args.latch_ttl_ms)
        .invoke(con)?;
    unlock_outcome(reply)
}

/// Releases one hold of `field`, which keeps `remaining` holds after it
/// (0: the lock is freed); `Ok(None)` means the owner does not hold the lock
/// (see `lua/rlock_release.lua`).
pub(crate) fn release(
    con: &mut dyn ConnectionLike,
    args: &UnlockArgs<'_>,
    remaining: u32,
) -> Result<Option<UnlockOutcome>> {
    let reply: Option<i64> = SCRIPTS
        .release
        .key(args.name)
        .key(args.channel)
        .arg(UNLOCK_MESSAGE)
        .arg(args.lease_ms)
        .arg(args.field)
        .arg(args.publish)
        .arg(remaining)
        .invoke(con)?;
    unlock_outcome(reply)
}

fn unlock_outcome(reply: Option<i64>) -> Result<Option<UnlockOutcome>> {
    match reply {
        None => Ok(None),
        Some(1) => Ok(Some(UnlockOutcome::Released)),
        Some(0) => Ok(Some(UnlockOutcome::StillHeld)),
        Some(other) => Err(Error::UnexpectedReply(format!(
            "unlock script returned {other}"
        ))),
    }
}

/// Deletes the lock whoever holds it; `true` if there was one.
pub(crate) fn force_unlock(
    con: &mut dyn ConnectionLike,
    name: &str,
    channel: &str,
    publish: &str,
) -> Result<bool> {
    let deleted: i64 = SCRIPTS
        .force_unlock
        .key(name)
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(publish)
        .invoke(con)?;
    Ok(deleted == 1)
}

/// What a renewal found for one `(name, owner field)` pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// The owner still holds it; its TTL is reset to the lease.
    Held,
    /// The owner's field (or the whole key) is gone.
    Gone,
    /// The key holds a value of another type.
    WrongType,
}

/// Renews chunks of `(name, owner field)` pairs to `lease_ms`, one script
/// call per chunk, all chunks pipelined: one write, one wait for the replies
/// however many chunks there are. Per chunk, what each pair was found to be,
/// or the error that chunk got (the others still count). A `NOSCRIPT` reply
/// proves the chunk did not run: those are sent again after `SCRIPT LOAD`.
pub(crate) fn renew_chunks(
    con: &mut dyn ConnectionLike,
    chunks: &[Vec<(&str, &str)>],
    lease_ms: u64,
) -> Result<Vec<Result<Vec<Renewed>>>> {
    let script = &SCRIPTS.renew_batch;
    let send = |con: &mut dyn ConnectionLike, which: &[usize]| -> Result<Vec<Value>> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for &i in which {
            let chunk = &chunks[i];
            let cmd = pipe.cmd("EVALSHA").arg(script.get_hash()).arg(chunk.len());
            for (name, _) in chunk {
                cmd.arg(*name);
            }
            cmd.arg(lease_ms);
            for (_, field) in chunk {
                cmd.arg(*field);
            }
        }
        Ok(pipe.query(con)?)
    };
    let all: Vec<usize> = (0..chunks.len()).collect();
    let mut replies = send(con, &all)?;
    let missing: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&i| {
            matches!(&replies[i], Value::ServerError(e) if e.kind() == Some(ServerErrorKind::NoScript))
        })
        .collect();
    if !missing.is_empty() {
        script.load(con)?;
        for (i, reply) in missing.iter().zip(send(con, &missing)?) {
            replies[*i] = reply;
        }
    }
    Ok(chunks
        .iter()
        .zip(replies)
        .map(|(chunk, reply)| decode_renewal(chunk.len(), reply))
        .collect())
}

fn decode_renewal(expected: usize, reply: Value) -> Result<Vec<Renewed>> {
    if let Value::ServerError(e) = reply {
        return Err(Error::Redis(e.into()));
    }
    let states: Vec<i64> = redis::from_redis_value(reply).map_err(redis::RedisError::from)?;
    if states.len() != expected {
        return Err(Error::UnexpectedReply(format!(
            "renewal of {expected} locks returned {} results",
            states.len()
        )));
    }
    Ok(states
        .into_iter()
        .map(|state| match state {
            1 => Renewed::Held,
            -1 => Renewed::WrongType,
            _ => Renewed::Gone,
        })
        .collect())
}

/// Milliseconds for the wire, rejecting what Redis cannot represent.
pub(crate) fn lease_millis(what: &str, lease: Duration) -> Result<u64> {
    /// A century: anything longer is a unit mistake, not a lease.
    const MAX: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    if lease > MAX {
        return Err(Error::invalid(format!(
            "{what} of {lease:?} is longer than the maximum of 100 years"
        )));
    }
    let ms = lease.as_millis();
    if ms == 0 {
        return Err(Error::invalid(format!(
            "{what} must be at least 1 ms, got {lease:?}"
        )));
    }
    u64::try_from(ms).map_err(|_| Error::invalid(format!("{what} of {lease:?} is out of range")))
}
