//! Scenario 5, the lock family: each lock type uncontended against its own
//! floor and Redisson's same type, four readers sharing a read lock, and the
//! fair lock's hand-off beside the reentrant lock's.

use std::fmt::Write;

use serde_json::Value;

use super::stats::{Series, cell, ratio, ratio_cell, ratio_text, stat};
use super::{Data, label};

/// The types of the uncontended rows, as `--lock-type` and in words.
pub const TYPES: [(&str, &str); 6] = [
    ("fair", "fair lock"),
    ("read", "read lock"),
    ("write", "write lock"),
    ("fenced", "fenced lock"),
    ("spin", "spin lock"),
    ("nonreentrant", "non-reentrant lock"),
];

/// Uncontended and 4-reader pairs/s: at least this share of the type's floor.
pub const FLOOR_GOAL: f64 = 0.95;
/// Fair-lock hand-off p99 at most this multiple of the reentrant lock's.
pub const FAIR_HANDOFF_GOAL: f64 = 1.2;

const CONTENDERS: [&str; 3] = ["floor", "crate", "redisson"];

fn family(lock_type: &'static str, threads: u64) -> impl Fn(&Value) -> bool {
    move |r: &Value| {
        r["scenario"] == "family"
            && r["lock_type"] == lock_type
            && r["threads"].as_u64() == Some(threads)
    }
}

/// Scenario 5's scenario-3 runs of one contender: metric by lock type and rep
/// (so that `ratio(&s, "fair", "lock")` compares the two types). A
/// repetition runs the reentrant and the fair lock several times,
/// alternating: its value is the median of those runs.
fn handoff(d: &Data, contender: &str, metric: &str) -> Series {
    d.series_by(
        |r| r["scenario"] == "family_contended" && r["contender"] == contender && r["procs"] == 1,
        "lock_type",
        metric,
    )
}

/// The rows: (label, series of pairs/s by contender).
fn rows(d: &Data) -> Vec<(String, Series)> {
    let mut out: Vec<(String, Series)> = TYPES
        .iter()
        .map(|&(t, words)| (words.to_owned(), d.series(family(t, 1), "pairs_per_s")))
        .collect();
    out.push((
        "read lock, 4 readers".to_owned(),
        d.series(family("read", 4), "pairs_per_s"),
    ));
    out.retain(|(_, s)| !s.is_empty());
    out
}

/// `results.json` summary entries.
pub fn summary(d: &Data) -> Vec<(String, Series)> {
    let mut out = Vec::new();
    for (t, _) in TYPES {
        for m in ["pairs_per_s", "p50_us", "p99_us"] {
            out.push((format!("family.{t}.{m}"), d.series(family(t, 1), m)));
        }
    }
    out.push((
        "family.read_4_readers.pairs_per_s".into(),
        d.series(family("read", 4), "pairs_per_s"),
    ));
    out.retain(|(_, s)| !s.is_empty());
    out
}

pub fn targets(d: &Data, push: &mut impl FnMut(String, &str, String, Option<bool>)) {
    let goal = format!("≥ {FLOOR_GOAL:.2}×");
    for (what, series) in rows(d) {
        let r = ratio(&series, "crate", "floor");
        let name = if what.contains("4 readers") {
            format!("Scenario 5: {what} vs its floor")
        } else {
            format!("Scenario 5: {what} uncontended vs its floor")
        };
        push(
            name,
            &goal,
            ratio_text(r, 2),
            r.map(|s| s.median >= FLOOR_GOAL),
        );
    }
    let h = handoff(d, "crate", "handoff_p99_us");
    if h.contains_key("fair") {
        let r = ratio(&h, "fair", "lock");
        push(
            "Scenario 5: fair-lock hand-off p99 vs the reentrant lock's".into(),
            &format!("≤ {FAIR_HANDOFF_GOAL:.1}×"),
            ratio_text(r, 2),
            r.map(|s| s.median <= FAIR_HANDOFF_GOAL),
        );
    }
}

