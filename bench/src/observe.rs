//! Watches the server while a holder keeps its locks (scenario 4): polls
//! `INFO commandstats` every few milliseconds between the holder's `holding`
//! and `done` marks, and cuts the EVAL/EVALSHA calls it sees into renewal
//! ticks (bursts separated by quiet time). Each poll is stamped with the
//! server's own clock (`TIME`, sent in the same pipeline, so executed right
//! after the `INFO`): a tick's duration is what the server saw, whatever the
//! poller's own scheduling.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::json;

use crate::common::Args;

/// `rlock-bench server-cost`: what the server spent on one contender's
/// commands since the last `CONFIG RESETSTAT` (scenario 1 resets before each
/// process), from `INFO commandstats`. Commands that scripts run are counted
/// both on their own lines and in their script's time, so the total is the
/// scripts (`EVAL`/`EVALSHA`) plus the commands named by `--direct`, the ones
/// this contender sends itself (e.g. `unlink` for the crate's latch flush).
pub fn server_cost(args: &Args) -> Result<()> {
    let mut con = redis::Client::open(args.str("url")?)?.get_connection()?;
    let info: String = redis::cmd("INFO").arg("commandstats").query(&mut con)?;
    let (script_calls, script_usec) = script_stats(&info);
    let by_command = command_stats(&info);
    let direct: Vec<&str> = args
        .str_or("direct", "")
        .split(',')
        .filter(|c| !c.is_empty())
        .collect();
    let mut usec = script_usec;
    let mut calls = script_calls;
    for (name, (c, u)) in &by_command {
        if direct.contains(&name.as_str()) {
            calls += c;
            usec += u;
        }
    }
    let out = json!({
        "kind": "server_cost",
        "scenario": "server_cost",
        "of_scenario": args.str_or("of", "uncontended"),
        "contender": args.str("contender")?,
        "rep": args.num_or("rep", 0)?,
        "run_id": args.str_or("run-id", "0"),
        "calls": calls,
        "usec": usec,
        "script_calls": script_calls,
        "script_usec": script_usec,
        "by_command": by_command
            .iter()
            .map(|(k, (c, u))| (k.clone(), json!({"calls": c, "usec": u})))
            .collect::<serde_json::Map<_, _>>(),
    });
    println!("{out}");
    Ok(())
}

