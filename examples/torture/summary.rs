//! What the supervisor makes of the workers' event lines: the failure and
//! information columns of the summary line.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use crate::chaos::Supervisor;
use crate::{LEASE_MS, LockKind, NAMES, SLOW_WAIT_MARGIN_MS, STALL_MS, instance_of};

/// A fair waiter may wait this much beyond (position + 1) × longest hold.
pub const FAIR_SLACK_MS: u64 = 250;
/// And this much more per thread ahead of it (a release wakes the next head
/// through pub/sub, which then sends its acquire).
pub const FAIR_HANDOVER_MS: u64 = 20;

#[derive(Default)]
pub struct TokenInfo {
    pub acquired_ms: u64,
    /// The fencing token of a fenced run's acquisition: the order in
    /// which Redis granted the lock, which the report time of a holder
    /// stopped before it could report is not.
    pub fencing: Option<u64>,
    /// `Some(lost signal)` once the section reported back.
    pub done: Option<bool>,
    /// A long hold (cluster runs) reported its lock lost before its end.
    pub told: bool,
}

/// A (later, earlier) pair of tokens seen together in an occupancy set.
pub struct OverlapReport {
    pub name: String,
    pub later: String,
    pub earlier: String,
    pub entered_ms: u64,
}

/// One `lock()` on a fair lock: when it started and ended, and how many
/// threads were waiting on that lock when it started.
pub struct FairWait {
    pub name: String,
    pub token: String,
    pub started: u64,
    pub ended: u64,
    pub ahead: u64,
}

#[derive(Default)]
pub struct Stats {
    pub client_ids: HashMap<String, String>,
    pub tokens: HashMap<String, TokenInfo>,
    pub acquires: HashMap<String, Vec<u64>>,
    /// Write (exclusive) acquisitions of a read/write run.
    pub write_acquires: HashMap<String, Vec<u64>>,
    /// Per lock, (acquired, released) of every completed section.
    pub holds: HashMap<String, Vec<(u64, u64)>>,
    pub fair_waits: Vec<FairWait>,
    pub sections: u64,
    pub read_sections: u64,
    pub lost_signals: u64,
    pub overlap_reports: Vec<OverlapReport>,
    /// (lock, value read) -> first token that read it.
    pub values: HashMap<(String, i64), String>,
    pub duplicate_values: Vec<(String, String, String)>,
    pub errors: BTreeMap<String, u64>,
    /// First holds whose count was above 1.
    pub phantom_counts: Vec<String>,
    pub panic_lines: Vec<String>,
    pub panicked_instances: HashSet<String>,
    pub garbled: u64,
    /// Semaphore runs: sections that saw more than `PERMITS` live holders.
    pub over_n: Vec<String>,
    /// Semaphore runs: acquires and releases whose outcome is unknown.
    pub unknown_acquires: u64,
    pub unknown_releases: u64,
    /// Semaphore runs: final rounds done, per instance, and those that failed.
    pub final_ok: HashMap<String, u64>,
    pub final_failed: Vec<String>,
    pub final_worst_ms: u64,
    /// Sections of the JVM worker.
    pub java_sections: u64,
}

