//! Issue 36's rows of the targets table (scenario 9 per thread count and
//! its hand-off, scenario 10 at 1,024 threads, the watchdog curve per size).

use serde_json::Value;

use super::scale::{
    BYTES_BEYOND_REDIS_GOAL, CALLS_PER_TICK_GOAL, MANY_CONNECTIONS_GOAL, MANY_RATIO_GOAL,
    PROXIED_HANDOFF_P99_GOAL, PROXIED_UNCONTENDED_GOAL, TICK_RATIO_GOAL, of, records,
    thread_counts,
};
use super::stats::{Stat, fmt, ratio};
use super::{Data, watchdog};

/// Issue 36's rows of the targets table, for what the run measured.
pub fn targets(d: &Data, push: &mut impl FnMut(String, &str, String, Option<bool>)) {
    let paired: Vec<&Value> = records(d, "proxied_paired").collect();
    let delay = d.m("proxy_delay_us");
    for t in thread_counts(paired.iter().copied()) {
        let r = of(
            paired
                .iter()
                .copied()
                .filter(|r| r["threads"].as_u64() == Some(t)),
            "ratio_median",
        );
        push(
            format!(
                "Scenario 9 ({t} thread{}, {delay} µs each way): pairs/s vs the true floor",
                if t == 1 { "" } else { "s" }
            ),
            &format!("≥ {PROXIED_UNCONTENDED_GOAL:.2}×"),
            super::stats::ratio_text(r, 2),
            r.map(|s| s.median >= PROXIED_UNCONTENDED_GOAL),
        );
    }
    let hp99 = d.series(|r| r["scenario"] == "proxied_contended", "handoff_p99_us");
    if hp99.contains_key("crate") {
        let r = ratio(&hp99, "crate", "floor");
        push(
            format!(
                "Scenario 9 (4 threads, {delay} µs each way): hand-off p99 vs the true floor's"
            ),
            &format!("≤ {PROXIED_HANDOFF_P99_GOAL}×"),
            super::stats::ratio_text(r, 2),
            r.map(|s| s.median <= PROXIED_HANDOFF_P99_GOAL),
        );
    }
    let many: Vec<&Value> = records(d, "paired_many").collect();
    // The goal is at 1,024 threads: no row for a run that stopped short.
    if let Some(&t) = thread_counts(many.iter().copied()).last()
        && t >= 1024
    {
        let at: Vec<&Value> = many
            .iter()
            .copied()
            .filter(|r| r["threads"].as_u64() == Some(t))
            .collect();
        let r = of(at.iter().copied(), "ratio_median");
        let conns = of(at.iter().copied(), "connections");
        push(
            format!("Scenario 10 ({t} threads): pairs/s vs the true floor, connections"),
            &format!("≥ {MANY_RATIO_GOAL}×, ≤ {MANY_CONNECTIONS_GOAL} connections"),
            format!(
                "{}, {} connections",
                super::stats::ratio_text(r, 2),
                conns.map_or("–".into(), |c| fmt(c.max))
            ),
            match (r, conns) {
                (Some(r), Some(c)) => {
                    Some(r.median >= MANY_RATIO_GOAL && c.max <= MANY_CONNECTIONS_GOAL)
                }
                _ => None,
            },
        );
    }
    let curve = watchdog::runs_of(d, "watchdog_scale");
    let mut sizes: Vec<u64> = curve.iter().filter_map(|r| r["locks"].as_u64()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for n in sizes {
        let at: Vec<&Value> = curve
            .iter()
            .filter(|r| r["locks"].as_u64() == Some(n))
            .collect();
        let ratio = of(at.iter().copied(), "tick_wall_per_server_median");
        let calls = at
            .iter()
            .filter_map(|r| r["calls_per_tick_max"].as_f64())
            .fold(f64::NAN, f64::max);
        let lost: u64 = at.iter().filter_map(|r| r["leases_lost"].as_u64()).sum();
        let beyond = Stat::of(at.iter().filter_map(|r| {
            Some(r["heap_bytes_per_lock"].as_f64()? - r["redis_bytes_per_lock"].as_f64()?)
        }));
        push(
            format!(
                "Scenario 4 curve ({} locks): tick wall ÷ Redis, calls per tick (worst), leases lost",
                fmt(n as f64)
            ),
            &format!("≤ {TICK_RATIO_GOAL}×, ≤ {CALLS_PER_TICK_GOAL}, 0"),
            format!(
                "{}, {}, {lost}",
                super::stats::ratio_text(ratio, 2),
                if calls.is_nan() {
                    "–".into()
                } else {
                    fmt(calls)
                }
            ),
            ratio.map(|r| r.median <= TICK_RATIO_GOAL && calls <= CALLS_PER_TICK_GOAL && lost == 0),
        );
        push(
            format!(
                "Scenario 4 curve ({} locks): client heap per lock beyond Redis's own",
                fmt(n as f64)
            ),
            &format!("≤ {BYTES_BEYOND_REDIS_GOAL} bytes"),
            beyond.map_or("–".into(), |b| format!("{} bytes", fmt(b.median))),
            beyond.map(|b| b.median <= BYTES_BEYOND_REDIS_GOAL),
        );
    }
}
