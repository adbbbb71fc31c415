//! Watches the server while a holder keeps its locks (scenario 4): polls
//! `INFO commandstats` every few milliseconds between the holder's `holding`
//! and `done` marks, and cuts the EVAL/EVALSHA calls it sees into renewal
//! ticks (bursts separated by quiet time).

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::json;

use crate::common::{Args, mono_ns};

#[derive(Clone, Copy)]
struct Sample {
    at: u64,
    calls: u64,
    usec: u64,
}

/// Successful EVAL/EVALSHA calls and their server time. Failed calls are
/// left out: the only ones here are the one-off `NOSCRIPT` replies of a
/// script's first run on the server, which the client follows with
/// `SCRIPT LOAD` and the same call again.
fn script_stats(info: &str) -> (u64, u64) {
    let mut calls = 0;
    let mut usec = 0;
    for line in info.lines() {
        let Some(rest) = line
            .strip_prefix("cmdstat_evalsha:")
            .or_else(|| line.strip_prefix("cmdstat_eval:"))
        else {
            continue;
        };
        for field in rest.trim().split(',') {
            if let Some(v) = field.strip_prefix("calls=") {
                calls += v.parse::<u64>().unwrap_or(0);
            } else if let Some(v) = field.strip_prefix("failed_calls=") {
                calls -= v.parse::<u64>().unwrap_or(0).min(calls);
            } else if let Some(v) = field.strip_prefix("usec=") {
                usec += v.parse::<u64>().unwrap_or(0);
            }
        }
    }
    (calls, usec)
}

pub fn run(args: &Args) -> Result<()> {
    let url = args.str("url")?;
    let run_id = args.str("run-id")?;
    let poll = Duration::from_millis(args.num_or("poll-ms", 5)?);
    let quiet = Duration::from_millis(args.num_or("quiet-ms", 100)?);
    let give_up = Instant::now() + Duration::from_secs(args.num_or("timeout-s", 300)?);
    let mut con = redis::Client::open(url)?.get_connection()?;
    let holding_key = format!("bench:s4:{run_id}:holding");
    let done_key = format!("bench:s4:{run_id}:done");

    let mut samples: Vec<Sample> = Vec::new();
    loop {
        if Instant::now() > give_up {
            bail!("observer: the holder never finished");
        }
        let (info, holding, done): (String, Option<String>, Option<String>) = redis::pipe()
            .cmd("INFO")
            .arg("commandstats")
            .cmd("GET")
            .arg(&holding_key)
            .cmd("GET")
            .arg(&done_key)
            .query(&mut con)?;
        let at = mono_ns();
        let (calls, usec) = script_stats(&info);
        if holding.is_some() {
            samples.push(Sample { at, calls, usec });
        }
        if done.is_some() {
            break;
        }
        std::thread::sleep(poll);
    }
    if samples.len() < 2 {
        bail!("observer: the window was too short to observe");
    }
    let first = samples[0];
    let last = samples[samples.len() - 1];

    // Bursts: runs of samples where the count moved, closed by `quiet`.
    let mut ticks = Vec::new();
    let mut current: Option<(Sample, Sample)> = None; // (before the burst, last moving sample)
    for pair in samples.windows(2) {
        let (prev, next) = (pair[0], pair[1]);
        if next.calls > prev.calls {
            current = match current {
                Some((start, _)) => Some((start, next)),
                None => Some((prev, next)),
            };
        } else if let Some((start, end)) = current
            && next.at - end.at >= quiet.as_nanos() as u64
        {
            ticks.push((start, end));
            current = None;
        }
    }
    if let Some(burst) = current {
        ticks.push(burst);
    }
    let tick_json: Vec<_> = ticks
        .iter()
        .map(|(start, end)| {
            json!({
                "at_ms": (start.at - first.at) as f64 / 1e6,
                "dur_ms": (end.at - start.at) as f64 / 1e6,
                "calls": end.calls - start.calls,
                "server_ms": (end.usec - start.usec) as f64 / 1e3,
            })
        })
        .collect();
    let window_s = (last.at - first.at) as f64 / 1e9;
    let out = json!({
        "kind": "observer",
        "scenario": "watchdog",
        "contender": args.str("contender")?,
        "rep": args.num_or("rep", 0)?,
        "run_id": run_id,
        "observed_s": window_s,
        "polls": samples.len(),
        "calls": last.calls - first.calls,
        "server_ms": (last.usec - first.usec) as f64 / 1e3,
        "calls_per_s": (last.calls - first.calls) as f64 / window_s,
        "ticks": tick_json,
    });
    println!("{out}");
    Ok(())
}
