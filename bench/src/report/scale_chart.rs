//! Issue 36's curves, as one SVG beside the summary chart (`…-scale.svg`):
//! cost against size, log-log, each point the median over the run's
//! repetitions. Panels: scenario 10's pairs/s against threads, scenario 9's
//! the same through the delay proxy, and scenario 4's renewal tick against
//! locks held (wall time and Redis's own time).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::stats::{Stat, compact};
use super::{Data, color, watchdog};

const PANEL_W: f64 = 420.0;
const PANEL_H: f64 = 260.0;
/// Margins inside a panel: left, right, top, bottom.
const M: (f64, f64, f64, f64) = (64.0, 16.0, 34.0, 64.0);

struct Line {
    name: &'static str,
    color: &'static str,
    /// (x, median y), ascending x.
    points: Vec<(f64, f64)>,
}

struct Panel {
    title: &'static str,
    x_label: &'static str,
    lines: Vec<Line>,
}

/// The path of the curves' SVG beside the summary chart's `svg`.
pub fn path_beside(svg: &str) -> String {
    match svg.strip_suffix(".svg") {
        Some(stem) => format!("{stem}-scale.svg"),
        None => format!("{svg}-scale.svg"),
    }
}

/// Medians of `y` by `x` over the records `rs`.
fn curve(rs: impl Iterator<Item = Value>, x: &str, y: &str) -> Vec<(f64, f64)> {
    let mut by: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for r in rs {
        if let (Some(x), Some(y)) = (r[x].as_u64(), r[y].as_f64()) {
            by.entry(x).or_default().push(y);
        }
    }
    by.into_iter()
        .filter_map(|(x, ys)| Stat::of(ys).map(|s| (x as f64, s.median)))
        .filter(|&(x, y)| x > 0.0 && y > 0.0)
        .collect()
}

fn paired_panel(d: &Data, scenario: &str, title: &'static str) -> Panel {
    let rs = || {
        d.records
            .iter()
            .filter(|r| r["scenario"] == scenario)
            .cloned()
    };
    Panel {
        title,
        x_label: "threads",
        lines: vec![
            Line {
                name: "floor",
                color: color("floor"),
                points: curve(rs(), "threads", "floor_pairs_per_s"),
            },
            Line {
                name: "redisson-lock",
                color: color("crate"),
                points: curve(rs(), "threads", "pairs_per_s"),
            },
        ],
    }
}

/// The SVG, or `None` when the run measured none of the curves.
pub fn chart(d: &Data) -> Option<String> {
    let wd = watchdog::runs_of(d, "watchdog_scale");
    let panels: Vec<Panel> = [
        paired_panel(d, "paired_many", "Pairs/s against threads (scenario 10)"),
        paired_panel(
            d,
            "proxied_paired",
            "Pairs/s through the delay proxy (scenario 9)",
        ),
        Panel {
            title: "Renewal tick, ms, against locks held",
            x_label: "locks held",
            lines: vec![
                Line {
                    name: "tick wall time",
                    color: color("crate"),
                    points: curve(wd.iter().cloned(), "locks", "tick_ms_median"),
                },
                Line {
                    name: "Redis's own time",
                    color: color("floor"),
                    points: curve(wd.iter().cloned(), "locks", "tick_server_ms_median"),
                },
            ],
        },
    ]
    .into_iter()
    .filter(|p| p.lines.iter().any(|l| l.points.len() >= 2))
    .collect();
    if panels.is_empty() {
        return None;
    }
    let width = PANEL_W * panels.len() as f64;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{PANEL_H}\" \
         viewBox=\"0 0 {width} {PANEL_H}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>"
    );
    for (i, p) in panels.iter().enumerate() {
        panel(&mut svg, p, i as f64 * PANEL_W);
    }
    svg.push_str("</svg>\n");
    Some(svg)
}

/// Decades (and 2×, 5×) within `[lo, hi]`, for log-axis ticks.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let v = decade * m;
            if v >= lo && v <= hi {
                out.push(v);
            }
        }
        decade *= 10.0;
    }
    out
}

fn panel(svg: &mut String, p: &Panel, x0: f64) {
    let pts = p.lines.iter().flat_map(|l| l.points.iter());
    let (mut xl, mut xh, mut yl, mut yh) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        (xl, xh, yl, yh) = (xl.min(x), xh.max(x), yl.min(y), yh.max(y));
    }
    // Some room around the data, in log space.
    let (xl, xh) = (xl / 1.3, xh * 1.3);
    let (yl, yh) = (yl / 1.5, yh * 1.5);
    let (left, right, top, bottom) = (x0 + M.0, x0 + PANEL_W - M.1, M.2, PANEL_H - M.3);
    let sx = |x: f64| left + (x.ln() - xl.ln()) / (xh.ln() - xl.ln()) * (right - left);
    let sy = |y: f64| bottom - (y.ln() - yl.ln()) / (yh.ln() - yl.ln()) * (bottom - top);
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"18\" font-weight=\"bold\">{}</text>\n\
         <rect x=\"{left:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#adb5bd\"/>",
        x0 + 8.0,
        p.title,
        right - left,
        bottom - top,
    );
    for v in log_ticks(xl, xh) {
        let x = sx(v);
        let _ = writeln!(
            svg,
            "<line x1=\"{x:.1}\" y1=\"{top:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\" stroke=\"#f1f3f5\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            bottom + 14.0,
            compact(v),
        );
    }
    for v in log_ticks(yl, yh) {
        let y = sy(v);
        let _ = writeln!(
            svg,
            "<line x1=\"{left:.1}\" y1=\"{y:.1}\" x2=\"{right:.1}\" y2=\"{y:.1}\" stroke=\"#f1f3f5\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left - 4.0,
            y + 4.0,
            compact(v),
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{} (log)</text>",
        (left + right) / 2.0,
        bottom + 30.0,
        p.x_label,
    );
    for (i, l) in p.lines.iter().filter(|l| !l.points.is_empty()).enumerate() {
        let path: Vec<String> = l
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        let _ = writeln!(
            svg,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>",
            path.join(" "),
            l.color,
        );
        for &(x, y) in &l.points {
            let _ = writeln!(
                svg,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{}\"/>",
                sx(x),
                sy(y),
                l.color
            );
        }
        let ly = bottom + 46.0;
        let lx = left + i as f64 * 150.0;
        let _ = writeln!(
            svg,
            "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"12\" height=\"4\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>",
            ly - 5.0,
            l.color,
            lx + 16.0,
            l.name,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_curves_file_sits_beside_the_chart() {
        assert_eq!(
            path_beside("docs/benchmarks.svg"),
            "docs/benchmarks-scale.svg"
        );
        assert_eq!(path_beside("x"), "x-scale.svg");
    }

    #[test]
    fn a_curve_needs_two_sizes() {
        let row = |t: u64| {
            serde_json::json!({"scenario": "paired_many", "threads": t, "rep": 1,
                "floor_pairs_per_s": 1000.0 * t as f64, "pairs_per_s": 1500.0 * t as f64})
        };
        let data = |records| Data {
            records,
            machine: BTreeMap::new(),
        };
        assert!(chart(&data(vec![row(64)])).is_none());
        let svg = chart(&data(vec![row(1), row(64), row(1024)])).expect("a chart");
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
        assert!(
            svg.contains("Pairs/s against threads (scenario 10)"),
            "{svg}"
        );
    }

    #[test]
    fn log_ticks_are_1_2_5_per_decade() {
        assert_eq!(log_ticks(0.8, 30.0), vec![1.0, 2.0, 5.0, 10.0, 20.0]);
    }
}
