//! Redisson's synchronizers as sessions (the paired measurements): a
//! "pair" is one acquire + release of one permit (RSemaphore,
//! RPermitExpirableSemaphore) or one count_down + count (RCountDownLatch).
//! Each has its protocol floor (the scripts SYNCHRONIZERS §3–§5 describe,
//! written for the benchmark in `bench/lua/`, sent with `redis::Script` on
//! one plain connection per thread, and a plain `GET` for the latch's
//! count) and the crate's object, called as a user does.
//!
//! Also the contended semaphore: `--threads` threads over one semaphore of
//! `--permits` permits, each taking one permit `--iterations` times and
//! holding it `--hold-us`, the floor waiting on the semaphore's channel as
//! Redisson's waiters do.
//!
//! Above `session` and `common` alone.

use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Result, bail};
use redis::{Script, Value};
use serde_json::json;

use crate::common::{Args, critical_section, mono_ns, ms, percentile, together, us};
use crate::session::{Session, braced};

/// A synchronizer, as `--lock-type` names it in the paired measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncType {
    /// RSemaphore: `acquire(1)`, then the permits' `release()`.
    Semaphore,
    /// RPermitExpirableSemaphore: `acquire(None)` (a permanent permit),
    /// then the permits' `release()`.
    Expirable,
    /// RCountDownLatch: `count_down()`, then `count()`.
    Latch,
}

impl SyncType {
    /// The synchronizer `s` names, `None` for a lock type.
    pub fn parse(s: &str) -> Option<SyncType> {
        match s {
            "semaphore" => Some(SyncType::Semaphore),
            "pes" => Some(SyncType::Expirable),
            "latch" => Some(SyncType::Latch),
            _ => None,
        }
    }
}

/// The permits each semaphore starts with: one per name, one thread per name.
const PERMITS: u32 = 1;
/// The count each latch starts with: more count-downs than any run makes,
/// so it never reaches 0 (which would delete it).
const LATCH_COUNT: u64 = 1_000_000_000_000;
/// The permanent permit's score (`Long.MAX_VALUE / 10000`, SYNCHRONIZERS §2.5).
const PERMANENT: u64 = 922_337_203_685_477;

/// A benchmark script of `bench/lua/`, hashed once.
macro_rules! script {
    ($file:literal) => {
        LazyLock::new(|| Script::new(include_str!(concat!("../lua/", $file))))
    };
}

static SEMAPHORE_ACQUIRE: LazyLock<Script> = script!("semaphore_acquire.lua");
static SEMAPHORE_RELEASE: LazyLock<Script> = script!("semaphore_release.lua");
static PERMIT_EXPIRABLE_ACQUIRE: LazyLock<Script> = script!("permit_expirable_acquire.lua");
static PERMIT_EXPIRABLE_RELEASE: LazyLock<Script> = script!("permit_expirable_release.lua");
static LATCH_COUNT_DOWN: LazyLock<Script> = script!("latch_count_down.lua");

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What the threads of one paired process share: the floor's plain client
/// and the crate's client.
pub struct SyncSides {
    t: SyncType,
    redis: redis::Client,
    client: redisson_lock::Client,
}

impl SyncSides {
    pub fn new(url: &str, t: SyncType) -> Result<SyncSides> {
        Ok(SyncSides {
            t,
            redis: redis::Client::open(url)?,
            client: redisson_lock::Client::builder(url).build()?,
        })
    }

    /// `[floor, crate]` sessions on `names` (one each), set up untimed: a
    /// semaphore with [`PERMITS`], a latch with [`LATCH_COUNT`].
    pub fn open(&self, names: [&str; 2]) -> Result<[Box<dyn Session>; 2]> {
        Ok([
            self.floor(names[0], PERMITS, false)?,
            self.crate_side(names[1], PERMITS)?,
        ])
    }

