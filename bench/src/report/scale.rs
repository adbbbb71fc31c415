//! Issue 36 (scale): the delay proxy's own cost and the paired rows through
//! it (scenario 9), the thread curve to 1,024 (scenario 10) and scenario 4's
//! watchdog curve (10k, 100k, 1M locks). Every number is the median over the
//! run's repetitions (a single run: its value) with [min–max] when more.

use std::fmt::Write as _;

use serde_json::Value;

use super::stats::{Stat, cell, fmt, ratio, ratio_cell, stat};
use super::{Data, label, present, watchdog};

/// The goals.
pub(super) const PROXIED_UNCONTENDED_GOAL: f64 = 0.97;
pub(super) const PROXIED_HANDOFF_P99_GOAL: f64 = 1.1;
pub(super) const MANY_RATIO_GOAL: f64 = 1.5;
pub(super) const MANY_CONNECTIONS_GOAL: f64 = 6.0;
pub(super) const TICK_RATIO_GOAL: f64 = 1.25;
pub(super) const CALLS_PER_TICK_GOAL: f64 = 1_000.0;
pub(super) const BYTES_BEYOND_REDIS_GOAL: f64 = 300.0;

pub(super) fn records<'a>(d: &'a Data, scenario: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    d.records.iter().filter(move |r| r["scenario"] == scenario)
}

/// A statistic of `key` over `rs`.
pub(super) fn of<'a>(rs: impl IntoIterator<Item = &'a Value>, key: &str) -> Option<Stat> {
    Stat::of(rs.into_iter().filter_map(|r| r[key].as_f64()))
}

fn ratio_of(s: Option<Stat>) -> String {
    match s {
        Some(s) if s.n > 1 => format!("**{:.2}×** [{:.2}–{:.2}]", s.median, s.min, s.max),
        Some(s) => format!("**{:.2}×**", s.median),
        None => "–".into(),
    }
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "✓",
        Some(false) => "✗",
        None => "–",
    }
}

/// The thread counts of `rs`, ascending.
pub(super) fn thread_counts<'a>(rs: impl IntoIterator<Item = &'a Value>) -> Vec<u64> {
    let mut t: Vec<u64> = rs
        .into_iter()
        .filter_map(|r| r["threads"].as_u64())
        .collect();
    t.sort_unstable();
    t.dedup();
    t
}

/// The section of `BENCHMARKS.md`, when the run measured any of it;
/// `svg_link` is the summary chart's link (the curves' sits beside it).
pub fn section(w: &mut String, d: &Data, svg_link: &str) {
    let curve = watchdog::runs_of(d, "watchdog_scale");
    let any = [
        "proxy_ping",
        "proxied_paired",
        "proxied_contended",
        "paired_many",
        "waiters",
    ]
    .iter()
    .any(|s| records(d, s).next().is_some());
    if !any && curve.is_empty() {
        return;
    }
    let _ = writeln!(
        w,
        "## Scale (issue 36)\n\n\
         Scenario 9 runs the paired rows with every client connected through the bench's own \
         delay proxy (`rlock-bench proxy`, bench/src/proxy.rs: one thread per connection and \
         direction, each chunk written {} µs after the kernel received it, order kept), \
         scenario 10 the paired measurement with the default client up to 1,024 threads (blocks \
         longer in proportion beyond 64 threads), and scenario 4 its watchdog curve. The proxy \
         runs on the server's vCPU unless `BENCH_PROXY_CPU` says otherwise: with one \
         connection per thread, the floor's side costs it more proxy CPU than the crate's \
         shared sockets do.\n",
        d.m("proxy_delay_us"),
    );
    if super::scale_chart::chart(d).is_some() {
        let _ = writeln!(
            w,
            "![Cost against size]({})\n",
            super::scale_chart::path_beside(svg_link)
        );
    }
    proxy(w, d);
    proxied(w, d);
    many(w, d);
    super::waiters::section(w, d);
    watchdog_curve(w, d, &curve);
}

