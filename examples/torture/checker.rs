//! The history checker: reads a run's history (`history.rs` describes the
//! lines) and checks three things per lock, across every Rust and Java
//! worker:
//!
//! 1. **Mutual exclusion within the lease.** A hold's interval runs from
//!    its acquire's completion to its release's invocation (or to its
//!    process's death); its *valid part* ends earlier if the hold was past
//!    its `vu` (valid-until) or its lost signal by then. The valid parts of
//!    two conflicting holds (different holds, not a reentry, not two
//!    readers) must not intersect: while a holder's lock cannot have
//!    expired, nobody else may have it.
//! 2. **Fencing tokens strictly increase in acquisition order.** No two
//!    acquisitions of a lock got the same token, and an acquisition that
//!    completed before another was invoked got a smaller token; so did a
//!    hold whose valid part ended before another hold's acquire completed,
//!    if that other hold was valid then (its key existed all along, so its
//!    acquire took effect after the first's).
//! 3. **Every overlap beyond the lease was signalled first.** When the
//!    intervals of two conflicting holds intersect but their valid parts do
//!    not, each holder whose valid part had ended when the overlap began
//!    must have had its lost signal in force by then: `is_lost()` true (a
//!    lease that ran out is in force from its deadline, any other loss from
//!    when it was seen; a Rust guard reads as lost from its deadline on
//!    whatever reason its signal gives later, e.g. a renewal that found
//!    the key gone before the deadline thread woke). And a Rust holder's `LostSignal` (the push a
//!    supervisor thread waits on, seen by the worker's watcher thread) must
//!    have fired within `PUSH_SLACK_NS` (0.5 s) of the overlap's start (of its
//!    process's SIGCONT, if it was stopped then): the signal is a promise of
//!    its own (issue 29: it once fired at the old deadline).
//!
//! Everything else is information: operations, faults by type, lost
//! signals, overlaps beyond the lease (signalled). `torture check-history
//! <file>` runs it on a file; a run with a history runs it at its end.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use std::path::Path;

/// How many violations of each kind a report describes (it counts them all).
const DESCRIBED: u64 = 8;
/// A violation this close after a fault (ns) names it.
const FAULT_REACH_NS: u64 = 5_000_000_000;
/// How long after an overlap beyond a Rust holder's lease began (or after
/// the holder's process was let go on, if it was stopped then) its
/// `LostSignal` may be seen firing (ns): the deadline thread's and the
/// watcher's wake-ups on a busy machine.
/// Scheduling latency reached 150 ms with the machine's 2 cores at a load
/// of 12; the defect this is for fired 0.5-15 s late.
const PUSH_SLACK_NS: u64 = 500_000_000;

#[derive(Clone, Debug, Default)]
struct Hold {
    who: String,
    lock: String,
    exclusive: bool,
    reentry: bool,
    invoked: Option<u64>,
    acquired: Option<u64>,
    token: Option<u64>,
    /// The release's invocation.
    end: Option<u64>,
    /// The latest (record time, valid until) seen.
    vu: Option<(u64, u64)>,
    lost_since: Option<u64>,
    /// When a `lost signal` line was recorded: for a Rust hold, when its
    /// worker's watcher saw the `LostSignal` fire.
    signal_seen: Option<u64>,
    /// The release said `ok`.
    released_ok: bool,
}

impl Hold {
    fn process(&self) -> &str {
        self.who.split('/').next().unwrap_or(&self.who)
    }

    fn note_vu(&mut self, at: u64, vu: u64) {
        if self.vu.is_none_or(|(seen, _)| at >= seen) {
            self.vu = Some((at, vu));
        }
    }

    fn note_lost(&mut self, since: u64) {
        self.lost_since = Some(self.lost_since.map_or(since, |s| s.min(since)));
    }
}

