//! A read-only snapshot of one lock of any kind of the family
//! (`lua/inspect.lua`): what its keys say about it, read in one script in
//! the lock's slot, and checked against the layouts of docs/wire-format.md. A key
//! laid out as no Redisson lock lays it out is [`Error::NotALock`], never a
//! guess. A string holding an integer is a synchronizer's counter (a
//! semaphore's or a count-down latch's), with a permit-expirable
//! semaphore's permits when its `{<name>}:timeout` ZSET exists
//! (docs/synchronizers.md, §4.1).

use std::sync::LazyLock;

use redis::{ConnectionLike, Value};

use crate::error::{Error, Result};
use crate::lua::Lua;
use crate::names::{self, RWLOCK_MODE_FIELD, WRITE_FIELD_SUFFIX};

static INSPECT: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("../../lua/inspect.lua")));

/// The most read markers the script reads per reader field: a real count is
/// a thread's read reentries; a larger one is reported with this many.
const MOST_MARKERS: u64 = 1024;

/// The most permits of a permit-expirable semaphore the script reads.
pub(crate) const MOST_PERMITS: u64 = 10_000;

/// What the keys say the lock is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SnapshotKind {
    /// Nothing tells: no hash, no queue, no token.
    Unknown,
    /// A hash of owner fields (RLock, spin, non-reentrant).
    Reentrant,
    /// A fair queue or its deadlines exist.
    Fair,
    /// A fenced token exists.
    Fenced,
    /// A hash with `mode` = `read`.
    Read,
    /// A hash with `mode` = `write`.
    Write,
    /// A string holding an integer: a semaphore's or a latch's counter.
    Counter,
    /// A counter with a `{<name>}:timeout` ZSET: a permit-expirable
    /// semaphore.
    ExpirableSemaphore,
}

/// One acquired permit of a permit-expirable semaphore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SnapshotPermit {
    /// The raw 16-byte id (decoded when the member is hex text).
    pub id: [u8; 16],
    /// The member is the id's 32-character hex text (Redisson up to 3.16.8).
    pub hex: bool,
    /// Its expiry (client epoch ms); `None`: permanent (the sentinel).
    pub expiry_ms: Option<i64>,
}

/// Which side of a lock a holder's field is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SnapshotSide {
    /// `<id>:<thread>` in a lock without `mode`.
    Exclusive,
    /// `<id>:<thread>` in a read/write lock.
    Read,
    /// `<id>:<thread>:write` in a read/write lock.
    Write,
}

/// One holder's field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SnapshotHolder {
    pub client_id: String,
    pub thread_id: u64,
    pub count: u64,
    pub side: SnapshotSide,
    /// Read holders only: each marker's PTTL (`-2` absent, `-1` no expiry).
    pub markers: Vec<i64>,
}

/// One queued waiter of a fair lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SnapshotWaiter {
    pub client_id: String,
    pub thread_id: u64,
    /// Its zset score: a deadline in client epoch ms; `None` without one.
    pub deadline_ms: Option<i64>,
}

/// The lock as one script saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// The server's clock (`TIME`) in epoch ms when the script ran.
    pub server_ms: u64,
    pub locked: bool,
    pub kind: SnapshotKind,
    /// The hash's PTTL: `-2` absent, `-1` no expiry.
    pub pttl: i64,
    pub holders: Vec<SnapshotHolder>,
    pub queue: Vec<SnapshotWaiter>,
    pub token: Option<u64>,
    /// A string `<name>`'s integer value.
    pub counter: Option<i64>,
    /// A permit-expirable semaphore's acquired permits, by expiry.
    pub permits: Vec<SnapshotPermit>,
}

/// Reads the lock `name` in one script call (one round trip).
pub(crate) fn inspect(con: &mut dyn ConnectionLike, name: &str) -> Result<Snapshot> {
    let reply: Value = INSPECT
        .key(name)
        .key(names::prefix_name(names::FAIR_QUEUE_PREFIX, name))
        .key(names::prefix_name(names::FAIR_TIMEOUT_PREFIX, name))
        .key(names::prefix_name(names::TOKEN_PREFIX, name))
        .key(names::permit_expirable_timeout_key(name))
        .arg(names::rwlock_key_prefix(name))
        .arg(MOST_MARKERS)
        .arg(MOST_PERMITS)
        .invoke(con)?;
    decode(name, reply)
}

fn unexpected(what: &str) -> Error {
    Error::UnexpectedReply(format!("inspect script: {what}"))
}

fn not_a_lock(name: &str, found: impl Into<String>) -> Error {
    Error::NotALock {
        name: name.to_owned(),
        found: found.into(),
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        other => text(other)?.parse().ok(),
    }
}