/// The proxy's own cost: PING round trips direct and through it.
fn proxy(w: &mut String, d: &Data) {
    let pings: Vec<&Value> = records(d, "proxy_ping").collect();
    if pings.is_empty() {
        return;
    }
    let _ = writeln!(
        w,
        "### The delay proxy's own cost\n\n\
         PING round trips on raw connections, {} of each per repetition, one direct and one \
         through each listener in turn. *Overhead* is the proxy's round trip less the direct \
         one and less its nominal delay (twice the one-way delay). Proxy pinning: `{}`.\n\n\
         | path | RTT p50 (µs) | RTT p99 (µs) | overhead p50 (µs) | overhead p99 (µs) |\n\
         |---|---|---|---|---|",
        pings[0]["samples"],
        d.m("proxy_pinning"),
    );
    let _ = writeln!(
        w,
        "| direct | {} | {} | – | – |",
        cell(of(pings.iter().copied(), "direct_p50_us")),
        cell(of(pings.iter().copied(), "direct_p99_us")),
    );
    let vias: Vec<&Value> = pings
        .iter()
        .filter_map(|p| p["via"].as_array())
        .flatten()
        .collect();
    let mut delays: Vec<u64> = vias.iter().filter_map(|v| v["delay_us"].as_u64()).collect();
    delays.sort_unstable();
    delays.dedup();
    for delay in delays {
        let at: Vec<&Value> = vias
            .iter()
            .copied()
            .filter(|v| v["delay_us"].as_u64() == Some(delay))
            .collect();
        let _ = writeln!(
            w,
            "| through the proxy, {delay} µs each way | {} | {} | {} | {} |",
            cell(of(at.iter().copied(), "rtt_p50_us")),
            cell(of(at.iter().copied(), "rtt_p99_us")),
            cell(of(at.iter().copied(), "overhead_p50_us")),
            cell(of(at.iter().copied(), "overhead_p99_us")),
        );
    }
    let _ = writeln!(w);
}

/// Scenario 9: the paired rows and the hand-off through the proxy.
fn proxied(w: &mut String, d: &Data) {
    let paired: Vec<&Value> = records(d, "proxied_paired").collect();
    if !paired.is_empty() {
        let _ = writeln!(
            w,
            "### Uncontended through the proxy ({} µs each way)\n\n\
             The paired measurement (floor and crate alternating in one process, each thread on \
             its own name), both sides through the proxy. Redisson's row is scenario 2's run \
             through the proxy, in its own JVM (not paired: its ratio is to the floor's mean \
             rate of the same repetitions). *Proxy CPU per pair* is the proxy process's CPU \
             time during each side's blocks ÷ that side's pairs: the proxy shares the machine's \
             two vCPUs, and a side that sends more, smaller chunks (the floor: one connection \
             per thread) costs it more. Goal: the crate ≥ {PROXIED_UNCONTENDED_GOAL}× the \
             floor.\n\n\
             | threads | floor (pairs/s) | redisson-lock (pairs/s) | crate ÷ floor | goal | crate connections | proxy CPU per pair, floor / crate (µs) | Redisson (pairs/s) | Redisson ÷ floor |\n\
             |---|---|---|---|---|---|---|---|---|",
            d.m("proxy_delay_us"),
        );
        for t in thread_counts(paired.iter().copied()) {
            let at: Vec<&Value> = paired
                .iter()
                .copied()
                .filter(|r| r["threads"].as_u64() == Some(t))
                .collect();
            let ratio = of(at.iter().copied(), "ratio_median");
            let floor = of(at.iter().copied(), "floor_pairs_per_s");
            let theirs = of(
                records(d, "proxied_scaled")
                    .filter(|r| r["threads"].as_u64() == Some(t) && r["contender"] == "redisson"),
                "pairs_per_s",
            );
            let _ = writeln!(
                w,
                "| {t} | {} | {} | {} | {} | {} | {} / {} | {} | {} |",
                cell(floor),
                cell(of(at.iter().copied(), "pairs_per_s")),
                ratio_of(ratio),
                verdict(ratio.map(|r| r.median >= PROXIED_UNCONTENDED_GOAL)),
                cell(of(at.iter().copied(), "connections")),
                cell(of(at.iter().copied(), "floor_proxy_cpu_us_per_pair")),
                cell(of(at.iter().copied(), "proxy_cpu_us_per_pair")),
                cell(theirs),
                match (theirs, floor) {
                    (Some(a), Some(b)) if b.median > 0.0 => format!("{:.2}×", a.median / b.median),
                    _ => "–".into(),
                },
            );
        }
        let _ = writeln!(w);
    }
    let pred = |r: &Value| r["scenario"] == "proxied_contended";
    let hp99 = d.series(pred, "handoff_p99_us");
    if hp99.is_empty() {
        return;
    }
    let hp50 = d.series(pred, "handoff_p50_us");
    let total = d.series(pred, "total_ms");
    let _ = writeln!(
        w,
        "### Contended hand-off through the proxy\n\n\
         Scenario 3's run (one process, 4 threads on one name, {} acquisitions each, {} µs \
         held), every connection through the proxy. Goal: the crate's hand-off p99 ≤ \
         {PROXIED_HANDOFF_P99_GOAL}× the floor's.\n\n\
         | contender | total (ms) | hand-off p50 (µs) | hand-off p99 (µs) | p99 × floor | goal |\n\
         |---|---|---|---|---|---|",
        d.m("s3_iterations"),
        d.m("s3_hold_us"),
    );
    for c in present(&hp99) {
        let r = ratio(&hp99, c, "floor");
        let goal = match c {
            "crate" => verdict(r.map(|r| r.median <= PROXIED_HANDOFF_P99_GOAL)),
            _ => "",
        };
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {goal} |",
            label(d, c),
            cell(stat(&total, c)),
            cell(stat(&hp50, c)),
            cell(stat(&hp99, c)),
            ratio_cell(r),
        );
    }
    let _ = writeln!(w);
}

