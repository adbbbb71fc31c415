//! The checker's report: its figures and violations (`Report`, one summary
//! line), how a violation names the holds and the faults near it
//! (`Reader::describe`, `Reader::faults_near`), and its printing on stderr
//! (`print`).

use std::collections::BTreeMap;

use super::DESCRIBED;
use super::read::Reader;

/// A violation this close after a fault (ns) names it.
const FAULT_REACH_NS: u64 = 5_000_000_000;

#[derive(Debug, Clone)]
pub struct Violation {
    pub kind: &'static str,
    pub lock: String,
    pub at: u64,
    pub detail: String,
}

#[derive(Debug, Default)]
pub struct Report {
    pub lines: u64,
    pub garbled: u64,
    /// Processes by implementation (`rust`, `java-4.7.0`, ...).
    pub processes: BTreeMap<String, u64>,
    pub acquire_invokes: u64,
    pub acquired: u64,
    pub acquire_failed: u64,
    pub acquire_unknown: u64,
    pub reentries: u64,
    /// Holds (acquired, not reentries) by implementation.
    pub holds: BTreeMap<String, u64>,
    pub sections: u64,
    /// A fenced run's counter writes, fenced by the token: `ok`, or
    /// `refused` (a stale holder's).
    pub fenced_writes: BTreeMap<String, u64>,
    pub releases: BTreeMap<String, u64>,
    pub tokens: u64,
    pub lost_signals: u64,
    /// Lost signals that came into force only after the release was
    /// invoked, on a release that then succeeded (a loss the unlock itself
    /// disproves: information, the signal being early is harmless).
    pub lost_after_good_release: u64,
    /// Holds whose process died holding them.
    pub died_holding: u64,
    /// Holds with no end at all (counted to the history's last event).
    pub unfinished: u64,
    pub faults: BTreeMap<String, u64>,
    pub beyond_lease_overlaps: u64,
    /// The latest a Rust holder's `LostSignal` fired after the start of
    /// such an overlap (or its process's resumption), in ns.
    pub worst_push_delay: u64,
    /// The first few of them, described.
    pub beyond_lease_described: Vec<String>,
    pub pairs_compared: u64,
    pub violations: BTreeMap<&'static str, u64>,
    pub described: Vec<Violation>,
    pub first_ns: u64,
    pub last_ns: u64,
}

impl Report {
    pub fn violation_count(&self) -> u64 {
        self.violations.values().sum()
    }

    pub fn operations(&self) -> u64 {
        // Invocations of acquire and release (the holds' sections between).
        self.acquire_invokes + self.releases.values().sum::<u64>()
    }

    pub(super) fn violate(&mut self, kind: &'static str, lock: &str, at: u64, detail: String) {
        let count = self.violations.entry(kind).or_default();
        *count += 1;
        if *count <= DESCRIBED {
            self.described.push(Violation {
                kind,
                lock: lock.to_owned(),
                at,
                detail,
            });
        }
    }

    /// One line of figures.
    pub fn summary(&self) -> String {
        let map = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("{k}:{v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let violations: Vec<String> = self
            .violations
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        format!(
            "history: violations={} [{}] events={} span={}s operations={} acquires={} \
             (ok={}, failed={}, unknown={}, reentries={}) holds=[{}] tokens={} fenced_writes=[{}] releases=[{}] \
             lost_signals={} (after a good release: {}) beyond_lease_overlaps={} worst_push_delay={}ms \
             died_holding={} unfinished={} \
             processes=[{}] faults=[{}] garbled={}",
            self.violation_count(),
            violations.join(","),
            self.lines,
            self.last_ns.saturating_sub(self.first_ns) / 1_000_000_000,
            self.operations(),
            self.acquire_invokes,
            self.acquired,
            self.acquire_failed,
            self.acquire_unknown,
            self.reentries,
            map(&self.holds),
            self.tokens,
            map(&self.fenced_writes),
            map(&self.releases),
            self.lost_signals,
            self.lost_after_good_release,
            self.beyond_lease_overlaps,
            self.worst_push_delay / 1_000_000,
            self.died_holding,
            self.unfinished,
            map(&self.processes),
            map(&self.faults),
            self.garbled,
        )
    }
}

impl Reader {
    /// Faults that had begun by `at` and ended at most `FAULT_REACH_NS`
    /// before it.
    pub(super) fn faults_near(&self, at: u64) -> String {
        let mut near: Vec<String> = self
            .faults
            .iter()
            .filter(|(_, from, to, _)| *from <= at && at <= to.saturating_add(FAULT_REACH_NS))
            .map(|(kind, from, _, _)| {
                format!("{kind} {} ms before", at.saturating_sub(*from) / 1_000_000)
            })
            .collect();
        near.dedup();
        if near.is_empty() {
            "no fault within 5 s".to_owned()
        } else {
            near.join(", ")
        }
    }

    /// Seconds from the history's first event, to the µs.
    pub(super) fn rel(&self, t: u64) -> String {
        let d = i128::from(t) - i128::from(self.report.first_ns);
        format!("{:.6}s", d as f64 / 1e9)
    }

    pub(super) fn describe(&self, index: usize) -> String {
        let hold = &self.holds[index];
        let opt = |t: Option<u64>| t.map_or("-".to_owned(), |t| self.rel(t));
        format!(
            "{} ({}) tok={} invoked={} acquired={} end={} vu={} lost_since={}",
            hold.who,
            self.impls.get(hold.process()).map_or("?", String::as_str),
            hold.token.map_or("-".to_owned(), |t| t.to_string()),
            opt(hold.invoked),
            opt(hold.acquired),
            opt(hold.end),
            opt(hold.vu.map(|(_, vu)| vu)),
            opt(hold.lost_since),
        )
    }
}

/// Prints the report (figures, then the violations it describes) on stderr.
pub fn print(report: &Report) {
    for overlap in &report.beyond_lease_described {
        eprintln!("torture: history: overlap beyond the lease, signalled first, {overlap}");
    }
    for v in &report.described {
        eprintln!(
            "torture: HISTORY VIOLATION {} on {} at {} ns: {}",
            v.kind, v.lock, v.at, v.detail
        );
    }
    let count = report.violation_count();
    if count > report.described.len() as u64 {
        eprintln!(
            "torture: ... and {} more violations",
            count - report.described.len() as u64
        );
    }
    eprintln!("torture: {}", report.summary());
}
