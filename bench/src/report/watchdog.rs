//! Scenario 4, watchdog at scale: joins each holder's record with its
//! observer's, and renders the section and its targets.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::stats::{Series, Stat, cell, fmt, stat};
use super::{Data, label, present};

/// Holder and observer records of scenario 4, joined per run.
pub fn runs(d: &Data) -> Vec<Value> {
    runs_of(d, "watchdog")
}

/// [`runs`] of the records named `scenario` (`watchdog_scale`: issue 36's
/// sizes).
pub fn runs_of(d: &Data, scenario: &str) -> Vec<Value> {
    let mut runs = Vec::new();
    for holder in d
        .records
        .iter()
        .filter(|r| r["scenario"] == scenario && r["kind"] == "holder")
    {
        let Some(obs) = d.records.iter().find(|r| {
            r["scenario"] == scenario && r["kind"] == "observer" && r["run_id"] == holder["run_id"]
        }) else {
            continue;
        };
        let ticks = obs["ticks"].as_array().cloned().unwrap_or_default();
        // Ticks seen whole (runs from before the flag existed: all of them).
        let whole: Vec<&Value> = ticks
            .iter()
            .filter(|t| t["complete"].as_bool() != Some(false))
            .collect();
        let tick_calls: Vec<f64> = whole.iter().filter_map(|t| t["calls"].as_f64()).collect();
        let all_calls = ticks.iter().filter_map(|t| t["calls"].as_f64());
        let tick_dur: Vec<f64> = whole.iter().filter_map(|t| t["dur_ms"].as_f64()).collect();
        let tick_server: Vec<f64> = whole
            .iter()
            .filter_map(|t| t["server_ms"].as_f64())
            .collect();
        let tick_ratio = whole.iter().filter_map(|t| {
            let (dur, server) = (t["dur_ms"].as_f64()?, t["server_ms"].as_f64()?);
            (server > 0.0).then_some(dur / server)
        });
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
            "ticks_timed": whole.len(),
            "calls_in_window": obs["calls"],
            "calls_per_s": obs["calls_per_s"],
            "calls_per_tick_median": Stat::of(tick_calls.iter().copied()).map(|s| s.median),
            "calls_per_tick_max": all_calls.fold(f64::NAN, f64::max),
            "tick_ms_median": Stat::of(tick_dur).map(|s| s.median),
            "tick_server_ms_median": Stat::of(tick_server).map(|s| s.median),
            "tick_wall_per_server_median": Stat::of(tick_ratio).map(|s| s.median),
            "cpu_ms_per_s": cpu / window_s,
            "cpu_ms_per_period": cpu / (window_s / period_s),
            "bytes_per_lock": holder["bytes_per_lock"],
            "heap_bytes_per_lock": holder["heap_bytes_per_lock"],
            "heap_tick_peak_mb": holder["heap_tick_peak_mb"],
            "redis_bytes_per_lock": holder["redis_bytes_per_lock"],
            "keys_alive": holder["keys_alive"],
            "lost_flagged": holder["lost_flagged"],
            "leases_lost": lost(holder),
            "acquire_s": holder["acquire_s"],
            "acquire_threads": holder["acquire_threads"],
            "acquire_in_flight": holder["acquire_in_flight"],
            "renewal": holder["renewal"],
        }));
    }
    runs
}

/// Guards flagged lost plus keys gone at the end of the window.
fn lost(holder: &Value) -> u64 {
    holder["lost_flagged"].as_u64().unwrap_or(0)
        + holder["locks"]
            .as_u64()
            .unwrap_or(0)
            .saturating_sub(holder["keys_alive"].as_u64().unwrap_or(0))
}

