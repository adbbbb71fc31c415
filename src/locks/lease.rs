//! The watchdog's renewal batches (docs/wire-format.md, "Batched renewal"): how a hold is renewed
//! (its [`Renewal`]), the chunks of holds one script call renews, and what
//! the replies say of each hold.

use std::sync::{Arc, LazyLock};

use redis::{ConnectionLike, ServerErrorKind, Value};

use crate::error::{Error, Result};
use crate::lua::Lua;

/// How the watchdog renews a hold; each kind has its own script, and a
/// renewal run sends each kind's holds in chunks of their own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// The owner field still exists: the key gets the lease (docs/wire-format.md, "Batched
    /// renewal").
    Field,
    /// A reader: its own markers `<prefix>:1..count` and the hash get the
    /// lease, never another holder's markers (docs/wire-format.md, "Batched renewal").
    ReadMarkers { prefix: Arc<str> },
}

static RENEW_BATCH: LazyLock<Lua> = super::lua_script!("rlock_renew_batch.lua");
static RENEW_READ_BATCH: LazyLock<Lua> = super::lua_script!("read_renew_batch.lua");

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
