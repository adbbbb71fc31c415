//! The paired measurements (`bench/src/paired.rs`): the true floor and
//! redisson-lock alternating in blocks on the same threads of one process.
//! Each record carries the median over its rounds of the per-round ratio;
//! the report summarises those medians over the repetitions.

use std::fmt::Write;

use serde_json::Value;

use super::Data;
use super::family::FLOOR_GOAL;
use super::stats::{Stat, fmt, ratio_text};
use super::targets::UNCONTENDED_GOAL;

/// (label, threads, lock type, goal)
const ROWS: [(&str, u64, &str, f64); 9] = [
    ("Scenario 1 (1 thread)", 1, "lock", UNCONTENDED_GOAL),
    ("Scenario 2 (4 threads)", 4, "lock", UNCONTENDED_GOAL),
    ("Scenario 5: fair lock (1 thread)", 1, "fair", FLOOR_GOAL),
    ("Scenario 5: read lock (1 thread)", 1, "read", FLOOR_GOAL),
    ("Scenario 5: write lock (1 thread)", 1, "write", FLOOR_GOAL),
    (
        "Scenario 5: fenced lock (1 thread)",
        1,
        "fenced",
        FLOOR_GOAL,
    ),
    ("Scenario 5: spin lock (1 thread)", 1, "spin", FLOOR_GOAL),
    (
        "Scenario 5: non-reentrant lock (1 thread)",
        1,
        "nonreentrant",
        FLOOR_GOAL,
    ),
    ("Scenario 5: read lock, 4 readers", 4, "read", FLOOR_GOAL),
];

fn records<'a>(d: &'a Data, threads: u64, lock_type: &'a str) -> impl Iterator<Item = &'a Value> {
    d.records.iter().filter(move |r| {
        r["scenario"] == "paired"
            && r["threads"].as_u64() == Some(threads)
            && r["lock_type"] == lock_type
    })
}

fn metric(d: &Data, threads: u64, lock_type: &str, key: &str) -> Option<Stat> {
    Stat::of(records(d, threads, lock_type).filter_map(|r| r[key].as_f64()))
}

pub fn targets(d: &Data, push: &mut impl FnMut(String, &str, String, Option<bool>)) {
    for (what, threads, lock_type, goal) in ROWS {
        let Some(r) = metric(d, threads, lock_type, "ratio_median") else {
            continue;
        };
        push(
            format!("{what}, paired in one process: pairs/s vs the true floor"),
            &format!("≥ {goal:.2}×"),
            ratio_text(Some(r), 2),
            Some(r.median >= goal),
        );
    }
}

pub fn section(w: &mut String, d: &Data) {
    if !ROWS
        .iter()
        .any(|&(_, t, l, _)| records(d, t, l).next().is_some())
    {
        return;
    }
    let rounds = d.m("pair_rounds");
    let block = d.m("pair_block_ms");
    let _ = writeln!(
        w,
        "\n## Paired: the floor and redisson-lock in one process\n\n\
         The scenarios above run each contender in its own process, one after the other, so a \
         ratio also carries whatever changed on the machine between the two (on this 2-vCPU VM, \
         a few percent either way). Here one process holds a floor session and a redisson-lock \
         session per thread and alternates {block} ms blocks of lock + unlock pairs between them, \
         {rounds} rounds per repetition (the floor first in even rounds, the crate first in odd \
         ones), all threads switching together. *Ratio* is the median over the rounds of \
         crate ÷ floor pairs/s; the table gives its median [min–max] over the repetitions.\n\n\
         | measurement | floor pairs/s | redisson-lock pairs/s | ratio (median of rounds) | ratio of the means |\n\
         |---|---|---|---|---|"
    );
    for (what, threads, lock_type, _) in ROWS {
        let cell = |key: &str| metric(d, threads, lock_type, key);
        let Some(r) = cell("ratio_median") else {
            continue;
        };
        let value = |s: Option<Stat>| {
            s.map_or("–".into(), |s| {
                format!("{} [{}–{}]", fmt(s.median), fmt(s.min), fmt(s.max))
            })
        };
        let _ = writeln!(
            w,
            "| {what} | {} | {} | **{}** | {} |",
            value(cell("floor_pairs_per_s")),
            value(cell("pairs_per_s")),
            ratio_text(Some(r), 2),
            ratio_text(cell("ratio_of_means"), 2),
        );
    }
}
