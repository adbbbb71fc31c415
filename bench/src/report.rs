//! Turns the raw JSON lines of one `scripts/bench.sh` run into
//! `results.json`, `BENCHMARKS.md` and one SVG chart.
//!
//! Every number is a median over the run's repetitions with its [min-max];
//! every ratio is taken per repetition (contenders of one repetition ran back
//! to back) and then summarised the same way.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::common::Args;

const CONTENDERS: [&str; 4] = ["floor", "crate", "rslock", "redisson"];

fn color(contender: &str) -> &'static str {
    match contender {
        "floor" => "#868e96",
        "crate" => "#e8590c",
        "rslock" => "#1c7ed6",
        _ => "#2b8a3e",
    }
}

#[derive(Clone, Copy, Debug)]
struct Stat {
    median: f64,
    min: f64,
    max: f64,
    n: usize,
}

impl Stat {
    fn of(values: impl IntoIterator<Item = f64>) -> Option<Stat> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Stat {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }

    fn json(&self) -> Value {
        json!({"median": self.median, "min": self.min, "max": self.max, "n": self.n})
    }
}

/// contender -> rep -> value
type Series = BTreeMap<String, BTreeMap<u64, f64>>;

struct Data {
    records: Vec<Value>,
    machine: BTreeMap<String, String>,
}

impl Data {
    /// One metric of the records that `pred` selects, by contender and rep.
    fn series(&self, pred: impl Fn(&Value) -> bool, metric: &str) -> Series {
        let mut out = Series::new();
        for r in self.records.iter().filter(|r| pred(r)) {
            let (Some(c), Some(v)) = (r["contender"].as_str(), r[metric].as_f64()) else {
                continue;
            };
            let rep = r["rep"].as_u64().unwrap_or(0);
            out.entry(c.to_owned()).or_default().insert(rep, v);
        }
        out
    }

    fn m(&self, key: &str) -> &str {
        self.machine.get(key).map_or("?", String::as_str)
    }
}

fn stat(series: &Series, contender: &str) -> Option<Stat> {
    series
        .get(contender)
        .and_then(|m| Stat::of(m.values().copied()))
}

/// Short labels for the chart: 15,054 -> 15.1k.
fn compact(v: f64) -> String {
    if v.abs() >= 10_000.0 {
        format!("{:.1}k", v / 1000.0)
    } else {
        fmt(v)
    }
}

/// Per-repetition ratio `a / b`, summarised.
fn ratio(series: &Series, a: &str, b: &str) -> Option<Stat> {
    let (sa, sb) = (series.get(a)?, series.get(b)?);
    Stat::of(
        sa.iter()
            .filter_map(|(rep, va)| sb.get(rep).map(|vb| va / vb)),
    )
}

fn fmt(v: f64) -> String {
    let a = v.abs();
    if a < 10_000.0 && (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else if a >= 10_000.0 {
        let s = format!("{:.0}", v);
        // thousands separators
        let (sign, digits) = s.strip_prefix('-').map_or(("", s.as_str()), |d| ("-", d));
        let mut out = String::new();
        for (i, ch) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(ch);
        }
        format!("{sign}{out}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn cell(s: Option<Stat>) -> String {
    match s {
        Some(s) if s.n > 1 => format!("{} [{}–{}]", fmt(s.median), fmt(s.min), fmt(s.max)),
        Some(s) => fmt(s.median),
        None => "–".into(),
    }
}

fn ratio_cell(s: Option<Stat>) -> String {
    match s {
        Some(s) if s.n > 1 => format!("**{:.2}×** [{:.2}–{:.2}]", s.median, s.min, s.max),
        Some(s) => format!("**{:.2}×**", s.median),
        None => "–".into(),
    }
}

fn label(d: &Data, c: &str) -> String {
    match c {
        "floor" => "floor (raw Lua, 1 conn/thread)".into(),
        "crate" => format!("**redisson-lock {}**", d.m("crate_version")),
        "rslock" => format!("rslock {}", d.m("rslock")),
        "redisson" => format!("Redisson {} (Java)", d.m("redisson")),
        other => other.into(),
    }
}

fn present(series: &Series) -> Vec<&'static str> {
    CONTENDERS
        .iter()
        .copied()
        .filter(|c| series.contains_key(*c))
        .collect()
}

pub fn run(args: &Args) -> Result<()> {
    let raw_path = args.str("raw")?;
    let text = std::fs::read_to_string(raw_path).with_context(|| format!("read {raw_path}"))?;
    let records: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["kind"] != "process")
        .collect();
    let mut machine = BTreeMap::new();
    if let Ok(text) = std::fs::read_to_string(args.str_or("machine", "")) {
        for line in text.lines() {
            if let Some((k, v)) = line.split_once('\t') {
                machine.insert(k.to_owned(), v.to_owned());
            }
        }
    }
    let data = Data { records, machine };
    let watchdog = watchdog_runs(&data);
    let soak = data
        .records
        .iter()
        .rfind(|r| r["scenario"] == "soak")
        .cloned();
    let targets = targets(&data, &watchdog, soak.as_ref());

    // results.json
    let mut summary = serde_json::Map::new();
    for (key, series) in summary_series(&data) {
        let mut per = serde_json::Map::new();
        for c in present(&series) {
            let mut entry = json!({ "value": stat(&series, c).map(|s| s.json()) });
            if series.contains_key("floor") {
                entry["ratio_to_floor"] = json!(ratio(&series, c, "floor").map(|s| s.json()));
            }
            per.insert(c.into(), entry);
        }
        summary.insert(key, Value::Object(per));
    }
    let results = json!({
        "machine": data.machine,
        "summary": summary,
        "watchdog": watchdog,
        "soak": soak,
        "targets": targets,
        "raw": data.records,
    });
    let json_path = args.str("json")?;
    std::fs::write(json_path, serde_json::to_string_pretty(&results)?)?;

    let svg = chart(&data, &watchdog);
    std::fs::write(args.str("svg")?, svg)?;
    let md = markdown(
        &data,
        &watchdog,
        soak.as_ref(),
        &targets,
        args.str("svg-link")?,
        args.str_or("analysis", ""),
    );
    std::fs::write(args.str("md")?, md)?;
    Ok(())
}

