//! Turns the raw JSON lines of one `scripts/bench.sh` run into
//! `results.json`, `BENCHMARKS.md` and one SVG chart.
//!
//! Every number is a median over the run's repetitions with its [min-max];
//! every ratio is taken per repetition (contenders of one repetition ran back
//! to back) and then summarised the same way. "× floor" is always against
//! the true floor (contender `floor`).
//!
//! Modules: `stats` (medians, ratios, number formatting), `targets` (the
//! targets table), `watchdog` (scenario 4: joins holder and observer
//! records), `family` (scenario 5: the lock family), `redlock` (scenario 6), `scale` (issue 36: scenarios 9, 10 and the watchdog curve), `markdown` (`BENCHMARKS.md`) and `chart` (the SVG).

mod chart;
mod family;
mod markdown;
mod paired;
mod redlock;
mod scale;
mod scale_chart;
mod scale_targets;
mod stats;
mod targets;
mod waiters;
mod watchdog;

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::common::Args;
use stats::{Runs, Series, medians, ratio, stat};

/// Every contender, in the order of the tables and the chart.
const CONTENDERS: [&str; 5] = ["floor", "raw", "crate", "rslock", "redisson"];

fn color(contender: &str) -> &'static str {
    match contender {
        "floor" => "#868e96",
        "raw" => "#ced4da",
        "crate" => "#e8590c",
        "rslock" => "#1c7ed6",
        _ => "#2b8a3e",
    }
}

struct Data {
    records: Vec<Value>,
    machine: BTreeMap<String, String>,
}

impl Data {
    /// One metric of the records that `pred` selects, by contender and rep.
    /// `metric` by contender and repetition, over the records `pred` picks;
    /// a repetition that ran a contender more than once counts its median.
    fn series(&self, pred: impl Fn(&Value) -> bool, metric: &str) -> Series {
        self.series_by(pred, "contender", metric)
    }

    /// [`Data::series`] keyed by the record's field `key` instead.
    fn series_by(&self, pred: impl Fn(&Value) -> bool, key: &str, metric: &str) -> Series {
        let mut out = Runs::new();
        for r in self.records.iter().filter(|r| pred(r)) {
            let (Some(k), Some(v)) = (r[key].as_str(), r[metric].as_f64()) else {
                continue;
            };
            let rep = r["rep"].as_u64().unwrap_or(0);
            out.entry(k.to_owned())
                .or_default()
                .entry(rep)
                .or_default()
                .push(v);
        }
        medians(out)
    }

    fn m(&self, key: &str) -> &str {
        self.machine.get(key).map_or("?", String::as_str)
    }

    /// Whether `floor` is the true floor. Runs before it existed sent the
    /// crate's own scripts under that name (`--report-only` on old raw data).
    fn true_floor(&self) -> bool {
        self.machine.get("floor").map(String::as_str) == Some("true")
    }
}

fn label(d: &Data, c: &str) -> String {
    match c {
        "floor" if d.true_floor() => {
            "floor (Redisson's scripts less the latch, 1 conn/thread)".into()
        }
        "floor" => "floor (the crate's scripts, raw: a run from before the true floor)".into(),
        "raw" => "crate scripts, raw (1 conn/thread)".into(),
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
    let watchdog = watchdog::runs(&data);
    let soak = data
        .records
        .iter()
        .rfind(|r| r["scenario"] == "soak")
        .cloned();
    let targets = targets::targets(&data, &watchdog, soak.as_ref());

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
        "watchdog_scale": watchdog::runs_of(&data, "watchdog_scale"),
        "soak": soak,
        "targets": targets,
        "raw": data.records,
    });
    let json_path = args.str("json")?;
    std::fs::write(json_path, serde_json::to_string_pretty(&results)?)?;

    let svg = chart::chart(&data, &watchdog);
    std::fs::write(args.str("svg")?, svg)?;
    // Issue 36's curves beside it, when the run measured them.
    let curves = scale_chart::path_beside(args.str("svg")?);
    match scale_chart::chart(&data) {
        Some(svg) => std::fs::write(&curves, svg)?,
        None => {
            let _ = std::fs::remove_file(&curves);
        }
    }
    let md = markdown::markdown(
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

/// Scenario 1: the server's own time per lock + unlock pair (µs), from each
/// process's `server-cost` record: its scripts and the commands it sends
/// itself, over every pair it ran, warm-up included.
fn server_us_per_pair(d: &Data) -> Series {
    let warmup: f64 = d.m("s1_warmup").parse().unwrap_or(0.0);
    let mut out = Runs::new();
    for cost in d
        .records
        .iter()
        .filter(|r| r["kind"] == "server_cost" && r["of_scenario"] == "uncontended")
    {
        let Some(run) = d
            .records
            .iter()
            .find(|r| r["scenario"] == "uncontended" && r["run_id"] == cost["run_id"])
        else {
            continue;
        };
        let (Some(c), Some(usec), Some(pairs)) = (
            cost["contender"].as_str(),
            cost["usec"].as_f64(),
            run["pairs"].as_f64(),
        ) else {
            continue;
        };
        if pairs + warmup > 0.0 {
            out.entry(c.to_owned())
                .or_default()
                .entry(cost["rep"].as_u64().unwrap_or(0))
                .or_default()
                .push(usec / (pairs + warmup));
        }
    }
    medians(out)
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
        (
            "uncontended.server_us_per_pair".into(),
            server_us_per_pair(d),
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
    out.extend(family::summary(d));
    out
}
