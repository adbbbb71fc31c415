//! Interop of `CountDownLatch` with real Redisson's `RCountDownLatch`
//! (SYNCHRONIZERS §5), both ways, on Redisson's newest release and 3.24.3:
//! a Java count-down to 0 wakes a Rust `wait()`, a Rust count-down to 0
//! wakes a Java `await()` that has no timeout (it has no fallback: only the
//! publish can wake it), each within a second; counts set on one side read
//! the same on the other; and a Rust `delete` while both sides wait
//! releases the Rust waiter at once but strands Java's (`1` closes Java's
//! latch): `await(t)` returns `true` only when its time runs out, and
//! `await()` stays blocked until a later count-down to 0. In a 3-master
//! Redis 7 cluster (started once for this binary) both sides `SPUBLISH` and
//! `SSUBSCRIBE`, and a name with a `}` fails for Java with `CROSSSLOT` as
//! the crate refuses it.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use support::RedisServer;
use support::cluster::calls;
use support::java::{JavaDriver, Redisson, for_each_redisson_version};
use support::java::{start_cluster, start_with_client};
use support::sync::{latch_waiter as rust_waiter, woken_within};

/// A publish-driven wake-up, far below the Rust side's 3 s safety re-poll:
/// a functional bound (round trips, the driver's reply pipe), not a speed
/// target.
const PROMPT: Duration = Duration::from_secs(1);

for_each_redisson_version!(
    java_count_down_to_zero_wakes_a_rust_wait,
    rust_count_down_to_zero_wakes_a_java_await_without_timeout,
    counts_set_on_either_side_read_the_same_on_the_other,
    rust_delete_releases_rust_waiters_but_strands_java_ones,
    cluster_count_downs_to_zero_wake_the_other_side_through_spublish,
    cluster_names_with_a_closing_brace_fail_for_java_too,
);

fn channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// Subscribers of the latch's channel on the server (Java's and Rust's).
fn subscribers(server: &RedisServer, name: &str) -> i64 {
    let reply: (String, i64) = server.cmd(&["PUBSUB", "NUMSUB", &channel(name)]);
    reply.1
}

/// Waits until `n` connections subscribe to the latch's channel, then a
/// little more for the waiting threads to park.
fn await_subscribers(server: &RedisServer, name: &str, n: i64) {
    assert!(
        support::eventually(Duration::from_secs(10), || subscribers(server, name) >= n),
        "fewer than {n} subscribers on {}",
        channel(name)
    );
    thread::sleep(Duration::from_millis(200));
}

fn java_count(java: &JavaDriver, name: &str) -> i64 {
    java.ok("k", &format!("latch.getCount {name}")).value(0)
}

/// Java sets 2 and counts down twice; the Rust waiter stays blocked at 1
/// and returns within a second of the count-down to 0.
fn java_count_down_to_zero_wakes_a_rust_wait(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let latch = client.count_down_latch("jl-wake");
    assert!(java.flag("k", "latch.trySetCount jl-wake 2"));
    assert_eq!(latch.count().expect("count"), 2);

    let rx = rust_waiter(&latch);
    await_subscribers(&server, "jl-wake", 1);
    java.ok("k", "latch.countDown jl-wake");
    assert_eq!(latch.count().expect("count"), 1);
    assert!(
        rx.recv_timeout(Duration::from_millis(500)).is_err(),
        "Rust left at count 1"
    );
    let sent = Instant::now();
    java.ok("k", "latch.countDown jl-wake");
    let took = woken_within(&rx, sent, PROMPT, "Java's count-down to 0");
    eprintln!("{}: Java countDown -> Rust wait() {took:?}", java.version);
    assert_eq!(latch.count().expect("count"), 0);
}

