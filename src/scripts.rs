//! The Lua scripts in `lua/`, how they are sent, and what their replies mean.
//!
//! Scripts go out as `EVALSHA`; a `NOSCRIPT` reply (a restarted or flushed
//! server) loads the script and sends it again, as Redisson does (PROTOCOL §1.4).

use std::sync::LazyLock;
use std::time::Duration;

use redis::{ConnectionLike, ServerErrorKind, Value};

use crate::lua::Lua;

use crate::error::{Error, Result};
use crate::locks::Acquired;

static EXPIRE_IF_HELD: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../lua/expire_if_held.lua")));

/// Sets `name`'s TTL to `lease_ms` if `field` still holds it; `false` if
/// not (MultiLock's and RedLock's final lease, PROTOCOL §8).
pub(crate) fn expire_if_held(
    con: &mut dyn ConnectionLike,
    name: &str,
    field: &str,
    lease_ms: u64,
) -> Result<bool> {
    let set: i64 = EXPIRE_IF_HELD
        .key(name)
        .arg(field)
        .arg(lease_ms)
        .invoke(con)?;
    Ok(set == 1)
}

static RENEW_BATCH: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../lua/rlock_renew_batch.lua")));
static RENEW_READ_BATCH: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("../lua/read_renew_batch.lua")));

/// The outcome of one unlock attempt (PROTOCOL §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnlockOutcome {
    /// That was the last hold: the key is deleted and waiters were told.
    Released,
    /// The owner still holds the lock (reentrancy); its lease was reset.
    StillHeld,
}

/// Reads an acquire script's reply the way every RLock-like script
/// answers (PROTOCOL §2.1): nil acquired, `-3` acquired afresh (the crate's
/// own), otherwise the holder's TTL (`-1`: no TTL).
pub(crate) fn acquire_reply(reply: Option<i64>) -> Acquired {
    match reply {
        None => Acquired::Yes {
            replaced: false,
            token: None,
        },
        Some(-3) => Acquired::Yes {
            replaced: true,
            token: None,
        },
        Some(ttl) if ttl >= 0 => Acquired::No {
            ttl: Some(Duration::from_millis(ttl.unsigned_abs())),
        },
        // -1: the key exists without a TTL. (-2 cannot happen: the key exists.)
        Some(_) => Acquired::No { ttl: None },
    }
}

/// Reads an unlock script's reply: 1 freed, 0 holds remain, nil not held.
pub(crate) fn unlock_outcome(reply: Option<i64>) -> Result<Option<UnlockOutcome>> {
    match reply {
        None => Ok(None),
        Some(1) => Ok(Some(UnlockOutcome::Released)),
        Some(0) => Ok(Some(UnlockOutcome::StillHeld)),
        Some(other) => Err(Error::UnexpectedReply(format!(
            "unlock script returned {other}"
        ))),
    }
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

/// One renewal script call: holds of one renewal kind.
pub(crate) struct RenewChunk<'a> {
    /// `false`: `(name, owner field)` pairs, each renewed if its field exists
    /// (`lua/rlock_renew_batch.lua`); `true`: readers, each renewing its own
    /// markers under `prefix` and the hash (`lua/read_renew_batch.lua`).
    pub read_markers: bool,
    /// `(name, field, marker prefix)`; the prefix is unused for fields.
    pub items: Vec<(&'a str, &'a str, &'a str)>,
}

impl RenewChunk<'_> {
    fn script(&self) -> &'static Lua {
        if self.read_markers {
            &RENEW_READ_BATCH
        } else {
            &RENEW_BATCH
        }
    }
}

/// Renews chunks of holds to `lease_ms`, one script call per chunk, the
/// chunks pipelined: one write, one wait for the replies however many chunks
/// there are. Per chunk, what each hold was found to be, or the error that
/// chunk got (the others still count). A `NOSCRIPT` reply proves the chunk
/// did not run: those are sent again after `SCRIPT LOAD`.
pub(crate) fn renew_chunks(
    con: &mut dyn ConnectionLike,
    chunks: &[RenewChunk<'_>],
    lease_ms: u64,
) -> Result<Vec<Result<Vec<Renewed>>>> {
    let send = |con: &mut dyn ConnectionLike, which: &[usize]| -> Result<Vec<Value>> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for chunk in which.iter().filter_map(|&i| chunks.get(i)) {
            let cmd = pipe
                .cmd("EVALSHA")
                .arg(chunk.script().get_hash())
                .arg(chunk.items.len());
            for (name, _, _) in &chunk.items {
                cmd.arg(*name);
            }
            cmd.arg(lease_ms);
            for (_, field, prefix) in &chunk.items {
                cmd.arg(*field);
                if chunk.read_markers {
                    cmd.arg(*prefix);
                }
            }
        }
        Ok(pipe.query(con)?)
    };
    let all: Vec<usize> = (0..chunks.len()).collect();
    let mut replies = send(con, &all)?;
    if replies.len() != chunks.len() {
        return Err(Error::UnexpectedReply(format!(
            "{} renewal calls got {} replies",
            chunks.len(),
            replies.len()
        )));
    }
    let missing: Vec<usize> = replies
        .iter()
        .enumerate()
        .filter(|(_, reply)| {
            matches!(reply, Value::ServerError(e) if e.kind() == Some(ServerErrorKind::NoScript))
        })
        .map(|(i, _)| i)
        .collect();
    if !missing.is_empty() {
        for read_markers in [false, true] {
            if missing
                .iter()
                .any(|&i| chunks[i].read_markers == read_markers)
            {
                let chunk = RenewChunk {
                    read_markers,
                    items: Vec::new(),
                };
                chunk.script().load(con)?;
            }
        }
        for (i, reply) in missing.iter().zip(send(con, &missing)?) {
            if let Some(slot) = replies.get_mut(*i) {
                *slot = reply;
            }
        }
    }
    Ok(chunks
        .iter()
        .zip(replies)
        .map(|(chunk, reply)| decode_renewal(chunk.items.len(), reply))
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
