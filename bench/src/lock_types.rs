//! The lock family's types other than RLock as sessions (scenario 5 and
//! the paired measurements): [`BenchedLock`], each type's protocol floor (that
//! type's acquire and unlock scripts as PROTOCOL §3–§7 describe them, less
//! the unlock latch, written for the benchmark in `bench/lua/`, sent with
//! `redis::Script` on one plain connection per thread) and the crate's lock
//! of that type.
//!
//! Below `contenders` (whose `Factory` hands these sessions out) and above
//! `session` alone.

use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Result, bail};
use redis::Script;

use crate::session::{FLOOR_ACQUIRE, FLOOR_UNLOCK, LEASE, Session, braced, crate_session};

/// A lock type of the family, as `--lock-type` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchedLock {
    /// `client.lock(n)`, RLock: scenarios 1–4.
    Lock,
    Fair,
    Read,
    Write,
    Fenced,
    Spin,
    NonReentrant,
}

impl BenchedLock {
    pub fn parse(s: &str) -> Result<BenchedLock> {
        Ok(match s {
            "lock" => BenchedLock::Lock,
            "fair" => BenchedLock::Fair,
            "read" => BenchedLock::Read,
            "write" => BenchedLock::Write,
            "fenced" => BenchedLock::Fenced,
            "spin" => BenchedLock::Spin,
            "nonreentrant" => BenchedLock::NonReentrant,
            other => bail!(
                "unknown lock type {other} (lock, fair, read, write, fenced, spin, nonreentrant)"
            ),
        })
    }
}

/// The wait time the fair floor queues with (Redisson's `fairLockWaitTimeout`).
const FAIR_WAIT_MS: u64 = 300_000;
/// The error text of a non-reentrant re-entry (PROTOCOL §7).
const REACQUIRE_ERROR: &str = "NON_REENTRANT_REACQUIRE";

/// A benchmark script of `bench/lua/`, hashed once.
macro_rules! script {
    ($file:literal) => {
        LazyLock::new(|| Script::new(include_str!(concat!("../lua/", $file))))
    };
}

static FAIR_ACQUIRE: LazyLock<Script> = script!("fair_acquire.lua");
static FAIR_UNLOCK: LazyLock<Script> = script!("fair_unlock.lua");
static READ_ACQUIRE: LazyLock<Script> = script!("read_acquire.lua");
static READ_UNLOCK: LazyLock<Script> = script!("read_unlock.lua");
static WRITE_ACQUIRE: LazyLock<Script> = script!("write_acquire.lua");
static WRITE_UNLOCK: LazyLock<Script> = script!("write_unlock.lua");
static FENCED_ACQUIRE: LazyLock<Script> = script!("fenced_acquire.lua");
static SPIN_UNLOCK: LazyLock<Script> = script!("spin_unlock.lua");
static NONREENTRANT_ACQUIRE: LazyLock<Script> = script!("nonreentrant_acquire.lua");

/// The crate's lock of type `t` on `name` of `c`.
pub fn crate_typed(c: &redisson_lock::Client, t: BenchedLock, name: &str) -> Box<dyn Session> {
    match t {
        BenchedLock::Lock => crate_session(c.lock(name)),
        BenchedLock::Fair => crate_session(c.fair_lock(name)),
        BenchedLock::Read => crate_session(c.read_write_lock(name).read_lock()),
        BenchedLock::Write => crate_session(c.read_write_lock(name).write_lock()),
        BenchedLock::Fenced => crate_session(c.fenced_lock(name)),
        BenchedLock::Spin => crate_session(c.spin_lock(name)),
        BenchedLock::NonReentrant => crate_session(c.non_reentrant_lock(name)),
    }
}

// ---------------------------------------------------------------- floor

