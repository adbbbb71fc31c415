//! Interop of the spin lock with real Redisson's `getSpinLock` (PROTOCOL
//! §6), both ways, on Redisson's newest release and 3.24.3: a Java spin
//! lock and a Rust one exclude each other, and each side's poller takes the
//! lock within its backoff cap (128 ms) plus slack after the other's
//! release, although nothing is published.

mod support;

use std::time::{Duration, Instant};

use redisson_lock::Spin;
use support::actor::{RustThread, assert_kept_out};
use support::java::{Redisson, for_each_redisson_version, start_with_client};
use support::state::{assert_held_elsewhere, hgetall, state};

/// Redisson's and the crate's default spin backoff cap.
const CAP: Duration = Duration::from_millis(128);
/// Round trips, scheduling, the driver's reply pipe: a functional bound.
const SLACK: Duration = Duration::from_millis(200);

for_each_redisson_version!(
    java_spin_hold_excludes_rust_and_rust_acquires_after_java_release,
    rust_spin_hold_excludes_java_and_java_acquires_after_rust_release,
);

/// Java holds `spin/sp1`: Rust cannot take it, polls without subscribing,
/// and has it within the cap after Java's unlock.
fn java_spin_hold_excludes_rust_and_rust_acquires_after_java_release(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let lock = client.spin_lock("sp1");

    java.ok("j", "lock spin/sp1");
    let java_field = java.owner_field("j");
    assert_eq!(hgetall(&server, "sp1"), state(&[(&java_field, "1")]));
    assert_held_elsewhere(&lock);

    let rust = RustThread::spawn("sp1-waiter");
    let acquired = rust.start_lock(&lock);
    assert_kept_out(&acquired, Duration::from_millis(500));
    assert_eq!(client.diagnostics().subscribed_channels, 0);

    let publishes = server.command_calls("publish");
    let sent = Instant::now();
    java.ok("j", "unlock spin/sp1");
    java.rust_woken(
        &acquired,
        sent,
        CAP + SLACK,
        "Java spin unlock -> Rust acquire",
    );
    assert_eq!(server.command_calls("publish"), publishes, "Java published");

    let rust_field = rust.owner_field(&client);
    assert_eq!(hgetall(&server, "sp1"), state(&[(&rust_field, "1")]));
    java.assert_cannot_take("j", "spin/sp1");
    rust.run(|held| held.clear());
    assert!(java.flag("j", "tryLockNow spin/sp1"));
    java.ok("j", "unlock spin/sp1");
}

/// Rust holds `sp2`: Java's spin lock cannot take it, and Java's poller
/// has it within the cap after the Rust release, which publishes nothing.
fn rust_spin_hold_excludes_java_and_java_acquires_after_rust_release(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let rust = RustThread::spawn("sp2-holder");
    rust.lock(&client.spin_lock("sp2"));
    let rust_field = rust.owner_field(&client);
    assert_eq!(hgetall(&server, "sp2"), state(&[(&rust_field, "1")]));
    java.assert_cannot_take("j", "spin/sp2");

    java.send("j", "lock spin/sp2");
    java.assert_kept_out("j", Duration::from_millis(500));
    let publishes = server.command_calls("publish");
    let released = Instant::now();
    rust.unlock_last::<Spin>().expect("unlock");
    java.java_woken(
        "j",
        released,
        CAP + SLACK,
        "Rust spin unlock -> Java acquire",
    );
    assert_eq!(server.command_calls("publish"), publishes, "Rust published");

    let java_field = java.owner_field("j");
    assert_eq!(hgetall(&server, "sp2"), state(&[(&java_field, "1")]));
    let lock = client.spin_lock("sp2");
    assert_held_elsewhere(&lock);
    java.ok("j", "unlock spin/sp2");
    assert!(lock.try_lock().expect("try_lock").is_some());
}
