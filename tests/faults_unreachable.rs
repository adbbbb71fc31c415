//! Fault: Redis becomes unreachable while a lock is held.
//!
//! The server is frozen with SIGSTOP for longer than the lease. The watchdog's
//! renewals fail (response timeouts) and are retried; the guard is marked lost
//! once the lease has passed by the local clock; when the server thaws, no
//! renewal brings the lock back; and a lock taken afterwards renews normally.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Error, LostReason};
use support::state::exists;
use support::{RedisServer, eventually, logs};

#[test]
fn lease_runs_out_while_redis_is_frozen_then_locking_works_again() {
    logs::install();
    let server = RedisServer::start();
    let lease = Duration::from_millis(600);
    let period = lease / 3;
    let client = support::builder(server.url())
        .watchdog_timeout(lease)
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_millis(150))
        .build()
        .expect("client");
    let name = "unreachable";
    let lock = client.lock(name);
    let guard = lock.lock().expect("lock");
    // Renewed for a few leases before the fault.
    thread::sleep(lease * 2);
    assert!(!guard.is_lost());
    let fails_before = renewal_failures();

    server.pause();
    let paused = Instant::now();
    let lost_within = eventually(lease + Duration::from_millis(500), || guard.is_lost());
    let lost_after = paused.elapsed();
    let paused_for = Duration::from_millis(1500);
    thread::sleep(paused_for.saturating_sub(paused.elapsed()));
    let retried = renewal_failures() - fails_before;
    server.resume();
    let resumed = Instant::now();

    assert!(
        lost_within,
        "the guard was not marked lost {lost_after:?} into a freeze longer than its {lease:?} lease"
    );
    eprintln!("lost {lost_after:?} after the freeze; {retried} failed renewal runs");
    assert!(
        retried >= 2,
        "failed renewals should be retried while the lease lasts, saw {retried} failure(s)"
    );

    // After the freeze the key has expired, and no renewal brings it back: the
    // renewals queued in the frozen server's sockets run late and find nothing.
    thread::sleep(period * 3);
    assert!(
        !exists(&server, name),
        "the lock key outlived its lease by {:?} after the freeze",
        resumed.elapsed()
    );
    assert!(guard.is_lost(), "lost is for good");
    match guard.unlock() {
        Err(Error::Lost { name: lost, reason }) => {
            assert_eq!(lost, name);
            assert_eq!(reason, LostReason::LeaseExpired);
        }
        other => panic!("unlock of a lost guard returned {other:?}"),
    }
    assert_eq!(client.diagnostics().registered_holds, 0);

    // The same client takes it again and the watchdog renews it for several
    // leases: renewal recovered from the failures.
    let guard = lock.lock().expect("lock after the freeze");
    let fails_after = renewal_failures();
    thread::sleep(lease * 4);
    assert!(!guard.is_lost(), "a fresh lock was lost after the freeze");
    assert_eq!(lock.hold_count().expect("hold_count"), 1);
    let ttl = lock.remaining_ttl().expect("pttl").expect("a TTL");
    assert!(ttl <= lease, "renewed to the lease, PTTL {ttl:?}");
    assert_eq!(
        renewal_failures(),
        fails_after,
        "renewals fail after resume"
    );
    guard.unlock().expect("unlock");
    assert!(!exists(&server, name));
}

/// Failed renewal runs logged so far ("can't renew ... will retry").
fn renewal_failures() -> usize {
    logs::lines()
        .iter()
        .filter(|line| line.contains("can't renew"))
        .count()
}