fn items(value: &Value) -> Option<&[Value]> {
    match value {
        Value::Array(items) => Some(items),
        Value::Nil => Some(&[]),
        _ => None,
    }
}

/// Whether `s` is a UUID in its 36-character text form (Java's
/// `UUID.toString()`, this crate's client ids).
fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// `<uuid>:<digits>` split into its two halves.
pub(crate) fn parse_owner(field: &str) -> Option<(String, u64)> {
    let (id, thread) = field.rsplit_once(':')?;
    if !is_uuid(id) || thread.is_empty() || !thread.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((id.to_owned(), thread.parse().ok()?))
}

/// What a key of type `found` is called in an error.
fn typed(key: &str, found: &str) -> String {
    format!("`{key}` is a {found}")
}

fn decode(name: &str, reply: Value) -> Result<Snapshot> {
    let parts = items(&reply).ok_or_else(|| unexpected("not an array"))?;
    let [
        now,
        t1,
        t2,
        t3,
        t4,
        pttl,
        hash,
        queue,
        token,
        markers,
        t5,
        counter,
        permits,
    ] = parts
    else {
        return Err(unexpected("wrong length"));
    };
    let server_ms = int(now)
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| unexpected("time"))?;
    let types: Vec<String> = [t1, t2, t3, t4]
        .iter()
        .map(|t| text(t).ok_or_else(|| unexpected("type")))
        .collect::<Result<_>>()?;
    let queue_key = names::prefix_name(names::FAIR_QUEUE_PREFIX, name);
    let timeout_key = names::prefix_name(names::FAIR_TIMEOUT_PREFIX, name);
    let token_key = names::prefix_name(names::TOKEN_PREFIX, name);
    let expected = [
        (name, "hash"),
        (queue_key.as_str(), "list"),
        (timeout_key.as_str(), "zset"),
        (token_key.as_str(), "string"),
    ];
    for ((key, want), found) in expected.iter().zip(&types) {
        let counter_string = *key == name && found == "string";
        if found != "none" && found != want && !counter_string {
            return Err(not_a_lock(name, typed(key, found)));
        }
    }
    let pttl = int(pttl).ok_or_else(|| unexpected("pttl"))?;

    // The hash: owner fields, and `mode` for a read/write lock.
    let hash = items(hash).ok_or_else(|| unexpected("hash"))?;
    let mut mode = None;
    let mut fields = Vec::with_capacity(hash.len() / 2);
    for pair in hash.chunks(2) {
        let [field, value] = pair else {
            return Err(unexpected("odd hash"));
        };
        let field = text(field).ok_or_else(|| unexpected("hash field"))?;
        let value = text(value).ok_or_else(|| unexpected("hash value"))?;
        if field == RWLOCK_MODE_FIELD {
            match value.as_str() {
                "read" | "write" => mode = Some(value),
                _ => {
                    return Err(not_a_lock(
                        name,
                        format!("a hash whose `mode` is `{value}`"),
                    ));
                }
            }
        } else {
            fields.push((field, value));
        }
    }
    let mut holders = Vec::with_capacity(fields.len());
    for (field, value) in &fields {
        let bad = || not_a_lock(name, format!("a hash with field `{field}` = `{value}`"));
        let (base, side) = match field.strip_suffix(WRITE_FIELD_SUFFIX) {
            Some(base) if mode.is_some() => (base, SnapshotSide::Write),
            Some(_) => return Err(bad()),
            None if mode.is_some() => (field.as_str(), SnapshotSide::Read),
            None => (field.as_str(), SnapshotSide::Exclusive),
        };
        let (client_id, thread_id) = parse_owner(base).ok_or_else(bad)?;
        let count: u64 = value.parse().map_err(|_| bad())?;
        holders.push(SnapshotHolder {
            client_id,
            thread_id,
            count,
            side,
            markers: Vec::new(),
        });
    }
    let markers = items(markers).ok_or_else(|| unexpected("markers"))?;
    for pair in markers.chunks(2) {
        let [field, ttls] = pair else {
            return Err(unexpected("odd markers"));
        };
        let field = text(field).ok_or_else(|| unexpected("marker field"))?;
        let ttls = items(ttls)
            .ok_or_else(|| unexpected("marker ttls"))?
            .iter()
            .map(|t| int(t).ok_or_else(|| unexpected("marker ttl")))
            .collect::<Result<Vec<i64>>>()?;
        if let Some((client_id, thread_id)) = parse_owner(&field)
            && let Some(holder) = holders.iter_mut().find(|h| {
                h.side == SnapshotSide::Read && h.client_id == client_id && h.thread_id == thread_id
            })
        {
            holder.markers = ttls;
        }
    }

    // The fair queue, in order, with each waiter's deadline.
    let queue = items(queue).ok_or_else(|| unexpected("queue"))?;
    let mut waiters = Vec::with_capacity(queue.len() / 2);
    for pair in queue.chunks(2) {
        let [entry, score] = pair else {
            return Err(unexpected("odd queue"));
        };
        let entry = text(entry).ok_or_else(|| unexpected("queue entry"))?;
        let (client_id, thread_id) = parse_owner(&entry).ok_or_else(|| {
            not_a_lock(
                name,
                format!("a fair queue `{queue_key}` with entry `{entry}`"),
            )
        })?;
        let deadline_ms = match score {
            Value::Nil => None,
            other => {
                let score = text(other).ok_or_else(|| unexpected("score"))?;
                let score: f64 = score.parse().map_err(|_| unexpected("score"))?;
                // Deadlines are whole ms; a float score is truncated.
                Some(score as i64)
            }
        };
        waiters.push(SnapshotWaiter {
            client_id,
            thread_id,
            deadline_ms,
        });
    }

    let token = match token {
        Value::Nil => None,
        other => {
            let value = text(other).ok_or_else(|| unexpected("token"))?;
            Some(value.parse::<u64>().map_err(|_| {
                not_a_lock(name, format!("a fenced token `{token_key}` = `{value}`"))
            })?)
        }
    };

    // A string: a synchronizer's counter, and a permit-expirable
    // semaphore's permits.
    let counter = match counter {
        Value::Nil => None,
        other => {
            let value = text(other).ok_or_else(|| unexpected("counter"))?;
            Some(value.trim().parse::<i64>().map_err(|_| {
                not_a_lock(
                    name,
                    format!("`{name}` is a string holding `{value}`, not a counter"),
                )
            })?)
        }
    };
    let timeout_type = text(t5).ok_or_else(|| unexpected("type"))?;
    let permits = items(permits).ok_or_else(|| unexpected("permits"))?;
    let mut acquired = Vec::with_capacity(permits.len() / 2);
    for pair in permits.chunks(2) {
        let [Value::BulkString(member), score] = pair else {
            return Err(unexpected("permits"));
        };
        let (id, hex) = permit_member(member).ok_or_else(|| {
            not_a_lock(
                name,
                format!(
                    "`{}` has a member of {} bytes, not a 16-byte permit id nor its hex text",
                    names::permit_expirable_timeout_key(name),
                    member.len()
                ),
            )
        })?;
        let score = text(score).ok_or_else(|| unexpected("permit score"))?;
        let score: f64 = score.parse().map_err(|_| unexpected("permit score"))?;
        // Expiries are whole ms; the sentinel means permanent.
        let expiry = score as i64;
        acquired.push(SnapshotPermit {
            id,
            hex,
            expiry_ms: (u64::try_from(expiry).ok() != Some(names::PES_PERMANENT_SCORE))
                .then_some(expiry),
        });
    }

    let locked = types[0] == "hash";
    let kind = match mode.as_deref() {
        None if counter.is_some() && timeout_type == "zset" => SnapshotKind::ExpirableSemaphore,
        None if counter.is_some() => SnapshotKind::Counter,
        Some("read") => SnapshotKind::Read,
        Some(_) => SnapshotKind::Write,
        None if types[1] != "none" || types[2] != "none" => SnapshotKind::Fair,
        None if token.is_some() => SnapshotKind::Fenced,
        None if locked => SnapshotKind::Reentrant,
        None => SnapshotKind::Unknown,
    };
    Ok(Snapshot {
        server_ms,
        locked,
        kind,
        pttl,
        holders,
        queue: waiters,
        token,
        counter,
        permits: acquired,
    })
}

