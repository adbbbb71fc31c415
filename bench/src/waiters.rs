//! Issue 36, item 2: many waiters on many names, one client.
//!
//! `rlock-bench run --contender crate --scenario waiters [--names 1000]
//! [--per-name 10] [--handoffs 20] [--hold-us 200] [--lock-type lock|fair]`
//!
//! 1. **Parked.** One thread takes every name (explicit 60 s lease: no
//!    watchdog, so every `EVALSHA` below is an acquire or a release); then
//!    `per-name` threads per name call `lock()` and park. When the client
//!    counts them all waiting, the live heap and RSS they added are read:
//!    per waiter, beyond its thread's stack (the threads' stacks are 64 KiB,
//!    reserved, not touched).
//! 2. **Hand-offs.** The holder releases every name; each waiter, once it
//!    holds its name, holds it `hold-us`, releases it and waits again,
//!    until its name was taken `handoffs` times (every waiter takes it once
//!    at least, to leave). Recorded per acquisition: when `lock()`
//!    returned, and when the release began. A hand-off is the time from a
//!    release's start to the next acquisition of that name.
//!
//! Reported: hand-off p50/p99; acquire attempts per acquisition (Redis's
//! `EVALSHA`/`EVAL` calls less the releases; 1.0 is one attempt per waiter
//! woken, a thundering herd reads near `per-name`); the subscriber thread's
//! (`rlock-pubsub`) CPU per release message; heap and RSS per parked waiter.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::common::{
    Args, count_live_bytes, cpu_ns, critical_section, live_bytes, mono_ns, percentile, rss_bytes,
    us,
};

/// One acquisition of a name: when `lock()` returned, when its release began.
struct Taken {
    acquired: u64,
    release: u64,
}

/// The scripts Redis ran so far (`EVALSHA` and `EVAL` calls).
fn script_calls(con: &mut redis::Connection) -> Result<u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con)?;
    Ok(info
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum())
}

/// Redis's own CPU time so far (user + system, `INFO cpu`), in nanoseconds.
fn server_cpu_ns(con: &mut redis::Connection) -> Result<u64> {
    let info: String = redis::cmd("INFO").arg("cpu").query(con)?;
    let secs: f64 = info
        .lines()
        .filter_map(|l| {
            let (key, value) = l.split_once(':')?;
            matches!(key, "used_cpu_user" | "used_cpu_sys")
                .then(|| value.trim().parse::<f64>().ok())?
        })
        .sum();
    Ok((secs * 1e9) as u64)
}

/// The CPUs this process may run on (one when `taskset` pins it): what
/// its "busy" is a fraction of.
fn cpus() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

/// The CPU time (ns) of this process's thread named `name`, from
/// `/proc/self/task/*/schedstat`.
fn thread_cpu_by_name(name: &str) -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let stat = std::fs::read_to_string(dir.join("schedstat")).ok()?;
            return stat.split_whitespace().next()?.parse().ok();
        }
    }
    None
}

/// The library's wake-ups so far (message, TTL elapsed, poll), when the
/// bench is built with `wakeups`.
fn wakeups() -> Option<[u64; 3]> {
    #[cfg(feature = "wakeups")]
    {
        let (message, ttl, poll) = crate::wakeups::counts();
        Some([message, ttl, poll])
    }
    #[cfg(not(feature = "wakeups"))]
    None
}