impl Stats {
    pub fn record(&mut self, instance: &str, line: &str) {
        let fields: Vec<&str> = line.split(' ').collect();
        match fields.as_slice() {
            ["I", instance, client_id] => {
                self.client_ids
                    .insert((*instance).to_owned(), (*client_id).to_owned());
            }
            ["A", name, token, at, ..] if fields.len() <= 5 => {
                let Ok(at) = at.parse() else {
                    self.garbled += 1;
                    return;
                };
                let info = self.tokens.entry((*token).to_owned()).or_default();
                info.acquired_ms = at;
                info.fencing = fields.get(4).and_then(|f| f.parse().ok());
                self.acquires
                    .entry((*name).to_owned())
                    .or_default()
                    .push(at);
                if token.ends_with("/w") {
                    self.write_acquires
                        .entry((*name).to_owned())
                        .or_default()
                        .push(at);
                }
            }
            ["W", name, token, started, ended, ahead] => {
                let (Ok(started), Ok(ended), Ok(ahead)) =
                    (started.parse(), ended.parse(), ahead.parse())
                else {
                    self.garbled += 1;
                    return;
                };
                self.fair_waits.push(FairWait {
                    name: (*name).to_owned(),
                    token: (*token).to_owned(),
                    started,
                    ended,
                    ahead,
                });
            }
            ["O", name, later, earlier, at] => {
                self.overlap_reports.push(OverlapReport {
                    name: (*name).to_owned(),
                    later: (*later).to_owned(),
                    earlier: (*earlier).to_owned(),
                    entered_ms: at.parse().unwrap_or(0),
                });
            }
            ["S", name, token, value, lost, outcome, released] => {
                self.sections += 1;
                // JVM workers: `j0` (semaphore runs), `j<slot>g<generation>`.
                self.java_sections += u64::from(instance.starts_with('j'));
                self.read_sections += u64::from(token.ends_with("/r"));
                let signalled = *lost == "true" || matches!(*outcome, "lost" | "not_held");
                self.lost_signals += u64::from(signalled);
                let info = self.tokens.entry((*token).to_owned()).or_default();
                info.done = Some(signalled);
                if let Ok(released) = released.parse::<u64>() {
                    let acquired = info.acquired_ms;
                    self.holds
                        .entry((*name).to_owned())
                        .or_default()
                        .push((acquired, released));
                }
                if let Ok(value) = value.parse::<i64>() {
                    let key = ((*name).to_owned(), value);
                    match self.values.get(&key) {
                        Some(first) => self.duplicate_values.push((
                            (*name).to_owned(),
                            first.clone(),
                            (*token).to_owned(),
                        )),
                        None => {
                            self.values.insert(key, (*token).to_owned());
                        }
                    }
                }
            }
            ["L", _name, token, _at] => {
                self.tokens.entry((*token).to_owned()).or_default().told = true;
            }
            ["C", name, token, count] => {
                self.phantom_counts
                    .push(format!("{name} {token} count={count}"));
            }
            ["X", name, token, holders, at] => {
                self.over_n
                    .push(format!("{name} at {at}: {token} saw {holders}"));
            }
            ["U", what, _name, _token] => match *what {
                "acquire" => self.unknown_acquires += 1,
                _ => self.unknown_releases += 1,
            },
            ["F", name, token, waited, outcome] => {
                let waited_ms: u64 = waited.parse().unwrap_or(u64::MAX);
                self.final_worst_ms = self.final_worst_ms.max(waited_ms);
                if *outcome == "ok" && waited_ms <= crate::semaphore::FINAL_ROUND_MS {
                    *self.final_ok.entry(instance.to_owned()).or_default() += 1;
                } else {
                    self.final_failed
                        .push(format!("{name} {token} {outcome} after {waited} ms"));
                }
            }
            ["E", what] => *self.errors.entry((*what).to_owned()).or_default() += 1,
            ["P", ..] => {
                self.panic_lines.push(line.to_owned());
                self.panicked_instances.insert(instance.to_owned());
            }
            _ => self.garbled += 1,
        }
    }
}

pub type SharedStats = Arc<Mutex<Stats>>;

pub fn stats_of(shared: &SharedStats) -> std::sync::MutexGuard<'_, Stats> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Default)]
pub struct Summary {
    pub sections: u64,
    pub overlaps: u64,
    pub after_long_pause: u64,
    /// Signalled overlaps on a lock whose master had just been killed
    /// (cluster runs): the failover lost the lock, and its holder was told.
    pub after_master_kill: u64,
    pub without_signal: u64,
    pub unresolved: u64,
    pub dead_holder: u64,
    pub undetected: u64,
    pub slow_waits: u64,
    pub max_kill_wait: u64,
    pub stalls: u64,
    pub unfair_waits: u64,
    pub fair_checked: u64,
    pub fair_skipped: u64,
    /// The largest wait / allowance ratio among checked fair waits, in percent.
    pub fair_worst_percent: u64,
}

