//! The soak (redisson-lock only): many lock/unlock cycles with some
//! contention, sampling memory and the client's bookkeeping.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Value, json};

use crate::common::{Args, count_live_bytes, live_bytes, rss_bytes};

/// The crate only: many lock/unlock cycles with some contention, sampling
/// memory and the client's bookkeeping, to show that nothing grows.
pub fn run(url: &str, args: &Args) -> Result<Value> {
    let run_id = args.str_or("run-id", "0").to_owned();
    let cycles = args.num_or("cycles", 1_000_000)?;
    let threads = args.num_or("threads", 4)? as usize;
    let names = args.num_or("names", 16)?;
    let client = redisson_lock::Client::builder(url).build()?;
    // From here on the allocator counts what Rust code holds: the client's
    // own structures as they grow, not allocator fragmentation.
    count_live_bytes();
    let done = AtomicUsize::new(0);
    let samples_wanted = 20u64;
    let per_thread = cycles / threads as u64;
    let total = per_thread * threads as u64;
    let start = Instant::now();
    let mut samples = Vec::new();
    std::thread::scope(|scope| -> Result<()> {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (client, done, run_id) = (&client, &done, &run_id);
                scope.spawn(move || -> Result<()> {
                    let locks: Vec<_> = (0..names)
                        .map(|i| client.lock(format!("bench:soak:{run_id}:{i}")))
                        .collect();
                    // xorshift: cheap, deterministic per thread.
                    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1);
                    for _ in 0..per_thread {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let guard = locks[(x % names) as usize].lock()?;
                        guard.unlock()?;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        let mut next = 1;
        while handles.iter().any(|h| !h.is_finished()) {
            let d = done.load(Ordering::Relaxed) as u64;
            if d >= next * total / samples_wanted {
                let diag = client.diagnostics();
                samples.push(json!({
                    "cycles": d,
                    "secs": start.elapsed().as_secs_f64(),
                    "rss_mb": rss_bytes() as f64 / 1048576.0,
                    "heap_mb": live_bytes() as f64 / 1048576.0,
                    "registered_holds": diag.registered_holds,
                    "subscribed_channels": diag.subscribed_channels,
                    "waiters": diag.waiters,
                    "pooled_connections": diag.pooled_connections,
                }));
                next += 1;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        for h in handles {
            h.join().expect("soak thread panicked")?;
        }
        Ok(())
    })?;
    let secs = start.elapsed().as_secs_f64();
    // Count any unlock latch left behind (a guard's release writes none).
    std::thread::sleep(Duration::from_millis(300));
    let diag = client.diagnostics();
    let mut con = redis::Client::open(url)?.get_connection()?;
    let mut latches_left = 0u64;
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("redisson_unlock_latch:{{bench:soak:{run_id}:*"))
            .arg("COUNT")
            .arg(10_000)
            .query(&mut con)?;
        latches_left += keys.len() as u64;
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let first = samples.first().cloned().unwrap_or(Value::Null);
    let last = samples.last().cloned().unwrap_or(Value::Null);
    let rss_growth_mb =
        last["rss_mb"].as_f64().unwrap_or(0.0) - first["rss_mb"].as_f64().unwrap_or(0.0);
    Ok(json!({
        "cycles": total,
        "threads": threads,
        "names": names,
        "secs": secs,
        "cycles_per_s": total as f64 / secs,
        "samples": samples,
        "rss_growth_mb": rss_growth_mb,
        "end_registered_holds": diag.registered_holds,
        "end_subscribed_channels": diag.subscribed_channels,
        "end_waiters": diag.waiters,
        "end_pooled_connections": diag.pooled_connections,
        "latches_left": latches_left,
    }))
}
