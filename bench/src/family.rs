//! Scenario 5: the lock family. Every Redisson lock type the crate has,
//! each against its own protocol floor (`lock_types`: that type's acquire
//! and unlock scripts as PROTOCOL §3–§7 describe them, less the unlock
//! latch, written for the benchmark in `bench/lua/`, sent with
//! `redis::Script` on one plain connection per thread) and against
//! Redisson's same type.
//!
//! `family` runs `threads` threads on ONE name for a fixed time: one thread
//! for the uncontended rows, four for the shared read lock (each thread its
//! own owner field). The fair lock's hand-off is scenario 3 run with
//! `--lock-type fair` (see [`Factory::with_lock_type`]).

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Value, json};

use crate::common::{Args, cpu_ns, percentile, together, us};
use crate::contenders::Factory;
use crate::session::{timed_pairs, warm_up};

/// Scenario 5, one measurement: `threads` threads on one name, lock+unlock
/// pairs for a fixed time.
pub fn run(f: &Factory, args: &Args) -> Result<Value> {
    let run_id = args.str_or("run-id", "0").to_owned();
    let threads = args.num_or("threads", 1)?.max(1) as usize;
    let warmup = args.num_or("warmup", 500)?;
    let duration = Duration::from_millis(args.num_or("duration-ms", 1_500)?);
    let name = format!("bench:s5:{run_id}");
    let cpu0 = cpu_ns();
    let results: Vec<Result<(Vec<u64>, f64)>> = together(
        threads,
        |t| {
            let mut session = f.session(&name, t as u64 + 1, false)?;
            warm_up(session.as_mut(), warmup)?;
            Ok(session)
        },
        |mut session, _| {
            let mut latencies = Vec::with_capacity(100_000);
            let start = Instant::now();
            timed_pairs(session.as_mut(), start + duration, &mut latencies)?;
            Ok((latencies, start.elapsed().as_secs_f64()))
        },
    );
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
