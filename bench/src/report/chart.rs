//! The SVG summary chart: four panels of bars (median) with min–max whiskers.

use std::fmt::Write as _;

use serde_json::Value;

use super::stats::{Series, Stat, compact, fmt, stat};
use super::{CONTENDERS, Data, color, contended, is, scaled, watchdog};

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

/// Scenario 4's bars: the contenders that held the crate's number of locks.
fn watchdog_bars(wd: &[Value], metric: &str) -> Vec<Bar> {
    let locks = wd
        .iter()
        .find(|r| r["contender"] == "crate")
        .map(|r| r["locks"].clone());
    let same: Vec<Value> = wd
        .iter()
        .filter(|r| locks.as_ref().is_none_or(|n| r["locks"] == *n))
        .cloned()
        .collect();
    bars(&watchdog::series(&same, metric))
}

pub fn chart(d: &Data, wd: &[Value]) -> String {
    let held = wd
        .iter()
        .find(|r| r["contender"] == "crate")
        .and_then(|r| r["locks"].as_f64())
        .map_or("many".into(), fmt);
    let wd_title = format!("Holding {held} locks: renewal tick, ms (lower is better)");
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
            title: &wd_title,
            groups: vec![
                ("tick wall time".into(), watchdog_bars(wd, "tick_ms_median")),
                (
                    "Redis time per tick".into(),
                    watchdog_bars(wd, "tick_server_ms_median"),
                ),
            ],
            log: false,
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
        r#"<text x="20" y="30" font-size="20" font-weight="bold">redisson-lock vs the protocol's floor, rslock and Redisson</text>"#
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
            "floor" => "floor (protocol minimum)".to_string(),
            "raw" => "crate scripts, raw".to_string(),
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
