//! Scenario 6: RedLock over five independent redis-servers. One thread
//! takes and releases a RedLock over the five (every member free) for a
//! fixed time, alternating in short slices with the same contender's plain
//! lock on the first server alone, so that the ratio of the two pair times
//! compares like with like on the same machine at the same moment.
//!
//! - `floor`: the true floor's acquire and unlock scripts (scenario 1's)
//!   on one plain connection per server, every member's command written
//!   before any reply is read: what "all at once" costs with no client code
//!   at all. The single lock is scenario 1's floor on the first server.
//! - `crate`: `RedLock::new` over one `Client` per server; the single lock
//!   is `Client::lock` on the first.
//! - `rslock`: one `LockManager` over the five URLs (rslock is RedLock
//!   itself); the single lock is a `LockManager` over the first URL.
//! - Redisson (Java, `Bench.java`): `RedissonRedLock` over one
//!   `RedissonClient` per server; the single lock is `getLock` on the first.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Value, json};

use crate::common::{Args, cpu_ns, percentile, us};
use crate::contenders::{Contender, Factory, rslock_session};
use crate::session::{
    FLOOR_ACQUIRE, FLOOR_UNLOCK, LEASE, Session, braced, crate_session, timed_pairs,
};

/// How long each side runs before the other takes over.
const SLICE: Duration = Duration::from_millis(100);

pub fn run(kind: Contender, args: &Args) -> Result<Value> {
    let urls: Vec<String> = args.str("urls")?.split(',').map(str::to_owned).collect();
    if urls.len() < 3 {
        bail!(
            "scenario redlock needs at least 3 --urls, got {}",
            urls.len()
        );
    }
    let run_id = args.str_or("run-id", "0");
    let warmup = args.num_or("warmup", 500)?;
    let duration = Duration::from_millis(args.num_or("duration-ms", 2_000)?);
    let red_name = format!("bench:s6:{run_id}");
    let single_name = format!("bench:s6:single:{run_id}");
    let (mut single, mut red): (Box<dyn Session>, Box<dyn Session>) = match kind {
        Contender::Crate => {
            let clients = urls
                .iter()
                .map(|url| {
                    redisson_lock::Client::builder(url.as_str())
                        .watchdog_timeout(LEASE)
                        .build()
                })
                .collect::<redisson_lock::Result<Vec<_>>>()?;
            let members: Vec<_> = clients.iter().map(|c| c.lock(&red_name)).collect();
            (
                crate_session(clients[0].lock(&single_name)),
                Box::new(CrateRed {
                    lock: redisson_lock::RedLock::new(members),
                    guard: None,
                }),
            )
        }
        Contender::Floor => (
            Factory::new(Contender::Floor, &urls[0], LEASE)?.session(&single_name, 1, false)?,
            Box::new(FloorRed::new(&urls, &red_name)?),
        ),
        Contender::Rslock => (
            rslock_session(vec![urls[0].clone()], &single_name)?,
            rslock_session(urls.clone(), &red_name)?,
        ),
        other => bail!("scenario redlock does not apply to {}", other.name()),
    };
    for _ in 0..warmup {
        single.lock()?;
        single.unlock()?;
        red.lock()?;
        red.unlock()?;
    }
    let mut single_lat = Vec::with_capacity(100_000);
    let mut red_lat = Vec::with_capacity(100_000);
    let cpu0 = cpu_ns();
    let mut red_time = Duration::ZERO;
    let mut cpu_red = 0;
    let start = Instant::now();
    while start.elapsed() < duration * 2 {
        pairs(&mut *single, SLICE, &mut single_lat)?;
        let c0 = cpu_ns();
        red_time += pairs(&mut *red, SLICE, &mut red_lat)?;
        cpu_red += cpu_ns() - c0;
    }
    let _ = cpu0;
    single_lat.sort_unstable();
    red_lat.sort_unstable();
    let n = red_lat.len() as u64;
    let p50 = us(percentile(&red_lat, 0.50));
    let single_p50 = us(percentile(&single_lat, 0.50));
    Ok(json!({
        "threads": 1,
        "members": urls.len(),
        "pairs": n,
        "pairs_per_s": n as f64 / red_time.as_secs_f64().max(1e-9),
        "p50_us": p50,
        "p99_us": us(percentile(&red_lat, 0.99)),
        "cpu_us_per_pair": us(cpu_red) / n.max(1) as f64,
        "single_pairs": single_lat.len(),
        "single_p50_us": single_p50,
        "single_p99_us": us(percentile(&single_lat, 0.99)),
        "ratio_p50": if single_p50 > 0.0 { p50 / single_p50 } else { 0.0 },
    }))
}

