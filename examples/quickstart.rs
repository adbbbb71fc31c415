//! A tour of redisson-lock: reentrancy, the Redis state a Redisson user would
//! recognise, threads contending for one lock, and the watchdog keeping a short
//! lease alive. Run it with `./scripts/demo.sh`, or against your own server:
//! `REDIS_URL=redis://127.0.0.1:6379 cargo run --release --example quickstart`

use std::error::Error;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;
use redisson_lock::Client;

type AnyResult<T> = Result<T, Box<dyn Error>>;

fn main() -> AnyResult<()> {
    let url =
        std::env::var("REDIS_URL").map_err(|_| "set REDIS_URL, e.g. redis://127.0.0.1:6379")?;
    let client = Client::open(url.as_str())?;
    // Plain redis-rs, to look at what the locks write.
    let redis = redis::Client::open(url.as_str())?;

    reentrancy(&client)?;
    redis_state(&client, &redis)?;
    contention(&client)?;
    watchdog(&url, &redis)?;
    Ok(())
}

fn reentrancy(client: &Client) -> AnyResult<()> {
    println!("== 1. Reentrancy: one thread takes the same lock twice");
    let lock = client.lock("quickstart:reentrant");
    let outer = lock.lock()?;
    let inner = lock.lock()?;
    println!("after lock(), lock(): hold_count = {}", lock.hold_count()?);
    inner.unlock()?;
    println!("after one unlock():   hold_count = {}", lock.hold_count()?);
    outer.unlock()?;
    println!("after both unlocks:   is_locked  = {}", lock.is_locked()?);
    Ok(())
}

fn redis_state(client: &Client, redis: &redis::Client) -> AnyResult<()> {
    println!("\n== 2. The Redis state, as Redisson writes it");
    let name = "quickstart:orders";
    let mut con = redis.get_connection()?;
    let guard = client.lock(name).lock()?;
    let hash: Vec<(String, String)> = con.hgetall(name)?;
    println!("HGETALL {name} -> {hash:?}");
    println!(
        "  field <client id>:<thread id>, here {}",
        client.owner_field()
    );
    let (pttl, lease): (i64, _) = (con.pttl(name)?, client.watchdog_timeout());
    println!("PTTL {name} -> {pttl} ms (the lease: the watchdog timeout, {lease:?})");

    // Listen on the unlock channel as a waiting Java thread would, then release.
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let mut listener = redis.get_connection()?;
    let mut pubsub = listener.as_pubsub();
    pubsub.subscribe(&channel)?;
    pubsub.set_read_timeout(Some(Duration::from_secs(5)))?;
    guard.unlock()?;
    let message = pubsub.get_message()?;
    let payload: String = message.get_payload()?;
    println!("unlock: PUBLISH {} {payload:?}", message.get_channel_name());
    println!("EXISTS {name} -> {}", con.exists::<_, bool>(name)?);
    Ok(())
}

/// The last release (thread, when) and every hand-off so far (from, to, ms).
#[derive(Default)]
struct HandOffs {
    releasing: Option<(usize, Instant)>,
    seen: Vec<(usize, usize, f64)>,
}

fn contention(client: &Client) -> AnyResult<()> {
    println!("\n== 3. Four threads, five critical sections each, one lock");
    let lock = client.lock("quickstart:contended");
    let log = Arc::new(Mutex::new(HandOffs::default()));
    let workers: Vec<_> = (0..4)
        .map(|me| {
            let (lock, log) = (lock.clone(), Arc::clone(&log));
            thread::spawn(move || -> redisson_lock::Result<()> {
                for _ in 0..5 {
                    let guard = lock.lock()?;
                    let mut shared = log.lock().unwrap_or_else(PoisonError::into_inner);
                    if let Some((from, at)) = shared.releasing.take() {
                        shared
                            .seen
                            .push((from, me, at.elapsed().as_secs_f64() * 1e3));
                    }
                    drop(shared);
                    thread::sleep(Duration::from_millis(2)); // the critical section
                    let now = Instant::now();
                    log.lock().unwrap_or_else(PoisonError::into_inner).releasing = Some((me, now));
                    guard.unlock()?;
                    // Work outside the lock. Without it, the thread that just
                    // released usually takes the lock straight back: like
                    // Redisson's RLock, this lock is not fair.
                    thread::sleep(Duration::from_millis(1));
                }
                Ok(())
            })
        })
        .collect();
    for worker in workers {
        worker.join().map_err(|_| "a worker thread panicked")??;
    }
    let log = log.lock().unwrap_or_else(PoisonError::into_inner);
    for (from, to, ms) in &log.seen {
        println!("thread {from} -> thread {to}: {ms:6.3} ms from unlock() to the next lock()");
    }
    let mut ms: Vec<f64> = log.seen.iter().map(|&(_, _, ms)| ms).collect();
    ms.sort_by(f64::total_cmp);
    let mean = ms.iter().sum::<f64>() / ms.len() as f64;
    let others = log.seen.iter().filter(|(from, to, _)| from != to).count();
    println!("{} hand-offs ({others} to another thread):", ms.len());
    println!(
        "min {:.3} ms, median {:.3} ms, mean {mean:.3} ms, max {:.3} ms",
        ms[0],
        ms[ms.len() / 2],
        ms[ms.len() - 1]
    );
    Ok(())
}

fn watchdog(url: &str, redis: &redis::Client) -> AnyResult<()> {
    println!("\n== 4. The watchdog: a 1 s lease, renewed every ~333 ms, held for 4 s");
    let client = Client::builder(url)
        .watchdog_timeout(Duration::from_secs(1))
        .build()?;
    let name = "quickstart:long-job";
    let (mut con, guard) = (redis.get_connection()?, client.lock(name).lock()?);
    let start = Instant::now();
    for _ in 0..4 {
        thread::sleep(Duration::from_secs(1));
        let pttl: i64 = con.pttl(name)?;
        let t = start.elapsed().as_secs_f64();
        println!(
            "t = {t:.1} s: PTTL {name} -> {pttl:4} ms, guard.is_lost() = {}",
            guard.is_lost()
        );
    }
    guard.unlock()?;
    println!("released after {:.1} s", start.elapsed().as_secs_f64());
    Ok(())
}