pub fn section(w: &mut String, d: &Data) {
    let rows = rows(d);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        w,
        "\n## 5. The lock family: every lock type against its own floor\n\n\
         Lock + unlock pairs/s on one name for {} ms after {} warm-up pairs, one thread \
         (the last row: 4 threads of one process sharing one read lock, each its own owner \
         field). Each type's *floor* is that type's Redisson acquire and unlock as \
         PROTOCOL §3–§7 describes them, less the unlock latch, in the benchmark's own Lua \
         (`bench/lua/`: the fair lock's queue purge, the read lock's per-hold timeout markers \
         and its unlock's maximum over every reader's markers, the write lock's `:write` field, \
         the fenced lock's token `INCR`, the spin lock's unlock without `PUBLISH`, the \
         non-reentrant acquire's error reply), sent with redis-rs `Script` on one plain \
         connection per thread. Redisson is the same type from its Java API (`getFairLock`, \
         `getReadWriteLock().readLock()` / `.writeLock()`, `getFencedLock`, `getSpinLock`, \
         `getNonReentrantLock`), `lock()` / `unlock()`.{}\n",
        d.m("s5_duration_ms"),
        d.m("s5_warmup"),
        match d.machine.get("s5_rounds") {
            Some(n) if n != "1" => format!(
                " Each repetition runs the floor and redisson-lock {n} times each, alternating \
                 (the first of the two changing each round), and counts each one's median (the \
                 processes run one after the other, so one run alone carries whatever the \
                 machine did meanwhile); Redisson runs once."
            ),
            _ => String::new(),
        },
    );
    let _ = writeln!(
        w,
        "| lock type | {} | {} | × floor | {} | × floor |\n|---|---|---|---|---|---|",
        label(d, "floor").replace("Redisson's scripts", "the type's scripts"),
        label(d, "crate"),
        label(d, "redisson"),
    );
    for (what, s) in &rows {
        let _ = writeln!(
            w,
            "| {what} | {} | {} | {} | {} | {} |",
            cell(stat(s, "floor")),
            cell(stat(s, "crate")),
            ratio_cell(ratio(s, "crate", "floor")),
            cell(stat(s, "redisson")),
            ratio_cell(ratio(s, "redisson", "floor")),
        );
    }
    let _ = writeln!(
        w,
        "\nPair latency p50 / p99 (µs), one thread:\n\n\
         | lock type | floor | redisson-lock | Redisson |\n|---|---|---|---|"
    );
    for (t, words) in TYPES {
        let p50 = d.series(family(t, 1), "p50_us");
        let p99 = d.series(family(t, 1), "p99_us");
        if p50.is_empty() {
            continue;
        }
        let both = |c: &str| format!("{} / {}", cell(stat(&p50, c)), cell(stat(&p99, c)));
        let cells: Vec<String> = CONTENDERS.iter().map(|c| both(c)).collect();
        let _ = writeln!(w, "| {words} | {} |", cells.join(" | "));
    }

    // The fair lock's hand-off.
    let runs = [
        ("crate", "lock", "redisson-lock, `lock` (reentrant)"),
        ("crate", "fair", "redisson-lock, `fair_lock`"),
        ("redisson", "fair", "Redisson, `getFairLock`"),
    ];
    let any = runs
        .iter()
        .any(|(c, t, _)| handoff(d, c, "handoff_p99_us").contains_key(*t));
    if !any {
        return;
    }
    let _ = writeln!(
        w,
        "\n### Fair-lock hand-off\n\n\
         Scenario 3's method (4 threads of one process on one hot name, {} acquisitions each, \
         {} µs critical section), run for the fair lock beside the reentrant lock in the same \
         repetition{}. A fair lock hands off to the queue head only (its own channel), so a \
         thread releasing cannot take the lock straight back.\n\n\
         | lock | total (ms) | hand-off p50 (µs) | hand-off p99 (µs) | p99 × reentrant | same holder | longest wait (ms) |\n\
         |---|---|---|---|---|---|---|",
        d.m("s3_iterations"),
        d.m("s3_hold_us"),
        match d.machine.get("s5_rounds") {
            Some(n) if n != "1" => format!(
                ", {n} times each, alternating (a repetition's value is the median of its runs; \
                 Redisson's fair lock runs once)"
            ),
            _ => String::new(),
        },
    );
    for (c, t, words) in runs {
        let total = handoff(d, c, "total_ms");
        if !total.contains_key(t) {
            continue;
        }
        let p50 = handoff(d, c, "handoff_p50_us");
        let p99 = handoff(d, c, "handoff_p99_us");
        let same = handoff(d, c, "same_holder_fraction");
        let longest = handoff(d, c, "longest_wait_ms");
        // Against redisson-lock's reentrant lock of the same repetition.
        let mut vs = handoff(d, "crate", "handoff_p99_us");
        vs.retain(|k, _| k == "lock");
        if let Some(mine) = p99.get(t) {
            vs.insert("this".into(), mine.clone());
        }
        let _ = writeln!(
            w,
            "| {words} | {} | {} | {} | {} | {} | {} |",
            cell(stat(&total, t)),
            cell(stat(&p50, t)),
            cell(stat(&p99, t)),
            ratio_cell(ratio(&vs, "this", "lock")),
            stat(&same, t).map_or("–".into(), |s| format!("{:.0}%", s.median * 100.0)),
            cell(stat(&longest, t)),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    #[test]
    fn family_targets_per_type_read4_and_fair_handoff() {
        let mut records = Vec::new();
        for rep in [1, 2] {
            for (c, v) in [("floor", 1000.0), ("crate", 960.0), ("redisson", 500.0)] {
                for (t, _) in TYPES {
                    records.push(json!({"scenario": "family", "lock_type": t, "threads": 1,
                        "contender": c, "rep": rep, "pairs_per_s": v}));
                }
                records.push(json!({"scenario": "family", "lock_type": "read", "threads": 4,
                    "contender": c, "rep": rep, "pairs_per_s": if c == "crate" { 900.0 } else { v }}));
            }
            for (t, p99) in [("lock", 200.0), ("fair", 230.0)] {
                records.push(
                    json!({"scenario": "family_contended", "lock_type": t, "procs": 1,
                    "contender": "crate", "rep": rep, "handoff_p99_us": p99, "total_ms": 10.0}),
                );
            }
        }
        let d = Data {
            records,
            machine: BTreeMap::from([("floor".to_owned(), "true".to_owned())]),
        };
        let mut got = Vec::new();
        targets(&d, &mut |name, goal: &str, measured, met| {
            got.push((name, goal.to_owned(), measured, met))
        });
        assert_eq!(got.len(), TYPES.len() + 2);
        assert_eq!(
            got[0],
            (
                "Scenario 5: fair lock uncontended vs its floor".to_owned(),
                "≥ 0.95×".to_owned(),
                "0.96× [0.96–0.96]".to_owned(),
                Some(true)
            )
        );
        let read4 = &got[TYPES.len()];
        assert_eq!(read4.0, "Scenario 5: read lock, 4 readers vs its floor");
        assert_eq!(read4.3, Some(false));
        let fair = &got[TYPES.len() + 1];
        assert_eq!(
            fair.0,
            "Scenario 5: fair-lock hand-off p99 vs the reentrant lock's"
        );
        assert_eq!((fair.1.as_str(), fair.3), ("≤ 1.2×", Some(true)));
        let mut md = String::new();
        section(&mut md, &d);
        assert!(md.contains("| read lock, 4 readers | 1000 [1000–1000] | 900 [900–900] |"));
        assert!(md.contains("### Fair-lock hand-off"));
    }
}
