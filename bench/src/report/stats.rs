//! Medians over repetitions, per-repetition ratios, and number formatting.

use std::collections::BTreeMap;

use serde_json::{Value, json};

#[derive(Clone, Copy, Debug)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Stat {
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Stat> {
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

    pub fn json(&self) -> Value {
        json!({"median": self.median, "min": self.min, "max": self.max, "n": self.n})
    }
}

/// contender -> rep -> value
pub type Series = BTreeMap<String, BTreeMap<u64, f64>>;

/// Values by contender (or type) and repetition, several runs per repetition
/// possible.
pub type Runs = BTreeMap<String, BTreeMap<u64, Vec<f64>>>;

/// Each repetition's median of its runs: a repetition may alternate two
/// contenders several times so that one hiccup of the machine does not
/// decide its ratio.
pub fn medians(runs: Runs) -> Series {
    runs.into_iter()
        .map(|(key, reps)| {
            let by_rep = reps
                .into_iter()
                .filter_map(|(rep, values)| Some((rep, Stat::of(values)?.median)))
                .collect();
            (key, by_rep)
        })
        .collect()
}

pub fn stat(series: &Series, contender: &str) -> Option<Stat> {
    series
        .get(contender)
        .and_then(|m| Stat::of(m.values().copied()))
}

/// Per-repetition ratio `a / b`, summarised.
pub fn ratio(series: &Series, a: &str, b: &str) -> Option<Stat> {
    let (sa, sb) = (series.get(a)?, series.get(b)?);
    Stat::of(
        sa.iter()
            .filter_map(|(rep, va)| sb.get(rep).map(|vb| va / vb)),
    )
}

/// Short labels for the chart: 15,054 -> 15.1k, 6,847 -> 6.8k.
pub fn compact(v: f64) -> String {
    if v.abs() >= 1_000.0 {
        format!("{:.1}k", v / 1000.0)
    } else {
        fmt(v)
    }
}

pub fn fmt(v: f64) -> String {
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

/// `median [min–max]`, or the value alone for one repetition.
pub fn cell(s: Option<Stat>) -> String {
    match s {
        Some(s) if s.n > 1 => format!("{} [{}–{}]", fmt(s.median), fmt(s.min), fmt(s.max)),
        Some(s) => fmt(s.median),
        None => "–".into(),
    }
}

/// A ratio in bold, `**1.02×** [0.98–1.05]`.
pub fn ratio_cell(s: Option<Stat>) -> String {
    match s {
        Some(s) if s.n > 1 => format!("**{:.2}×** [{:.2}–{:.2}]", s.median, s.min, s.max),
        Some(s) => format!("**{:.2}×**", s.median),
        None => "–".into(),
    }
}

/// A ratio for the targets table, `1.02× [0.98–1.05]`.
pub fn ratio_text(s: Option<Stat>, digits: usize) -> String {
    match s {
        Some(s) if s.n > 1 => format!(
            "{:.d$}× [{:.d$}–{:.d$}]",
            s.median,
            s.min,
            s.max,
            d = digits
        ),
        Some(s) => format!("{:.d$}×", s.median, d = digits),
        None => "–".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_runs_of_a_repetition_count_their_median() {
        let mut runs = Runs::new();
        let floor = runs.entry("floor".into()).or_default();
        floor.insert(1, vec![100.0, 10.0, 90.0]);
        floor.insert(2, vec![50.0]);
        let crate_runs = runs.entry("crate".into()).or_default();
        crate_runs.insert(1, vec![95.0, 85.0, 5.0]);
        crate_runs.insert(2, vec![f64::NAN]);
        let series = medians(runs);
        assert_eq!(series["floor"], BTreeMap::from([(1, 90.0), (2, 50.0)]));
        // A repetition without a finite value has none.
        assert_eq!(series["crate"], BTreeMap::from([(1, 85.0)]));
        let r = ratio(&series, "crate", "floor").expect("one common repetition");
        assert_eq!((r.n, (r.median * 1000.0).round()), (1, 944.0));
    }

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
        assert_eq!(compact(6_847.0), "6.8k");
        assert_eq!(compact(80.7), "80.7");
        let r = Stat::of([0.9, 1.0, 1.1]);
        assert_eq!(ratio_text(r, 2), "1.00× [0.90–1.10]");
        assert_eq!(ratio_text(Stat::of([1.5]), 1), "1.5×");
        assert_eq!(ratio_text(None, 2), "–");
    }
}
