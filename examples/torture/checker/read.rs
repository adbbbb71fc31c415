//! Reading a history (`history.rs` describes the lines) into holds: a
//! `Hold` per acquisition attempt (its acquire, section, release, valid-until
//! and lost signal), the processes and their implementations, their exits,
//! and the supervisor's faults. Lines may come in any order; a line that
//! does not parse is counted (`garbled`), not fatal.

use std::collections::HashMap;

use super::report::Report;

#[derive(Clone, Debug, Default)]
pub(super) struct Hold {
    pub(super) who: String,
    pub(super) lock: String,
    pub(super) exclusive: bool,
    pub(super) reentry: bool,
    pub(super) invoked: Option<u64>,
    pub(super) acquired: Option<u64>,
    pub(super) token: Option<u64>,
    /// The release's invocation.
    pub(super) end: Option<u64>,
    /// The latest (record time, valid until) seen.
    pub(super) vu: Option<(u64, u64)>,
    pub(super) lost_since: Option<u64>,
    /// When a `lost signal` line was recorded: for a Rust hold, when its
    /// worker's watcher saw the `LostSignal` fire.
    pub(super) signal_seen: Option<u64>,
    /// The release said `ok`.
    pub(super) released_ok: bool,
}

impl Hold {
    pub(super) fn process(&self) -> &str {
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
pub(super) struct Reader {
    pub(super) report: Report,
    pub(super) holds: Vec<Hold>,
    by_key: HashMap<String, usize>,
    /// Process -> when it was known gone.
    pub(super) exits: HashMap<String, u64>,
    /// Process -> implementation.
    pub(super) impls: HashMap<String, String>,
    /// (type, from, to, target) of every fault.
    pub(super) faults: Vec<(String, u64, u64, String)>,
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

    pub(super) fn read(&mut self, line: &str) {
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
}