/// A type's floor: its scripts on one plain connection. Waiting (never
/// needed uncontended, nor by readers) is a short sleep and a retry.
pub struct TypedFloor {
    con: redis::Connection,
    t: BenchedLock,
    name: String,
    field: String,
    /// Derived keys, in the order the type's scripts take them.
    queue: String,
    timeouts: String,
    channel: String,
    markers: String,
    prefix: String,
    token: String,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl TypedFloor {
    /// Type `t`'s floor on `name` over `con`, owner field
    /// `<floor_id>:<thread>`.
    pub fn new(
        con: redis::Connection,
        floor_id: &str,
        t: BenchedLock,
        name: &str,
        thread: u64,
    ) -> Result<Self> {
        let field = format!("{floor_id}:{thread}");
        // suffixName / the rwlock key prefix (PROTOCOL §1.1, §4).
        let prefix = if name.contains('{') {
            name.to_owned()
        } else {
            format!("{{{name}}}")
        };
        let channel = match t {
            BenchedLock::Read | BenchedLock::Write => braced("redisson_rwlock", name),
            _ => braced("redisson_lock__channel", name),
        };
        Ok(TypedFloor {
            con,
            t,
            name: name.to_owned(),
            queue: braced("redisson_lock_queue", name),
            timeouts: braced("redisson_lock_timeout", name),
            channel,
            markers: format!("{prefix}:{field}:rwlock_timeout"),
            prefix,
            token: braced("redisson_lock_token", name),
            field,
        })
    }

    /// `None` when acquired, else how long to wait.
    fn attempt(&mut self) -> Result<Option<Duration>> {
        let lease = LEASE.as_millis() as u64;
        let con = &mut self.con;
        let reply: Option<i64> = match self.t {
            BenchedLock::Lock | BenchedLock::Spin => FLOOR_ACQUIRE
                .key(&self.name)
                .arg(lease)
                .arg(&self.field)
                .invoke(con)?,
            BenchedLock::Fair => FAIR_ACQUIRE
                .key(&self.name)
                .key(&self.queue)
                .key(&self.timeouts)
                .arg(lease)
                .arg(&self.field)
                .arg(FAIR_WAIT_MS)
                .arg(now_ms())
                .invoke(con)?,
            BenchedLock::Read => READ_ACQUIRE
                .key(&self.name)
                .key(&self.markers)
                .arg(lease)
                .arg(&self.field)
                .arg(format!("{}:write", self.field))
                .invoke(con)?,
            BenchedLock::Write => WRITE_ACQUIRE
                .key(&self.name)
                .arg(lease)
                .arg(format!("{}:write", self.field))
                .invoke(con)?,
            BenchedLock::Fenced => {
                let (ttl, _token): (i64, i64) = FENCED_ACQUIRE
                    .key(&self.name)
                    .key(&self.token)
                    .arg(lease)
                    .arg(&self.field)
                    .invoke(con)?;
                (ttl != -1).then_some(ttl)
            }
            BenchedLock::NonReentrant => NONREENTRANT_ACQUIRE
                .key(&self.name)
                .arg(lease)
                .arg(&self.field)
                .arg(REACQUIRE_ERROR)
                .invoke(con)?,
        };
        // Never waited on uncontended nor between readers: poll every 1 ms.
        Ok(reply.map(|_| Duration::from_millis(1)))
    }
}

impl Session for TypedFloor {
    fn lock(&mut self) -> Result<()> {
        while let Some(wait) = self.attempt()? {
            std::thread::sleep(wait);
        }
        Ok(())
    }

    fn unlock(&mut self) -> Result<()> {
        let lease = LEASE.as_millis() as u64;
        let con = &mut self.con;
        let reply: Option<i64> = match self.t {
            BenchedLock::Lock | BenchedLock::Fenced | BenchedLock::NonReentrant => FLOOR_UNLOCK
                .key(&self.name)
                .key(&self.channel)
                .arg("0")
                .arg(lease)
                .arg(&self.field)
                .arg("publish")
                .invoke(con)?,
            BenchedLock::Fair => FAIR_UNLOCK
                .key(&self.name)
                .key(&self.queue)
                .key(&self.timeouts)
                .key(&self.channel)
                .arg("0")
                .arg(lease)
                .arg(&self.field)
                .arg(now_ms())
                .arg("publish")
                .invoke(con)?,
            BenchedLock::Read => READ_UNLOCK
                .key(&self.name)
                .key(&self.channel)
                .key(&self.markers)
                .key(&self.prefix)
                .arg("0")
                .arg(&self.field)
                .arg("publish")
                .invoke(con)?,
            BenchedLock::Write => WRITE_UNLOCK
                .key(&self.name)
                .key(&self.channel)
                .arg("1")
                .arg(lease)
                .arg(format!("{}:write", self.field))
                .arg("publish")
                .invoke(con)?,
            BenchedLock::Spin => SPIN_UNLOCK
                .key(&self.name)
                .arg(lease)
                .arg(&self.field)
                .invoke(con)?,
        };
        if reply.is_none() {
            bail!(
                "floor: unlock of {} ({:?}) found it not held",
                self.name,
                self.t
            );
        }
        Ok(())
    }
}