/// Every `cmdstat_` line: command -> (calls, usec).
fn command_stats(info: &str) -> std::collections::BTreeMap<String, (u64, u64)> {
    let mut out = std::collections::BTreeMap::new();
    for line in info.lines() {
        let Some((name, rest)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.trim().split_once(':'))
        else {
            continue;
        };
        let field = |key: &str| {
            rest.split(',')
                .find_map(|f| f.strip_prefix(key))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        out.insert(name.to_owned(), (field("calls="), field("usec=")));
    }
    out
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    /// Server time (`TIME`), in ns.
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
        let (info, (secs, micros), holding, done): (
            String,
            (u64, u64),
            Option<String>,
            Option<String>,
        ) = redis::pipe()
            .cmd("INFO")
            .arg("commandstats")
            .cmd("TIME")
            .cmd("GET")
            .arg(&holding_key)
            .cmd("GET")
            .arg(&done_key)
            .query(&mut con)?;
        let at = secs * 1_000_000_000 + micros * 1_000;
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

    let ticks = bursts(&samples, quiet.as_nanos() as u64);
    let tick_json: Vec<_> = ticks
        .iter()
        .map(|b| {
            json!({
                "at_ms": b.start.at.saturating_sub(first.at) as f64 / 1e6,
                "dur_ms": b.end.at.saturating_sub(b.start.at) as f64 / 1e6,
                "calls": b.end.calls - b.start.calls,
                "server_ms": (b.end.usec - b.start.usec) as f64 / 1e3,
                "complete": b.complete,
            })
        })
        .collect();
    let window_s = last.at.saturating_sub(first.at) as f64 / 1e9;
    let out = json!({
        "kind": "observer",
        // `watchdog`, or `watchdog_scale` for issue 36's sizes.
        "scenario": args.str_or("scenario", "watchdog"),
        "contender": args.str("contender")?,
        "rep": args.num_or("rep", 0)?,
        "run_id": run_id,
        "observed_s": window_s,
        "polls": samples.len(),
        "poll_ms": poll.as_secs_f64() * 1e3,
        "calls": last.calls - first.calls,
        "server_ms": (last.usec - first.usec) as f64 / 1e3,
        "calls_per_s": (last.calls - first.calls) as f64 / window_s,
        "ticks": tick_json,
    });
    println!("{out}");
    Ok(())
}

/// One burst of script calls: from the sample before its first call to the
/// first sample after its last call, so its duration overstates the true one
/// by less than two poll intervals.
#[derive(Clone, Copy, Debug)]
struct Burst {
    start: Sample,
    end: Sample,
    /// Seen whole: quiet before it inside the window, and closed by quiet
    /// time before the window ended. A tick cut by either edge of the window
    /// is counted but not timed.
    complete: bool,
}

/// Cuts the samples into bursts: runs of samples where the script call count
/// moved, each closed by `quiet_ns` without a call.
fn bursts(samples: &[Sample], quiet_ns: u64) -> Vec<Burst> {
    let mut ticks = Vec::new();
    // (index of the sample before the burst, last moving sample)
    let mut current: Option<(usize, Sample)> = None;
    for (i, pair) in samples.windows(2).enumerate() {
        let (prev, next) = (pair[0], pair[1]);
        if next.calls > prev.calls {
            current = match current {
                Some((start, _)) => Some((start, next)),
                None => Some((i, next)),
            };
        } else if let Some((start, end)) = current
            && next.at.saturating_sub(end.at) >= quiet_ns
        {
            ticks.push(Burst {
                start: samples[start],
                end,
                complete: start > 0,
            });
            current = None;
        }
    }
    if let Some((start, end)) = current {
        ticks.push(Burst {
            start: samples[start],
            end,
            complete: false,
        });
    }
    ticks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(at_ms: u64, calls: u64, usec: u64) -> Sample {
        Sample {
            at: at_ms * 1_000_000,
            calls,
            usec,
        }
    }

    #[test]
    fn script_stats_count_successful_script_calls() {
        let info = "# Commandstats\r\n\
                    cmdstat_evalsha:calls=12,usec=300,usec_per_call=25.00,rejected_calls=0,failed_calls=2\r\n\
                    cmdstat_eval:calls=3,usec=30,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n\
                    cmdstat_get:calls=99,usec=99,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n";
        assert_eq!(script_stats(info), (13, 330));
        let all = command_stats(info);
        assert_eq!(all.get("get"), Some(&(99, 99)));
        assert_eq!(all.get("evalsha"), Some(&(12, 300)));
    }

    #[test]
    fn bursts_are_split_by_quiet_time() {
        let samples = [
            s(0, 0, 0),
            s(5, 0, 0),
            s(10, 40, 100),
            s(15, 100, 250),
            s(20, 100, 250),
            s(200, 100, 250),
            s(205, 160, 400),
            s(210, 200, 500),
        ];
        let b = bursts(&samples, 100_000_000);
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].start.at, b[0].end.at), (5_000_000, 15_000_000));
        assert_eq!(
            (
                b[0].end.calls - b[0].start.calls,
                b[0].end.usec - b[0].start.usec
            ),
            (100, 250)
        );
        assert!(b[0].complete);
        // The last burst is still open when the window ends: counted, not timed.
        assert_eq!(
            (
                b[1].start.at,
                b[1].end.at,
                b[1].end.calls - b[1].start.calls
            ),
            (200_000_000, 210_000_000, 100)
        );
        assert!(!b[1].complete);
    }

    #[test]
    fn a_burst_in_flight_when_the_window_opens_is_not_timed() {
        let samples = [s(0, 10, 0), s(5, 50, 100), s(10, 50, 100), s(200, 50, 100)];
        let b = bursts(&samples, 100_000_000);
        assert_eq!(b.len(), 1);
        assert!(!b[0].complete);
    }
}