pub fn run(url: &str, args: &Args) -> Result<Value> {
    let names = args.num_or("names", 1_000)? as usize;
    let per_name = args.num_or("per-name", 10)? as usize;
    let handoffs = args.num_or("handoffs", 20)?.max(per_name as u64);
    let hold = Duration::from_micros(args.num_or("hold-us", 200)?);
    let fair = match args.str_or("lock-type", "lock") {
        "lock" => false,
        "fair" => true,
        other => bail!("waiters: lock type {other} (lock or fair)"),
    };
    let run_id = args.str_or("run-id", "0").to_owned();
    let lease = Duration::from_secs(60);
    #[cfg(feature = "wakeups")]
    crate::wakeups::install();
    let client = redisson_lock::Client::builder(url).build()?;
    let mut con = redis::Client::open(url)?.get_connection()?;
    let name_of = |i: usize| format!("bench:w:{run_id}:{i}");
    let take = |name: String| -> Result<Box<dyn Send>> {
        Ok(if fair {
            Box::new(client.fair_lock(name).with_lease(lease).lock_owned()?)
        } else {
            Box::new(client.lock(name).with_lease(lease).lock_owned()?)
        })
    };
    // Warm: the pool, the subscriber thread, the allocator.
    drop(take(format!("bench:w:{run_id}:warm"))?);

    let held: Vec<Box<dyn Send>> = (0..names)
        .map(|i| take(name_of(i)))
        .collect::<Result<_>>()?;
    count_live_bytes();
    let heap0 = live_bytes();
    let rss0 = rss_bytes();
    let counts: Vec<AtomicU64> = (0..names).map(|_| AtomicU64::new(0)).collect();
    let taken: Mutex<HashMap<usize, Vec<Taken>>> = Mutex::new(HashMap::new());
    let first_error: Mutex<Option<String>> = Mutex::new(None);
    let waiters = names * per_name;
    let measured = std::thread::scope(|scope| -> Result<Value> {
        for i in 0..names {
            for _ in 0..per_name {
                let (counts, taken, first_error, take) = (&counts, &taken, &first_error, &take);
                let name = name_of(i);
                std::thread::Builder::new()
                    .stack_size(64 * 1024)
                    .spawn_scoped(scope, move || {
                        let mut mine = Vec::new();
                        loop {
                            let guard = match take(name.clone()) {
                                Ok(guard) => guard,
                                Err(e) => {
                                    first_error.lock().unwrap().get_or_insert(e.to_string());
                                    break;
                                }
                            };
                            let acquired = mono_ns();
                            let n = counts[i].fetch_add(1, Ordering::SeqCst) + 1;
                            critical_section(hold);
                            let release = mono_ns();
                            drop(guard);
                            mine.push(Taken { acquired, release });
                            if n >= handoffs {
                                break;
                            }
                        }
                        taken.lock().unwrap().entry(i).or_default().extend(mine);
                    })
                    .context("spawn a waiter")?;
            }
        }
        // Parked: every waiter counted by the client.
        let parked_by = Instant::now() + Duration::from_secs(300);
        while client.diagnostics().waiters < waiters {
            if Instant::now() > parked_by {
                bail!(
                    "{} of {waiters} waiters parked after 300 s",
                    client.diagnostics().waiters
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        let heap1 = live_bytes();
        let rss1 = rss_bytes();
        let calls0 = script_calls(&mut con)?;
        let sub0 = thread_cpu_by_name("rlock-pubsub");
        let woken0 = wakeups();
        let server_cpu0 = server_cpu_ns(&mut con)?;
        let cpu0 = cpu_ns();
        let t0 = mono_ns();
        drop(held);
        Ok(json!({
            "heap_per_waiter_b": (heap1 - heap0) as f64 / waiters as f64,
            "rss_per_waiter_b": rss1.saturating_sub(rss0) as f64 / waiters as f64,
            "calls0": calls0,
            "sub0_ns": sub0,
            "woken0": woken0,
            "cpu0_ns": cpu0,
            "server_cpu0_ns": server_cpu0,
            "t0_ns": t0,
        }))
    })?;
    if let Some(e) = first_error.into_inner().unwrap() {
        bail!("a waiter failed: {e}");
    }
    let elapsed_ns = mono_ns() - measured["t0_ns"].as_u64().unwrap_or(0);
    let calls = script_calls(&mut con)? - measured["calls0"].as_u64().unwrap_or(0);
    // How busy each side's CPU was with the hand-offs, over the phase: this
    // process (of the CPUs it may run on: one when pinned) and Redis (its
    // main thread: of one CPU). Near 1.0 that side's work queues for its
    // CPU, and the hand-offs' tail is the machine's.
    let elapsed = elapsed_ns.max(1) as f64;
    let client_busy = cpu_ns().saturating_sub(measured["cpu0_ns"].as_u64().unwrap_or(0)) as f64
        / (elapsed * cpus());
    let server_busy = server_cpu_ns(&mut con)?
        .saturating_sub(measured["server_cpu0_ns"].as_u64().unwrap_or(0))
        as f64
        / elapsed;
    let sub_ns = thread_cpu_by_name("rlock-pubsub")
        .zip(measured["sub0_ns"].as_u64())
        .map(|(b, a)| b - a);
    let taken = taken.into_inner().unwrap();
    let mut gaps = Vec::new();
    let mut acquisitions = 0u64;
    for (_, mut events) in taken {
        events.sort_by_key(|t| t.acquired);
        acquisitions += events.len() as u64;
        for pair in events.windows(2) {
            gaps.push(pair[1].acquired.saturating_sub(pair[0].release));
        }
    }
    gaps.sort_unstable();
    // Releases in the phase: the holder's one per name, and one per
    // acquisition; every other script call is an acquire attempt.
    let releases = names as u64 + acquisitions;
    let attempts = calls.saturating_sub(releases);
    // Wake-ups per release (the `wakeups` build only): each parked waiter
    // woken makes one attempt; the rest of the attempts are each `lock()`
    // call's first, and its second once subscribed.
    let woken = |i: usize| -> Option<f64> {
        let (before, after) = (measured["woken0"][i].as_u64()?, wakeups()?[i]);
        Some(after.saturating_sub(before) as f64 / releases as f64)
    };
    Ok(json!({
        "kind": "waiters",
        "lock_type": if fair { "fair" } else { "lock" },
        "names": names,
        "per_name": per_name,
        "waiters": waiters,
        "hold_us": hold.as_micros() as u64,
        "acquisitions": acquisitions,
        "attempts_per_acquisition": attempts as f64 / acquisitions.max(1) as f64,
        "woken_by_message_per_release": woken(0),
        "woken_by_ttl_per_release": woken(1),
        "handoff_p50_us": us(percentile(&gaps, 0.50)),
        "handoff_p99_us": us(percentile(&gaps, 0.99)),
        "handoffs_per_s": acquisitions as f64 / (elapsed_ns as f64 / 1e9),
        "client_busy": client_busy,
        "server_busy": server_busy,
        "subscriber_cpu_us_per_message": sub_ns.map(|ns| us(ns) / releases as f64),
        "heap_per_waiter_b": measured["heap_per_waiter_b"],
        "rss_per_waiter_b": measured["rss_per_waiter_b"],
        "thread_stack_b": 64 * 1024,
        // The kernel's futex hash the process ran with (`RLOCK_BENCH_FUTEX_HASH`).
        "futex_hash": if crate::FUTEX_HASH_GLOBAL.load(std::sync::atomic::Ordering::Relaxed) {
            "global"
        } else {
            "private"
        },
    }))
}