/// A permit id ZSET member: 16 raw bytes (`false`), or 32 hex digits of
/// either case (`true`, Redisson up to 3.16.8) decoded.
fn permit_member(member: &[u8]) -> Option<([u8; 16], bool)> {
    if let Ok(raw) = <[u8; 16]>::try_from(member) {
        return Some((raw, false));
    }
    if member.len() != 32 {
        return None;
    }
    let digit = |c: u8| {
        char::from(c)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    let mut id = [0; 16];
    for (byte, pair) in id.iter_mut().zip(member.chunks(2)) {
        *byte = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some((id, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0b6e5c3a-6f43-4d3e-9a57-8f5cbe7c1d2a";

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn reply(types: [&str; 4], hash: &[&str], queue: Vec<Value>, token: Value) -> Value {
        let mut parts = vec![Value::Int(1_000)];
        parts.extend(types.iter().map(|t| Value::SimpleString((*t).to_owned())));
        parts.push(Value::Int(500));
        parts.push(Value::Array(hash.iter().map(|s| bulk(s)).collect()));
        parts.push(Value::Array(queue));
        parts.push(token);
        parts.push(Value::Array(vec![]));
        parts.push(Value::SimpleString("none".to_owned()));
        parts.push(Value::Nil);
        parts.push(Value::Array(vec![]));
        Value::Array(parts)
    }

    #[test]
    fn owner_fields_are_uuid_colon_digits() {
        assert_eq!(parse_owner(&format!("{ID}:42")), Some((ID.to_owned(), 42)));
        assert_eq!(parse_owner(&format!("{ID}:")), None);
        assert_eq!(parse_owner(&format!("{ID}:4x")), None);
        assert_eq!(parse_owner("abc:1"), None);
    }

    #[test]
    fn a_reentrant_hash_reads_as_one_holder() {
        let field = format!("{ID}:7");
        let snap = decode(
            "l",
            reply(
                ["hash", "none", "none", "none"],
                &[&field, "2"],
                vec![],
                Value::Nil,
            ),
        )
        .expect("decodes");
        assert!(snap.locked);
        assert_eq!(snap.kind, SnapshotKind::Reentrant);
        assert_eq!(snap.holders[0].count, 2);
        assert_eq!(snap.holders[0].thread_id, 7);
    }

    #[test]
    fn foreign_layouts_are_not_locks() {
        let wrong_type = decode(
            "l",
            reply(["list", "none", "none", "none"], &[], vec![], Value::Nil),
        );
        assert!(matches!(wrong_type, Err(Error::NotALock { .. })));
        let foreign_hash = decode(
            "l",
            reply(
                ["hash", "none", "none", "none"],
                &["name", "x"],
                vec![],
                Value::Nil,
            ),
        );
        assert!(matches!(foreign_hash, Err(Error::NotALock { .. })));
        let write_without_mode = decode(
            "l",
            reply(
                ["hash", "none", "none", "none"],
                &[&format!("{ID}:1:write"), "1"],
                vec![],
                Value::Nil,
            ),
        );
        assert!(matches!(write_without_mode, Err(Error::NotALock { .. })));
    }

    #[test]
    fn a_queue_with_scores_reads_in_order() {
        let queue = vec![
            bulk(&format!("{ID}:1")),
            bulk("2000"),
            bulk(&format!("{ID}:2")),
            Value::Nil,
        ];
        let snap = decode(
            "l",
            reply(["none", "list", "zset", "none"], &[], queue, Value::Nil),
        )
        .expect("decodes");
        assert!(!snap.locked);
        assert_eq!(snap.kind, SnapshotKind::Fair);
        assert_eq!(snap.queue[0].deadline_ms, Some(2000));
        assert_eq!(snap.queue[1].deadline_ms, None);
    }

    #[test]
    fn a_string_is_a_counter_and_with_its_zset_a_semaphore() {
        let mut parts = match reply(["string", "none", "none", "none"], &[], vec![], Value::Nil) {
            Value::Array(parts) => parts,
            _ => unreachable!(),
        };
        parts[11] = bulk("3");
        let counter = decode("s", Value::Array(parts.clone())).expect("decodes");
        assert_eq!(counter.kind, SnapshotKind::Counter);
        assert_eq!(counter.counter, Some(3));
        assert!(!counter.locked);

        parts[10] = Value::SimpleString("zset".to_owned());
        parts[12] = Value::Array(vec![
            Value::BulkString(vec![7; 16]),
            bulk("1700000000000"),
            Value::BulkString(vec![8; 16]),
            bulk("922337203685477"),
        ]);
        let pes = decode("s", Value::Array(parts.clone())).expect("decodes");
        assert_eq!(pes.kind, SnapshotKind::ExpirableSemaphore);
        assert_eq!(pes.permits[0].expiry_ms, Some(1_700_000_000_000));
        assert_eq!(pes.permits[1].expiry_ms, None);
        assert_eq!(pes.permits[1].id, [8; 16]);
        assert!(!pes.permits[1].hex);

        parts[12] = Value::Array(vec![bulk("0B0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b"), bulk("5")]);
        let old = decode("s", Value::Array(parts.clone())).expect("decodes");
        assert_eq!(old.permits[0].id, [0x0b; 16]);
        assert!(old.permits[0].hex);

        parts[12] = Value::Array(vec![bulk("hex text"), bulk("1")]);
        assert!(matches!(
            decode("s", Value::Array(parts.clone())),
            Err(Error::NotALock { .. })
        ));
        parts[12] = Value::Array(vec![bulk("0g0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b"), bulk("5")]);
        assert!(matches!(
            decode("s", Value::Array(parts.clone())),
            Err(Error::NotALock { .. })
        ));
        parts[11] = bulk("x");
        parts[12] = Value::Array(vec![]);
        assert!(matches!(
            decode("s", Value::Array(parts)),
            Err(Error::NotALock { .. })
        ));
    }
}