/// Scenario 10: the thread curve.
fn many(w: &mut String, d: &Data) {
    let rows: Vec<&Value> = records(d, "paired_many").collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        w,
        "### Many threads (scenario 10)\n\n\
         The paired measurement, each thread on its own names, the crate with its default \
         client, the floor with one connection per thread. Goal at 1,024 threads: the crate ≥ \
         {MANY_RATIO_GOAL}× the floor's pairs/s on ≤ {MANY_CONNECTIONS_GOAL} connections.\n\n\
         | threads | floor (pairs/s) | redisson-lock (pairs/s) | crate ÷ floor | floor connections | crate connections | crate CPU per pair (µs) | goal |\n\
         |---|---|---|---|---|---|---|---|",
    );
    for t in thread_counts(rows.iter().copied()) {
        let at: Vec<&Value> = rows
            .iter()
            .copied()
            .filter(|r| r["threads"].as_u64() == Some(t))
            .collect();
        let r = of(at.iter().copied(), "ratio_median");
        let conns = of(at.iter().copied(), "connections");
        let goal = match (t >= 1024, r, conns) {
            (true, Some(r), Some(c)) => verdict(Some(
                r.median >= MANY_RATIO_GOAL && c.max <= MANY_CONNECTIONS_GOAL,
            )),
            _ => "",
        };
        let _ = writeln!(
            w,
            "| {t} | {} | {} | {} | {} | {} | {} | {goal} |",
            cell(of(at.iter().copied(), "floor_pairs_per_s")),
            cell(of(at.iter().copied(), "pairs_per_s")),
            ratio_of(r),
            cell(of(at.iter().copied(), "floor_connections")),
            cell(conns),
            cell(of(at.iter().copied(), "cpu_us_per_pair")),
        );
    }
    let _ = writeln!(w);
}

