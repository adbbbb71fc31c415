//! Issue 36 (scale): the delay proxy's own cost and the paired rows through
//! it (scenario 9), the thread curve to 1,024 (scenario 10) and scenario 4's
//! watchdog curve (10k, 100k, 1M locks). Every number is the median over the
//! run's repetitions (a single run: its value) with [min–max] when more.

use std::fmt::Write as _;

use serde_json::Value;

use super::stats::{Stat, cell, fmt, ratio, ratio_cell, stat};
use super::{Data, label, present, watchdog};

/// The goals.
const PROXIED_UNCONTENDED_GOAL: f64 = 0.97;
const PROXIED_HANDOFF_P99_GOAL: f64 = 1.1;
const MANY_RATIO_GOAL: f64 = 1.5;
const MANY_CONNECTIONS_GOAL: f64 = 6.0;
const TICK_RATIO_GOAL: f64 = 1.25;
const CALLS_PER_TICK_GOAL: f64 = 1_000.0;
const BYTES_BEYOND_REDIS_GOAL: f64 = 300.0;

fn records<'a>(d: &'a Data, scenario: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    d.records.iter().filter(move |r| r["scenario"] == scenario)
}

/// A statistic of `key` over `rs`.
fn of<'a>(rs: impl IntoIterator<Item = &'a Value>, key: &str) -> Option<Stat> {
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
fn thread_counts<'a>(rs: impl IntoIterator<Item = &'a Value>) -> Vec<u64> {
    let mut t: Vec<u64> = rs
        .into_iter()
        .filter_map(|r| r["threads"].as_u64())
        .collect();
    t.sort_unstable();
    t.dedup();
    t
}

/// The section of `BENCHMARKS.md`, when the run measured any of it.
pub fn section(w: &mut String, d: &Data) {
    let curve = watchdog::runs_of(d, "watchdog_scale");
    let any = [
        "proxy_ping",
        "proxied_paired",
        "proxied_contended",
        "paired_many",
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
    proxy(w, d);
    proxied(w, d);
    many(w, d);
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
             rate of the same repetitions). Goal: the crate ≥ {PROXIED_UNCONTENDED_GOAL}× the \
             floor.\n\n\
             | threads | floor (pairs/s) | redisson-lock (pairs/s) | crate ÷ floor | goal | crate connections | Redisson (pairs/s) | Redisson ÷ floor |\n\
             |---|---|---|---|---|---|---|---|",
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
                "| {t} | {} | {} | {} | {} | {} | {} | {} |",
                cell(floor),
                cell(of(at.iter().copied(), "pairs_per_s")),
                ratio_of(ratio),
                verdict(ratio.map(|r| r.median >= PROXIED_UNCONTENDED_GOAL)),
                cell(of(at.iter().copied(), "connections")),
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
         cuts the server's script calls into ticks, as above. *Redis per lock* is the growth of \
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
