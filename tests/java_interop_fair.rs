//! Fair-lock interop with real Redisson (`getFairLock`), both ways: Java and
//! Rust waiters share one queue and are served in arrival order, a waiter
//! that gives up on either side leaves nothing that blocks the other, and the
//! two sides' fair locks exclude each other.
//!
//! Every scenario runs once per Redisson version of the matrix (the newest
//! release and 3.24.3, the oldest the crate supports), each with its own
//! redis-server and JVM.

mod support;

use std::time::{Duration, Instant};

use support::RedisServer;
use support::eventually;
use support::java::{Redisson, for_each_redisson_version, start_with_client};
use support::mutex::{Keys, java_and_rust_sections};
use support::state::{assert_free, queue};
use support::waiter::{fair_waiter, served_within};

for_each_redisson_version!(
    java_waiter_queued_before_a_rust_waiter_is_served_first,
    rust_waiter_queued_before_a_java_waiter_is_served_first,
    a_rust_waiter_that_gives_up_leaves_nothing_that_blocks_java,
    a_java_waiter_that_gives_up_leaves_nothing_that_blocks_rust,
    java_and_rust_fair_locks_exclude_each_other,
);

// ---------------------------------------------------------------------------
// Scenarios

/// Rust holds; a Java actor queues, then a Rust thread: the release goes to
/// Java, and Java's release to the Rust thread.
fn java_waiter_queued_before_a_rust_waiter_is_served_first(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let holder = client.fair_lock("f1").lock().expect("lock");
    let java_field = java.owner_field("j");
    java.send("j", "lock fair/f1");
    queued(&server, "f1", std::slice::from_ref(&java_field));
    let (rust_field, rust_got) = fair_waiter(&client, "f1", None, Duration::ZERO);
    queued(&server, "f1", &[java_field.clone(), rust_field.clone()]);

    holder.unlock().expect("unlock");
    let reply = java.recv("j");
    assert!(reply.ok, "Java's lock failed: `{}`", reply.line);
    assert!(
        rust_got.recv_timeout(Duration::from_millis(300)).is_err(),
        "the Rust waiter jumped the Java head"
    );
    assert_eq!(queue(&server, "f1"), vec![rust_field]);
    let released = Instant::now();
    java.ok("j", "unlock fair/f1");
    // Served by Java's unlock.
    served_within(
        &rust_got,
        released,
        Duration::from_millis(500),
        Duration::from_secs(10),
    );
    assert!(eventually(Duration::from_secs(5), || !java
        .flag("j", "isLocked fair/f1")));
    assert!(queue(&server, "f1").is_empty());
}

/// Java holds; a Rust thread queues, then a Java actor: the release goes to
/// the Rust thread, and the Rust release to Java.
fn rust_waiter_queued_before_a_java_waiter_is_served_first(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    java.ok("holder", "lock fair/f2");
    let (rust_field, rust_got) = fair_waiter(&client, "f2", None, Duration::from_millis(500));
    queued(&server, "f2", std::slice::from_ref(&rust_field));
    let java_field = java.owner_field("j");
    java.send("j", "lock fair/f2");
    queued(&server, "f2", &[rust_field.clone(), java_field.clone()]);

    java.ok("holder", "unlock fair/f2");
    let at = rust_got
        .recv_timeout(Duration::from_secs(10))
        .expect("the Rust waiter was not served")
        .expect("got it");
    assert!(
        java.try_recv("j", Duration::from_millis(200)).is_none(),
        "Java jumped the Rust head"
    );
    let reply = java.recv("j");
    assert!(reply.ok, "Java's lock failed: `{}`", reply.line);
    let took = reply.at.saturating_duration_since(at);
    assert!(
        took >= Duration::from_millis(450),
        "Java got it {took:?} after Rust"
    );
    assert!(
        took < Duration::from_secs(2),
        "Java got it {took:?} after Rust"
    );
    java.ok("j", "unlock fair/f2");
    assert!(queue(&server, "f2").is_empty());
}

/// A Rust `try_lock_for` that runs out leaves the queue: Java's `tryLock()`
/// (which refuses while someone else heads the queue) gets the lock at once.
fn a_rust_waiter_that_gives_up_leaves_nothing_that_blocks_java(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    java.ok("holder", "lock fair/f3");
    let lock = client.fair_lock("f3");
    assert!(
        lock.try_lock_for(Duration::from_millis(500))
            .expect("try")
            .is_none()
    );
    assert!(queue(&server, "f3").is_empty());
    let zcard: i64 = server.cmd(&["ZCARD", "redisson_lock_timeout:{f3}"]);
    assert_eq!(zcard, 0);
    java.ok("holder", "unlock fair/f3");
    assert!(
        java.flag("j", "tryLockNow fair/f3"),
        "a Rust leftover blocked Java"
    );
    java.ok("j", "unlock fair/f3");
}

/// A Java `tryLock(wait)` that runs out leaves the queue: a Rust
/// `try_lock` gets the lock at once.
fn a_java_waiter_that_gives_up_leaves_nothing_that_blocks_rust(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let holder = client.fair_lock("f4").lock().expect("lock");
    assert!(!java.flag("j", "tryLock fair/f4 500"));
    assert!(queue(&server, "f4").is_empty());
    let zcard: i64 = server.cmd(&["ZCARD", "redisson_lock_timeout:{f4}"]);
    assert_eq!(zcard, 0);
    holder.unlock().expect("unlock");
    // No Java leftover blocks Rust.
    assert_free(&server.client().fair_lock("f4"));
}

/// Java and Rust threads take turns on one fair lock: a non-atomic
/// read-modify-write loses no update, no two holders are inside at once.
fn java_and_rust_fair_locks_exclude_each_other(redisson: Redisson) {
    const ITERATIONS: u64 = 60;
    let (server, java, client) = start_with_client(redisson);
    // Each side sees the other's hold.
    let guard = client.fair_lock("f5").lock().expect("lock");
    assert!(!java.flag("j", "tryLockNow fair/f5"));
    assert!(!java.flag("j", "tryLock fair/f5 100"));
    guard.unlock().expect("unlock");
    java.ok("j", "lock fair/f5");
    assert!(client.fair_lock("f5").try_lock().expect("try").is_none());
    java.ok("j", "unlock fair/f5");

    let keys = Keys {
        counter: "f5:counter",
        occupancy: "f5:occ",
    };
    let locks = (0..2).map(|_| client.fair_lock("f5")).collect();
    java_and_rust_sections(&server, &java, ("fair/f5", 2), locks, keys, ITERATIONS);
    assert!(!client.fair_lock("f5").is_locked().expect("is_locked"));
    assert!(queue(&server, "f5").is_empty());
}

// ---------------------------------------------------------------------------
// Helpers

/// Waits until the queue of `name` is `expected`.
fn queued(server: &RedisServer, name: &str, expected: &[String]) {
    support::state::queued(server, name, expected, Duration::from_secs(10));
}
