//! Interop of the non-reentrant lock (PROTOCOL §7) with real Redisson.
//!
//! Redisson added `getNonReentrantLock` in 4.4.0, so the scenarios against
//! a Java non-reentrant lock run on the newest release only; on 3.24.3 the
//! driver has no such lock (pinned by `has_no_non_reentrant_lock`), and the
//! crate's non-reentrant lock is checked there against a Java `RLock` of
//! the same name, which it excludes and wakes like an RLock.

mod support;

use std::time::{Duration, Instant};

use redisson_lock::NonReentrant;

use support::actor::RustThread;
use support::java::{Redisson, start, start_with_client};
use support::state::assert_held_elsewhere;

/// How soon a waiter must get a lock after its holder releases it: woken
/// by the unlock message, not by sleeping out a 30 s TTL.
const HANDOFF: Duration = Duration::from_millis(200);

mod newest {
    #[test]
    fn java_non_reentrant_lock_and_rust_exclude_and_wake_each_other() {
        super::java_non_reentrant_lock_and_rust_exclude_and_wake_each_other(super::Redisson::Newest)
    }

    #[test]
    fn rust_non_reentrant_lock_excludes_a_java_rlock_both_ways() {
        super::rust_non_reentrant_lock_excludes_a_java_rlock_both_ways(super::Redisson::Newest)
    }
}

mod redisson_3_24_3 {
    // No Java non-reentrant lock before 4.4.0 (the driver answers NA): only
    // the RLock scenario.
    #[test]
    fn has_no_non_reentrant_lock() {
        let (_server, java) = super::start(super::Redisson::V3_24_3);
        let reply = java.call("j", "tryLockNow nonreentrant/x");
        assert!(
            reply.na && reply.line.contains("getNonReentrantLock"),
            "3.24.3 answered `{}`",
            reply.line
        );
    }

    #[test]
    fn rust_non_reentrant_lock_excludes_a_java_rlock_both_ways() {
        super::rust_non_reentrant_lock_excludes_a_java_rlock_both_ways(super::Redisson::V3_24_3)
    }
}

/// Java's `nonreentrant/n1` excludes Rust's `n1` and its unlock wakes the
/// Rust waiter; then the other way round.
fn java_non_reentrant_lock_and_rust_exclude_and_wake_each_other(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let lock = client.non_reentrant_lock("n1");
    java.ok("j", "lock nonreentrant/n1");
    let java_field = java.owner_field("j");
    let count: Option<String> = server.cmd(&["HGET", "n1", &java_field]);
    assert_eq!(count.as_deref(), Some("1"));
    assert_held_elsewhere(&lock);

    let rust = RustThread::spawn("n1-rust");
    java.unlock_wakes_rust(("j", "nonreentrant/n1"), &rust, &lock, HANDOFF);

    java.assert_cannot_take("j", "nonreentrant/n1");
    java.send("j", "lock nonreentrant/n1");
    java.assert_kept_out("j", Duration::from_millis(300));
    let released = Instant::now();
    rust.unlock_last::<NonReentrant>().expect("unlock");
    java.java_woken("j", released, HANDOFF, "Rust unlock -> Java acquire");
    java.ok("j", "unlock nonreentrant/n1");
}

/// A Rust non-reentrant hold on `m` excludes Java's `RLock` `m` and wakes
/// it on release; Java's RLock hold excludes the Rust non-reentrant lock
/// and wakes it on unlock.
fn rust_non_reentrant_lock_excludes_a_java_rlock_both_ways(redisson: Redisson) {
    let (_server, java, client) = start_with_client(redisson);
    let lock = client.non_reentrant_lock("m");
    let rust = RustThread::spawn("m-rust");
    rust.lock(&lock);
    assert!(!java.flag("j", "tryLockNow m"), "Java took Rust's lock");
    java.send("j", "lock m");
    java.assert_kept_out("j", Duration::from_millis(300));
    let released = Instant::now();
    rust.unlock_last::<NonReentrant>().expect("unlock");
    java.java_woken("j", released, HANDOFF, "Rust unlock -> Java acquire");

    assert_held_elsewhere(&lock);
    java.unlock_wakes_rust(("j", "m"), &rust, &lock, HANDOFF);
    rust.unlock_last::<NonReentrant>().expect("unlock");
    assert!(!lock.is_locked().expect("is_locked"));
}