/// One metric of the joined runs, by contender and rep.
pub fn series(runs: &[Value], metric: &str) -> Series {
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

/// How many locks `contender` held (the first run's; every run of a
/// contender holds the same number).
fn locks_of(runs: &[Value], contender: &str) -> Option<u64> {
    runs.iter()
        .find(|r| r["contender"] == contender)
        .and_then(|r| r["locks"].as_u64())
}

fn runs_text(n: usize) -> String {
    if n == 1 {
        "1 run".into()
    } else {
        format!("{n} runs")
    }
}

/// How many of the run's repetitions included this scenario.
fn reps_text(d: &Data) -> String {
    match (d.m("s4_reps"), d.m("reps")) {
        (s4, all) if s4 == all => format!("Every repetition runs it ({s4})"),
        ("1", all) => format!("It runs in the first of the {all} repetitions only"),
        (s4, all) => format!("It runs in the first {s4} of the {all} repetitions"),
    }
}

/// The scenario's rows of the targets table, for the crate's runs.
pub fn targets(runs: &[Value], push: &mut impl FnMut(String, &str, String, Option<bool>)) {
    let ours: Vec<&Value> = runs.iter().filter(|r| r["contender"] == "crate").collect();
    if ours.is_empty() {
        return;
    }
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
        format!(
            "Scenario 4: renewal script calls per tick, {} locks",
            fmt(locks as f64)
        ),
        &format!("≤ {}", fmt(limit)),
        format!(
            "median {}, worst tick {} ({})",
            med.map_or("–".into(), |s| fmt(s.median)),
            fmt(worst),
            runs_text(ours.len())
        ),
        Some(worst <= limit && worst > 0.0),
    );
    let ratio = Stat::of(
        ours.iter()
            .filter_map(|r| r["tick_wall_per_server_median"].as_f64()),
    );
    let wall = Stat::of(ours.iter().filter_map(|r| r["tick_ms_median"].as_f64()));
    let server = Stat::of(
        ours.iter()
            .filter_map(|r| r["tick_server_ms_median"].as_f64()),
    );
    push(
        format!(
            "Scenario 4: renewal tick wall time vs Redis' own execution time for it, {} locks",
            fmt(locks as f64)
        ),
        "≤ 1.5×",
        match ratio {
            Some(r) => format!(
                "{} (tick {} ms, Redis {} ms)",
                super::stats::ratio_text(Some(r), 2),
                wall.map_or("–".into(), |s| fmt(s.median)),
                server.map_or("–".into(), |s| fmt(s.median)),
            ),
            None => "– (no tick seen whole)".into(),
        },
        ratio.map(|r| r.median <= 1.5),
    );
    let lost: u64 = ours.iter().filter_map(|r| r["leases_lost"].as_u64()).sum();
    push(
        format!(
            "Scenario 4: leases lost while holding {} locks",
            fmt(locks as f64)
        ),
        "0",
        format!("{lost} (guards flagged lost + keys gone, all runs)"),
        Some(lost == 0),
    );
}

