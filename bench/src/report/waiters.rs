//! Issue 36, item 2: many waiters on many names (scenario 11,
//! bench/src/waiters.rs and Bench.java's `waiters`). One row per contender,
//! lock type and shape; the goals are checked against the same contender's
//! 10-waiter row and against Redisson's attempts.

use std::fmt::Write as _;

use serde_json::Value;

use super::Data;
use super::scale::{of, records};
use super::stats::cell;

/// Hand-off p99 at the large shape, at most this times the 10-waiter one.
const HANDOFF_P99_GOAL: f64 = 1.2;
/// Live heap per parked waiter beyond its thread's stack, bytes.
const HEAP_PER_WAITER_GOAL: f64 = 2_048.0;

/// The kernel's futex hash a record ran with (older records: the default,
/// the process's private one).
fn futex_hash(r: &Value) -> &str {
    r["futex_hash"].as_str().unwrap_or("private")
}

/// The rows of `contender` and `lock_type` with `waiters` waiters, run with
/// the futex hash `hash`.
fn rows<'a>(
    d: &'a Data,
    contender: &str,
    lock_type: &str,
    waiters: u64,
    hash: &str,
) -> Vec<&'a Value> {
    records(d, "waiters")
        .filter(|r| {
            r["contender"] == contender
                && r["lock_type"] == lock_type
                && r["waiters"].as_u64() == Some(waiters)
                && futex_hash(r) == hash
        })
        .collect()
}

