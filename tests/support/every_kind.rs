//! One cheap pass over every lock type for a topology's tests: a holder on
//! one client takes the lock, a second client is refused it (`try_lock`),
//! then waits for it in a thread and must get it soon after the release:
//! woken by the unlock message within 2 s (the spin lock: within its 128 ms
//! backoff cap, plus a margin), not by the lease running out (the clients'
//! leases are 30 s).

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Kind, Lock};

/// The longest a waiter may take after the release: generous for a loaded
/// machine, far below the 30 s lease a missed wake-up would cost.
pub const WAKE_BOUND: Duration = Duration::from_secs(2);

/// The longest a spin waiter may take after the release: its backoff cap
/// (128 ms) plus a margin for a loaded machine.
pub const SPIN_BOUND: Duration = Duration::from_millis(128 + 500);

/// How a waiter of a type is woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// By the unlock message, through the client's subscriber.
    Message,
    /// By its own polling, with a backoff capped at 128 ms.
    Spin,
}

/// What a pass reports of one type: its name, the lock's name and the
/// time from the release to the waiter's acquisition.
#[derive(Debug)]
pub struct Handoff {
    pub kind: &'static str,
    pub name: String,
    pub took: Duration,
}

/// The lock types, with the name suffix each pass gives them.
pub const KINDS: [&str; 9] = [
    "reentrant",
    "fenced",
    "fair",
    "non-reentrant",
    "non-reentrant-fair",
    "spin",
    "write",
    "read-behind-write",
    "write-behind-read",
];

/// Runs [`contend_and_wake`] for every type in [`KINDS`]; `name_for` gives
/// the lock name for a type (e.g. one served by a given cluster master).
/// `while_waiting(name, wake)` runs while the waiter waits (the lock held),
/// for the topology's own checks (the key on the right node, the
/// subscriber's connection).
pub fn every_kind(
    holder: &Client,
    waiter: &Client,
    name_for: &dyn Fn(&str) -> String,
    while_waiting: &dyn Fn(&str, Wake),
) -> Vec<Handoff> {
    use Wake::{Message, Spin};
    let pass = |kind: &'static str, took: Duration| Handoff {
        kind,
        name: name_for(kind),
        took,
    };
    let mut out = Vec::new();
    for kind in KINDS {
        let name = name_for(kind);
        let args = (
            Pass {
                holder,
                waiter,
                while_waiting,
            },
            name.as_str(),
        );
        let took = match kind {
            "reentrant" => contend_on_one_kind(|c, n| c.lock(n), Message, args),
            "fenced" => contend_on_one_kind(|c, n| c.fenced_lock(n), Message, args),
            "fair" => contend_on_one_kind(|c, n| c.fair_lock(n), Message, args),
            "non-reentrant" => contend_on_one_kind(|c, n| c.non_reentrant_lock(n), Message, args),
            "non-reentrant-fair" => {
                contend_on_one_kind(|c, n| c.non_reentrant_fair_lock(n), Message, args)
            }
            "spin" => contend_on_one_kind(|c, n| c.spin_lock(n), Spin, args),
            "write" => contend_on_one_kind(|c, n| c.read_write_lock(n).write_lock(), Message, args),
            "read-behind-write" => contend_and_wake(
                |c, n| c.read_write_lock(n).write_lock(),
                |c, n| c.read_write_lock(n).read_lock(),
                Message,
                args,
            ),
            "write-behind-read" => contend_and_wake(
                |c, n| c.read_write_lock(n).read_lock(),
                |c, n| c.read_write_lock(n).write_lock(),
                Message,
                args,
            ),
            other => unreachable!("no lock type {other}"),
        };
        out.push(pass(kind, took));
    }
    for handoff in &out {
        eprintln!(
            "{:>20} {:<40} woken {:?} after the release",
            handoff.kind, handoff.name, handoff.took
        );
    }
    out
}

/// The two clients of a pass and the topology's check while a waiter waits.
#[derive(Clone, Copy)]
pub struct Pass<'a> {
    pub holder: &'a Client,
    pub waiter: &'a Client,
    pub while_waiting: &'a dyn Fn(&str, Wake),
}

/// [`contend_and_wake`] with the same type on both sides.
fn contend_on_one_kind<K: Kind>(
    lock: fn(&Client, &str) -> Lock<K>,
    wake: Wake,
    args: (Pass<'_>, &str),
) -> Duration {
    contend_and_wake(lock, lock, wake, args)
}

/// The holder's `hold` takes `name`; the waiter's `wait` is refused it, then
/// waits for it in a thread; the release must reach the waiter within
/// [`WAKE_BOUND`] ([`SPIN_BOUND`] for the spin lock). Returns the time from the release to the acquisition.
pub fn contend_and_wake<H: Kind, W: Kind>(
    hold: fn(&Client, &str) -> Lock<H>,
    wait: fn(&Client, &str) -> Lock<W>,
    wake: Wake,
    (pass, name): (Pass<'_>, &str),
) -> Duration {
    let Pass {
        holder,
        waiter,
        while_waiting,
    } = pass;
    let held = hold(holder, name);
    let guard = held.lock().unwrap_or_else(|e| panic!("lock {name}: {e}"));
    assert!(held.is_locked().expect("is_locked"), "{name} is locked");
    let lock = wait(waiter, name);
    assert!(
        lock.try_lock().expect("try_lock").is_none(),
        "{name}: the second client is kept out while the first holds it"
    );
    let (tx, rx) = mpsc::channel();
    let waiting = thread::spawn(move || {
        let got = lock.try_lock_for(Duration::from_secs(20));
        let at = Instant::now();
        let _ = tx.send(());
        (got.map(|guard| guard.map(|guard| guard.unlock())), at)
    });
    match wake {
        Wake::Message => assert!(
            super::eventually(Duration::from_secs(5), || waiter.diagnostics().waiters == 1),
            "{name}: the waiter waits through its subscriber"
        ),
        // Long enough for the spin waiter to back off to its cap.
        Wake::Spin => thread::sleep(Duration::from_millis(300)),
    }
    while_waiting(name, wake);
    // Still waiting: the lock is held.
    thread::sleep(Duration::from_millis(50));
    assert!(
        rx.try_recv().is_err(),
        "{name}: the waiter stays out while the lock is held"
    );
    let released = Instant::now();
    guard
        .unlock()
        .unwrap_or_else(|e| panic!("unlock {name}: {e}"));
    let (got, at) = waiting.join().expect("the waiting thread");
    match got {
        Ok(Some(Ok(()))) => {}
        other => panic!("{name}: the waiter did not get the lock and release it: {other:?}"),
    }
    let took = at.saturating_duration_since(released);
    let bound = match wake {
        Wake::Message => WAKE_BOUND,
        Wake::Spin => SPIN_BOUND,
    };
    assert!(
        took < bound,
        "{name}: woken {took:?} after the release ({wake:?})"
    );
    assert!(
        !held.is_locked().expect("is_locked"),
        "{name} is free at the end"
    );
    took
}
