//! Schedule tests of the holds ledger and the `rlock-deadline` thread
//! (RELIABILITY.md, "Schedule exploration"): `shuttle`'s random scheduler
//! runs each body over many interleavings, on the virtual clock of
//! `crate::sync` (feature `shuttle`; `cargo test --features shuttle --lib
//! schedules::`).

use super::*;
use crate::sync::explore::{self, check, coin, pick, sleep};
use crate::sync::thread;

/// The lease the hold was taken with, and the shorter one a reentry sets.
const LONG: Duration = Duration::from_secs(30);
const SHORT: Duration = Duration::from_secs(2);

fn hold(lease: Duration) -> Arc<Hold> {
    let name: Arc<str> = "l".into();
    Arc::new(Hold::new(
        &name,
        "f",
        Renewal::Field,
        true,
        now(),
        lease,
        &Arc::default(),
    ))
}

/// Lowers `hold`'s deadline to `SHORT` from now in one of three ways (a
/// reentry with a shorter lease answered, or of unknown outcome, or a read
/// release that reports a shorter TTL); returns the deadline it set.
fn lower(hold: &Hold, how: usize) -> Instant {
    let sent = now();
    match how {
        0 => {
            let ticket = hold.begin_lease(SHORT);
            hold.end_lease(ticket, LeaseOutcome::Set);
        }
        1 => {
            let ticket = hold.begin_lease(SHORT);
            hold.end_lease(ticket, LeaseOutcome::Unknown);
        }
        _ => {
            // The lease is not known when sent: only the reply lowers it.
            let ticket = hold.begin_lease(Duration::MAX);
            hold.end_lease_with_ttl(ticket, sent, SHORT);
        }
    }
    sent + SHORT
}

/// (b) No lost wake-up: a thread blocked in `wait_lost` returns at a
/// deadline another thread moved earlier, not at the one it read, however
/// the two interleave (issue 29, item 1). The clock moves only when every
/// thread is blocked, so the waiter returns at the earliest deadline it
/// should have seen.
#[test]
fn a_waiter_wakes_at_a_deadline_another_thread_moved_earlier() {
    check(explore::iterations(3000), 0.0, || {
        let hold = hold(LONG);
        let waiter = {
            let hold = Arc::clone(&hold);
            thread::spawn(move || (hold.wait_lost(None), now()))
        };
        let lowered = lower(&hold, pick(3));
        let (reason, woke) = waiter.join().expect("the waiter");
        assert_eq!(reason, Some(LostReason::LeaseExpired));
        assert!(
            woke <= lowered,
            "woke {:?} after the lowered deadline",
            woke - lowered
        );
    });
}

/// (b) No lost wake-up at the end either: a thread blocked in `wait_lost`
/// returns at once when the hold ends without loss (its last guard
/// released) or is marked lost, not at the deadline it read, however the
/// two interleave (cargo-mutants: no test caught a waiter that skipped the
/// check of the hold's state under the waiting lock).
#[test]
fn a_waiter_returns_when_the_hold_ends_or_is_lost() {
    check(explore::iterations(1000), 0.0, || {
        let hold = hold(LONG);
        let started = now();
        let waiter = {
            let hold = Arc::clone(&hold);
            thread::spawn(move || (hold.wait_lost(None), now()))
        };
        let lose = coin(0.5);
        if lose {
            hold.mark_lost(LostReason::KeyGone);
        } else {
            hold.end();
        }
        let (reason, woke) = waiter.join().expect("the waiter");
        assert_eq!(reason, lose.then_some(LostReason::KeyGone));
        assert_eq!(woke, started, "woke {:?} later", woke - started);
    });
}

