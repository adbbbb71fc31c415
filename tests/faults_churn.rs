//! Fault: unlocks racing renewals, as fast as they come.
//!
//! 100,000 lock/unlock cycles on 4 threads, on their own and on a shared lock,
//! with the shortest watchdog timeout the builder allows (30 ms: a renewal
//! every 10 ms), so that renewal runs constantly overlap acquires, unlocks and
//! re-acquires of the same (lock, thread) pairs. Afterwards nothing may be
//! left behind: no lock key, no latch, no registration, no subscription, no
//! waiter, no panic, and the watchdog still renews.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::Error;
use support::{RedisServer, assert_diagnostics, eventually, threads_named};

const CYCLES: u64 = 100_000;
const THREADS: u64 = 4;

#[derive(Default)]
struct Tally {
    released: AtomicU64,
    lost: AtomicU64,
    not_held: AtomicU64,
}

#[test]
fn a_hundred_thousand_cycles_against_a_30_ms_watchdog_leave_nothing_behind() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(30);
    let client = server.watchdog_client(lease);
    let tally = Arc::new(Tally::default());
    let start = Arc::new(Barrier::new(THREADS as usize));
    let began = Instant::now();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let client = client.clone();
            let tally = Arc::clone(&tally);
            let start = Arc::clone(&start);
            thread::spawn(move || {
                let own = client.lock(format!("churn-own-{t}"));
                let shared = client.lock("churn-shared");
                start.wait();
                for i in 0..CYCLES / THREADS {
                    let lock = if i % 2 == 0 { &own } else { &shared };
                    let guard = lock.lock().expect("lock");
                    // A reentry now and then, released in the other order.
                    let inner = (i % 7 == 0).then(|| lock.lock().expect("reentry"));
                    drop(inner);
                    match guard.unlock() {
                        Ok(()) => tally.released.fetch_add(1, Ordering::Relaxed),
                        // A 30 ms lease can run out on a loaded machine between
                        // taking and releasing: reported, never silent.
                        Err(Error::Lost { .. }) => tally.lost.fetch_add(1, Ordering::Relaxed),
                        Err(Error::NotHeld { .. }) => {
                            tally.not_held.fetch_add(1, Ordering::Relaxed)
                        }
                        Err(e) => panic!("unlock failed: {e}"),
                    };
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a worker panicked");
    }
    let elapsed = began.elapsed();
    let (released, lost, not_held) = (
        tally.released.load(Ordering::Relaxed),
        tally.lost.load(Ordering::Relaxed),
        tally.not_held.load(Ordering::Relaxed),
    );
    eprintln!(
        "{CYCLES} cycles in {elapsed:?}: {released} released, {lost} lost, {not_held} not held"
    );
    assert_eq!(released + lost + not_held, CYCLES);

    // Nothing left in Redis once the lock keys' 30 ms leases and the batched
    // latch deletion (every 100 ms) are through.
    let leftovers = || -> Vec<String> { server.cmd(&["KEYS", "*"]) };
    assert!(
        eventually(Duration::from_secs(3), || leftovers().is_empty()),
        "left in Redis: {:?}",
        leftovers()
    );
    let diagnostics = client.diagnostics();
    assert_eq!(diagnostics.registered_holds, 0, "{diagnostics:?}");
    assert_diagnostics(&client, Duration::from_secs(2), |d| {
        d.subscribed_channels == 0 && d.waiters == 0
    });
    assert_eq!(threads_named("rlock-watchdog"), 1);

    // The watchdog survived the churn: a hold is renewed over many leases.
    let lock = client.lock("churn-after");
    let guard = lock.lock().expect("lock");
    thread::sleep(lease * 10);
    assert!(!guard.is_lost(), "not renewed after the churn");
    assert_eq!(lock.hold_count().expect("hold_count"), 1);
    guard.unlock().expect("unlock");
    assert!(eventually(Duration::from_secs(2), || leftovers().is_empty()));
}