/// Rust sets 2; a Java `await()` with no timeout blocks; Rust counts down
/// twice; the Java thread returns within a second of the second.
fn rust_count_down_to_zero_wakes_a_java_await_without_timeout(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let latch = client.count_down_latch("jl-await");
    assert!(latch.try_set_count(2).expect("set"));
    assert_eq!(java_count(&java, "jl-await"), 2);

    java.send("j", "latch.await jl-await");
    await_subscribers(&server, "jl-await", 1);
    latch.count_down().expect("2 -> 1");
    assert!(
        java.try_recv("j", Duration::from_millis(500)).is_none(),
        "Java's await() returned at count 1"
    );
    let sent = Instant::now();
    latch.count_down().expect("1 -> 0");
    java.java_woken("j", sent, PROMPT, "Rust count_down -> Java await()");
    assert_eq!(java_count(&java, "jl-await"), 0);
}

/// `trySetCount` is refused on either side while the other's count is
/// set, and each side reads the other's count and count-downs.
fn counts_set_on_either_side_read_the_same_on_the_other(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let latch = client.count_down_latch("jl-count");
    assert!(java.flag("k", "latch.trySetCount jl-count 5"));
    assert_eq!(latch.count().expect("count"), 5);
    assert!(!latch.try_set_count(7).expect("set over Java's"));
    latch.count_down().expect("5 -> 4");
    assert_eq!(java_count(&java, "jl-count"), 4);
    assert!(latch.delete().expect("delete"));
    assert_eq!(java_count(&java, "jl-count"), 0);

    assert!(latch.try_set_count(3).expect("set"));
    assert!(!java.flag("k", "latch.trySetCount jl-count 9"));
    assert_eq!(java_count(&java, "jl-count"), 3);
    java.ok("k", "latch.countDown jl-count");
    assert_eq!(latch.count().expect("count"), 2);
    assert!(java.flag("k", "latch.delete jl-count"));
    assert_eq!(latch.count().expect("count"), 0);
    assert!(!latch.delete().expect("nothing to delete"));
    let exists: bool = server.cmd(&["EXISTS", "jl-count"]);
    assert!(!exists);
}

/// SYNCHRONIZERS §5.2, verified: Rust deletes a latch on which a Rust
/// `wait()`, a Java `await(3 s)` and a Java `await()` wait. The Rust waiter
/// re-checks on the `1` and returns at once. Java's `1` closes its latch:
/// `await(3 s)` returns `true` only when its time is up (its loop then
/// re-reads the count, now 0), `await()` stays blocked until a later
/// count-down to 0 (here: Rust sets 1 and counts it down).
fn rust_delete_releases_rust_waiters_but_strands_java_ones(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let latch = client.count_down_latch("jl-del");
    assert!(latch.try_set_count(1).expect("set"));

    let timed_wait = Duration::from_millis(3000);
    java.send(
        "j",
        &format!("latch.awaitMs jl-del {}", timed_wait.as_millis()),
    );
    let java_started = Instant::now();
    java.send("j2", "latch.await jl-del");
    let rust = rust_waiter(&latch);
    // One subscription per JVM (shared by its two threads) and one for Rust.
    await_subscribers(&server, "jl-del", 2);

    let deleted_at = Instant::now();
    assert!(latch.delete().expect("delete"));
    woken_within(&rust, deleted_at, PROMPT, "the delete");

    // Java's timed await: stranded until its time runs out, then `true`.
    let reply = java
        .try_recv("j", timed_wait + Duration::from_secs(10))
        .expect("Java's await(t) never returned");
    assert!(reply.ok, "{}", reply.line);
    assert_eq!(reply.values, ["true"], "{}", reply.line);
    let waited = reply.at.saturating_duration_since(java_started);
    eprintln!(
        "{}: Java await({timed_wait:?}) after a delete returned {:?} after {waited:?}",
        java.version, reply.values
    );
    assert!(
        waited >= timed_wait - Duration::from_millis(300),
        "Java's await(t) returned after {waited:?}: the delete woke it"
    );

    // Java's await() without timeout: still blocked.
    assert!(
        java.try_recv("j2", Duration::from_millis(500)).is_none(),
        "Java's await() returned after the delete"
    );
    assert_eq!(java_count(&java, "jl-del"), 0);
    // A later count-down to 0 opens Java's latch; await() re-reads 0.
    assert!(latch.try_set_count(1).expect("set again"));
    let sent = Instant::now();
    latch.count_down().expect("1 -> 0");
    let what = "a count-down to 0 after the delete -> Java await()";
    java.java_woken("j2", sent, PROMPT, what);
}

