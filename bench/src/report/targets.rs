//! The targets table: each target, its goal, what was measured, met or not.

use serde_json::{Value, json};

use super::paired::UNCONTENDED_GOAL;
use super::stats::{Stat, fmt, ratio, ratio_text};
use super::{Data, contended, family, is, scaled, watchdog};

/// The goal when `floor` was the crate's own scripts (runs before the true
/// floor, re-rendered with `--report-only`).
const OLD_FLOOR_GOAL: f64 = 0.95;

pub fn targets(d: &Data, wd: &[Value], soak: Option<&Value>) -> Vec<Value> {
    let mut out = Vec::new();
    let mut push = |name: String, goal: &str, measured: String, met: Option<bool>| {
        out.push(json!({"target": name, "goal": goal, "measured": measured, "met": met}));
    };
    let floor = if d.true_floor() {
        "the true floor"
    } else {
        "the floor"
    };
    let uncontended = [
        (
            "Scenario 1 (1 thread)",
            d.series(is("uncontended"), "pairs_per_s"),
        ),
        ("Scenario 2 (4 threads)", d.series(scaled(4), "pairs_per_s")),
    ];
    let goal = if d.true_floor() {
        UNCONTENDED_GOAL
    } else {
        OLD_FLOOR_GOAL
    };
    for (what, series) in uncontended {
        let r = ratio(&series, "crate", "floor");
        push(
            format!("{what}: uncontended pairs/s vs {floor}"),
            &format!("≥ {goal:.2}×"),
            ratio_text(r, 2),
            r.map(|s| s.median >= goal),
        );
    }
    super::paired::targets(d, &mut push);
    for p in [1u64, 2] {
        let what = if p == 1 {
            "4 threads"
        } else {
            "2 processes × 4 threads"
        };
        let h = d.series(contended(p), "handoff_p99_us");
        let r = ratio(&h, "crate", "floor");
        push(
            format!("Scenario 3 ({what}): hand-off p99 vs {floor}'s pub/sub hand-off"),
            "≤ 1.2×",
            ratio_text(r, 2),
            r.map(|s| s.median <= 1.2),
        );
        let w = d.series(contended(p), "longest_wait_ms");
        let r = ratio(&w, "rslock", "crate");
        push(
            format!("Scenario 3 ({what}): longest single wait, rslock's ÷ ours"),
            "≥ 10×",
            ratio_text(r, 1),
            r.map(|s| s.median >= 10.0),
        );
        let t = d.series(contended(p), "total_ms");
        let r = ratio(&t, "crate", "redisson");
        push(
            format!("Scenario 3 ({what}): total time vs Redisson"),
            "≤ 1.0×",
            ratio_text(r, 2),
            r.map(|s| s.median <= 1.0),
        );
    }
    watchdog::targets(wd, &mut push);
    family::targets(d, &mut push);
    super::redlock::targets(d, &mut push);
    super::scale_targets::targets(d, &mut push);
    if let Some(s) = soak {
        let samples = s["samples"].as_array().cloned().unwrap_or_default();
        let rss = |x: &Value| x["rss_mb"].as_f64().unwrap_or(f64::NAN);
        let first = samples.first().map_or(f64::NAN, rss);
        let last = samples.last().map_or(f64::NAN, rss);
        let half = samples
            .iter()
            .find(|x| {
                x["cycles"].as_f64().unwrap_or(0.0) >= s["cycles"].as_f64().unwrap_or(0.0) / 2.0
            })
            .map_or(f64::NAN, rss);
        let clean = s["end_registered_holds"] == 0
            && s["end_subscribed_channels"] == 0
            && s["end_waiters"] == 0
            && s["latches_left"] == 0;
        // Bytes Rust code holds (counted by the bench's global allocator),
        // which fragmentation does not move: median of the second half
        // against the median of the first.
        let total = s["cycles"].as_f64().unwrap_or(0.0);
        let heap = |second: bool| {
            Stat::of(samples.iter().filter_map(|x| {
                let late = x["cycles"].as_f64().unwrap_or(0.0) >= total / 2.0;
                if late == second {
                    x["heap_mb"].as_f64()
                } else {
                    None
                }
            }))
            .map(|s| s.median)
        };
        let heap_growth = match (heap(false), heap(true)) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        let flat = last - half <= 0.5 && heap_growth.is_none_or(|g| g <= 0.25);
        push(
            format!(
                "Soak: {} lock/unlock cycles, memory and bookkeeping flat",
                fmt(s["cycles"].as_f64().unwrap_or(0.0))
            ),
            "RSS grows ≤ 0.5 MiB over the second half, live heap ≤ 0.25 MiB; holds, subscriptions, waiters, latches back to 0",
            format!(
                "RSS {first:.2} MiB (at 5%) → {half:.2} (50%) → {last:.2} (end): {:+.2} MiB in the second half; \
                 live heap {}; holds {}, channels {}, waiters {}, latches left {}",
                last - half,
                heap_growth.map_or("not measured".into(), |g| format!(
                    "{:.2} → {:.2} MiB (medians of the halves)",
                    heap(false).unwrap_or(0.0),
                    heap(false).unwrap_or(0.0) + g
                )),
                s["end_registered_holds"],
                s["end_subscribed_channels"],
                s["end_waiters"],
                s["latches_left"]
            ),
            Some(flat && clean),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::super::{Data, watchdog};
    use super::*;

    fn data(records: Vec<Value>) -> Data {
        Data {
            records,
            machine: BTreeMap::from([("floor".to_owned(), "true".to_owned())]),
        }
    }

    fn target<'a>(all: &'a [Value], prefix: &str) -> &'a Value {
        all.iter()
            .find(|t| t["target"].as_str().is_some_and(|n| n.starts_with(prefix)))
            .unwrap_or_else(|| panic!("no target {prefix}"))
    }

    #[test]
    fn uncontended_targets_are_against_the_true_floor_per_repetition() {
        let mut records = Vec::new();
        for (rep, floor, raw, ours) in [(1, 1000.0, 900.0, 980.0), (2, 1000.0, 950.0, 960.0)] {
            for (c, v) in [("floor", floor), ("raw", raw), ("crate", ours)] {
                records.push(json!({"scenario": "uncontended", "contender": c, "rep": rep, "pairs_per_s": v}));
                records.push(json!({"scenario": "scaled", "threads": 4, "contender": c, "rep": rep, "pairs_per_s": v / 2.0}));
            }
        }
        let t = targets(&data(records), &[], None);
        let s1 = target(
            &t,
            "Scenario 1 (1 thread): uncontended pairs/s vs the true floor",
        );
        assert_eq!(s1["goal"], "≥ 0.97×");
        // Ratios 0.98 and 0.96: median 0.97, met.
        assert_eq!(s1["measured"], "0.97× [0.96–0.98]");
        assert_eq!(s1["met"], true);
        let s2 = target(&t, "Scenario 2 (4 threads)");
        assert_eq!(s2["met"], true);
    }

    #[test]
    fn a_repetition_that_ran_a_contender_several_times_counts_its_median() {
        let mut records = Vec::new();
        // Rep 1 ran the floor and the crate 3 times each: one hiccup of the
        // crate (600) does not decide the ratio, its median (980) does.
        for (i, (floor, ours)) in [(1000.0, 600.0), (990.0, 980.0), (1010.0, 990.0)]
            .into_iter()
            .enumerate()
        {
            for (c, v, usec) in [("floor", floor, 100.0 + i as f64), ("crate", ours, 50.0)] {
                let id = format!("r1-{c}-{i}");
                records.push(json!({"scenario": "uncontended", "contender": c, "rep": 1,
                    "pairs_per_s": v, "pairs": 10, "run_id": id}));
                records.push(json!({"kind": "server_cost", "of_scenario": "uncontended",
                    "contender": c, "rep": 1, "usec": usec, "run_id": id}));
            }
        }
        let d = data(records);
        let t = targets(&d, &[], None);
        let s1 = target(
            &t,
            "Scenario 1 (1 thread): uncontended pairs/s vs the true floor",
        );
        assert_eq!(s1["measured"], "0.98×");
        // The server's time per pair: the median of the rep's three runs.
        let server = super::super::server_us_per_pair(&d);
        assert_eq!(server["floor"][&1], 10.1);
        assert_eq!(server["crate"][&1], 5.0);
    }

    #[test]
    fn paired_targets_summarise_each_repetitions_median_ratio() {
        let mut records = Vec::new();
        for (rep, ratio) in [(1, 0.99), (2, 0.95), (3, 0.97)] {
            records.push(
                json!({"scenario": "paired", "threads": 1, "lock_type": "lock",
                "contender": "crate", "rep": rep, "ratio_median": ratio}),
            );
            records.push(
                json!({"scenario": "paired", "threads": 4, "lock_type": "read",
                "contender": "crate", "rep": rep, "ratio_median": ratio - 0.03}),
            );
            records.push(
                json!({"scenario": "paired", "threads": 1, "lock_type": "latch",
                "contender": "crate", "rep": rep, "ratio_median": ratio - 0.01}),
            );
        }
        let t = targets(&data(records), &[], None);
        let s1 = target(&t, "Scenario 1 (1 thread), paired in one process");
        assert_eq!(
            (s1["goal"].as_str(), s1["measured"].as_str()),
            (Some("≥ 0.97×"), Some("0.97× [0.95–0.99]"))
        );
        assert_eq!(s1["met"], true);
        let latch = target(&t, "Latch count_down+count (1 thread), paired");
        // Ratios 0.98, 0.94, 0.96 against the family's 0.95, and against
        // the latch's own floor.
        assert_eq!(
            (latch["goal"].as_str(), latch["measured"].as_str()),
            (Some("≥ 0.95×"), Some("0.96× [0.94–0.98]"))
        );
        assert_eq!(latch["met"], true);
        assert!(
            latch["target"]
                .as_str()
                .is_some_and(|n| n.ends_with("pairs/s vs its protocol floor"))
        );
        let readers = target(&t, "Scenario 5: read lock, 4 readers, paired");
        // Median 0.94 against the family's 0.95.
        assert_eq!(readers["met"], false);
        // No paired records for 4 threads of RLock: no row.
        assert!(!t.iter().any(|x| {
            x["target"]
                .as_str()
                .is_some_and(|n| n.starts_with("Scenario 2 (4 threads), paired"))
        }));
    }

    #[test]
    fn the_contended_semaphore_holds_the_crates_hand_off_p99_to_its_floors() {
        let mut records = Vec::new();
        for (rep, floor, ours) in [(1, 400.0, 440.0), (2, 500.0, 650.0), (3, 500.0, 550.0)] {
            for (c, p99) in [("floor", floor), ("crate", ours)] {
                records.push(
                    json!({"scenario": "sync_contended", "contender": c, "rep": rep,
                    "lock_type": "lock", "threads": 8, "permits": 2,
                    "handoff_p50_us": p99 / 4.0, "handoff_p99_us": p99}),
                );
            }
            records.push(
                json!({"scenario": "paired", "threads": 1, "lock_type": "semaphore",
                "contender": "crate", "rep": rep, "ratio_median": 1.0}),
            );
        }
        let d = data(records);
        let t = targets(&d, &[], None);
        let h = target(&t, "Semaphore, 8 threads over 2 permits: hand-off p99");
        // Ratios 1.10, 1.30 and 1.10: median 1.10, met.
        assert_eq!(
            (h["goal"].as_str(), h["measured"].as_str()),
            (Some("≤ 1.2×"), Some("1.10× [1.10–1.30]"))
        );
        assert_eq!(h["met"], true);
        let mut md = String::new();
        crate::report::paired::section(&mut md, &d);
        assert!(md.contains("*Contended semaphore*"), "{md}");
        assert!(md.contains("p99 ratio 1.10× [1.10–1.30]"), "{md}");
    }

    #[test]
    fn redissons_synchronizers_render_beside_the_paired_rows() {
        let mut records = Vec::new();
        for (rep, ours, theirs) in [(1, 2000.0, 1000.0), (2, 2200.0, 1100.0), (3, 1800.0, 900.0)] {
            records.push(
                json!({"scenario": "paired", "threads": 1, "lock_type": "semaphore",
                "contender": "crate", "rep": rep, "ratio_median": 0.98,
                "pairs_per_s": ours, "floor_pairs_per_s": ours / 0.98}),
            );
            records.push(json!({"scenario": "sync_uncontended", "threads": 1,
                "lock_type": "semaphore", "contender": "redisson", "rep": rep,
                "pairs_per_s": theirs, "p50_us": 900.0}));
            for (c, p99) in [("floor", 400.0), ("crate", 440.0), ("redisson", 800.0)] {
                records.push(
                    json!({"scenario": "sync_contended", "contender": c, "rep": rep,
                    "lock_type": "lock", "threads": 8, "permits": 2,
                    "handoff_p50_us": p99 / 4.0, "handoff_p99_us": p99}),
                );
            }
        }
        let d = data(records);
        let mut md = String::new();
        crate::report::paired::section(&mut md, &d);
        assert!(md.contains("*Synchronizers beside Redisson*"), "{md}");
        assert!(
            md.contains(
                "| Semaphore acquire+release (1 thread) | 2041 [1837–2245] | \
                 2000 [1800–2200] | **0.98× [0.98–0.98]** | 1000 [900–1100] | 900 | 2.00× |"
            ),
            "{md}"
        );
        // No Redisson record for the other two: no row without data.
        assert!(
            !md.contains("| Latch count_down+count (1 thread) |"),
            "{md}"
        );
        // The contended semaphore with Redisson's hand-offs.
        assert!(md.contains("p99 ratio 1.10× [1.10–1.10]"), "{md}");
        assert!(
            md.contains("Redisson's contended semaphore") && md.contains("p99 800 µs"),
            "{md}"
        );
        assert!(md.contains("p99 ÷ the floor's 2.00×"), "{md}");
        // The targets are the crate's: Redisson's records change none.
        let without = data(
            d.records
                .iter()
                .filter(|r| r["contender"] != "redisson")
                .cloned()
                .collect(),
        );
        assert_eq!(targets(&d, &[], None), targets(&without, &[], None));
    }

    #[test]
    fn cluster_paired_rows_are_their_own_and_held_to_095() {
        let mut records = Vec::new();
        for (rep, one, four) in [(1, 0.96, 0.93), (2, 0.95, 0.94), (3, 0.99, 0.97)] {
            for (threads, ratio) in [(1, one), (4, four)] {
                records.push(json!({"scenario": "cluster_paired", "threads": threads,
                    "lock_type": "lock", "contender": "crate", "rep": rep,
                    "ratio_median": ratio, "floor_pairs_per_s": 1000.0,
                    "pairs_per_s": 1000.0 * ratio, "ratio_of_means": ratio,
                    "masters": 3, "publish": "spublish"}));
            }
        }
        let d = data(records);
        let t = targets(&d, &[], None);
        let one = target(&t, "Cluster (1 thread), paired in one process");
        assert_eq!(
            (one["goal"].as_str(), one["measured"].as_str()),
            (Some("≥ 0.95×"), Some("0.96× [0.95–0.99]"))
        );
        assert_eq!(one["met"], true);
        assert!(
            one["target"]
                .as_str()
                .is_some_and(|n| n.ends_with("vs the true floor on the slot's master"))
        );
        // Median 0.94: not met.
        assert_eq!(
            target(&t, "Cluster (4 threads), paired in one process")["met"],
            false
        );
        // Cluster records are not the standalone paired rows.
        assert!(!t.iter().any(|x| {
            x["target"]
                .as_str()
                .is_some_and(|n| n.starts_with("Scenario 1 (1 thread), paired"))
        }));
        let mut md = String::new();
        crate::report::paired::section(&mut md, &d);
        assert!(
            md.contains("| Cluster (4 threads) | 1000 [1000–1000] |"),
            "{md}"
        );
        assert!(md.contains("Both unlock with `SPUBLISH`"), "{md}");
    }

    #[test]
    fn watchdog_targets_time_whole_ticks_only() {
        let holder = json!({
            "scenario": "watchdog", "kind": "holder", "contender": "crate", "rep": 1,
            "run_id": "r1", "locks": 100_000, "keys_alive": 100_000, "lost_flagged": 0,
            "watchdog_ms": 6000, "window_ms": 7000, "cpu_ms_window": 100.0,
        });
        let observer = json!({
            "scenario": "watchdog", "kind": "observer", "contender": "crate", "rep": 1,
            "run_id": "r1", "calls": 2600, "calls_per_s": 371.0,
            "ticks": [
                // Cut by the window's start: counted, not timed.
                {"calls": 600, "dur_ms": 10.0, "server_ms": 1.0, "complete": false},
                {"calls": 1000, "dur_ms": 300.0, "server_ms": 250.0, "complete": true},
                {"calls": 1000, "dur_ms": 330.0, "server_ms": 240.0, "complete": true},
            ],
        });
        let d = data(vec![holder, observer]);
        let runs = watchdog::runs(&d);
        assert_eq!(runs[0]["ticks"], 3);
        assert_eq!(runs[0]["ticks_timed"], 2);
        assert_eq!(runs[0]["calls_per_tick_median"], 1000.0);
        let t = targets(&d, &runs, None);
        let calls = target(
            &t,
            "Scenario 4: renewal script calls per tick, 100,000 locks",
        );
        assert_eq!(
            (calls["goal"].as_str(), calls["met"].as_bool()),
            (Some("≤ 1000"), Some(true))
        );
        let wall = target(&t, "Scenario 4: renewal tick wall time");
        // Per tick 1.20 and 1.375: the run's median tick 1.29.
        assert_eq!(wall["measured"], "1.29× (tick 315 ms, Redis 245 ms)");
        assert_eq!(wall["met"], true);
        assert_eq!(target(&t, "Scenario 4: leases lost")["met"], true);
    }
}
