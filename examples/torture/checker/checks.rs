//! Checks 1 and 3 of the module docs (`checker.rs`): the holds' intervals
//! and valid parts (`Span`, built by `Reader::finish`, which then runs
//! every check per lock), mutual exclusion within the lease
//! (`Reader::exclusion`), and the lost signal of every overlap beyond a
//! lease, its push's delay included (`told_since`, `push_late`).

use std::collections::HashMap;

use super::DESCRIBED;
use super::read::Reader;
use super::report::Report;

/// How long after an overlap beyond a Rust holder's lease began (or after
/// the holder's process was let go on, if it was stopped then) its
/// `LostSignal` may be seen firing (ns): the deadline thread's and the
/// watcher's wake-ups on a busy machine.
/// Scheduling latency reached 150 ms with the machine's 2 cores at a load
/// of 12; the defect this is for fired 0.5-15 s late.
const PUSH_SLACK_NS: u64 = 500_000_000;

/// A hold as the checks see it: its interval and valid part, in ns.
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    pub(super) index: usize,
    pub(super) acquired: u64,
    pub(super) end: u64,
    pub(super) valid_end: u64,
}

impl Reader {
    pub(super) fn finish(mut self) -> Report {
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

    /// A Rust hold past its lease at `start` must have seen its
    /// `LostSignal` fire within `PUSH_SLACK_NS` of `start`, not counting
    /// the time its process was stopped (SIGSTOP) meanwhile: what is wrong
    /// if not.
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
}