/// The scenario's section of `BENCHMARKS.md`.
pub fn section(w: &mut String, d: &Data, runs: &[Value]) {
    let crate_locks =
        locks_of(runs, "crate").map_or_else(|| d.m("s4_locks").to_owned(), |n| fmt(n as f64));
    let _ = writeln!(
        w,
        "## 4. Watchdog at scale\n\n\
         One client takes {crate_locks} locks in watchdog mode (watchdog timeout {} ms, so one \
         renewal period is {} ms) and holds them for {} ms while `rlock-bench observe` polls \
         `INFO commandstats` and `TIME` every 5 ms on its own connection. Every successful \
         EVAL/EVALSHA in that window is a renewal (the acquisitions happened before it; a \
         script's one-off `NOSCRIPT` reply on its first run is not counted); bursts separated by \
         ≥ 100 ms of silence are ticks. *Tick wall time* is a tick's duration by the server's own \
         clock, from the poll before its first renewal call to the poll after its last (so it \
         overstates by less than two polls, 10 ms); *Redis time* is Redis' own execution time for \
         the tick's calls (the `cmdstat_evalsha` `usec` delta over it); *wall ÷ Redis* is taken \
         per tick. Tick columns are the median tick of each run; a tick cut by either edge of the \
         window is counted in *ticks* but not timed. {}.\n\n\
         redisson-lock takes its locks on {} threads (`client.lock(name).lock()`, each thread \
         keeps its guards); Redisson with `lockAsync()` and releases them with `unlockAsync()`, {} \
         calls in flight from one thread (renewal is the same as after `lock()`); \
         rslock, which has no watchdog, with `LockManager::using`, which extends each lock on its \
         own timer (at validity − 500 ms). *RSS per held lock* is the growth of the process's \
         RSS while taking the locks ÷ locks; *heap per held lock* is, for redisson-lock, the live \
         heap counted by the benchmark's global allocator (the window's low point, between ticks) \
         ÷ locks, and for Redisson its retained heap after `System.gc()` ÷ locks. Client CPU comes \
         from `getrusage` (Java: `getProcessCpuTime`).\n",
        d.m("s4_watchdog_ms"),
        d.m("s4_period_ms"),
        d.m("s4_window_ms"),
        reps_text(d),
        d.m("s4_acquire_threads"),
        d.m("s4_java_in_flight"),
    );
    let _ = writeln!(
        w,
        "| contender | locks held | renewal calls per tick | ticks in window | tick wall time (ms) | Redis time per tick (ms) | wall ÷ Redis | client CPU (ms per period) | RSS per held lock (bytes) | heap per held lock (bytes) | taking the locks (s) | leases lost |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let per_tick = series(runs, "calls_per_tick_median");
    let ticks = series(runs, "ticks");
    let tick_ms = series(runs, "tick_ms_median");
    let server_ms = series(runs, "tick_server_ms_median");
    let wall_ratio = series(runs, "tick_wall_per_server_median");
    let cpu_p = series(runs, "cpu_ms_per_period");
    let bpl = series(runs, "bytes_per_lock");
    let heap = series(runs, "heap_bytes_per_lock");
    let acquire = series(runs, "acquire_s");
    for c in present(&ticks) {
        let lost: u64 = runs
            .iter()
            .filter(|r| r["contender"] == c)
            .filter_map(|r| r["leases_lost"].as_u64())
            .sum();
        let calls = if c == "rslock" {
            format!(
                "{} (one EXTEND per lock, each on its own timer)",
                cell(stat(&per_tick, c))
            )
        } else {
            cell(stat(&per_tick, c))
        };
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            label(d, c),
            locks_of(runs, c).map_or("–".into(), |n| fmt(n as f64)),
            calls,
            cell(stat(&ticks, c)),
            cell(stat(&tick_ms, c)),
            cell(stat(&server_ms, c)),
            stat(&wall_ratio, c).map_or("–".into(), |s| if s.n > 1 {
                format!("**{:.2}×** [{:.2}–{:.2}]", s.median, s.min, s.max)
            } else {
                format!("**{:.2}×**", s.median)
            }),
            cell(stat(&cpu_p, c)),
            cell(stat(&bpl, c)),
            cell(stat(&heap, c)),
            cell(stat(&acquire, c)),
            lost,
        );
    }
    let peak = series(runs, "heap_tick_peak_mb");
    if let Some(p) = stat(&peak, "crate") {
        let _ = writeln!(
            w,
            "\nWhile it held its locks, redisson-lock's live heap rose by up to {} MiB above its \
             low point (the highest sample, every 10 ms, minus the lowest): what a renewal tick \
             allocates while it runs.",
            cell(Some(p))
        );
    }
    if let (Some(ours), Some(theirs)) = (locks_of(runs, "crate"), locks_of(runs, "rslock"))
        && ours != theirs
    {
        let _ = writeln!(
            w,
            "\nrslock holds {} locks, not {} (see the analysis below for why).",
            fmt(theirs as f64),
            fmt(ours as f64),
        );
    }
}