fn is(scenario: &'static str) -> impl Fn(&Value) -> bool {
    move |r: &Value| r["scenario"] == scenario
}

fn scaled(threads: u64) -> impl Fn(&Value) -> bool {
    move |r: &Value| r["scenario"] == "scaled" && r["threads"].as_u64() == Some(threads)
}

fn contended(procs: u64) -> impl Fn(&Value) -> bool {
    move |r: &Value| r["scenario"] == "contended" && r["procs"].as_u64() == Some(procs)
}

fn summary_series(d: &Data) -> Vec<(String, Series)> {
    let mut out = vec![
        (
            "uncontended.pairs_per_s".into(),
            d.series(is("uncontended"), "pairs_per_s"),
        ),
        (
            "uncontended.p50_us".into(),
            d.series(is("uncontended"), "p50_us"),
        ),
        (
            "uncontended.p99_us".into(),
            d.series(is("uncontended"), "p99_us"),
        ),
    ];
    for t in [4, 16] {
        out.push((
            format!("scaled{t}.pairs_per_s"),
            d.series(scaled(t), "pairs_per_s"),
        ));
    }
    for p in [1, 2] {
        for m in [
            "total_ms",
            "handoff_p50_us",
            "handoff_p99_us",
            "longest_wait_ms",
            "same_holder_fraction",
        ] {
            out.push((format!("contended_{p}x4.{m}"), d.series(contended(p), m)));
        }
    }
    out
}

// ------------------------------------------------------------ watchdog

/// Holder and observer records of scenario 4, joined per run.
fn watchdog_runs(d: &Data) -> Vec<Value> {
    let mut runs = Vec::new();
    for holder in d
        .records
        .iter()
        .filter(|r| r["scenario"] == "watchdog" && r["kind"] == "holder")
    {
        let Some(obs) = d.records.iter().find(|r| {
            r["scenario"] == "watchdog"
                && r["kind"] == "observer"
                && r["run_id"] == holder["run_id"]
        }) else {
            continue;
        };
        let ticks = obs["ticks"].as_array().cloned().unwrap_or_default();
        let tick_calls: Vec<f64> = ticks.iter().filter_map(|t| t["calls"].as_f64()).collect();
        let tick_dur: Vec<f64> = ticks.iter().filter_map(|t| t["dur_ms"].as_f64()).collect();
        let tick_server: Vec<f64> = ticks
            .iter()
            .filter_map(|t| t["server_ms"].as_f64())
            .collect();
        let window_s = holder["window_ms"].as_f64().unwrap_or(1.0) / 1e3;
        let period_s = holder["watchdog_ms"].as_f64().unwrap_or(3e3) / 3e3;
        let cpu = holder["cpu_ms_window"].as_f64().unwrap_or(f64::NAN);
        let locks = holder["locks"].as_u64().unwrap_or(0);
        runs.push(json!({
            "contender": holder["contender"],
            "rep": holder["rep"],
            "run_id": holder["run_id"],
            "locks": locks,
            "watchdog_ms": holder["watchdog_ms"],
            "ticks": ticks.len(),
            "calls_in_window": obs["calls"],
            "calls_per_s": obs["calls_per_s"],
            "calls_per_tick_median": Stat::of(tick_calls.iter().copied()).map(|s| s.median),
            "calls_per_tick_max": tick_calls.iter().copied().fold(f64::NAN, f64::max),
            "tick_ms_median": Stat::of(tick_dur).map(|s| s.median),
            "tick_server_ms_median": Stat::of(tick_server).map(|s| s.median),
            "cpu_ms_per_s": cpu / window_s,
            "cpu_ms_per_period": cpu / (window_s / period_s),
            "bytes_per_lock": holder["bytes_per_lock"],
            "heap_bytes_per_lock": holder["heap_bytes_per_lock"],
            "keys_alive": holder["keys_alive"],
            "lost_flagged": holder["lost_flagged"],
            "acquire_s": holder["acquire_s"],
            "renewal": holder["renewal"],
        }));
    }
    runs
}

