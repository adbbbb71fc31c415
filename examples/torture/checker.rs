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
//!
//! This file holds the entry points (`check_file`, `main`) and the unit
//! tests of the whole checker; `checker/read.rs` reads the lines into holds,
//! `checker/checks.rs` runs checks 1 and 3, `checker/tokens.rs` check 2,
//! and `checker/report.rs` holds the report and prints it.

mod checks;
mod read;
mod report;
mod tokens;

use std::io::BufRead;
use std::path::Path;

use self::read::Reader;
pub use self::report::{Report, print};

/// How many violations of each kind a report describes (it counts them all).
const DESCRIBED: u64 = 8;

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