    /// The floor's session on `name` (`permits` set if it has none);
    /// `contended`: subscribed to the semaphore's channel up front, waiting
    /// for a message after a failed attempt.
    fn floor(&self, name: &str, permits: u32, contended: bool) -> Result<Box<dyn Session>> {
        let mut con = self.redis.get_connection()?;
        let initial = match self.t {
            SyncType::Latch => LATCH_COUNT,
            _ => u64::from(permits),
        };
        let channel = match self.t {
            SyncType::Latch => format!("redisson_countdownlatch__channel__{{{name}}}"),
            _ => braced("redisson_sc", name),
        };
        let sub = match contended {
            // Leaked: a `PubSub` borrows its connection, and a contended
            // process opens a handful of them once.
            true => {
                let mut sub = Box::leak(Box::new(self.redis.get_connection()?)).as_pubsub();
                sub.subscribe(&channel)?;
                sub.set_read_timeout(Some(SAFETY_NET))?;
                Some(sub)
            }
            false => None,
        };
        let _: Value = redis::cmd("SET")
            .arg(name)
            .arg(initial)
            .arg("NX")
            .query(&mut con)?;
        Ok(Box::new(SyncFloor {
            con,
            t: self.t,
            name: name.to_owned(),
            channel,
            sub,
            timeout: if name.contains('{') {
                format!("{name}:timeout")
            } else {
                format!("{{{name}}}:timeout")
            },
            permit: None,
        }))
    }

    fn crate_side(&self, name: &str, permits: u32) -> Result<Box<dyn Session>> {
        let c = &self.client;
        Ok(match self.t {
            SyncType::Semaphore => {
                let semaphore = c.semaphore(name);
                semaphore.try_set_permits(permits)?;
                Box::new(CrateSemaphore {
                    semaphore,
                    held: None,
                })
            }
            SyncType::Expirable => {
                let semaphore = c.permit_expirable_semaphore(name);
                semaphore.try_set_permits(PERMITS)?;
                Box::new(CrateExpirable {
                    semaphore,
                    held: None,
                })
            }
            SyncType::Latch => {
                let latch = c.count_down_latch(name);
                latch.try_set_count(LATCH_COUNT)?;
                Box::new(CrateLatch { latch })
            }
        })
    }
}

// ---------------------------------------------------------------- floor

/// How long a contended floor waits for a message before trying again.
const SAFETY_NET: Duration = Duration::from_millis(100);

/// A synchronizer's floor: its scripts on one plain connection. Waiting
/// (uncontended, never needed: one thread per name) is a short sleep and a
/// retry, or, contended, the next message on the channel (Redisson's
/// waiters have no other wake-up; a stale message just costs an attempt).
struct SyncFloor {
    con: redis::Connection,
    t: SyncType,
    name: String,
    channel: String,
    sub: Option<redis::PubSub<'static>>,
    /// The permit-expirable semaphore's `{<name>}:timeout`.
    timeout: String,
    /// The permit-expirable semaphore's held permit id.
    permit: Option<[u8; 16]>,
}

impl SyncFloor {
    /// `true` when acquired (the latch: counted down).
    fn attempt(&mut self) -> Result<bool> {
        let con = &mut self.con;
        Ok(match self.t {
            SyncType::Semaphore => {
                let taken: i64 = SEMAPHORE_ACQUIRE.key(&self.name).arg(1).invoke(con)?;
                taken == 1
            }
            SyncType::Expirable => {
                // Redisson's id: 16 random bytes, fresh for each attempt.
                let id = *uuid::Uuid::new_v4().as_bytes();
                let reply: Value = PERMIT_EXPIRABLE_ACQUIRE
                    .key(&self.name)
                    .key(&self.timeout)
                    .key(&self.channel)
                    .arg(1)
                    .arg(PERMANENT)
                    .arg(now_ms())
                    .arg(PERMANENT)
                    .arg("publish")
                    .arg(&id[..])
                    .invoke(con)?;
                let ok = match &reply {
                    Value::Okay => true,
                    Value::SimpleString(s) => s == "OK",
                    Value::BulkString(b) => b == b"OK",
                    _ => false,
                };
                if ok {
                    self.permit = Some(id);
                }
                ok
            }
            SyncType::Latch => {
                let _: Value = LATCH_COUNT_DOWN
                    .key(&self.name)
                    .key(&self.channel)
                    .arg("0")
                    .arg("publish")
                    .invoke(con)?;
                true
            }
        })
    }
}