pub fn summarize(sup: &Supervisor, stats: &Stats, chaos_start: u64, chaos_end: u64) -> Summary {
    // Overlaps: one per unordered pair of tokens.
    let mut pairs: HashMap<(String, String), &OverlapReport> = HashMap::new();
    let mut dead_holder = 0;
    for report in &stats.overlap_reports {
        let earlier_dead = sup
            .dead_at
            .get(instance_of(&report.earlier))
            .is_some_and(|&died| died <= report.entered_ms);
        if earlier_dead {
            dead_holder += 1;
            continue;
        }
        let key = if report.later < report.earlier {
            (report.later.clone(), report.earlier.clone())
        } else {
            (report.earlier.clone(), report.later.clone())
        };
        pairs.entry(key).or_insert(report);
    }
    let mut summary = Summary {
        sections: stats.sections,
        overlaps: pairs.len() as u64,
        dead_holder,
        ..Summary::default()
    };
    for ((a, b), report) in &pairs {
        let acquired = |t: &str| stats.tokens.get(t).map_or(0, |info| info.acquired_ms);
        let fencing = |t: &str| stats.tokens.get(t).and_then(|info| info.fencing);
        // The earlier holder is the one that acquired first (by the fencing
        // tokens when both have one); the one already in the set when the
        // reporter entered breaks ties.
        let order = match (fencing(a), fencing(b)) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => acquired(a).cmp(&acquired(b)),
        };
        let earlier = match order {
            std::cmp::Ordering::Less => a,
            std::cmp::Ordering::Greater => b,
            std::cmp::Ordering::Equal => &report.earlier,
        };
        let later = if earlier == a { b } else { a };
        // A holder killed before the end of its section was told if it
        // reported its lock lost before it died.
        let signal = stats
            .tokens
            .get(earlier)
            .and_then(|info| info.done.or(info.told.then_some(true)));
        if sup.after_long_pause(report.entered_ms) {
            summary.after_long_pause += 1;
        }
        let master_killed = sup.after_master_kill(&report.name, report.entered_ms);
        match signal {
            Some(true) if master_killed => {
                summary.after_master_kill += 1;
                eprintln!(
                    "torture: overlap on {} after its master's kill -9 (earlier holder signalled lost): {earlier} (earlier) and {later}",
                    report.name
                );
            }
            Some(true) => {
                let pause = sup
                    .pauses
                    .iter()
                    .filter(|&&(start, _, _)| start <= report.entered_ms)
                    .max_by_key(|&&(start, _, _)| start)
                    .map_or_else(
                        || "no pause before it".to_owned(),
                        |&(start, end, _)| {
                            format!(
                                "the last pause lasted {} ms and ended {} ms before",
                                end.saturating_sub(start),
                                report.entered_ms.saturating_sub(end)
                            )
                        },
                    );
                eprintln!(
                    "torture: overlap on {} at {} (earlier holder signalled lost): {earlier} (earlier) and {later}; {pause}",
                    report.name, report.entered_ms
                );
            }
            Some(false) => {
                summary.without_signal += 1;
                eprintln!(
                    "torture: OVERLAP WITHOUT LOST SIGNAL on {} at {}: {earlier} (earlier) and {later}{}",
                    report.name,
                    report.entered_ms,
                    if master_killed {
                        " (after its master's kill -9)"
                    } else {
                        ""
                    }
                );
            }
            None => {
                summary.without_signal += 1;
                summary.unresolved += 1;
                eprintln!(
                    "torture: overlap on {} at {}: earlier holder {earlier} never reported back (counted as unsignalled), later {later}",
                    report.name, report.entered_ms
                );
            }
        }
    }
    for (name, first, second) in &stats.duplicate_values {
        let key = if first < second {
            (first.clone(), second.clone())
        } else {
            (second.clone(), first.clone())
        };
        if !pairs.contains_key(&key) {
            summary.undetected += 1;
            eprintln!("torture: LOST UPDATE WITHOUT OVERLAP on {name}: {first} and {second}");
        }
    }
    let sorted = |map: &HashMap<String, Vec<u64>>| -> HashMap<String, Vec<u64>> {
        map.iter()
            .map(|(name, times)| {
                let mut times = times.clone();
                times.sort_unstable();
                (name.clone(), times)
            })
            .collect()
    };
    let acquires = sorted(&stats.acquires);
    for (name, killed_at) in &sup.killed_holds {
        let times = acquires.get(name).map_or(&[][..], Vec::as_slice);
        let next = times.iter().copied().find(|&t| t >= *killed_at);
        let until = next.unwrap_or(chaos_end.max(*killed_at));
        let waited = (until - killed_at).saturating_sub(sup.paused_within(*killed_at, until));
        if next.is_some() {
            summary.max_kill_wait = summary.max_kill_wait.max(waited);
        }
        if waited > LEASE_MS + SLOW_WAIT_MARGIN_MS {
            summary.slow_waits += 1;
            eprintln!(
                "torture: SLOW WAIT on {name}: holder killed at {killed_at}, next acquire {} ({waited} ms excluding pauses)",
                next.map_or("never".to_owned(), |t| t.to_string())
            );
        }
    }
    summary.stalls = stalls(sup, &acquires, "", chaos_start, chaos_end);
    if sup.kind == LockKind::Rw {
        // Readers share: a lock whose writers never get in is stalled too.
        let writes = sorted(&stats.write_acquires);
        summary.stalls += stalls(sup, &writes, "WRITER ", chaos_start, chaos_end);
    }
    if sup.kind == LockKind::Fair {
        fair_waits(sup, stats, &mut summary);
    }
    summary
}