fn wd_series(runs: &[Value], metric: &str) -> Series {
    let mut out = Series::new();
    for r in runs {
        if let (Some(c), Some(v)) = (r["contender"].as_str(), r[metric].as_f64()) {
            out.entry(c.to_owned())
                .or_default()
                .insert(r["rep"].as_u64().unwrap_or(0), v);
        }
    }
    out
}

// ------------------------------------------------------------ targets

fn targets(d: &Data, wd: &[Value], soak: Option<&Value>) -> Vec<Value> {
    let mut out = Vec::new();
    let mut push = |name: String, goal: &str, measured: String, met: Option<bool>| {
        out.push(json!({"target": name, "goal": goal, "measured": measured, "met": met}));
    };
    let s1 = d.series(is("uncontended"), "pairs_per_s");
    let r = ratio(&s1, "crate", "floor");
    push(
        "Scenario 1: uncontended pairs/s vs the floor".into(),
        "≥ 0.95×",
        r.map_or("–".into(), |s| {
            format!("{:.2}× [{:.2}–{:.2}]", s.median, s.min, s.max)
        }),
        r.map(|s| s.median >= 0.95),
    );
    for p in [1u64, 2] {
        let what = if p == 1 {
            "4 threads"
        } else {
            "2 processes × 4 threads"
        };
        let h = d.series(contended(p), "handoff_p99_us");
        let r = ratio(&h, "crate", "floor");
        push(
            format!("Scenario 3 ({what}): hand-off p99 vs the floor's pub/sub hand-off"),
            "≤ 1.2×",
            r.map_or("–".into(), |s| {
                format!("{:.2}× [{:.2}–{:.2}]", s.median, s.min, s.max)
            }),
            r.map(|s| s.median <= 1.2),
        );
        let w = d.series(contended(p), "longest_wait_ms");
        let r = ratio(&w, "rslock", "crate");
        push(
            format!("Scenario 3 ({what}): longest single wait, rslock's ÷ ours"),
            "≥ 10×",
            r.map_or("–".into(), |s| {
                format!("{:.1}× [{:.1}–{:.1}]", s.median, s.min, s.max)
            }),
            r.map(|s| s.median >= 10.0),
        );
        let t = d.series(contended(p), "total_ms");
        let r = ratio(&t, "crate", "redisson");
        push(
            format!("Scenario 3 ({what}): total time vs Redisson"),
            "≤ 1.0×",
            r.map_or("–".into(), |s| {
                format!("{:.2}× [{:.2}–{:.2}]", s.median, s.min, s.max)
            }),
            r.map(|s| s.median <= 1.0),
        );
    }
    let ours: Vec<&Value> = wd.iter().filter(|r| r["contender"] == "crate").collect();
    if !ours.is_empty() {
        let locks = ours[0]["locks"].as_u64().unwrap_or(0);
        let limit = locks.div_ceil(100) as f64;
        let worst = ours
            .iter()
            .filter_map(|r| r["calls_per_tick_max"].as_f64())
            .fold(0.0, f64::max);
        let med = Stat::of(
            ours.iter()
                .filter_map(|r| r["calls_per_tick_median"].as_f64()),
        );
        push(
            format!("Scenario 4: renewal round trips per tick, {locks} locks"),
            &format!("≤ {limit}"),
            format!(
                "median {}, worst tick {} ({} runs)",
                med.map_or("–".into(), |s| fmt(s.median)),
                fmt(worst),
                ours.len()
            ),
            Some(worst <= limit && worst > 0.0),
        );
        let lost: u64 = ours
            .iter()
            .map(|r| {
                r["lost_flagged"].as_u64().unwrap_or(0)
                    + locks.saturating_sub(r["keys_alive"].as_u64().unwrap_or(0))
            })
            .sum();
        push(
            "Scenario 4: leases lost while holding".into(),
            "0",
            format!("{lost} (guards flagged lost + keys gone, all runs)"),
            Some(lost == 0),
        );
    }
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

// ------------------------------------------------------------ markdown

fn markdown(
    d: &Data,
    wd: &[Value],
    soak: Option<&Value>,
    targets: &[Value],
    svg_link: &str,
    analysis_path: &str,
) -> String {
    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(w, "# Benchmarks\n");
    let _ = writeln!(
        w,
        "Generated by `{}` on {} ({} run, {} repetitions, contenders interleaved within each \
         repetition). All numbers: **median [min–max]** over the repetitions; ratios are taken \
         per repetition, then summarised the same way.\n",
        d.m("command"),
        d.m("date"),
        d.m("mode"),
        d.m("reps"),
    );
    let _ = writeln!(w, "![Benchmark summary]({svg_link})\n");

    let _ = writeln!(w, "## Targets\n");
    let _ = writeln!(w, "| target | goal | measured | met |\n|---|---|---|---|");
    for t in targets {
        let met = match t["met"].as_bool() {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "n/a",
        };
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} |",
            t["target"].as_str().unwrap_or(""),
            t["goal"].as_str().unwrap_or(""),
            t["measured"].as_str().unwrap_or(""),
            met
        );
    }

    let _ = writeln!(w, "\n## Setup\n");
    let _ = writeln!(
        w,
        "- **Machine:** {}, {} vCPUs, Linux {}; {}.\n\
         - **Redis:** {}, started by the script on a free loopback port with no persistence \
           (`--save '' --appendonly no`), flushed before every measurement.\n\
         - **Pinning:** {}. Loopback round trips on this VM are bimodal (a client and the server \
           on the same vCPU answer several times faster than across vCPUs), so every contender \
           gets the same placement.\n\
         - **Contenders:** the *floor* is the crate's own `lua/rlock_acquire.lua` and \
           `lua/rlock_unlock.lua` sent with plain redis-rs `Script` calls on one connection per \
           thread (no pool, no watchdog, no shared subscriber; when contended, each thread keeps \
           its own subscription and retries after a message or the TTL). *redisson-lock* is used \
           as a user would (`client.lock(name).lock()`, watchdog mode, guard). *rslock* {} \
           (Redlock, `SET NX PX` + Lua release) runs on one current-thread tokio runtime and one \
           `LockManager` per thread, driven with `block_on`; its waiters retry after a random \
           0–200 ms sleep (its default). *Redisson* {} runs in its own JVM ({}) with default \
           settings, `lock()`/`unlock()` (watchdog mode).\n\
         - **Versions:** rslock and Redisson are the newest releases on crates.io and Maven \
           Central when this benchmark was written (`bench/Cargo.toml` pins rslock; \
           `REDISSON_VERSION` overrides the interop pom's Redisson).\n\
         - **Toolchain:** {}; commit `{}`.\n\
         - **Load:** load average {} at the start, {} at the end. {}\n",
        d.m("cpu"),
        d.m("nproc"),
        d.m("kernel"),
        d.m("memory"),
        d.m("redis"),
        d.m("pinning"),
        d.m("rslock"),
        d.m("redisson"),
        d.m("java"),
        d.m("rustc"),
        d.m("commit"),
        d.m("load_start"),
        d.m("load_end"),
        d.m("note"),
    );

    // Scenario 1
    let _ = writeln!(
        w,
        "## 1. Uncontended: one thread, lock + unlock pairs on one name\n\n\
         {} ms of pairs after {} warm-up pairs, per process.\n",
        d.m("s1_duration_ms"),
        d.m("s1_warmup"),
    );
    let pairs = d.series(is("uncontended"), "pairs_per_s");
    let p50 = d.series(is("uncontended"), "p50_us");
    let p99 = d.series(is("uncontended"), "p99_us");
    let cpu = d.series(is("uncontended"), "cpu_us_per_pair");
    let _ = writeln!(
        w,
        "| contender | pairs/s | × floor | pair p50 (µs) | pair p99 (µs) | client CPU per pair (µs) |\n|---|---|---|---|---|---|"
    );
    for c in present(&pairs) {
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} |",
            label(d, c),
            cell(stat(&pairs, c)),
            ratio_cell(ratio(&pairs, c, "floor")),
            cell(stat(&p50, c)),
            cell(stat(&p99, c)),
            cell(stat(&cpu, c)),
        );
    }

    // Scenario 2
    let _ = writeln!(
        w,
        "\n## 2. Uncontended, scaled: N threads on distinct names\n\n\
         Total pairs/s over {} ms, all threads started together. All client threads share one \
         vCPU, so this measures per-pair client cost and server throughput, not parallel speed-up.\n",
        d.m("s2_duration_ms"),
    );
    let _ = writeln!(
        w,
        "| contender | 4 threads: pairs/s | × floor | 16 threads: pairs/s | × floor |\n|---|---|---|---|---|"
    );
    let s4 = d.series(scaled(4), "pairs_per_s");
    let s16 = d.series(scaled(16), "pairs_per_s");
    for c in present(&s4) {
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} |",
            label(d, c),
            cell(stat(&s4, c)),
            ratio_cell(ratio(&s4, c, "floor")),
            cell(stat(&s16, c)),
            ratio_cell(ratio(&s16, c, "floor")),
        );
    }

    // Scenario 3
    let _ = writeln!(
        w,
        "\n## 3. Contended: one hot name\n\n\
         {} lock/unlock per thread with a {} µs critical section (a sleep), after {} warm-up \
         acquisitions per thread on another shared name. *Hand-off* is the time from the start \
         of a release to the next holder's acquire returning (whoever that is; the *other thread* \
         column only counts hand-offs to a different thread). *Same holder* is the share of \
         releases after which the releasing thread itself took the lock again. *Longest wait* is \
         the longest single `lock()` call (starvation). Timestamps are `CLOCK_MONOTONIC` \
         (`Instant` in Rust, `System.nanoTime()` in Java), comparable across processes.\n",
        d.m("s3_iterations"),
        d.m("s3_hold_us"),
        d.m("s3_warmup"),
    );
    for p in [1u64, 2] {
        let title = if p == 1 {
            "4 threads in one process"
        } else {
            "2 processes × 4 threads"
        };
        let f = contended(p);
        let total = d.series(&f, "total_ms");
        let hp50 = d.series(&f, "handoff_p50_us");
        let hp99 = d.series(&f, "handoff_p99_us");
        let ho99 = d.series(&f, "handoff_other_p99_us");
        let same = d.series(&f, "same_holder_fraction");
        let longest = d.series(&f, "longest_wait_ms");
        let overlaps = d.series(&f, "overlaps");
        if total.is_empty() {
            continue;
        }
        let _ = writeln!(
            w,
            "### {title}\n\n| contender | total (ms) | hand-off p50 (µs) | hand-off p99 (µs) | p99 × floor | to other thread p99 (µs) | same holder | longest wait (ms) | overlaps |\n|---|---|---|---|---|---|---|---|---|"
        );
        for c in present(&total) {
            let _ = writeln!(
                w,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                label(d, c),
                cell(stat(&total, c)),
                cell(stat(&hp50, c)),
                cell(stat(&hp99, c)),
                ratio_cell(ratio(&hp99, c, "floor")),
                cell(stat(&ho99, c)),
                stat(&same, c).map_or("–".into(), |s| format!("{:.0}%", s.median * 100.0)),
                cell(stat(&longest, c)),
                overlaps
                    .get(c)
                    .map_or("–".into(), |m| format!("{}", m.values().sum::<f64>())),
            );
        }
        let _ = writeln!(w);
    }

    // Scenario 4
    let _ = writeln!(
        w,
        "## 4. Watchdog at scale\n\n\
         One client takes {} locks in watchdog mode (watchdog timeout {} ms, so one renewal \
         period is {} ms) and holds them for {} ms while `rlock-bench observe` polls \
         `INFO commandstats` every 5 ms on its own connection. Every successful EVAL/EVALSHA in \
         that window is a renewal (the acquisitions happened before it; a script's one-off \
         `NOSCRIPT` reply on its first run is not counted); bursts separated by \
         ≥ 100 ms of silence are ticks. *Tick time* is the burst's wall time as the poller saw \
         it (±5 ms); *server time* is Redis' own execution time for the burst. Client CPU and \
         RSS come from `getrusage`/`/proc/self/statm` (Java: `getProcessCpuTime`, statm). \
         The floor has no watchdog and is not run here. rslock has no watchdog either: the \
         closest it offers is `LockManager::using`, which extends each lock on its own timer \
         (at validity − 500 ms), so it is shown with that.\n",
        d.m("s4_locks"),
        d.m("s4_watchdog_ms"),
        d.m("s4_period_ms"),
        d.m("s4_window_ms"),
    );
    let _ = writeln!(
        w,
        "| contender | renewal round trips per tick | ticks in window | round trips/s | tick time (ms) | server time per tick (ms) | client CPU (ms per period) | client RSS per held lock (bytes) | leases lost |\n|---|---|---|---|---|---|---|---|---|"
    );
    let per_tick = wd_series(wd, "calls_per_tick_median");
    let ticks = wd_series(wd, "ticks");
    let per_s = wd_series(wd, "calls_per_s");
    let tick_ms = wd_series(wd, "tick_ms_median");
    let server_ms = wd_series(wd, "tick_server_ms_median");
    let cpu_p = wd_series(wd, "cpu_ms_per_period");
    let bpl = wd_series(wd, "bytes_per_lock");
    for c in present(&per_s) {
        let lost: u64 = wd
            .iter()
            .filter(|r| r["contender"] == c)
            .map(|r| {
                r["lost_flagged"].as_u64().unwrap_or(0)
                    + r["locks"]
                        .as_u64()
                        .unwrap_or(0)
                        .saturating_sub(r["keys_alive"].as_u64().unwrap_or(0))
            })
            .sum();
        let smeared = c == "rslock";
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            label(d, c),
            if smeared {
                format!(
                    "{} (one EXTEND per lock, each on its own timer)",
                    cell(stat(&per_tick, c))
                )
            } else {
                cell(stat(&per_tick, c))
            },
            cell(stat(&ticks, c)),
            cell(stat(&per_s, c)),
            cell(stat(&tick_ms, c)),
            cell(stat(&server_ms, c)),
            cell(stat(&cpu_p, c)),
            cell(stat(&bpl, c)),
            lost,
        );
    }
    let heap = wd_series(wd, "heap_bytes_per_lock");
    if let Some(h) = stat(&heap, "redisson") {
        let _ = writeln!(
            w,
            "\nRedisson's RSS per lock mixes in JVM heap sizing; its retained heap per held lock \
             (after `System.gc()`) was {} bytes.",
            cell(Some(h))
        );
    }

    // Soak
    if let Some(s) = soak {
        let _ = writeln!(
            w,
            "\n## Soak: {} lock/unlock cycles (redisson-lock only)\n\n\
             {} threads on {} names picked at random (so some acquisitions wait and subscribe), \
             {:.0} cycles/s over {:.0} s. Sampled from inside the process:\n",
            fmt(s["cycles"].as_f64().unwrap_or(0.0)),
            s["threads"],
            s["names"],
            s["cycles_per_s"].as_f64().unwrap_or(0.0),
            s["secs"].as_f64().unwrap_or(0.0),
        );
        let _ = writeln!(
            w,
            "| cycles | RSS (MiB) | live heap (MiB) | registered holds | subscribed channels | waiters | pooled connections |\n|---|---|---|---|---|---|---|"
        );
        let samples = s["samples"].as_array().cloned().unwrap_or_default();
        let step = (samples.len() / 10).max(1);
        for (i, x) in samples.iter().enumerate() {
            if i % step != 0 && i + 1 != samples.len() {
                continue;
            }
            let _ = writeln!(
                w,
                "| {} | {:.2} | {} | {} | {} | {} | {} |",
                fmt(x["cycles"].as_f64().unwrap_or(0.0)),
                x["rss_mb"].as_f64().unwrap_or(0.0),
                x["heap_mb"]
                    .as_f64()
                    .map_or("–".into(), |h| format!("{h:.2}")),
                x["registered_holds"],
                x["subscribed_channels"],
                x["waiters"],
                x["pooled_connections"],
            );
        }
        let _ = writeln!(
            w,
            "| after the run | – | – | {} | {} | {} | {} |\n\nUnlock latches left in Redis after the run: {}. \
             *Live heap* is what the process's Rust code holds (allocated and not yet freed since the \
             client was built), counted by the benchmark's global allocator; unlike RSS, \
             allocator fragmentation does not move it. Mid-run samples catch holds and waits in progress; what \
             matters is that they do not accumulate.",
            s["end_registered_holds"],
            s["end_subscribed_channels"],
            s["end_waiters"],
            s["end_pooled_connections"],
            s["latches_left"],
        );
    }

    if !analysis_path.is_empty()
        && let Ok(text) = std::fs::read_to_string(analysis_path)
    {
        let _ = writeln!(w, "\n{}", text.trim_end());
    }
    let _ = writeln!(
        w,
        "\n## Reproduce\n\n```sh\nscripts/bench.sh          # full run: {} repetitions, ~{} min; writes BENCHMARKS.md, docs/benchmarks.svg, target/bench/results.json\nscripts/bench.sh --quick  # reduced run, under 3 min; writes target/bench/quick/\n```\n\n\
         It needs `redis-server`, a Rust toolchain, and for Redisson a JDK 17+ and Maven \
         (installed with apt-get when run as root; Redisson is skipped with a note otherwise). \
         Raw per-process records: `target/bench/raw.jsonl`; everything summarised: \
         `target/bench/results.json`.",
        d.m("full_reps"),
        d.m("full_minutes"),
    );
    md
}

