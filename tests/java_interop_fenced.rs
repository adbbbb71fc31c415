//! Interop of the fenced lock with real Redisson's `getFencedLock`
//! (PROTOCOL §5), both ways, on Redisson's newest release and 3.24.3: one
//! token counter for both sides, whose tokens strictly increase across
//! interleaved acquisitions, and mutual exclusion with prompt wake-ups.

mod support;

use std::time::{Duration, Instant};

use redisson_lock::{Fenced, LockGuard};

use support::actor::{RustThread, last};
use support::java::{Redisson, for_each_redisson_version, start_with_client};
use support::state::{assert_held_elsewhere, lock_twice};

/// How soon a waiter must get a lock after its holder releases it: woken
/// by the unlock message, not by sleeping out a 30 s TTL.
const HANDOFF: Duration = Duration::from_millis(200);

for_each_redisson_version!(
    interleaved_java_and_rust_tokens_strictly_increase,
    java_fenced_hold_excludes_rust_and_java_unlock_wakes_rust,
    rust_fenced_hold_excludes_java_and_rust_unlock_wakes_java,
);

/// Java (`lockAndGetToken`, reentry included) and Rust take turns; every
/// token is greater than the one before, and both sides read the same last
/// token.
fn interleaved_java_and_rust_tokens_strictly_increase(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let lock = client.fenced_lock("f1");
    let mut tokens: Vec<u64> = Vec::new();
    for _ in 0..3 {
        tokens.push(java.ok("j", "lockToken fenced/f1").value(0));
        tokens.push(java.ok("j", "lockToken fenced/f1").value(0));
        java.ok("j", "unlock fenced/f1");
        java.ok("j", "unlock fenced/f1");
        let (outer, inner) = lock_twice(&lock);
        tokens.extend([outer.token(), inner.token()]);
        drop(inner);
        drop(outer);
    }
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "tokens do not strictly increase: {tokens:?}"
    );
    let last = tokens.last().copied();
    assert_eq!(lock.token().expect("token"), last);
    assert_eq!(
        java.ok("j", "token fenced/f1").value::<u64>(0),
        last.unwrap_or(0)
    );
    let stored: Option<u64> = server.cmd(&["GET", "redisson_lock_token:{f1}"]);
    assert_eq!(stored, last);
}

/// Java holds `fenced/f2`; Rust cannot take it, waits, is woken by Java's
/// unlock and gets a greater token; Java then cannot take Rust's.
fn java_fenced_hold_excludes_rust_and_java_unlock_wakes_rust(redisson: Redisson) {
    let (_server, java, client) = start_with_client(redisson);
    let lock = client.fenced_lock("f2");
    let java_token: u64 = java.ok("j", "lockToken fenced/f2").value(0);
    assert_held_elsewhere(&lock);

    let rust = RustThread::spawn("f2-waiter");
    java.unlock_wakes_rust(("j", "fenced/f2"), &rust, &lock, HANDOFF);
    let rust_token = rust.run(|held| last::<LockGuard<Fenced>>(held).token());
    assert!(rust_token > java_token, "{rust_token} after {java_token}");

    java.assert_cannot_take("j", "fenced/f2");
    rust.run(|held| held.clear());
    let after: String = java.ok("j", "tryLockToken fenced/f2 1000").value(0);
    let after: u64 = after.parse().expect("Java got a token");
    assert!(after > rust_token, "{after} after {rust_token}");
    java.ok("j", "unlock fenced/f2");
}

/// Rust holds `f3`; Java cannot take it, waits in `lockAndGetToken`, is
/// woken by the Rust unlock and gets a greater token.
fn rust_fenced_hold_excludes_java_and_rust_unlock_wakes_java(redisson: Redisson) {
    let (_server, java, client) = start_with_client(redisson);
    let rust = RustThread::spawn("f3-holder");
    let rust_token = rust.run({
        let lock = client.fenced_lock("f3");
        move |held| {
            let guard = lock.lock().expect("lock");
            let token = guard.token();
            held.push(Box::new(guard));
            token
        }
    });
    java.assert_cannot_take("j", "fenced/f3");
    java.send("j", "lockToken fenced/f3");
    java.assert_kept_out("j", Duration::from_millis(300));
    let released = Instant::now();
    rust.unlock_last::<Fenced>().expect("unlock");
    let reply = java.java_woken("j", released, HANDOFF, "Rust unlock -> Java acquire");
    let java_token: u64 = reply.value(0);
    assert!(java_token > rust_token, "{java_token} after {rust_token}");
    let lock = client.fenced_lock("f3");
    assert_held_elsewhere(&lock);
    assert_eq!(lock.token().expect("token"), Some(java_token));
    java.ok("j", "unlock fenced/f3");
}