/// For a name on each master: a Java count-down to 0 wakes a Rust
/// `wait()`, and a Rust one wakes a Java `await()`, each within a second,
/// with one `SPUBLISH` (and no `PUBLISH`) on the slot's master.
fn cluster_count_downs_to_zero_wake_the_other_side_through_spublish(redisson: Redisson) {
    let (cluster, java, client) = start_cluster(redisson);
    let prefix = format!("jl-cluster-{}-", redisson.version());
    for name in cluster.names_on_different_masters(&prefix, 3) {
        let owner = cluster.owner(&name);
        // Waits for `who` to SSUBSCRIBE on the slot's master, `settle` more
        // for it to park; then the master's SPUBLISH and PUBLISH counts.
        let subscribed = |who: &str, settle: Duration| {
            assert!(
                support::eventually(Duration::from_secs(10), || owner
                    .shard_subscribers(&channel(&name))
                    >= 1),
                "{name}: {who} never SSUBSCRIBEd on its slot's master"
            );
            thread::sleep(settle);
            (calls(owner, "spublish"), calls(owner, "publish"))
        };
        let latch = client.count_down_latch(name.as_str());

        // Java -> Rust.
        assert!(java.flag("k", &format!("latch.trySetCount {name} 1")));
        let rx = rust_waiter(&latch);
        let (spublish, publish) = subscribed("the Rust waiter", Duration::from_millis(200));
        let sent = Instant::now();
        java.ok("k", &format!("latch.countDown {name}"));
        woken_within(&rx, sent, PROMPT, &format!("{name}: Java -> Rust"));
        assert_eq!(calls(owner, "spublish"), spublish + 1, "{name}: Java");
        assert_eq!(calls(owner, "publish"), publish, "{name}: Java");

        // Rust -> Java.
        assert!(latch.try_set_count(1).expect("set"));
        java.send("j", &format!("latch.await {name}"));
        let (spublish, publish) = subscribed("Java's await()", Duration::from_millis(300));
        let sent = Instant::now();
        latch.count_down().expect("count down");
        java.java_woken("j", sent, PROMPT, &format!("{name}: Rust -> Java"));
        assert_eq!(calls(owner, "spublish"), spublish + 1, "{name}: Rust");
        assert_eq!(calls(owner, "publish"), publish, "{name}: Rust");
    }
}

/// SYNCHRONIZERS §2.1: `{job}:latch` puts its channel in another slot. Java
/// fails with `CROSSSLOT` (checked here); the crate refuses the name before
/// sending ([`redisson_lock::Error::InvalidArgument`]).
fn cluster_names_with_a_closing_brace_fail_for_java_too(redisson: Redisson) {
    let (_cluster, java, client) = start_cluster(redisson);
    let name = format!("{{jl-{}}}:latch", redisson.version());
    let reply = java.call("k", &format!("latch.trySetCount {name} 1"));
    assert!(!reply.ok, "Java set a count on {name}: {}", reply.line);
    assert!(reply.line.contains("CROSSSLOT"), "{}", reply.line);
    eprintln!("{}: Java trySetCount({name}): {}", java.version, reply.line);
    let e = client
        .count_down_latch(name.as_str())
        .try_set_count(1)
        .expect_err("the crate sent it");
    assert!(
        matches!(e, redisson_lock::Error::InvalidArgument(ref m) if m.contains("CROSSSLOT")),
        "{e:?}"
    );
}
