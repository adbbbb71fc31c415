//! Paired measurement: the floor and one contender in the same process, on
//! the same threads, in alternating blocks (floor first in even rounds, the
//! contender first in odd ones). Separate processes run minutes apart see
//! different machines (frequency, neighbours, the other vCPU's load); blocks
//! a few hundred milliseconds apart see nearly the same one, so the ratio of
//! each round's two rates is what the contender's own code costs.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Value, json};

use crate::common::{Args, percentile, thread_cpu_ns, together};
use crate::contenders::{Contender, Factory};
use crate::lock_types::BenchedLock;
use crate::session::{Session, counted_pairs, warm_up};
use crate::sync_types::{SyncSides, SyncType};

/// One thread's round: (pairs, seconds, thread CPU ns) of the floor, then of
/// the contender.
type Round = [(u64, f64, u64); 2];

/// `threads` threads, each with a floor session and a contender session
/// (on its own names, or on one shared name per side with `--shared-name 1`,
/// as scenario 5's readers), run `rounds` rounds of one block each. A
/// synchronizer's `--lock-type` (`semaphore`, `pes`, `latch`) pairs its
/// floor with the crate's object instead, each thread on its own names.
pub fn run(args: &Args) -> Result<Value> {
    let url = args.str("url")?;
    let run_id = args.str_or("run-id", "0").to_owned();
    if let Some(sync) = SyncType::parse(args.str_or("lock-type", "lock")) {
        let sides = SyncSides::new(url, sync)?;
        return measure(args, |t| {
            let name = |side: usize| format!("bench:paired:{run_id}:{side}:{t}");
            sides.open([&name(0), &name(1)])
        });
    }
    let watchdog = Duration::from_millis(args.num_or("watchdog-ms", 30_000)?);
    let lock_type = BenchedLock::parse(args.str_or("lock-type", "lock"))?;
    let kind = Contender::parse(args.str("contender")?)?;
    // `--multiplexed N`: the crate's commands share N sockets.
    let multiplexed = args.multiplexed()?;
    let sides = [
        Factory::new(Contender::Floor, url, watchdog)?.with_lock_type(lock_type),
        Factory::with_connections(kind, url, watchdog, multiplexed)?.with_lock_type(lock_type),
    ];
    let shared = args.num_or("shared-name", 0)? == 1;
    let mut out = measure(args, |t| open_sessions(&sides, &run_id, t, shared))?;
    // The connections each side used: the floor one per thread, the
    // crate's client those it has open at the end.
    out["floor_connections"] = json!(args.num_or("threads", 1)?.max(1));
    out["connections"] = json!(sides[1].connections());
    // The mode the crate's side ran in (0: pooled), given or its default.
    out["multiplexed"] = json!(sides[1].multiplexed());
    out["multiplexed_given"] = json!(multiplexed.is_some());
    Ok(out)
}

/// The measurement itself, for any pair of sides: `--threads` threads, each
/// opening its `[floor, contender]` sessions with `open(thread index)`,
/// warming both up (`--warmup` pairs each), then `--rounds` rounds of one
/// `--block-ms` block per side, all threads switching together.
pub fn measure(
    args: &Args,
    open: impl Fn(usize) -> Result<[Box<dyn Session>; 2]> + Sync,
) -> Result<Value> {
    let threads = args.num_or("threads", 1)?.max(1) as usize;
    let rounds = args.num_or("rounds", 20)?.max(1) as usize;
    let block = Duration::from_millis(args.num_or("block-ms", 250)?);
    let warmup = args.num_or("warmup", 1_000)?;
    let per_thread: Vec<Result<Vec<Round>>> = together(
        threads,
        |t| {
            let mut sessions = open(t)?;
            for session in &mut sessions {
                warm_up(session.as_mut(), warmup)?;
            }
            Ok(sessions)
        },
        |mut sessions, barrier| {
            let mut out = Vec::with_capacity(rounds);
            for round in 0..rounds {
                let mut pair = [(0, 0.0, 0); 2];
                let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
                for side in order {
                    barrier.wait();
                    pair[side] = block_of_pairs(sessions[side].as_mut(), block)?;
                }
                out.push(pair);
            }
            Ok(out)
        },
    );
    let mut rates = vec![[0.0f64; 2]; rounds];
    // Per side, over every thread and round: pairs and thread CPU ns.
    let mut totals = [(0u64, 0u64); 2];
    for thread in per_thread {
        for (round, pair) in thread?.into_iter().enumerate() {
            for side in 0..2 {
                rates[round][side] += pair[side].0 as f64 / pair[side].1.max(1e-9);
                totals[side].0 += pair[side].0;
                totals[side].1 += pair[side].2;
            }
        }
    }
    let cpu_us_per_pair = |side: usize| totals[side].1 as f64 / 1e3 / totals[side].0.max(1) as f64;
    // Ratios in parts per million, sorted, for the median and the spread.
    let mut ratios: Vec<u64> = rates
        .iter()
        .map(|r| (r[1] / r[0].max(1e-9) * 1e6) as u64)
        .collect();
    ratios.sort_unstable();
    let mean = |side: usize| rates.iter().map(|r| r[side]).sum::<f64>() / rounds as f64;
    Ok(json!({
        "threads": threads,
        "rounds": rounds,
        "block_ms": block.as_millis() as u64,
        "floor_pairs_per_s": mean(0),
        "pairs_per_s": mean(1),
        "ratio_median": percentile(&ratios, 0.5) as f64 / 1e6,
        "ratio_p25": percentile(&ratios, 0.25) as f64 / 1e6,
        "ratio_p75": percentile(&ratios, 0.75) as f64 / 1e6,
        "ratio_of_means": mean(1) / mean(0).max(1e-9),
        // CPU time of the measuring threads themselves (user + system; not
        // the contender's background threads), per pair.
        "floor_cpu_us_per_pair": cpu_us_per_pair(0),
        "cpu_us_per_pair": cpu_us_per_pair(1),
    }))
}

/// Both sessions of thread `t`.
fn open_sessions(
    sides: &[Factory; 2],
    run_id: &str,
    t: usize,
    shared: bool,
) -> Result<[Box<dyn Session>; 2]> {
    let open = |side: usize| {
        let name = match shared {
            true => format!("bench:paired:{run_id}:{side}"),
            false => format!("bench:paired:{run_id}:{side}:{t}"),
        };
        sides[side].session(&name, t as u64 + 1, false)
    };
    Ok([open(0)?, open(1)?])
}

/// Lock+unlock pairs for `block`: (pairs, seconds, this thread's CPU ns).
fn block_of_pairs(session: &mut dyn Session, block: Duration) -> Result<(u64, f64, u64)> {
    let cpu = thread_cpu_ns();
    let start = Instant::now();
    let pairs = counted_pairs(session, start + block)?;
    let secs = start.elapsed().as_secs_f64();
    Ok((pairs, secs, thread_cpu_ns().saturating_sub(cpu)))
}
