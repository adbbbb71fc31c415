//! The watchdog's renewal batches (docs/wire-format.md, "Batched renewal"): how a hold is renewed
//! (its [`Renewal`]), the chunks of holds one script call renews, and what
//! the replies say of each hold.

use std::sync::{Arc, LazyLock};

use redis::{ConnectionLike, Value};

use crate::error::{Error, Result, Verdict};
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
    /// Renewed permits of a `PermitExpirableSemaphore`: each id still in
    /// the `timeout` ZSET (`{<name>}:timeout`) with an expiry in the future
    /// gets `now + lease` (`lua/permit_expirable_renew_batch.lua`), whether stored as
    /// raw bytes or hex text. Behind one pointer: a hold's renewal is as
    /// small as a reader's (every hold carries one).
    Permits(Arc<PermitRenewal>),
}

/// What renews a set of permits (see [`Renewal::Permits`]).
#[derive(Debug, PartialEq, Eq)]
pub struct PermitRenewal {
    /// The semaphore's timeout ZSET, `{<name>}:timeout`.
    pub timeout: Arc<str>,
    /// The permits' ids.
    pub ids: Box<[[u8; 16]]>,
}

/// The renewal kinds: a chunk holds one kind only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum RenewKind {
    Field,
    ReadMarkers,
    Permits,
}

impl Renewal {
    /// Which script renews it.
    pub(crate) fn kind(&self) -> RenewKind {
        match self {
            Renewal::Field => RenewKind::Field,
            Renewal::ReadMarkers { .. } => RenewKind::ReadMarkers,
            Renewal::Permits(_) => RenewKind::Permits,
        }
    }

    /// The key its script names (and whose slot it goes to): the lock's
    /// own `name`, or a semaphore's timeout ZSET.
    pub(crate) fn key<'a>(&'a self, name: &'a str) -> &'a str {
        match self {
            Renewal::Permits(permits) => &permits.timeout,
            _ => name,
        }
    }
}

static RENEW_BATCH: LazyLock<Lua> = super::lua_script!("rlock_renew_batch.lua");
static RENEW_READ_BATCH: LazyLock<Lua> = super::lua_script!("read_renew_batch.lua");
static RENEW_PERMITS_BATCH: LazyLock<Lua> = super::lua_script!("permit_expirable_renew_batch.lua");

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
    /// `(name, owner field, how it is renewed)`, all of one [`RenewKind`]:
    /// [`Renewal::Field`], each renewed if its field exists
    /// (`lua/rlock_renew_batch.lua`); [`Renewal::ReadMarkers`], readers each
    /// renewing its own markers and the hash (`lua/read_renew_batch.lua`);
    /// [`Renewal::Permits`], permit sets (`lua/permit_expirable_renew_batch.lua`).
    pub items: Vec<(&'a str, &'a str, &'a Renewal)>,
}

fn script(kind: RenewKind) -> &'static Lua {
    match kind {
        RenewKind::Field => &RENEW_BATCH,
        RenewKind::ReadMarkers => &RENEW_READ_BATCH,
        RenewKind::Permits => &RENEW_PERMITS_BATCH,
    }
}

impl RenewChunk<'_> {
    fn kind(&self) -> RenewKind {
        self.items
            .first()
            .map_or(RenewKind::Field, |(_, _, renewal)| renewal.kind())
    }

    /// Appends the call's keys and arguments to `cmd` (after its key count).
    fn args(&self, cmd: &mut redis::Cmd, lease_ms: u64, now_ms: u64) {
        for (name, _, renewal) in &self.items {
            cmd.arg(renewal.key(name));
        }
        cmd.arg(lease_ms);
        if self.kind() == RenewKind::Permits {
            cmd.arg(now_ms);
        }
        for (_, field, renewal) in &self.items {
            match renewal {
                Renewal::Field => {
                    cmd.arg(*field);
                }
                Renewal::ReadMarkers { prefix } => {
                    cmd.arg(*field).arg(&**prefix);
                }
                Renewal::Permits(permits) => {
                    cmd.arg(permits.ids.len());
                    for id in permits.ids.iter() {
                        cmd.arg(&id[..])
                            .arg(&super::permit_expirable::hex_id(id)[..]);
                    }
                }
            }
        }
    }
}