/// A hold as the checks see it: its interval and valid part, in ns.
#[derive(Clone, Copy, Debug)]
struct Span {
    index: usize,
    acquired: u64,
    end: u64,
    valid_end: u64,
}

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

    fn violate(&mut self, kind: &'static str, lock: &str, at: u64, detail: String) {
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

fn field<'a>(fields: &[(&'a str, &'a str)], key: &str) -> Option<&'a str> {
    fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

fn num(fields: &[(&str, &str)], key: &str) -> Option<u64> {
    field(fields, key).and_then(|v| v.parse().ok())
}

/// A `lost=` field: `None` for `0` (or none), else when the loss came into
/// force: the deadline for `lease_expired`, else the record's time.
fn lost_field(fields: &[(&str, &str)], at: u64) -> Option<u64> {
    match field(fields, "lost") {
        None | Some("0") => None,
        Some("lease_expired") => Some(num(fields, "vu").unwrap_or(at).min(at)),
        Some(_) => Some(at),
    }
}

#[derive(Default)]
struct Reader {
    report: Report,
    holds: Vec<Hold>,
    by_key: HashMap<String, usize>,
    /// Process -> when it was known gone.
    exits: HashMap<String, u64>,
    /// Process -> implementation.
    impls: HashMap<String, String>,
    /// (type, from, to, target) of every fault.
    faults: Vec<(String, u64, u64, String)>,
    open_faults: HashMap<String, (String, u64, String)>,
}

impl Reader {
    fn hold(&mut self, who: &str, h: &str) -> &mut Hold {
        let key = format!("{who}#{h}");
        let index = match self.by_key.get(&key) {
            Some(&index) => index,
            None => {
                self.holds.push(Hold {
                    who: who.to_owned(),
                    exclusive: true,
                    ..Hold::default()
                });
                self.by_key.insert(key, self.holds.len() - 1);
                self.holds.len() - 1
            }
        };
        &mut self.holds[index]
    }

    fn read(&mut self, line: &str) {
        let mut words = line.split_ascii_whitespace();
        let (Some(t), Some(who), Some(op), Some(phase)) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            if !line.trim().is_empty() {
                self.report.garbled += 1;
            }
            return;
        };
        let Ok(t) = t.parse::<u64>() else {
            self.report.garbled += 1;
            return;
        };
        let fields: Vec<(&str, &str)> = words.filter_map(|w| w.split_once('=')).collect();
        self.report.lines += 1;
        if self.report.first_ns == 0 || t < self.report.first_ns {
            self.report.first_ns = t;
        }
        self.report.last_ns = self.report.last_ns.max(t);
        if who == "sup" {
            self.supervisor(t, op, phase, &fields);
            return;
        }
        let Some(h) = field(&fields, "h") else {
            self.report.garbled += 1;
            return;
        };
        let lock = field(&fields, "lock").unwrap_or("");
        let hold = self.hold(who, h);
        if hold.lock.is_empty() {
            hold.lock = lock.to_owned();
        }
        if let Some(token) = num(&fields, "tok") {
            hold.token = Some(token);
        }
        if let Some(vu) = num(&fields, "vu") {
            hold.note_vu(t, vu);
        }
        if let Some(since) = lost_field(&fields, t) {
            hold.note_lost(since);
        }
        match (op, phase) {
            ("acquire", "invoke") => {
                hold.invoked = Some(t);
                hold.exclusive = field(&fields, "mode") != Some("r");
                hold.reentry = field(&fields, "reentry") == Some("1");
                self.report.acquire_invokes += 1;
            }
            ("acquire", "ok") => {
                hold.acquired = Some(t);
                if field(&fields, "reentry") == Some("1") {
                    hold.reentry = true;
                }
                self.report.acquired += 1;
            }
            ("acquire", "fail") => self.report.acquire_failed += 1,
            ("acquire", "info") => self.report.acquire_unknown += 1,
            ("hold", "invoke") => self.report.sections += 1,
            ("hold", "ok") | ("valid", _) => {}
            ("write", outcome) => {
                *self
                    .report
                    .fenced_writes
                    .entry(outcome.to_owned())
                    .or_default() += 1;
            }
            ("release", "invoke") => {
                hold.end = Some(hold.end.map_or(t, |e| e.min(t)));
            }
            ("release", outcome) => {
                hold.released_ok |= outcome == "ok";
                let err = field(&fields, "err").unwrap_or("");
                if outcome == "fail" && matches!(err, "lost" | "not_held") {
                    hold.note_lost(t);
                }
                let key = if err.is_empty() {
                    outcome.to_owned()
                } else {
                    format!("{outcome}-{err}")
                };
                *self.report.releases.entry(key).or_default() += 1;
            }
            ("lost", _) => {
                let since = num(&fields, "since").unwrap_or(t).min(t);
                hold.note_lost(since);
                hold.signal_seen = Some(hold.signal_seen.map_or(t, |s| s.min(t)));
            }
            _ => self.report.garbled += 1,
        }
    }

    fn supervisor(&mut self, t: u64, op: &str, phase: &str, fields: &[(&str, &str)]) {
        let target = field(fields, "target").unwrap_or("").to_owned();
        match (op, phase) {
            ("process", "start") => {
                let implementation = match (field(fields, "impl"), field(fields, "version")) {
                    (Some("java"), Some(version)) => format!("java-{version}"),
                    (Some(other), _) => other.to_owned(),
                    (None, _) => "unknown".to_owned(),
                };
                *self
                    .report
                    .processes
                    .entry(implementation.clone())
                    .or_default() += 1;
                self.impls.insert(target, implementation);
            }
            ("process", "exit") => {
                self.exits.entry(target).or_insert(t);
            }
            ("process", _) => {}
            ("fault", "invoke") => {
                let kind = field(fields, "type").unwrap_or("unknown").to_owned();
                *self.report.faults.entry(kind.clone()).or_default() += 1;
                let id = field(fields, "id").unwrap_or(&kind).to_owned();
                self.open_faults.insert(id, (kind, t, target));
            }
            ("fault", "ok") => {
                let kind = field(fields, "type").unwrap_or("unknown");
                let id = field(fields, "id").unwrap_or(kind);
                if let Some((kind, from, target)) = self.open_faults.remove(id) {
                    if field(fields, "refused") == Some("1") {
                        // Never happened (a CLUSTER FAILOVER refused).
                        if let Some(n) = self.report.faults.get_mut(&kind) {
                            *n -= 1;
                        }
                    } else {
                        self.faults.push((kind, from, t, target));
                    }
                }
            }
            _ => self.report.garbled += 1,
        }
    }

    /// Faults that had begun by `at` and ended at most `FAULT_REACH_NS`
    /// before it.
    fn faults_near(&self, at: u64) -> String {
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
    fn rel(&self, t: u64) -> String {
        let d = i128::from(t) - i128::from(self.report.first_ns);
        format!("{:.6}s", d as f64 / 1e9)
    }

    fn describe(&self, index: usize) -> String {
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

    fn finish(mut self) -> Report {
        let last = self.report.last_ns;
        let mut spans: HashMap<String, Vec<Span>> = HashMap::new();
        let mut acquisitions: HashMap<String, Vec<(u64, u64, u64, usize)>> = HashMap::new();
        for (index, hold) in self.holds.iter().enumerate() {
            let Some(acquired) = hold.acquired else {
                continue;
            };
            if let Some(since) = hold.lost_since {
                self.report.lost_signals += 1;
                if hold.released_ok && hold.end.is_some_and(|end| since >= end) {
                    self.report.lost_after_good_release += 1;
                }
            }
            if let Some(token) = hold.token {
                self.report.tokens += 1;
                acquisitions.entry(hold.lock.clone()).or_default().push((
                    hold.invoked.unwrap_or(acquired),
                    acquired,
                    token,
                    index,
                ));
            }
            if hold.reentry {
                self.report.reentries += 1;
                continue;
            }
            let implementation = self
                .impls
                .get(hold.process())
                .cloned()
                .unwrap_or_else(|| "unknown".to_owned());
            *self.report.holds.entry(implementation).or_default() += 1;
            let end = match (hold.end, self.exits.get(hold.process())) {
                (Some(end), _) => end,
                (None, Some(&died)) => {
                    self.report.died_holding += 1;
                    died
                }
                (None, None) => {
                    self.report.unfinished += 1;
                    last
                }
            }
            .max(acquired);
            let mut valid_end = end;
            if let Some((_, vu)) = hold.vu {
                valid_end = valid_end.min(vu);
            }
            if let Some(since) = hold.lost_since {
                valid_end = valid_end.min(since);
            }
            spans.entry(hold.lock.clone()).or_default().push(Span {
                index,
                acquired,
                end,
                // Below `acquired` when the hold was lost on arrival.
                valid_end,
            });
        }
        let mut locks: Vec<String> = spans.keys().cloned().collect();
        locks.sort();
        for lock in &locks {
            let mut list = spans.remove(lock).unwrap_or_default();
            list.sort_by_key(|s| (s.acquired, s.index));
            self.exclusion(lock, &list);
            let tokens = acquisitions.remove(lock).unwrap_or_default();
            self.token_order(lock, tokens, &list);
        }
        // Tokens of locks without a hold (never happens in a run).
        for (lock, tokens) in acquisitions {
            self.token_order(&lock, tokens, &[]);
        }
        self.report
    }

    /// Checks 1 and 3 over the holds of one lock, sorted by acquisition.
    fn exclusion(&mut self, lock: &str, list: &[Span]) {
        let mut active: Vec<Span> = Vec::new();
        for &b in list {
            active.retain(|a| a.end > b.acquired);
            for &a in &active {
                let (ha, hb) = (&self.holds[a.index], &self.holds[b.index]);
                if !(ha.exclusive || hb.exclusive) || b.end <= a.acquired {
                    continue;
                }
                self.report.pairs_compared += 1;
                let start = a.acquired.max(b.acquired);
                if start < a.valid_end.min(b.valid_end) {
                    let detail = format!(
                        "{} and {} were both within their lease from {} for {} µs; {}",
                        self.describe(a.index),
                        self.describe(b.index),
                        self.rel(start),
                        (a.valid_end.min(b.valid_end) - start) / 1000,
                        self.faults_near(start)
                    );
                    self.report
                        .violate("overlap_within_lease", lock, start, detail);
                    continue;
                }
                // Beyond the lease of at least one of them: each whose
                // valid part had ended must have been told by `start`.
                let mut fine = true;
                for s in [a, b] {
                    if s.valid_end > start {
                        continue;
                    }
                    let since = self.told_since(s.index);
                    if let Some(late) = self.push_late(s.index, start) {
                        fine = false;
                        let detail = format!(
                            "the LostSignal of {}, past its lease when an overlap began at {}, {late}; {}",
                            self.describe(s.index),
                            self.rel(start),
                            self.faults_near(start)
                        );
                        self.report
                            .violate("lost_signal_push_late", lock, start, detail);
                    }
                    if since.is_none_or(|since| since > start) {
                        fine = false;
                        let other = if s.index == a.index { b } else { a };
                        let kind = if since.is_some() {
                            "lost_signal_late"
                        } else {
                            "overlap_beyond_lease_unsignalled"
                        };
                        let detail = format!(
                            "{} was past its lease and not told when {} overlapped it at {}; {}",
                            self.describe(s.index),
                            self.describe(other.index),
                            self.rel(start),
                            self.faults_near(start)
                        );
                        self.report.violate(kind, lock, start, detail);
                    }
                }
                if fine {
                    self.report.beyond_lease_overlaps += 1;
                    if self.report.beyond_lease_described.len() < DESCRIBED as usize {
                        let detail = format!(
                            "on {lock} at {}: {} and {}; {}",
                            self.rel(start),
                            self.describe(a.index),
                            self.describe(b.index),
                            self.faults_near(start)
                        );
                        self.report.beyond_lease_described.push(detail);
                    }
                }
            }
            active.push(b);
        }
    }

    /// A Rust hold past its lease at `start` must have seen its
    /// `LostSignal` fire within `PUSH_SLACK_NS` of `start`, not counting
    /// the time its process was stopped (SIGSTOP) meanwhile: what is wrong
    /// if not.
    /// Since when the holder of hold `index` knew it was lost, if it was
    /// told at all: its `lost` record; for a Rust hold, no later than its
    /// deadline (the last `vu` it reported), since a Rust guard reads as
    /// lost from its deadline on (`is_lost`, `ensure_held` compare the clock
    /// with `valid_until`) whenever the push comes: the push is checked on
    /// its own (`push_late`).
    fn told_since(&self, index: usize) -> Option<u64> {
        let hold = &self.holds[index];
        let since = hold.lost_since?;
        let rust = self.impls.get(hold.process()).map(String::as_str) == Some("rust");
        Some(match hold.vu {
            Some((_, vu)) if rust => since.min(vu),
            _ => since,
        })
    }

    fn push_late(&mut self, index: usize, start: u64) -> Option<String> {
        let hold = &self.holds[index];
        if self.impls.get(hold.process()).map(String::as_str) != Some("rust") {
            return None;
        }
        // Nothing runs in a stopped process: the time it spent stopped
        // between the overlap's start and the signal does not count.
        let Some(seen) = hold.signal_seen else {
            return Some("never fired".to_owned());
        };
        let stopped: u64 = self
            .faults
            .iter()
            .filter(|(kind, _, _, target)| kind.starts_with("sigstop") && target == hold.process())
            .map(|&(_, from, to, _)| seen.min(to).saturating_sub(start.max(from)))
            .sum();
        let delay = seen.saturating_sub(start).saturating_sub(stopped);
        self.report.worst_push_delay = self.report.worst_push_delay.max(delay);
        (delay > PUSH_SLACK_NS).then(|| {
            format!(
                "fired {} ms after it ({} ms of them stopped)",
                (delay + stopped) / 1_000_000,
                stopped / 1_000_000
            )
        })
    }

    /// Check 2 over the acquisitions (invoked, acquired, token, hold) of one
    /// lock and its holds' spans.
    fn token_order(
        &mut self,
        lock: &str,
        mut acquisitions: Vec<(u64, u64, u64, usize)>,
        spans: &[Span],
    ) {
        let mut reported: HashSet<(usize, usize)> = HashSet::new();
        let mut seen: HashMap<u64, usize> = HashMap::new();
        for &(_, acquired, token, index) in &acquisitions {
            if let Some(&first) = seen.get(&token) {
                let detail = format!(
                    "token {token} handed out twice: {} and {}",
                    self.describe(first),
                    self.describe(index)
                );
                self.report
                    .violate("duplicate_token", lock, acquired, detail);
                reported.insert((first, index));
                reported.insert((index, first));
            } else {
                seen.insert(token, index);
            }
        }
        // Real-time order: acquired(A) < invoked(B) => token(A) < token(B).
        acquisitions.sort_by_key(|&(_, acquired, _, index)| (acquired, index));
        let mut best: Vec<(u64, usize)> = Vec::with_capacity(acquisitions.len());
        for &(_, _, token, index) in &acquisitions {
            let previous = best.last().copied();
            best.push(match previous {
                Some((max, at)) if max >= token => (max, at),
                _ => (token, index),
            });
        }
        for &(invoked, acquired, token, index) in &acquisitions {
            let before = acquisitions.partition_point(|&(_, a, _, _)| a < invoked);
            if before == 0 {
                continue;
            }
            let (max, at) = best[before - 1];
            if max >= token && reported.insert((at, index)) {
                let detail = format!(
                    "{} completed before {} was invoked, with a token not smaller",
                    self.describe(at),
                    self.describe(index)
                );
                self.report.violate("token_order", lock, acquired, detail);
            }
        }
        // A hold B is valid, its key in Redis, from its acquire's effect
        // until its valid part ends. An acquisition A by another thread
        // that completed before then took effect inside that time if its
        // token is greater (tokens follow the effects): both held the lock.
        // So: acquired(A) < valid_end(B) => token(A) < token(B).
        // `top` is the prefix's largest token, and the largest of another
        // thread than the largest's (B's own reentries do not count).
        let mut top: Vec<[Option<(u64, usize)>; 2]> = Vec::with_capacity(acquisitions.len());
        let mut current: [Option<(u64, usize)>; 2] = [None, None];
        for &(_, _, token, index) in &acquisitions {
            let who = |i: usize| self.holds[i].who.as_str();
            match current[0] {
                Some((max, first)) if max >= token => {
                    if who(first) != who(index) && current[1].is_none_or(|(m, _)| token > m) {
                        current[1] = Some((token, index));
                    }
                }
                Some((_, first)) => {
                    if who(first) != who(index) {
                        current[1] = current[0];
                    }
                    current[0] = Some((token, index));
                }
                None => current[0] = Some((token, index)),
            }
            top.push(current);
        }
        for b in spans {
            let Some(token) = self.holds[b.index].token else {
                continue;
            };
            let before = acquisitions.partition_point(|&(_, a, _, _)| a < b.valid_end);
            if before == 0 {
                continue;
            }
            let candidate = top[before - 1]
                .into_iter()
                .flatten()
                .find(|&(_, i)| self.holds[i].who != self.holds[b.index].who);
            if let Some((max, at)) = candidate
                && max > token
                && reported.insert((at, b.index))
            {
                let detail = format!(
                    "{} was acquired while {} was valid, with a greater token",
                    self.describe(at),
                    self.describe(b.index)
                );
                self.report.violate(
                    "token_order",
                    lock,
                    self.holds[at].acquired.unwrap_or(0),
                    detail,
                );
            }
        }
    }
}

/// Checks history lines (in any order).
#[cfg(test)]
pub fn check_lines<I, S>(lines: I) -> Report
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut reader = Reader::default();
    for line in lines {
        reader.read(line.as_ref());
    }
    reader.finish()
}

pub fn check_file(path: &Path) -> std::io::Result<Report> {
    let file = std::fs::File::open(path)?;
    let mut reader = Reader::default();
    for line in std::io::BufReader::with_capacity(1 << 20, file).lines() {
        match line {
            Ok(line) => reader.read(&line),
            // A line cut mid-character: count it, go on.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => reader.report.garbled += 1,
            Err(e) => return Err(e),
        }
    }
    Ok(reader.finish())
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

/// `torture check-history <file>...`: exits 1 on a violation.
pub fn main(paths: &[String]) -> std::process::ExitCode {
    if paths.is_empty() {
        eprintln!("usage: torture check-history <history file>...");
        return std::process::ExitCode::from(2);
    }
    let mut failed = false;
    for path in paths {
        match check_file(Path::new(path)) {
            Ok(report) => {
                eprintln!("torture: {path}:");
                print(&report);
                failed |= report.violation_count() > 0;
            }
            Err(e) => {
                eprintln!("torture: {path}: {e}");
                return std::process::ExitCode::from(2);
            }
        }
    }
    if failed {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Times in ms from 1 s after the epoch, written in ns.
    fn ns(ms: u64) -> u64 {
        (1000 + ms) * 1_000_000
    }

    /// One hold's events: acquire invoke at `inv`, ok at `acq` with `tok`
    /// and valid until `vu`, section, release invoked at `rel` (`None`:
    /// never released), with `lost` on the release's invocation.
    fn hold(
        who: &str,
        h: u64,
        (inv, acq, rel): (u64, u64, Option<u64>),
        tok: u64,
        vu: u64,
        lost: &str,
    ) -> Vec<String> {
        let mut lines = vec![
            format!(
                "{} {who} acquire invoke lock=x h={h} mode=w call=lock",
                ns(inv)
            ),
            format!(
                "{} {who} acquire ok lock=x h={h} tok={tok} vu={}",
                ns(acq),
                ns(vu)
            ),
            format!("{} {who} hold invoke lock=x h={h} tok={tok}", ns(acq)),
        ];
        if let Some(rel) = rel {
            lines.push(format!(
                "{} {who} hold ok lock=x h={h} tok={tok} vu={} lost={lost}",
                ns(rel),
                ns(vu)
            ));
            lines.push(format!(
                "{} {who} release invoke lock=x h={h} tok={tok} vu={} lost={lost}",
                ns(rel),
                ns(vu)
            ));
            let outcome = if lost == "0" { "ok" } else { "fail" };
            let err = if lost == "0" { "" } else { " err=lost" };
            lines.push(format!(
                "{} {who} release {outcome} lock=x h={h} tok={tok}{err}",
                ns(rel + 1)
            ));
        }
        lines
    }

    fn start(who: &str, implementation: &str) -> String {
        format!(
            "{} sup process start target={who} impl={implementation} version=4.7.0",
            ns(0)
        )
    }

    fn check(parts: &[Vec<String>]) -> Report {
        let mut lines = vec![start("w0g0", "rust"), start("j0g0", "java")];
        lines.extend(parts.iter().flatten().cloned());
        check_lines(lines)
    }

    #[test]
    fn disjoint_holds_with_increasing_tokens_pass() {
        let report = check(&[
            hold("w0g0/1", 1, (0, 10, Some(20)), 1, 1510, "0"),
            hold("j0g0/a0", 1, (5, 25, Some(30)), 2, 1505, "0"),
            hold("w0g0/2", 1, (26, 40, Some(50)), 3, 1540, "0"),
        ]);
        assert_eq!(report.violation_count(), 0, "{:?}", report.described);
        assert_eq!(report.acquired, 3);
        assert_eq!(report.holds.get("rust"), Some(&2));
        assert_eq!(report.holds.get("java-4.7.0"), Some(&1));
        assert_eq!(report.tokens, 3);
    }

    #[test]
    fn an_overlap_inside_both_leases_is_a_violation() {
        let report = check(&[
            hold("w0g0/1", 1, (0, 10, Some(100)), 1, 1510, "0"),
            hold("j0g0/a0", 1, (5, 50, Some(60)), 2, 1505, "0"),
        ]);
        assert_eq!(report.violations.get("overlap_within_lease"), Some(&1));
        // The later acquisition's greater token was handed out while the
        // first hold was valid: the token check says so too.
        assert_eq!(report.violations.get("token_order"), Some(&1));
        assert_eq!(report.violation_count(), 2, "{:?}", report.described);
    }

    #[test]
    fn readers_may_share_but_not_with_a_writer() {
        let read = |who: &str, inv: u64, acq: u64, rel: u64| {
            vec![
                format!(
                    "{} {who} acquire invoke lock=x h=1 mode=r call=lock",
                    ns(inv)
                ),
                format!(
                    "{} {who} acquire ok lock=x h=1 vu={}",
                    ns(acq),
                    ns(acq + 1500)
                ),
                format!(
                    "{} {who} release invoke lock=x h=1 vu={} lost=0",
                    ns(rel),
                    ns(acq + 1500)
                ),
            ]
        };
        let report = check(&[read("w0g0/1", 0, 10, 100), read("w0g0/2", 0, 20, 90)]);
        assert_eq!(report.violation_count(), 0, "{:?}", report.described);
        let writer = vec![
            format!(
                "{} w0g0/3 acquire invoke lock=x h=1 mode=w call=lock",
                ns(0)
            ),
            format!("{} w0g0/3 acquire ok lock=x h=1 vu={}", ns(50), ns(1550)),
            format!(
                "{} w0g0/3 release invoke lock=x h=1 vu={} lost=0",
                ns(60),
                ns(1550)
            ),
        ];
        let report = check(&[read("w0g0/1", 0, 10, 100), writer]);
        assert_eq!(report.violations.get("overlap_within_lease"), Some(&1));
    }

    #[test]
    fn a_token_not_above_an_earlier_ones_is_a_violation() {
        // Sequential holds, the second with a smaller token.
        let report = check(&[
            hold("w0g0/1", 1, (0, 10, Some(20)), 5, 1510, "0"),
            hold("w0g0/2", 1, (30, 40, Some(50)), 4, 1540, "0"),
        ]);
        assert_eq!(report.violations.get("token_order"), Some(&1));
        assert_eq!(report.violation_count(), 1, "{:?}", report.described);
        // The same token twice.
        let report = check(&[
            hold("w0g0/1", 1, (0, 10, Some(20)), 5, 1510, "0"),
            hold("j0g0/a0", 1, (30, 40, Some(50)), 5, 1530, "0"),
        ]);
        assert_eq!(report.violations.get("duplicate_token"), Some(&1));
        assert_eq!(report.violation_count(), 1, "{:?}", report.described);
    }

    #[test]
    fn a_waiters_token_must_exceed_the_hold_it_waited_for() {
        // B invoked before A's acquire completed (no real-time order), but
        // A's hold was over before B acquired, and B was valid from then.
        let report = check(&[
            hold("w0g0/1", 1, (0, 10, Some(20)), 7, 1510, "0"),
            hold("w0g0/2", 1, (5, 30, Some(40)), 6, 1505, "0"),
        ]);
        assert_eq!(report.violations.get("token_order"), Some(&1));
    }

    #[test]
    fn a_late_acquire_reply_is_not_a_token_violation() {
        // B's acquire took effect first (token 6) but its reply came after
        // its lease: B was lost on arrival, and A (token 7) legitimately
        // took the expired lock in between.
        let report = check(&[
            hold("w0g0/2", 1, (0, 2000, Some(2010)), 6, 1500, "lease_expired"),
            hold("w0g0/1", 1, (1600, 1700, Some(1800)), 7, 3200, "0"),
        ]);
        assert_eq!(
            report.violations.get("token_order"),
            None,
            "{:?}",
            report.described
        );
    }

    #[test]
    fn a_hold_whose_wait_outlasted_its_lease_is_no_token_violation() {
        // A waited 2.3 s: its valid-until (invoke + lease) passed before it
        // got the lock, after B had held and released it with a smaller
        // token.
        let report = check(&[
            hold(
                "j0g0/a0",
                1,
                (0, 2300, Some(2310)),
                100,
                1500,
                "lease_expired",
            ),
            hold("w0g0/1", 1, (1000, 1200, Some(1210)), 90, 2700, "0"),
        ]);
        assert_eq!(report.violation_count(), 0, "{:?}", report.described);
    }

    #[test]
    fn a_greater_token_handed_out_during_a_valid_hold_is_a_violation() {
        // B (token 6) holds from 30 to 40; A's acquisition, completed at
        // 35 with token 7, took effect after B's: both held the lock. The
        // overlap check sees it too; the token check names the order.
        let report = check(&[
            hold("w0g0/2", 1, (5, 30, Some(40)), 6, 1505, "0"),
            hold("w0g0/1", 1, (0, 35, Some(36)), 7, 1510, "0"),
        ]);
        assert_eq!(
            report.violations.get("token_order"),
            Some(&1),
            "{:?}",
            report.described
        );
        assert_eq!(report.violations.get("overlap_within_lease"), Some(&1));
    }

    #[test]
    fn an_overlap_beyond_the_lease_without_a_lost_signal_is_a_violation() {
        // A (Java, no signal) runs past its lease; B takes the expired lock.
        let report = check(&[
            hold("j0g0/a0", 1, (0, 10, Some(3000)), 1, 1500, "0"),
            hold("w0g0/1", 1, (1400, 1600, Some(1700)), 2, 3100, "0"),
        ]);
        assert_eq!(
            report.violations.get("overlap_beyond_lease_unsignalled"),
            Some(&1),
            "{:?}",
            report.described
        );
        assert_eq!(report.violation_count(), 1);
    }

    #[test]
    fn an_overlap_beyond_the_lease_with_a_lost_signal_first_is_fine() {
        // The same, but A's lost signal fired at its deadline.
        let mut a = hold("w0g0/2", 1, (0, 10, Some(3000)), 1, 1500, "lease_expired");
        a.push(format!(
            "{} w0g0/2 lost signal lock=x h=1 tok=1 reason=lease_expired since={}",
            ns(1502),
            ns(1500)
        ));
        let report = check(&[a, hold("w0g0/1", 1, (1400, 1600, Some(1700)), 2, 3100, "0")]);
        assert_eq!(report.violation_count(), 0, "{:?}", report.described);
        assert_eq!(report.beyond_lease_overlaps, 1);
        assert_eq!(report.lost_signals, 1);
    }

    /// A Rust hold past its lease from 1500 ms to 3000 ms whose
    /// `LostSignal` was seen firing at `seen` ms.
    fn rust_past_its_lease(seen: u64) -> Vec<String> {
        let mut a = hold("w0g0/2", 1, (0, 10, Some(3000)), 1, 1500, "lease_expired");
        a.push(format!(
            "{} w0g0/2 lost signal lock=x h=1 tok=1 reason=lease_expired since={}",
            ns(seen),
            ns(1500)
        ));
        a
    }

    #[test]
    fn a_rust_holder_is_told_at_its_deadline_whatever_its_signal_says_later() {
        // A's deadline passed at 1500 ms; a renewal found the key gone and
        // its signal (key_gone, seen at 1603 ms) came 3 ms after B got in:
        // `is_lost()` had been true since 1500 ms, and the push was in time.
        let mut a = hold("w0g0/2", 1, (0, 10, Some(3000)), 1, 1500, "key_gone");
        a.push(format!(
            "{} w0g0/2 lost signal lock=x h=1 tok=1 reason=key_gone since={}",
            ns(1603),
            ns(1603)
        ));
        let b = hold("w1g0/1", 1, (1400, 1600, Some(1700)), 2, 3100, "0");
        let report = check(&[a, b.clone()]);
        assert_eq!(report.violation_count(), 0, "{:?}", report.described);
        // A Java holder's loss is in force only from its own record.
        let mut a = hold("j0g0/a0", 1, (0, 10, Some(3000)), 1, 1500, "0");
        a.push(format!(
            "{} j0g0/a0 lost signal lock=x h=1 tok=1 reason=key_gone since={}",
            ns(1603),
            ns(1603)
        ));
        let report = check(&[a, b]);
        assert_eq!(
            report.violations.get("lost_signal_late"),
            Some(&1),
            "{:?}",
            report.described
        );
    }

    #[test]
    fn a_lost_signal_that_fires_late_is_a_violation() {
        // In force since the deadline (is_lost), but the LostSignal a
        // supervisor thread waits on fired 900 ms after B got in.
        let b = hold("w1g0/1", 1, (1400, 1600, Some(1700)), 2, 3100, "0");
        let report = check(&[rust_past_its_lease(2500), b.clone()]);
        assert_eq!(
            report.violations.get("lost_signal_push_late"),
            Some(&1),
            "{:?}",
            report.described
        );
        assert_eq!(report.violation_count(), 1);
        // Within the slack: fine.
        let report = check(&[rust_past_its_lease(1650), b]);
        assert_eq!(report.violation_count(), 0, "{:?}", report.described);
        assert_eq!(report.worst_push_delay, 50_000_000);
    }

    #[test]
    fn a_stopped_holders_signal_is_due_when_it_goes_on() {
        // w0g0 was SIGSTOPped from 1000 to 2900 ms (or from just after B
        // got in): its watcher saw the signal at 2905, 5 ms after the
        // SIGCONT.
        let mut a = rust_past_its_lease(2905);
        a.push(format!(
            "{} sup fault invoke type=sigstop-rust-long id=s1 target=w0g0 ms=1900",
            ns(1000)
        ));
        a.push(format!(
            "{} sup fault ok type=sigstop-rust-long id=s1",
            ns(2900)
        ));
        let b = hold("w1g0/1", 1, (1400, 1600, Some(1700)), 2, 3100, "0");
        let report = check(&[a, b.clone()]);
        assert_eq!(report.violation_count(), 0, "{:?}", report.described);
        assert_eq!(report.faults.get("sigstop-rust-long"), Some(&1));
        let mut a = rust_past_its_lease(2905);
        a.push(format!(
            "{} sup fault invoke type=sigstop-rust id=s1 target=w0g0 ms=1297",
            ns(1603)
        ));
        a.push(format!("{} sup fault ok type=sigstop-rust id=s1", ns(2900)));
        let report = check(&[a, b.clone()]);
        assert_eq!(report.violation_count(), 0, "{:?}", report.described);
        assert_eq!(report.worst_push_delay, 8_000_000);
        // Stopped for a part of the delay only: the rest counts.
        let mut a = rust_past_its_lease(2905);
        a.push(format!(
            "{} sup fault invoke type=sigstop-rust id=s1 target=w0g0 ms=400",
            ns(2500)
        ));
        a.push(format!("{} sup fault ok type=sigstop-rust id=s1", ns(2900)));
        let report = check(&[a, b]);
        assert_eq!(
            report.violations.get("lost_signal_push_late"),
            Some(&1),
            "{:?}",
            report.described
        );
    }

    #[test]
    fn a_lost_signal_after_the_overlap_began_is_late() {
        // A learns it lost the lock only when its unlock fails, after B.
        let a = hold("j0g0/a0", 1, (0, 10, Some(3000)), 1, 1500, "0");
        let mut a: Vec<String> = a
            .into_iter()
            .filter(|l| !l.contains(" release ok"))
            .collect();
        a.push(format!(
            "{} j0g0/a0 release fail lock=x h=1 tok=1 err=not_held",
            ns(3001)
        ));
        let report = check(&[a, hold("w0g0/1", 1, (1400, 1600, Some(1700)), 2, 3100, "0")]);
        assert_eq!(
            report.violations.get("lost_signal_late"),
            Some(&1),
            "{:?}",
            report.described
        );
    }

    #[test]
    fn a_dead_holders_interval_ends_at_its_death() {
        // w0g0 dies holding the lock at 100 ms; B takes it after the lease.
        let mut a = hold("w0g0/1", 1, (0, 10, None), 1, 1510, "0");
        a.push(format!(
            "{} sup fault invoke type=kill-rust target=w0g0 id=k1",
            ns(99)
        ));
        a.push(format!(
            "{} sup fault ok type=kill-rust target=w0g0 id=k1",
            ns(100)
        ));
        a.push(format!("{} sup process exit target=w0g0", ns(100)));
        let b = hold("w1g0/1", 1, (20, 1600, Some(1700)), 2, 3100, "0");
        let report = check(&[a, b]);
        assert_eq!(report.violation_count(), 0, "{:?}", report.described);
        assert_eq!(report.died_holding, 1);
        assert_eq!(report.faults.get("kill-rust"), Some(&1));
        // Had it lived on unreleased past B's acquisition, that would be
        // an unsignalled overlap beyond its lease.
        let a = hold("w0g0/1", 1, (0, 10, None), 1, 1510, "0");
        let report = check(&[a, hold("w1g0/1", 1, (20, 1600, Some(1700)), 2, 3100, "0")]);
        assert_eq!(report.unfinished, 1);
        assert_eq!(
            report.violations.get("overlap_beyond_lease_unsignalled"),
            Some(&1)
        );
    }

    #[test]
    fn a_reentry_inside_its_own_hold_is_no_overlap() {
        let mut a = hold("w0g0/1", 1, (0, 10, Some(100)), 1, 1510, "0");
        a.extend([
            format!(
                "{} w0g0/1 acquire invoke lock=x h=1r mode=w call=try reentry=1",
                ns(20)
            ),
            format!(
                "{} w0g0/1 acquire ok lock=x h=1r tok=2 vu={} reentry=1",
                ns(21),
                ns(1521)
            ),
            format!(
                "{} w0g0/1 release invoke lock=x h=1r tok=2 vu={} lost=0",
                ns(22),
                ns(1521)
            ),
        ]);
        let b = hold("w0g0/2", 1, (5, 101, Some(110)), 3, 1601, "0");
        let report = check(&[a, b]);
        assert_eq!(report.violation_count(), 0, "{:?}", report.described);
        assert_eq!(report.reentries, 1);
        assert_eq!(report.tokens, 3);
    }

    #[test]
    fn garbage_is_counted_not_fatal() {
        let report = check_lines([
            "",
            "12 x",
            "notanumber w acquire ok",
            "5 w0/1 acquire invoke lock=x",
        ]);
        assert_eq!(report.garbled, 3);
        assert_eq!(report.violation_count(), 0);
    }
}