impl Session for SyncFloor {
    fn lock(&mut self) -> Result<()> {
        while !self.attempt()? {
            match self.sub.as_mut() {
                Some(sub) => match sub.get_message() {
                    Ok(_) => {}
                    Err(e) if e.is_timeout() => {}
                    Err(e) => return Err(e.into()),
                },
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        Ok(())
    }

    fn unlock(&mut self) -> Result<()> {
        let con = &mut self.con;
        match self.t {
            SyncType::Semaphore => {
                let _: Value = SEMAPHORE_RELEASE
                    .key(&self.name)
                    .key(&self.channel)
                    .arg(1)
                    .arg("publish")
                    .invoke(con)?;
            }
            SyncType::Expirable => {
                let Some(id) = self.permit.take() else {
                    bail!("floor: release of {} without a permit", self.name);
                };
                let released: i64 = PERMIT_EXPIRABLE_RELEASE
                    .key(&self.name)
                    .key(&self.channel)
                    .key(&self.timeout)
                    .arg(&id[..])
                    .arg(1)
                    .arg(now_ms())
                    .arg("publish")
                    .invoke(con)?;
                if released != 1 {
                    bail!("floor: the permit of {} was not released", self.name);
                }
            }
            SyncType::Latch => {
                let count: Option<i64> = redis::cmd("GET").arg(&self.name).query(con)?;
                if count.is_none_or(|c| c <= 0) {
                    bail!("floor: latch {} is open", self.name);
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- crate

struct CrateSemaphore {
    semaphore: redisson_lock::Semaphore,
    held: Option<redisson_lock::SemaphorePermits>,
}

impl Session for CrateSemaphore {
    fn lock(&mut self) -> Result<()> {
        self.held = Some(self.semaphore.acquire(1)?);
        Ok(())
    }

    fn unlock(&mut self) -> Result<()> {
        match self.held.take() {
            Some(permits) => Ok(permits.release()?),
            None => bail!("crate: release without permits"),
        }
    }
}

struct CrateExpirable {
    semaphore: redisson_lock::PermitExpirableSemaphore,
    held: Option<redisson_lock::ExpirablePermits>,
}

impl Session for CrateExpirable {
    fn lock(&mut self) -> Result<()> {
        self.held = Some(self.semaphore.acquire(None)?);
        Ok(())
    }

    fn unlock(&mut self) -> Result<()> {
        match self.held.take() {
            Some(permits) => Ok(permits.release()?),
            None => bail!("crate: release without permits"),
        }
    }
}

struct CrateLatch {
    latch: redisson_lock::CountDownLatch,
}

impl Session for CrateLatch {
    fn lock(&mut self) -> Result<()> {
        Ok(self.latch.count_down()?)
    }

    fn unlock(&mut self) -> Result<()> {
        if self.latch.count()? == 0 {
            bail!("crate: latch {} is open", self.latch.name());
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- contended

/// The contended semaphore, one process of one side (`floor`, else the
/// crate): `--threads` threads over one semaphore of `--permits` permits,
/// `--iterations` acquisitions each holding it `--hold-us`, after
/// `--warmup` untimed ones on another semaphore.
pub fn contended(url: &str, floor: bool, args: &Args) -> Result<serde_json::Value> {
    let run_id = args.str_or("run-id", "0").to_owned();
    let threads = args.num_or("threads", 8)?.max(1) as usize;
    let permits = args.num_or("permits", 2)?.max(1) as u32;
    let iterations = args.num_or("iterations", 500)?;
    let warmup = args.num_or("warmup", 20)?;
    let hold = Duration::from_micros(args.num_or("hold-us", 100)?);
    let sides = SyncSides::new(url, SyncType::Semaphore)?;
    let open = |name: &str| match floor {
        true => sides.floor(name, permits, true),
        false => sides.crate_side(name, permits),
    };
    let (hot, warm) = (
        format!("bench:semc:{run_id}"),
        format!("bench:semcw:{run_id}"),
    );
    // (acquired, release) per acquisition, mono ns.
    let per_thread: Vec<Result<Vec<(u64, u64)>>> = together(
        threads,
        |_| {
            let mut warm_session = open(&warm)?;
            for _ in 0..warmup {
                warm_session.lock()?;
                critical_section(hold);
                warm_session.unlock()?;
            }
            open(&hot)
        },
        |mut session, _| {
            let mut out = Vec::with_capacity(iterations as usize);
            for _ in 0..iterations {
                session.lock()?;
                let acquired = mono_ns();
                critical_section(hold);
                let release = mono_ns();
                session.unlock()?;
                out.push((acquired, release));
            }
            Ok(out)
        },
    );
    let mut acquired: Vec<u64> = Vec::new();
    let mut releases = Vec::new();
    for thread in per_thread {
        for (a, r) in thread? {
            acquired.push(a);
            releases.push(r);
        }
    }
    let acquisitions = acquired.len();
    let start = acquired.iter().copied().min().unwrap_or(0);
    let end = releases.iter().copied().max().unwrap_or(0);
    let (mut handoff, overlaps) = handoffs(acquired, releases, permits as usize);
    handoff.sort_unstable();
    Ok(json!({
        "threads": threads,
        "permits": permits,
        "acquisitions": acquisitions,
        "total_ms": ms(end.saturating_sub(start)),
        "handoff_p50_us": us(percentile(&handoff, 0.50)),
        "handoff_p99_us": us(percentile(&handoff, 0.99)),
        "handoff_max_us": us(percentile(&handoff, 1.0)),
        "overlaps": overlaps,
    }))
}

/// Hand-offs of a semaphore of `permits` permits: in time order, the k-th
/// acquisition (k ≥ `permits`) needs the (k − `permits`)-th release to have
/// started, and its hand-off is the time between the two (for one permit,
/// scenario 3's hand-off). An acquisition before that release is an
/// overlap (more holders than permits, or clocks that disagree).
fn handoffs(mut acquired: Vec<u64>, mut releases: Vec<u64>, permits: usize) -> (Vec<u64>, u64) {
    acquired.sort_unstable();
    releases.sort_unstable();
    let mut gaps = Vec::with_capacity(acquired.len());
    let mut overlaps = 0;
    for (k, &a) in acquired.iter().enumerate().skip(permits) {
        match releases.get(k - permits) {
            Some(&r) if a >= r => gaps.push(a - r),
            _ => overlaps += 1,
        }
    }
    (gaps, overlaps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permit_is_handed_off_from_the_release_that_freed_it() {
        // Two permits: acquisitions at 0 and 1 need no release; the one at
        // 15 follows the first release (10), the one at 30 the second (20).
        let (gaps, overlaps) = handoffs(vec![0, 1, 15, 30], vec![10, 20, 40, 50], 2);
        assert_eq!((gaps, overlaps), (vec![5, 10], 0));
        // A third holder before any release: an overlap.
        let (gaps, overlaps) = handoffs(vec![0, 1, 2], vec![10, 20, 30], 2);
        assert_eq!((gaps, overlaps), (vec![], 1));
    }

    #[test]
    fn synchronizers_parse_and_lock_types_do_not() {
        assert_eq!(SyncType::parse("semaphore"), Some(SyncType::Semaphore));
        assert_eq!(SyncType::parse("pes"), Some(SyncType::Expirable));
        assert_eq!(SyncType::parse("latch"), Some(SyncType::Latch));
        assert_eq!(SyncType::parse("lock"), None);
        assert_eq!(SyncType::parse("fair"), None);
    }

    #[test]
    fn the_floor_scripts_hash() {
        for s in [
            &SEMAPHORE_ACQUIRE,
            &SEMAPHORE_RELEASE,
            &PERMIT_EXPIRABLE_ACQUIRE,
            &PERMIT_EXPIRABLE_RELEASE,
            &LATCH_COUNT_DOWN,
        ] {
            assert_eq!(s.get_hash().len(), 40);
        }
    }
}