/// Renews chunks of holds to `lease_ms`, one script call per chunk, the
/// chunks pipelined: one write, one wait for the replies however many chunks
/// there are. Per chunk, what each hold was found to be, or the error that
/// chunk got (the others still count). A `NOSCRIPT` reply proves the chunk
/// did not run: those are sent again after `SCRIPT LOAD`. Permit chunks
/// renew to `now + lease` by this host's clock, read here, after the
/// callers began their lease tickets.
pub(crate) fn renew_chunks(
    con: &mut dyn ConnectionLike,
    chunks: &[RenewChunk<'_>],
    lease_ms: u64,
) -> Result<Vec<Result<Vec<Renewed>>>> {
    let send = |con: &mut dyn ConnectionLike, which: &[usize]| -> Result<Vec<Value>> {
        // Rounded up: the expiry `now + lease` is never earlier than the
        // callers' ticket (taken before) plus the lease, so a permit's lost
        // signal fires no later than its expiry; a permit expiring within
        // that millisecond counts as expired.
        let now_ms = super::epoch_millis().saturating_add(1);
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for chunk in which.iter().filter_map(|&i| chunks.get(i)) {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(script(chunk.kind()).get_hash())
                .arg(chunk.items.len());
            chunk.args(&mut cmd, lease_ms, now_ms);
            pipe.add_command(cmd);
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
        .filter(|(_, reply)| Verdict::of_reply(reply) == Verdict::NoScript)
        .map(|(i, _)| i)
        .collect();
    if !missing.is_empty() {
        for kind in [RenewKind::Field, RenewKind::ReadMarkers, RenewKind::Permits] {
            if missing.iter().any(|&i| chunks[i].kind() == kind) {
                script(kind).load(con)?;
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

/// One chunk's reply: `1` held, `-1` another type, anything else gone.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_replies_decode_per_hold() {
        let reply = Value::Array(vec![Value::Int(1), Value::Int(0), Value::Int(-1)]);
        assert_eq!(
            decode_renewal(3, reply).ok(),
            Some(vec![Renewed::Held, Renewed::Gone, Renewed::WrongType])
        );
        let short = Value::Array(vec![Value::Int(1)]);
        assert!(matches!(
            decode_renewal(2, short),
            Err(Error::UnexpectedReply(_))
        ));
        assert!(decode_renewal(1, Value::Int(1)).is_err());
    }

    #[test]
    fn permit_chunks_send_both_id_forms_after_now() {
        let renewal = Renewal::Permits(Arc::new(PermitRenewal {
            timeout: "{s}:timeout".into(),
            ids: vec![[0xab; 16]].into(),
        }));
        assert_eq!(renewal.kind(), RenewKind::Permits);
        assert_eq!(renewal.key("s"), "{s}:timeout");
        let chunk = RenewChunk {
            items: vec![("s", "permits:ab", &renewal)],
        };
        let mut cmd = redis::cmd("EVALSHA");
        chunk.args(&mut cmd, 600, 1_000);
        let args: Vec<Vec<u8>> = cmd
            .args_iter()
            .filter_map(|arg| match arg {
                redis::Arg::Simple(bytes) => Some(bytes.to_vec()),
                _ => None,
            })
            .collect();
        assert_eq!(args[1], b"{s}:timeout");
        assert_eq!(args[2], b"600");
        assert_eq!(args[3], b"1000");
        assert_eq!(args[4], b"1");
        assert_eq!(args[5], vec![0xab; 16]);
        assert_eq!(args[6], "ab".repeat(16).into_bytes());
    }
}