/// Gaps longer than `STALL_MS` (pauses not counted) between acquisitions.
fn stalls(
    sup: &Supervisor,
    acquires: &HashMap<String, Vec<u64>>,
    what: &str,
    chaos_start: u64,
    chaos_end: u64,
) -> u64 {
    let mut stalls = 0;
    for name in NAMES {
        let times = acquires.get(name).map_or(&[][..], Vec::as_slice);
        let mut previous = chaos_start;
        for &t in times.iter().chain(std::iter::once(&chaos_end)) {
            let t = t.max(previous);
            let gap = (t - previous).saturating_sub(sup.paused_within(previous, t));
            if gap > STALL_MS {
                stalls += 1;
                eprintln!(
                    "torture: {what}STALL on {name}: nobody acquired it for {gap} ms after {previous}"
                );
            }
            previous = t;
        }
    }
    stalls
}

/// Every fair `lock()` whose wait no chaos action touched must have been
/// served within (threads waiting when it arrived + 1) × the longest hold of
/// that lock during its wait, plus handovers and slack.
fn fair_waits(sup: &Supervisor, stats: &Stats, summary: &mut Summary) {
    let mut holds: HashMap<&str, Vec<(u64, u64)>> = HashMap::new();
    for (name, list) in &stats.holds {
        let mut list = list.clone();
        list.sort_unstable();
        holds.insert(name.as_str(), list);
    }
    let longest_any = holds
        .values()
        .flatten()
        .map(|&(a, r)| r.saturating_sub(a))
        .max()
        .unwrap_or(0);
    for wait in &stats.fair_waits {
        if sup.disrupted(wait.started, wait.ended) {
            summary.fair_skipped += 1;
            continue;
        }
        summary.fair_checked += 1;
        let list = holds.get(wait.name.as_str()).map_or(&[][..], Vec::as_slice);
        // Holds that overlap the wait: acquired before its end (and at most
        // the longest hold before its start), released after its start.
        let from = list.partition_point(|&(a, _)| a + longest_any < wait.started);
        let to = list.partition_point(|&(a, _)| a <= wait.ended);
        let longest = list[from..to.max(from)]
            .iter()
            .filter(|&&(_, r)| r >= wait.started)
            .map(|&(a, r)| r.saturating_sub(a))
            .max()
            .unwrap_or(0);
        let allowed = (wait.ahead + 1) * longest + wait.ahead * FAIR_HANDOVER_MS + FAIR_SLACK_MS;
        let waited = wait.ended.saturating_sub(wait.started);
        summary.fair_worst_percent = summary
            .fair_worst_percent
            .max(waited * 100 / allowed.max(1));
        if waited > allowed {
            summary.unfair_waits += 1;
            eprintln!(
                "torture: UNFAIR WAIT on {}: {} waited {waited} ms from {} with {} ahead, longest hold {longest} ms (allowed {allowed} ms)",
                wait.name, wait.token, wait.started, wait.ahead
            );
        }
    }
}