/// (b) The same for the `rlock-deadline` thread: a hold it watches is
/// signalled lost (its lost channel) at a deadline moved earlier after the
/// thread went to sleep until the old one.
#[test]
fn the_deadline_thread_wakes_at_a_deadline_moved_earlier() {
    const STEP: Duration = Duration::from_millis(100);
    check(explore::iterations(1000), 0.0, || {
        let registry = Registry::default();
        let name: Arc<str> = "l".into();
        let hold = registry.acquired(
            &name,
            "f",
            &HoldKind::NONE,
            Renewal::Field,
            LONG,
            true,
            now(),
            None,
        );
        let lost = hold.lost_channel();
        registry.watch(&hold);
        let lowered = {
            let hold = Arc::clone(&hold);
            let how = pick(3);
            thread::spawn(move || lower(&hold, how))
        };
        // Only the deadline thread marks the hold lost: nobody else looks.
        let signalled = loop {
            if let Ok(reason) = lost.try_recv() {
                break (reason, now());
            }
            sleep(STEP);
        };
        let lowered = lowered.join().expect("the lowering thread");
        registry.stop();
        assert_eq!(signalled.0, LostReason::LeaseExpired);
        assert!(
            signalled.1 <= lowered + STEP,
            "signalled {:?} after the lowered deadline",
            signalled.1 - lowered
        );
    });
}

/// The key's expiry as a model server keeps it.
struct ExpiryServer {
    expires: Instant,
}

/// (d) The hold's deadline is never later than the key's expiry: a
/// "watchdog" renewing with the long lease and a thread re-entering with a
/// shorter one, each command run by the server at a moment the schedule
/// picks (held back in the network past its caller's response timeout, or
/// not), its reply counted as the ledger is told (`Set`, `Unknown` after a
/// timeout, a key found gone). Checked at every command the server runs and
/// after every reply: the deadline is at most the expiry (or the hold is
/// lost), so `is_lost()` turns true no later than the key expires (issue
/// 29, item 2).
#[test]
fn the_deadline_is_never_later_than_the_keys_expiry() {
    const TIMEOUT: Duration = Duration::from_secs(3);
    const LEASES: [Duration; 2] = [LONG, Duration::from_secs(10)];
    check(explore::iterations(3000), 0.2, || {
        let start = now();
        let hold = hold(LONG);
        let server = Arc::new(Mutex::new(ExpiryServer {
            expires: start + LONG,
        }));
        let holds_the_bound = |hold: &Hold, server: &ExpiryServer, when: &str| {
            let lost = hold.lost.load(Ordering::Acquire) != 0;
            assert!(
                lost || hold.valid_until() <= server.expires,
                "{when}: the hold's deadline is {:?} after the key's expiry",
                hold.valid_until() - server.expires
            );
        };
        let clients: Vec<_> = LEASES
            .iter()
            .map(|&lease| {
                let hold = Arc::clone(&hold);
                let server = Arc::clone(&server);
                thread::spawn(move || {
                    let mut network = Vec::new();
                    for _ in 0..2 {
                        let ticket = hold.begin_lease(lease);
                        let sent = now();
                        let reply = Arc::new((Mutex::new(None::<bool>), Condvar::new()));
                        let held_back = match coin(0.3) {
                            true => TIMEOUT * u32::try_from(1 + pick(3)).unwrap_or(1),
                            false => Duration::ZERO,
                        };
                        network.push({
                            let (hold, server, reply) =
                                (Arc::clone(&hold), Arc::clone(&server), Arc::clone(&reply));
                            thread::spawn(move || {
                                if !held_back.is_zero() {
                                    sleep(held_back);
                                }
                                let ran = {
                                    let mut server = server.lock();
                                    holds_the_bound(&hold, &server, "before a command ran");
                                    let alive = now() < server.expires;
                                    if alive {
                                        server.expires = now() + lease;
                                    }
                                    holds_the_bound(&hold, &server, "after a command ran");
                                    alive
                                };
                                *reply.0.lock() = Some(ran);
                                reply.1.notify_all();
                            })
                        });
                        let answer = {
                            let mut answer = reply.0.lock();
                            while answer.is_none()
                                && !reply.1.wait_until(&mut answer, sent + TIMEOUT).timed_out()
                            {
                            }
                            *answer
                        };
                        match answer {
                            Some(true) => hold.end_lease(ticket, LeaseOutcome::Set),
                            Some(false) => {
                                hold.end_lease(ticket, LeaseOutcome::Untouched);
                                hold.mark_lost(LostReason::KeyGone);
                            }
                            None => hold.end_lease(ticket, LeaseOutcome::Unknown),
                        }
                        holds_the_bound(&hold, &server.lock(), "after a reply");
                    }
                    for command in network {
                        command.join().expect("a command");
                    }
                })
            })
            .collect();
        for client in clients {
            client.join().expect("a client");
        }
    });
}