// ------------------------------------------------------------ chart

struct Bar {
    contender: &'static str,
    stat: Stat,
}

struct Panel<'a> {
    title: &'a str,
    groups: Vec<(String, Vec<Bar>)>,
    log: bool,
    unit: &'a str,
}

fn bars(series: &Series) -> Vec<Bar> {
    CONTENDERS
        .iter()
        .filter_map(|c| stat(series, c).map(|stat| Bar { contender: c, stat }))
        .collect()
}

fn chart(d: &Data, wd: &[Value]) -> String {
    let panels = [
        Panel {
            title: "Uncontended lock+unlock pairs/s (higher is better)",
            groups: vec![
                (
                    "1 thread".into(),
                    bars(&d.series(is("uncontended"), "pairs_per_s")),
                ),
                (
                    "4 threads".into(),
                    bars(&d.series(scaled(4), "pairs_per_s")),
                ),
                (
                    "16 threads".into(),
                    bars(&d.series(scaled(16), "pairs_per_s")),
                ),
            ],
            log: false,
            unit: "",
        },
        Panel {
            title: "Contended hand-off p99, µs (log; lower is better)",
            groups: vec![
                (
                    "1 proc × 4 thr".into(),
                    bars(&d.series(contended(1), "handoff_p99_us")),
                ),
                (
                    "2 procs × 4 thr".into(),
                    bars(&d.series(contended(2), "handoff_p99_us")),
                ),
            ],
            log: true,
            unit: "",
        },
        Panel {
            title: "Contended: longest single wait, ms (log; lower is better)",
            groups: vec![
                (
                    "1 proc × 4 thr".into(),
                    bars(&d.series(contended(1), "longest_wait_ms")),
                ),
                (
                    "2 procs × 4 thr".into(),
                    bars(&d.series(contended(2), "longest_wait_ms")),
                ),
            ],
            log: true,
            unit: "",
        },
        Panel {
            title: "Holding 10k locks: round trips per renewal (log; lower is better)",
            groups: vec![(
                "10,000 locks, watchdog timeout 3 s".into(),
                bars(&wd_series(wd, "calls_per_tick_median")),
            )],
            log: true,
            unit: "",
        },
    ];
    let (width, height) = (1100.0, 720.0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="20" y="30" font-size="20" font-weight="bold">redisson-lock vs the raw-script floor, rslock and Redisson</text>"#
    );
    let _ = writeln!(
        s,
        r##"<text x="20" y="52" font-size="13" fill="#495057">{} · {} vCPUs · Redis {} · server pinned to one vCPU, clients to the other · bars: median of {} repetitions, whiskers: min–max</text>"##,
        xml(d.m("cpu")),
        xml(d.m("nproc")),
        xml(d.m("redis")),
        xml(d.m("reps")),
    );
    // legend
    let mut lx = 20.0;
    for c in CONTENDERS {
        let name = match c {
            "floor" => "floor (raw Lua)".to_string(),
            "crate" => "redisson-lock (this crate)".to_string(),
            "rslock" => format!("rslock {}", d.m("rslock")),
            _ => format!("Redisson {}", d.m("redisson")),
        };
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="66" width="14" height="14" fill="{}"/><text x="{}" y="78" font-size="13">{}</text>"#,
            color(c),
            lx + 20.0,
            xml(&name)
        );
        lx += 40.0 + name.len() as f64 * 7.2;
    }
    let (pw, ph) = (520.0, 290.0);
    for (i, panel) in panels.iter().enumerate() {
        let x = 20.0 + (i % 2) as f64 * (pw + 40.0);
        let y = 100.0 + (i / 2) as f64 * (ph + 20.0);
        draw_panel(&mut s, panel, x, y, pw, ph);
    }
    s.push_str("</svg>\n");
    s
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn draw_panel(s: &mut String, p: &Panel, x: f64, y: f64, w: f64, h: f64) {
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
        x,
        y + 14.0,
        xml(p.title)
    );
    let (left, top, bottom) = (x + 60.0, y + 30.0, y + h - 30.0);
    let right = x + w;
    let all: Vec<f64> = p
        .groups
        .iter()
        .flat_map(|(_, b)| {
            b.iter()
                .flat_map(|b| [b.stat.max, b.stat.min, b.stat.median])
        })
        .filter(|v| *v > 0.0)
        .collect();
    if all.is_empty() {
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" font-size="13" fill="#868e96">no data</text>"##,
            left,
            (top + bottom) / 2.0
        );
        return;
    }
    let vmax = all.iter().copied().fold(0.0, f64::max);
    let vmin = all.iter().copied().fold(f64::MAX, f64::min);
    let (lo, hi) = if p.log {
        // A decade below the smallest bar, so that it has a height, and
        // room above the tallest one for its label.
        let lo = 10f64.powf((vmin * 0.99).log10().floor());
        (lo, 10f64.powf((vmax * 1.2).log10().ceil()).max(lo * 10.0))
    } else {
        (0.0, nice_ceil(vmax * 1.1))
    };
    let ypos = |v: f64| -> f64 {
        let f = if p.log {
            (v.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10())
        } else {
            (v - lo) / (hi - lo)
        };
        bottom - f * (bottom - top)
    };
    // grid and axis labels
    let ticks: Vec<f64> = if p.log {
        let mut t = Vec::new();
        let mut v = lo;
        while v <= hi * 1.0001 {
            t.push(v);
            v *= 10.0;
        }
        t
    } else {
        (0..=4).map(|i| hi * i as f64 / 4.0).collect()
    };
    for t in ticks {
        let yy = ypos(t);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{right}" y2="{yy:.1}" stroke="#e9ecef"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end" fill="#495057">{}{}</text>"##,
            left - 6.0,
            yy + 4.0,
            fmt(t),
            p.unit
        );
    }
    let _ = writeln!(
        s,
        r##"<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#495057"/>"##
    );
    let groups = p.groups.len().max(1) as f64;
    let gw = (right - left) / groups;
    for (gi, (name, bars)) in p.groups.iter().enumerate() {
        let gx = left + gi as f64 * gw;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" font-size="12" text-anchor="middle">{}</text>"#,
            gx + gw / 2.0,
            bottom + 18.0,
            xml(name)
        );
        let n = bars.len().max(1) as f64;
        let bw = ((gw - 24.0) / n).min(60.0);
        let start = gx + (gw - bw * n) / 2.0;
        for (bi, b) in bars.iter().enumerate() {
            let bx = start + bi as f64 * bw + 3.0;
            let inner = bw - 6.0;
            let top_y = ypos(b.stat.median);
            let _ = writeln!(
                s,
                r#"<rect x="{bx:.1}" y="{top_y:.1}" width="{inner:.1}" height="{:.1}" fill="{}"/>"#,
                (bottom - top_y).max(0.5),
                color(b.contender)
            );
            if b.stat.n > 1 {
                let cx = bx + inner / 2.0;
                let (y1, y2) = (ypos(b.stat.min), ypos(b.stat.max));
                let _ = writeln!(
                    s,
                    r##"<line x1="{cx:.1}" y1="{y1:.1}" x2="{cx:.1}" y2="{y2:.1}" stroke="#212529"/><line x1="{:.1}" y1="{y1:.1}" x2="{:.1}" y2="{y1:.1}" stroke="#212529"/><line x1="{:.1}" y1="{y2:.1}" x2="{:.1}" y2="{y2:.1}" stroke="#212529"/>"##,
                    cx - 4.0,
                    cx + 4.0,
                    cx - 4.0,
                    cx + 4.0
                );
            }
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="#212529">{}</text>"##,
                bx + inner / 2.0,
                ypos(b.stat.max) - 4.0,
                compact(b.stat.median)
            );
        }
    }
}

fn nice_ceil(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * mag >= v {
            return m * mag;
        }
    }
    10.0 * mag
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_per_repetition_ratios() {
        let s = Stat::of([3.0, 1.0, 2.0, 10.0]).expect("stat");
        assert_eq!((s.median, s.min, s.max, s.n), (2.5, 1.0, 10.0, 4));
        let mut series = Series::new();
        series.insert("floor".into(), [(1, 100.0), (2, 200.0)].into());
        series.insert("crate".into(), [(1, 90.0), (2, 220.0), (3, 5.0)].into());
        // Rep 3 has no floor to compare with.
        let r = ratio(&series, "crate", "floor").expect("ratio");
        assert_eq!((r.min, r.max, r.n), (0.9, 1.1, 2));
    }

    #[test]
    fn numbers_are_formatted_for_reading() {
        assert_eq!(fmt(3.0), "3");
        assert_eq!(fmt(1234.4), "1234");
        assert_eq!(fmt(12_345.6), "12,346");
        assert_eq!(fmt(1.234), "1.23");
        assert_eq!(compact(15_054.0), "15.1k");
    }
}