/// Lock+unlock pairs for `slice`; their latencies go to `out`.
fn pairs(session: &mut dyn Session, slice: Duration, out: &mut Vec<u64>) -> Result<Duration> {
    let start = Instant::now();
    timed_pairs(session, start + slice, out)?;
    Ok(start.elapsed())
}

struct CrateRed {
    lock: redisson_lock::RedLock,
    guard: Option<redisson_lock::RedLockGuard>,
}

impl Session for CrateRed {
    fn lock(&mut self) -> Result<()> {
        let guard = self.lock.lock()?;
        if guard.guards().len() != self.lock.members().len() {
            bail!(
                "crate: RedLock took {} of {} free members",
                guard.guards().len(),
                self.lock.members().len()
            );
        }
        self.guard = Some(guard);
        Ok(())
    }

    fn unlock(&mut self) -> Result<()> {
        match self.guard.take() {
            Some(guard) => Ok(guard.unlock()?),
            None => bail!("crate: unlock without a guard"),
        }
    }
}

/// The floor over several servers: one plain connection each, every
/// command written before any reply is read.
struct FloorRed {
    cons: Vec<redis::Connection>,
    acquire: Vec<u8>,
    unlock: Vec<u8>,
}

impl FloorRed {
    fn new(urls: &[String], name: &str) -> Result<Self> {
        let field = format!("{}:1", uuid::Uuid::new_v4());
        let channel = braced("redisson_lock__channel", name);
        let lease = LEASE.as_millis() as u64;
        let mut cons = Vec::new();
        for url in urls {
            let mut con = redis::Client::open(url.as_str())?.get_connection()?;
            // Loads both scripts on this server (EVALSHA then finds them).
            let _: Option<i64> = FLOOR_ACQUIRE
                .key(name)
                .arg(lease)
                .arg(&field)
                .invoke(&mut con)?;
            let _: Option<i64> = FLOOR_UNLOCK
                .key(name)
                .key(&channel)
                .arg("0")
                .arg(lease)
                .arg(&field)
                .arg("publish")
                .invoke(&mut con)?;
            cons.push(con);
        }
        let acquire = redis::cmd("EVALSHA")
            .arg(FLOOR_ACQUIRE.get_hash())
            .arg(1)
            .arg(name)
            .arg(lease)
            .arg(&field)
            .get_packed_command();
        let unlock = redis::cmd("EVALSHA")
            .arg(FLOOR_UNLOCK.get_hash())
            .arg(2)
            .arg(name)
            .arg(&channel)
            .arg("0")
            .arg(lease)
            .arg(&field)
            .arg("publish")
            .get_packed_command();
        Ok(FloorRed {
            cons,
            acquire,
            unlock,
        })
    }

    /// Writes `cmd` to every server, then reads every reply (last first);
    /// `Ok` when every reply is nil (acquired) or, for an unlock, 1.
    fn all(&mut self, unlock: bool) -> Result<()> {
        let cmd = if unlock { &self.unlock } else { &self.acquire };
        for con in &mut self.cons {
            con.send_packed_command(cmd)?;
        }
        for con in self.cons.iter_mut().rev() {
            let reply: Option<i64> = redis::from_redis_value(con.recv_response()?)?;
            if reply.is_some() != unlock {
                bail!("floor: a free member answered {reply:?}");
            }
        }
        Ok(())
    }
}

impl Session for FloorRed {
    fn lock(&mut self) -> Result<()> {
        self.all(false)
    }

    fn unlock(&mut self) -> Result<()> {
        self.all(true)
    }
}