pub fn section(w: &mut String, d: &Data) {
    let all: Vec<&Value> = records(d, "waiters").collect();
    if all.is_empty() {
        return;
    }
    let _ = writeln!(
        w,
        "### Many waiters (scenario 11)\n\n\
         One client; one thread holds every name, then `per-name` threads per name wait on it; \
         once they are all parked the holder releases every name and each waiter takes its \
         name, holds it 200 µs, releases it and waits again, until the name was taken 20 times \
         (1,000 times for the one-name shape, so that its p99 is of ~1,000 hand-offs; each \
         waiter once at least). A hand-off is a release's start to the next acquisition of \
         that name; attempts are the server's script calls less the releases, per acquisition \
         (a waiter that releases and queues again races the one it woke: about 2 for an unfair \
         lock; a thundering herd reads near `per-name`). Wake-ups per release are the crate's own \
         count (`redisson_lock_wakeups_total`, by a message / by a timer): each parked waiter \
         woken makes one attempt, so they are the attempts a release causes; the other attempts \
         are every waiting `lock()` call's first and its second once subscribed (Redisson makes \
         both too). Heap and RSS per parked waiter are the \
         crate's (threads of 64 KiB stacks, reserved). Goals: hand-off p99 at 10,000 waiters ≤ \
         {HANDOFF_P99_GOAL}× the same contender's at 10, attempts no more than Redisson's, heap \
         per waiter ≤ {HEAP_PER_WAITER_GOAL:.0} B. CPU busy, client / server: the client process's \
         CPU time over the hand-offs ÷ (their wall time × the CPUs it may run on: one, pinned) and \
         Redis's ÷ their wall time; near 1 that side's work queues for its CPU, and the hand-offs' \
         tail is the machine's (older runs recorded one sum of both over the wall time, shown \
         as `sum`: up to 2.0). *crate, global futex hash*: the crate's same runs with the \
         bench process's futexes in the kernel's global hash (`RLOCK_BENCH_FUTEX_HASH=global`, \
         a process-wide setting an application makes, not the crate): since Linux 6.16 a \
         threaded process has a private hash of 4 slots per CPU, at least 16, whatever its \
         threads (see the analysis).\n\n\
         | contender | lock | names × per name | acquisitions | attempts per acquisition | wake-ups per release (message / timer) | hand-off p50 (µs) | hand-off p99 (µs) | p99 ÷ 10 waiters' | hand-offs/s | CPU busy, client / server | subscriber CPU per message (µs) | heap per waiter (B) | RSS per waiter (B) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    );
    let mut shapes: Vec<(String, String, String, u64, u64, u64)> = all
        .iter()
        .map(|r| {
            (
                r["contender"].as_str().unwrap_or("?").to_owned(),
                futex_hash(r).to_owned(),
                r["lock_type"].as_str().unwrap_or("lock").to_owned(),
                r["waiters"].as_u64().unwrap_or(0),
                r["names"].as_u64().unwrap_or(0),
                r["per_name"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    // The kernel's default first.
    shapes.sort_by(|a, b| {
        (&a.0, a.1 != "private", &a.2, a.3).cmp(&(&b.0, b.1 != "private", &b.2, b.3))
    });
    shapes.dedup();
    for (contender, hash, lock_type, waiters, names, per_name) in shapes {
        let at = rows(d, &contender, &lock_type, waiters, &hash);
        let p99 = of(at.iter().copied(), "handoff_p99_us");
        let base = of(rows(d, &contender, &lock_type, 10, &hash), "handoff_p99_us");
        let label = match hash.as_str() {
            "private" => contender.clone(),
            other => format!("{contender}, {other} futex hash"),
        };
        let vs_base = match (p99, base) {
            (Some(p), Some(b)) if waiters > 10 && b.median > 0.0 => {
                let r = p.median / b.median;
                let mark = if r <= HANDOFF_P99_GOAL { "✓" } else { "✗" };
                format!("{r:.2}× {mark}")
            }
            _ => "–".into(),
        };
        let woken = match (
            of(at.iter().copied(), "woken_by_message_per_release"),
            of(at.iter().copied(), "woken_by_ttl_per_release"),
        ) {
            (Some(message), Some(timer)) => format!("{:.2} / {:.2}", message.median, timer.median),
            _ => "–".into(),
        };
        let _ = writeln!(
            w,
            "| {label} | {lock_type} | {names} × {per_name} | {} | {} | {woken} | {} | {} | {vs_base} | {} | {} | {} | {} | {} |",
            cell(of(at.iter().copied(), "acquisitions")),
            cell(of(at.iter().copied(), "attempts_per_acquisition")),
            cell(of(at.iter().copied(), "handoff_p50_us")),
            cell(p99),
            cell(of(at.iter().copied(), "handoffs_per_s")),
            busy(&at),
            cell(of(at.iter().copied(), "subscriber_cpu_us_per_message")),
            cell(of(at.iter().copied(), "heap_per_waiter_b")),
            cell(of(at.iter().copied(), "rss_per_waiter_b")),
        );
    }
    let _ = writeln!(w);
}

/// The CPU busy cell: client / server, or the one sum an older run kept.
fn busy(at: &[&Value]) -> String {
    let side = |key| of(at.iter().copied(), key);
    match (side("client_busy"), side("server_busy"), side("cpu_busy")) {
        (Some(client), Some(server), _) => format!("{:.2} / {:.2}", client.median, server.median),
        (_, _, Some(sum)) => format!("{:.2} sum", sum.median),
        _ => "–".into(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn row(contender: &str, names: u64, p99: f64) -> Value {
        json!({"scenario": "waiters", "contender": contender, "lock_type": "lock",
               "names": names, "per_name": 10, "waiters": names * 10,
               "acquisitions": names * 20, "attempts_per_acquisition": 2.0,
               "handoff_p50_us": p99 / 2.0, "handoff_p99_us": p99,
               "client_busy": 0.9, "server_busy": 0.3})
    }

    #[test]
    fn the_large_shape_is_held_to_the_ten_waiters_p99() {
        let d = Data {
            records: vec![
                row("crate", 1, 1_000.0),
                row("crate", 1_000, 1_100.0),
                row("redisson", 1, 1_000.0),
                row("redisson", 1_000, 1_500.0),
            ],
            machine: BTreeMap::new(),
        };
        let mut w = String::new();
        section(&mut w, &d);
        assert!(w.contains("| crate | lock | 1000 × 10 |"), "{w}");
        assert!(w.contains("1.10× ✓"), "{w}");
        assert!(w.contains("1.50× ✗"), "{w}");
        assert!(w.contains("| 0.90 / 0.30 |"), "{w}");
        let mut empty = String::new();
        section(
            &mut empty,
            &Data {
                records: vec![],
                machine: BTreeMap::new(),
            },
        );
        assert!(empty.is_empty());
    }
}
