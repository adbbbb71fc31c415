//! Scenario 5: the lock family. Every Redisson lock type the crate has,
//! each against its own protocol floor (that type's acquire and unlock
//! scripts as PROTOCOL §3–§7 describe them, less the unlock latch, written
//! for the benchmark in `bench/lua/`, sent with `redis::Script` on one plain
//! connection per thread) and against Redisson's same type.
//!
//! `family` runs `threads` threads on ONE name for a fixed time: one thread
//! for the uncontended rows, four for the shared read lock (each thread its
//! own owner field). The fair lock's hand-off is scenario 3 run with
//! `--lock-type fair` (see [`Factory::with_lock_type`]).

use std::sync::{Barrier, LazyLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Result, bail};
use redis::Script;
use serde_json::{Value, json};

use crate::common::{Args, cpu_ns, percentile, us};
use crate::contenders::{
    FLOOR_ACQUIRE_LUA, FLOOR_UNLOCK_LUA, Factory, Kind, LEASE, Session, braced,
};

/// A lock type of the family, as `--lock-type` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockType {
    /// `client.lock(n)`, RLock: scenarios 1–4.
    Lock,
    Fair,
    Read,
    Write,
    Fenced,
    Spin,
    NonReentrant,
}

impl LockType {
    pub fn parse(s: &str) -> Result<LockType> {
        Ok(match s {
            "lock" => LockType::Lock,
            "fair" => LockType::Fair,
            "read" => LockType::Read,
            "write" => LockType::Write,
            "fenced" => LockType::Fenced,
            "spin" => LockType::Spin,
            "nonreentrant" => LockType::NonReentrant,
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

static RLOCK_ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(FLOOR_ACQUIRE_LUA));
static RLOCK_UNLOCK: LazyLock<Script> = LazyLock::new(|| Script::new(FLOOR_UNLOCK_LUA));
static FAIR_ACQUIRE: LazyLock<Script> = script!("fair_acquire.lua");
static FAIR_UNLOCK: LazyLock<Script> = script!("fair_unlock.lua");
static READ_ACQUIRE: LazyLock<Script> = script!("read_acquire.lua");
static READ_UNLOCK: LazyLock<Script> = script!("read_unlock.lua");
static WRITE_ACQUIRE: LazyLock<Script> = script!("write_acquire.lua");
static WRITE_UNLOCK: LazyLock<Script> = script!("write_unlock.lua");
static FENCED_ACQUIRE: LazyLock<Script> = script!("fenced_acquire.lua");
static SPIN_UNLOCK: LazyLock<Script> = script!("spin_unlock.lua");
static NONREENTRANT_ACQUIRE: LazyLock<Script> = script!("nonreentrant_acquire.lua");

/// A session of a type other than [`LockType::Lock`] (the factory's own
/// sessions cover that one).
pub fn session(f: &Factory, t: LockType, name: &str, thread: u64) -> Result<Box<dyn Session>> {
    Ok(match f.kind {
        Kind::Floor => Box::new(TypedFloor::new(f, t, name, thread)?),
        Kind::Crate => {
            let c = f.client.as_ref().expect("crate contender has a client");
            match t {
                LockType::Lock => Box::new(Typed::new(c.lock(name))),
                LockType::Fair => Box::new(Typed::new(c.fair_lock(name))),
                LockType::Read => Box::new(Typed::new(c.read_write_lock(name).read_lock())),
                LockType::Write => Box::new(Typed::new(c.read_write_lock(name).write_lock())),
                LockType::Fenced => Box::new(Typed::new(c.fenced_lock(name))),
                LockType::Spin => Box::new(Typed::new(c.spin_lock(name))),
                LockType::NonReentrant => Box::new(Typed::new(c.non_reentrant_lock(name))),
            }
        }
        other => bail!("the lock family is not measured for {}", other.name()),
    })
}

// ---------------------------------------------------------------- crate

struct Typed<K: redisson_lock::Kind> {
    lock: redisson_lock::Lock<K>,
    guard: Option<redisson_lock::LockGuard<K>>,
}

impl<K: redisson_lock::Kind> Typed<K> {
    fn new(lock: redisson_lock::Lock<K>) -> Self {
        Typed { lock, guard: None }
    }
}

impl<K: redisson_lock::Kind> Session for Typed<K> {
    fn lock(&mut self) -> Result<()> {
        self.guard = Some(self.lock.lock()?);
        Ok(())
    }

    fn unlock(&mut self) -> Result<()> {
        match self.guard.take() {
            Some(guard) => Ok(guard.unlock()?),
            None => bail!("crate: unlock without a guard"),
        }
    }
}

// ---------------------------------------------------------------- floor

/// A type's floor: its scripts on one plain connection. Waiting (never
/// needed uncontended, nor by readers) is a short sleep and a retry.
struct TypedFloor {
    con: redis::Connection,
    t: LockType,
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
    fn new(f: &Factory, t: LockType, name: &str, thread: u64) -> Result<Self> {
        let field = format!("{}:{thread}", f.floor_id);
        // suffixName / the rwlock key prefix (PROTOCOL §1.1, §4).
        let prefix = if name.contains('{') {
            name.to_owned()
        } else {
            format!("{{{name}}}")
        };
        let channel = match t {
            LockType::Read | LockType::Write => braced("redisson_rwlock", name),
            _ => braced("redisson_lock__channel", name),
        };
        Ok(TypedFloor {
            con: f.plain_connection()?,
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
            LockType::Lock | LockType::Spin => RLOCK_ACQUIRE
                .key(&self.name)
                .arg(lease)
                .arg(&self.field)
                .invoke(con)?,
            LockType::Fair => FAIR_ACQUIRE
                .key(&self.name)
                .key(&self.queue)
                .key(&self.timeouts)
                .arg(lease)
                .arg(&self.field)
                .arg(FAIR_WAIT_MS)
                .arg(now_ms())
                .invoke(con)?,
            LockType::Read => READ_ACQUIRE
                .key(&self.name)
                .key(&self.markers)
                .arg(lease)
                .arg(&self.field)
                .arg(format!("{}:write", self.field))
                .invoke(con)?,
            LockType::Write => WRITE_ACQUIRE
                .key(&self.name)
                .arg(lease)
                .arg(format!("{}:write", self.field))
                .invoke(con)?,
            LockType::Fenced => {
                let (ttl, _token): (i64, i64) = FENCED_ACQUIRE
                    .key(&self.name)
                    .key(&self.token)
                    .arg(lease)
                    .arg(&self.field)
                    .invoke(con)?;
                (ttl != -1).then_some(ttl)
            }
            LockType::NonReentrant => NONREENTRANT_ACQUIRE
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
            LockType::Lock | LockType::Fenced | LockType::NonReentrant => RLOCK_UNLOCK
                .key(&self.name)
                .key(&self.channel)
                .arg("0")
                .arg(lease)
                .arg(&self.field)
                .arg("publish")
                .invoke(con)?,
            LockType::Fair => FAIR_UNLOCK
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
            LockType::Read => READ_UNLOCK
                .key(&self.name)
                .key(&self.channel)
                .key(&self.markers)
                .key(&self.prefix)
                .arg("0")
                .arg(&self.field)
                .arg("publish")
                .invoke(con)?,
            LockType::Write => WRITE_UNLOCK
                .key(&self.name)
                .key(&self.channel)
                .arg("1")
                .arg(lease)
                .arg(format!("{}:write", self.field))
                .arg("publish")
                .invoke(con)?,
            LockType::Spin => SPIN_UNLOCK
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

// ---------------------------------------------------------------- scenario

/// Scenario 5, one measurement: `threads` threads on one name, lock+unlock
/// pairs for a fixed time.
pub fn run(f: &Factory, args: &Args) -> Result<Value> {
    let run_id = args.str_or("run-id", "0").to_owned();
    let threads = args.num_or("threads", 1)?.max(1) as usize;
    let warmup = args.num_or("warmup", 500)?;
    let duration = Duration::from_millis(args.num_or("duration-ms", 1_500)?);
    let name = format!("bench:s5:{run_id}");
    let barrier = Barrier::new(threads);
    let cpu0 = cpu_ns();
    let results: Vec<Result<(Vec<u64>, f64)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, name) = (&barrier, &name);
                scope.spawn(move || -> Result<(Vec<u64>, f64)> {
                    let ready = f.session(name, t as u64 + 1, false).and_then(|mut s| {
                        for _ in 0..warmup {
                            s.lock()?;
                            s.unlock()?;
                        }
                        Ok(s)
                    });
                    barrier.wait();
                    let mut session = ready?;
                    let mut latencies = Vec::with_capacity(100_000);
                    let start = Instant::now();
                    let end = start + duration;
                    loop {
                        let t0 = Instant::now();
                        if t0 >= end {
                            break;
                        }
                        session.lock()?;
                        session.unlock()?;
                        latencies.push(t0.elapsed().as_nanos() as u64);
                    }
                    Ok((latencies, start.elapsed().as_secs_f64()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread panicked"))
            .collect()
    });
    let cpu = cpu_ns() - cpu0;
    let mut all = Vec::new();
    let mut rate = 0.0;
    for r in results {
        let (lat, secs) = r?;
        rate += lat.len() as f64 / secs;
        all.extend(lat);
    }
    all.sort_unstable();
    let pairs = all.len() as u64;
    Ok(json!({
        "threads": threads,
        "pairs": pairs,
        "pairs_per_s": rate,
        "p50_us": us(percentile(&all, 0.50)),
        "p99_us": us(percentile(&all, 0.99)),
        "cpu_us_per_pair": us(cpu) / pairs.max(1) as f64,
    }))
}
