//! Interop of the non-reentrant lock (PROTOCOL §7) with real Redisson.
//!
//! Redisson added `getNonReentrantLock` in 4.4.0, so the scenarios against
//! a Java non-reentrant lock run on the newest release only; on 3.24.3 the
//! driver has no such lock (pinned by `has_no_non_reentrant_lock`), and the
//! crate's non-reentrant lock is checked there against a Java `RLock` of
//! the same name, which it excludes and wakes like an RLock.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{LockGuard, NonReentrant};

use support::actor::RustThread;
use support::java::{Redisson, start};

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
    // No Java non-reentrant lock before 4.4.0: only the RLock scenario.
    #[test]
    fn has_no_non_reentrant_lock() {
        let (_server, java) = super::start(super::Redisson::V3_24_3);
        let reply = java.call("j", "tryLockNow nonreentrant/x");
        assert!(
            !reply.ok && reply.line.contains("BadCommand"),
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
    let (server, java) = start(redisson);
    let client = server.client();
    let lock = client.non_reentrant_lock("n1");
    java.ok("j", "lock nonreentrant/n1");
    let java_field = java.owner_field("j");
    let count: Option<String> = server.cmd(&["HGET", "n1", &java_field]);
    assert_eq!(count.as_deref(), Some("1"));
    assert!(
        lock.try_lock().expect("try_lock").is_none(),
        "Rust took Java's lock"
    );

    let rust = RustThread::spawn("n1-rust");
    let acquired = {
        let lock = lock.clone();
        rust.start(move |held| {
            held.push(Box::new(lock.lock().expect("lock")));
            Instant::now()
        })
    };
    thread::sleep(Duration::from_millis(300));
    assert!(
        acquired.try_recv().is_err(),
        "Rust acquired while Java held it"
    );
    let sent = Instant::now();
    java.ok("j", "unlock nonreentrant/n1");
    let at = acquired
        .recv_timeout(Duration::from_secs(30))
        .expect("the Rust waiter was not woken");
    let handoff = at.saturating_duration_since(sent);
    assert!(
        handoff < HANDOFF,
        "Rust woke {handoff:?} after Java's unlock"
    );

    assert!(
        !java.flag("j", "tryLockNow nonreentrant/n1"),
        "Java took Rust's lock"
    );
    java.send("j", "lock nonreentrant/n1");
    thread::sleep(Duration::from_millis(300));
    assert!(java.try_recv("j", Duration::ZERO).is_none());
    let released = Instant::now();
    rust.run(release);
    let reply = java.recv("j");
    assert!(reply.ok, "`{}`", reply.line);
    let handoff = reply.at.saturating_duration_since(released);
    assert!(
        handoff < HANDOFF,
        "Java woke {handoff:?} after the Rust unlock"
    );
    java.ok("j", "unlock nonreentrant/n1");
}

/// A Rust non-reentrant hold on `m` excludes Java's `RLock` `m` and wakes
/// it on release; Java's RLock hold excludes the Rust non-reentrant lock
/// and wakes it on unlock.
fn rust_non_reentrant_lock_excludes_a_java_rlock_both_ways(redisson: Redisson) {
    let (server, java) = start(redisson);
    let client = server.client();
    let lock = client.non_reentrant_lock("m");
    let rust = RustThread::spawn("m-rust");
    rust.run({
        let lock = lock.clone();
        move |held| held.push(Box::new(lock.lock().expect("lock")))
    });
    assert!(!java.flag("j", "tryLockNow m"), "Java took Rust's lock");
    java.send("j", "lock m");
    thread::sleep(Duration::from_millis(300));
    assert!(java.try_recv("j", Duration::ZERO).is_none());
    let released = Instant::now();
    rust.run(release);
    let reply = java.recv("j");
    assert!(reply.ok, "`{}`", reply.line);
    let handoff = reply.at.saturating_duration_since(released);
    assert!(
        handoff < HANDOFF,
        "Java woke {handoff:?} after the Rust unlock"
    );

    assert!(
        lock.try_lock().expect("try_lock").is_none(),
        "Rust took Java's lock"
    );
    let acquired = {
        let lock = lock.clone();
        rust.start(move |held| {
            held.push(Box::new(lock.lock().expect("lock")));
            Instant::now()
        })
    };
    thread::sleep(Duration::from_millis(300));
    assert!(
        acquired.try_recv().is_err(),
        "Rust acquired while Java held it"
    );
    let sent = Instant::now();
    java.ok("j", "unlock m");
    let at = acquired
        .recv_timeout(Duration::from_secs(30))
        .expect("the Rust waiter was not woken");
    let handoff = at.saturating_duration_since(sent);
    assert!(
        handoff < HANDOFF,
        "Rust woke {handoff:?} after Java's unlock"
    );
    rust.run(release);
    assert!(!lock.is_locked().expect("is_locked"));
}

/// Unlocks the Rust thread's last guard, checking the outcome.
fn release(held: &mut support::actor::Held) {
    let guard = held.pop().expect("guard");
    let guard = guard
        .downcast::<LockGuard<NonReentrant>>()
        .expect("a non-reentrant guard");
    guard.unlock().expect("unlock");
}