/// Scenario 4's curve: one row per size.
fn watchdog_curve(w: &mut String, d: &Data, runs: &[Value]) {
    if runs.is_empty() {
        return;
    }
    let lease = d.m("s4_scale_lease_ms");
    let _ = writeln!(
        w,
        "### Watchdog curve (scenario 4, redisson-lock alone)\n\n\
         One client takes the locks on {} threads in watchdog mode (watchdog timeout {lease} ms: \
         a tick every third of it) and holds them for {}/1000 renewal periods while the observer \
         cuts the server's script calls into ticks, as above (polling every 5 ms, and every \
         1 ms up to 10,000 locks, whose ~50 ms tick two 5 ms polls would overstate by up to a \
         fifth). *Redis per lock* is the growth of \
         Redis's `used_memory` while the locks were taken ÷ locks; *beyond Redis* is the \
         client's live heap per lock less that. Goals: wall ÷ Redis ≤ {TICK_RATIO_GOAL}×, \
         ≤ {CALLS_PER_TICK_GOAL} calls per tick, 0 leases lost, ≤ {BYTES_BEYOND_REDIS_GOAL} \
         bytes beyond Redis.\n\n\
         | locks | ticks (timed) | calls per tick | tick wall (ms) | Redis per tick (ms) | wall ÷ Redis | leases lost | taking (s) | client RSS per lock (B) | client heap per lock (B) | Redis per lock (B) | beyond Redis (B) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|",
        d.m("s4_acquire_threads"),
        d.m("s4_scale_window_permille"),
    );
    let mut sizes: Vec<u64> = runs.iter().filter_map(|r| r["locks"].as_u64()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for n in sizes {
        let at: Vec<&Value> = runs
            .iter()
            .filter(|r| r["locks"].as_u64() == Some(n))
            .collect();
        let lost: u64 = at.iter().filter_map(|r| r["leases_lost"].as_u64()).sum();
        let beyond = Stat::of(at.iter().filter_map(|r| {
            Some(r["heap_bytes_per_lock"].as_f64()? - r["redis_bytes_per_lock"].as_f64()?)
        }));
        let _ = writeln!(
            w,
            "| {} | {} ({}) | {} | {} | {} | {} | {lost} | {} | {} | {} | {} | {} |",
            fmt(n as f64),
            cell(of(at.iter().copied(), "ticks")),
            cell(of(at.iter().copied(), "ticks_timed")),
            cell(of(at.iter().copied(), "calls_per_tick_median")),
            cell(of(at.iter().copied(), "tick_ms_median")),
            cell(of(at.iter().copied(), "tick_server_ms_median")),
            ratio_of(of(at.iter().copied(), "tick_wall_per_server_median")),
            cell(of(at.iter().copied(), "acquire_s")),
            cell(of(at.iter().copied(), "bytes_per_lock")),
            cell(of(at.iter().copied(), "heap_bytes_per_lock")),
            cell(of(at.iter().copied(), "redis_bytes_per_lock")),
            cell(beyond),
        );
    }
    let _ = writeln!(w);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn data(records: Vec<Value>) -> Data {
        Data {
            records,
            machine: BTreeMap::from([
                ("floor".to_owned(), "true".to_owned()),
                ("proxy_delay_us".to_owned(), "250".to_owned()),
            ]),
        }
    }

    fn targets_of(d: &Data) -> Vec<(String, String, Option<bool>)> {
        let mut out = Vec::new();
        crate::report::scale_targets::targets(d, &mut |name, _goal: &str, measured, met| {
            out.push((name, measured, met))
        });
        out
    }

    #[test]
    fn proxied_rows_and_the_thread_curve_meet_or_miss_their_goals() {
        let mut records = vec![json!({"scenario": "proxy_ping", "kind": "proxy_ping",
            "rep": 1, "samples": 10, "direct_p50_us": 50.0, "direct_p99_us": 90.0,
            "via": [{"delay_us": 0, "rtt_p50_us": 70.0, "rtt_p99_us": 120.0,
                     "overhead_p50_us": 20.0, "overhead_p99_us": 30.0}]})];
        for (rep, r1, p99) in [(1, 0.99, 1000.0), (2, 0.95, 1200.0), (3, 0.98, 1050.0)] {
            records.push(
                json!({"scenario": "proxied_paired", "threads": 1, "rep": rep,
                "contender": "crate", "ratio_median": r1, "pairs_per_s": 600.0,
                "floor_pairs_per_s": 610.0, "connections": 1}),
            );
            for (c, v) in [("floor", 1000.0), ("crate", p99)] {
                records.push(json!({"scenario": "proxied_contended", "contender": c,
                    "rep": rep, "handoff_p50_us": v / 2.0, "handoff_p99_us": v,
                    "total_ms": 900.0}));
            }
            records.push(
                json!({"scenario": "paired_many", "threads": 1024, "rep": rep,
                "contender": "crate", "ratio_median": 1.6, "connections": 4,
                "floor_connections": 1024}),
            );
        }
        let d = data(records);
        let t = targets_of(&d);
        // Median of 0.99, 0.95, 0.98 is 0.98: met; the p99 ratios 1.0, 1.2,
        // 1.05: median 1.05, met; 1.6x on 4 connections: met.
        assert_eq!(t.len(), 3, "{t:?}");
        assert!(t[0].0.starts_with("Scenario 9 (1 thread, 250 µs"), "{t:?}");
        assert_eq!(t.iter().map(|r| r.2).collect::<Vec<_>>(), [Some(true); 3]);
        assert!(t[2].1.ends_with("4 connections"), "{t:?}");
        let mut md = String::new();
        section(&mut md, &d, "b.svg");
        assert!(md.contains("### The delay proxy's own cost"), "{md}");
        assert!(
            md.contains("| through the proxy, 0 µs each way | 70 | 120 | 20 | 30 |"),
            "{md}"
        );
        assert!(md.contains("| 1024 |"), "{md}");
    }

    #[test]
    fn nothing_measured_renders_nothing() {
        let d = data(vec![json!({"scenario": "paired", "threads": 1, "rep": 1})]);
        let mut md = String::new();
        section(&mut md, &d, "b.svg");
        assert!(md.is_empty());
        assert!(targets_of(&d).is_empty());
    }
}
