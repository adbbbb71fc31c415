//! Merges the event files of one contended run (one file per process, Rust
//! or Java, all stamped with `CLOCK_MONOTONIC`) into its hand-off statistics.

use std::io::Write;

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::common::{Args, ms, percentile, us};

/// One acquisition of a contended run, in `CLOCK_MONOTONIC` ns: one line of
/// an event file (written by `scenarios::contended` or the Java driver),
/// its five numbers in this order.
pub struct Event {
    pub thread: u64,
    pub call: u64,
    pub acquired: u64,
    pub release: u64,
    pub released: u64,
}

impl Event {
    /// Writes the event's line.
    pub fn write_line(&self, w: &mut impl Write) -> std::io::Result<()> {
        writeln!(
            w,
            "{} {} {} {} {}",
            self.thread, self.call, self.acquired, self.release, self.released
        )
    }

    /// The event of a line [`Event::write_line`] wrote.
    fn parse(line: &str) -> Result<Event> {
        let f: Vec<u64> = line
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()?;
        let [thread, call, acquired, release, released] = f[..] else {
            bail!("{} numbers, not 5", f.len());
        };
        Ok(Event {
            thread,
            call,
            acquired,
            release,
            released,
        })
    }
}

pub fn run(args: &Args) -> Result<()> {
    let mut events = Vec::new();
    for path in &args.positional {
        let text = std::fs::read_to_string(path).with_context(|| format!("read {path}"))?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            events.push(
                Event::parse(line).with_context(|| format!("bad event line in {path}: {line}"))?,
            );
        }
    }
    let expected = args.num_or("expected", 0)?;
    if events.is_empty() {
        bail!("no events");
    }
    let mut out = summarize(events);
    out["contender"] = json!(args.str("contender")?);
    // Scenario 5 runs scenario 3 per lock type under its own name.
    out["scenario"] = json!(args.str_or("scenario", "contended"));
    out["lock_type"] = json!(args.str_or("lock-type", "lock"));
    out["rep"] = json!(args.num_or("rep", 0)?);
    out["run_id"] = json!(args.str_or("run-id", "0"));
    out["threads"] = json!(args.num_or("threads", 0)?);
    out["procs"] = json!(args.num_or("procs", 1)?);
    out["expected_acquisitions"] = json!(expected);
    println!("{out}");
    Ok(())
}

/// Hand-off, wait and starvation statistics of one run's acquisitions.
fn summarize(mut events: Vec<Event>) -> serde_json::Value {
    events.sort_by_key(|e| e.acquired);

    let mut handoff = Vec::new();
    let mut handoff_other = Vec::new();
    let mut same_holder = 0u64;
    let mut overlaps = 0u64;
    for pair in events.windows(2) {
        let (prev, next) = (&pair[0], &pair[1]);
        if next.acquired < prev.release {
            // The next holder got the lock before this one let go: either a
            // broken lock or clocks that disagree. Either way, report it.
            overlaps += 1;
            continue;
        }
        let gap = next.acquired - prev.release;
        handoff.push(gap);
        if next.thread == prev.thread {
            same_holder += 1;
        } else {
            handoff_other.push(gap);
        }
    }
    let mut waits: Vec<u64> = events.iter().map(|e| e.acquired - e.call).collect();
    handoff.sort_unstable();
    handoff_other.sort_unstable();
    waits.sort_unstable();
    let start = events.iter().map(|e| e.call).min().unwrap_or(0);
    let end = events.iter().map(|e| e.released).max().unwrap_or(0);
    let mut threads: Vec<u64> = events.iter().map(|e| e.thread).collect();
    threads.sort_unstable();
    threads.dedup();

    json!({
        "scenario": "contended",
        "acquisitions": events.len(),
        "holder_threads": threads.len(),
        "total_ms": ms(end - start),
        "handoff_p50_us": us(percentile(&handoff, 0.50)),
        "handoff_p99_us": us(percentile(&handoff, 0.99)),
        "handoff_max_us": us(percentile(&handoff, 1.0)),
        "handoff_other_p50_us": us(percentile(&handoff_other, 0.50)),
        "handoff_other_p99_us": us(percentile(&handoff_other, 0.99)),
        "same_holder_fraction": same_holder as f64 / handoff.len().max(1) as f64,
        "wait_p50_us": us(percentile(&waits, 0.50)),
        "wait_p99_us": us(percentile(&waits, 0.99)),
        "longest_wait_ms": ms(percentile(&waits, 1.0)),
        "overlaps": overlaps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(thread: u64, call: u64, acquired: u64, release: u64) -> Event {
        Event {
            thread,
            call,
            acquired,
            release,
            released: release + 10,
        }
    }

    #[test]
    fn event_lines_read_back_as_written() {
        let mut line = Vec::new();
        ev(3, 1, 2, 4).write_line(&mut line).expect("write");
        let line = String::from_utf8(line).expect("utf-8");
        assert_eq!(line, "3 1 2 4 14\n");
        let e = Event::parse(line.trim_end()).expect("parse");
        assert_eq!(
            (e.thread, e.call, e.acquired, e.release, e.released),
            (3, 1, 2, 4, 14)
        );
        assert!(Event::parse("1 2 3 4").is_err());
        assert!(Event::parse("1 2 x 4 5").is_err());
    }

    #[test]
    fn hand_offs_run_from_release_start_to_the_next_acquire() {
        let s = summarize(vec![
            ev(2, 0, 150, 300),
            ev(1, 0, 10, 100),
            ev(2, 310, 330, 400),
        ]);
        assert_eq!(s["acquisitions"], 3);
        // 100 -> 150 (to thread 2), 300 -> 330 (thread 2 again)
        assert_eq!(s["handoff_max_us"], 0.05);
        assert_eq!(s["handoff_other_p99_us"], 0.05);
        assert_eq!(s["same_holder_fraction"], 0.5);
        assert_eq!(s["longest_wait_ms"], 0.00015);
        assert_eq!(s["overlaps"], 0);
        assert_eq!(s["total_ms"], 0.00041);
    }

    #[test]
    fn a_holder_acquiring_before_the_previous_release_is_an_overlap() {
        let s = summarize(vec![ev(1, 0, 10, 100), ev(2, 0, 50, 120)]);
        assert_eq!(s["overlaps"], 1);
    }
}
