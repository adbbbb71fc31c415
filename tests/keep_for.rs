//! `LockGuard::keep_for` (issue 33 item 6, library half): a hold left to
//! expire `lease` after the call, never renewed again, never released.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Error, LostReason};
use support::RedisServer;
use support::state::pttl;

#[test]
fn a_kept_lock_expires_after_the_lease_and_no_renewal_extends_it() {
    let server = RedisServer::start();
    // Renewed every 500 ms: three renewals would fall in the kept second.
    let owner = server.watchdog_client(Duration::from_millis(1500));
    let rival = server.client().lock("kept");
    let guard = owner.lock("kept").lock().expect("lock");
    thread::sleep(Duration::from_millis(400));
    let kept_at = Instant::now();
    guard.keep_for(Duration::from_secs(1)).expect("keep_for");
    let ttl = pttl(&server, "kept");
    assert!(
        (800..=1000).contains(&ttl),
        "PTTL {ttl} right after keep_for(1 s)"
    );
    assert_eq!(owner.diagnostics().registered_holds, 0);
    let mut last_ttl = ttl;
    let taken_at = loop {
        if let Some(taken) = rival.try_lock().expect("rival try_lock") {
            let at = kept_at.elapsed();
            drop(taken);
            break at;
        }
        let ttl = pttl(&server, "kept");
        // Never extended: each look finds less left (a renewal would set
        // it back to 1500).
        assert!(ttl <= last_ttl, "PTTL went up from {last_ttl} to {ttl}");
        last_ttl = ttl;
        assert!(kept_at.elapsed() < Duration::from_secs(3), "never expired");
        thread::sleep(Duration::from_millis(20));
    };
    println!("kept for 1 s: a rival took it {taken_at:?} after keep_for");
    assert!(
        taken_at >= Duration::from_millis(950),
        "a rival took it after only {taken_at:?}"
    );
    assert!(taken_at < Duration::from_millis(1400), "{taken_at:?}");
}

#[test]
fn keep_for_refuses_a_reentered_hold_and_a_hold_gone_from_redis() {
    let server = RedisServer::start();
    let client = server.client();
    let lock = client.lock("kept-twice");
    let first = lock.lock().expect("lock");
    let second = lock.lock().expect("reentry");
    assert!(matches!(
        second.keep_for(Duration::from_secs(5)),
        Err(Error::InvalidArgument(_))
    ));
    // That guard was released as on drop; the first one is still held.
    assert_eq!(lock.hold_count().expect("count"), 1);
    assert!(matches!(
        first.keep_for(Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!lock.is_locked().expect("is_locked"));

    let guard = lock.lock().expect("lock again");
    let lost = guard.lost_signal();
    let _: i64 = server.cmd(&["DEL", "kept-twice"]);
    assert!(matches!(
        guard.keep_for(Duration::from_secs(5)),
        Err(Error::NotHeld { .. })
    ));
    // A thread following the hold learns it was lost, and why.
    assert_eq!(
        lost.wait_timeout(Duration::from_secs(1)),
        Some(LostReason::KeyGone)
    );
    assert_eq!(client.diagnostics().registered_holds, 0);
    assert!(!lock.is_locked().expect("is_locked"));
}
