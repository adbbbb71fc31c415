//! A mixed Redisson fleet in a Redis 7 cluster: Java 3.21.3 (classic
//! `PUBLISH`/`SUBSCRIBE` always, PROTOCOL §11) and Java 4.7.0 (sharded
//! `SPUBLISH`/`SSUBSCRIBE`, chosen automatically) on the same cluster, and a
//! Rust client with `ShardedSubscription::Both`, which must hear either and
//! be heard by either. For the lock, the semaphore and the count-down
//! latch: a Java 3.21.3 holder wakes a Rust waiter, a Java 4.7.0 holder
//! wakes a Rust waiter, and a Rust holder wakes a Java 3.21.3 waiter and a
//! Java 4.7.0 waiter, all promptly (locks: under 3 s with 30 s leases;
//! synchronizers: under 2 s after one of the Rust waiter's 3 s re-reads, or
//! of the Rust release).
//!
//! The control: a Rust client left on `Auto` misses Java 3.21.3's unlock
//! message (its waiter is still out 3 s later).
//!
//! One cluster (3 masters, 3 replicas) and one JVM per version for the
//! binary, in a single test.

mod support;

use std::time::{Duration, Instant};

use redisson_lock::{Client, ShardedSubscription};
use support::cluster::{Cluster, Node};
use support::every_synchronizer::{WAKE_BOUND, release_after_a_reread};
use support::java::{JavaDriver, Redisson};
use support::sync::{latch_waiter, spawn_reporting, woken_within};
use support::waiter::Waiter;
use support::{connections, eventually};

/// Locks: a tenth of the 30 s lease a missed message would cost.
const WAKE: Duration = Duration::from_secs(3);

#[test]
fn classic_and_sharded_redisson_beside_a_rust_client_in_both_modes() {
    let started = Instant::now();
    let cluster = Cluster::shared();
    let seeds = format!("cluster:{}", cluster.urls().join(","));
    let classic = JavaDriver::start(Redisson::Exact("3.21.3"), &seeds, Duration::from_secs(30));
    let sharded = JavaDriver::start(Redisson::Exact("4.7.0"), &seeds, Duration::from_secs(30));
    classic.warm_up();
    sharded.warm_up();
    let client = connections(Client::cluster_builder(cluster.urls()))
        .sharded_subscription(ShardedSubscription::Both)
        .build()
        .expect("a cluster client in Both mode");

    for java in [&classic, &sharded] {
        lock_both_ways(cluster, java, &client);
        semaphore_both_ways(cluster, java, &client);
        latch_both_ways(cluster, java, &client);
    }
    classic_release_missed_without_both(cluster, &classic);
    eprintln!("mixed-fleet cluster scenarios: {:?}", started.elapsed());
}

/// Why `Both`: a Rust client left on `Auto` (sharded on Redis 7) does not
/// hear Java 3.21.3's classic unlock message; its waiter is still waiting
/// 3 s after the release (it would get the lock at its TTL fallback).
fn classic_release_missed_without_both(cluster: &Cluster, classic: &JavaDriver) {
    let auto = cluster.client();
    let name = "mixed-lock-auto";
    classic.ok("a1", &format!("lock {name}"));
    let waiter = Waiter::try_lock_for(auto.lock(name), Duration::from_secs(25));
    assert!(
        eventually(Duration::from_secs(10), || auto.diagnostics().waiters == 1),
        "the Rust waiter parks"
    );
    classic.ok("a1", &format!("unlock {name}"));
    std::thread::sleep(WAKE);
    assert!(
        !waiter.has_acquired(),
        "a sharded-only Rust waiter heard Java 3.21.3's classic PUBLISH"
    );
    eprintln!(
        "WITHOUT ShardedSubscription::Both a Rust waiter misses Java 3.21.3's unlock message"
    );
    // A Rust release (sharded) does wake it.
    let other = cluster.client();
    let guard = other.lock(name).lock().expect("the free lock");
    let released = Instant::now();
    guard.unlock().expect("unlock");
    waiter.woken_within(released, WAKE, Duration::from_secs(25));
}

/// The flavour a driver's Redisson publishes with, for the names.
fn flavour(java: &JavaDriver) -> &'static str {
    if java.version.starts_with("3.21") {
        "classic"
    } else {
        "sharded"
    }
}

/// Waits until `node` has a subscriber for `channel` of the Java flavour:
/// a classic `SUBSCRIBE` for 3.21.3, an `SSUBSCRIBE` for 4.7.0 (the Rust
/// client in Both mode has one of each, so there must be 2).
fn java_subscribed(node: &Node, java: &JavaDriver, channel: &str) {
    assert!(
        eventually(Duration::from_secs(10), || {
            if flavour(java) == "classic" {
                let (_, n): (String, i64) = node.cmd(&["PUBSUB", "NUMSUB", channel]);
                n >= 1
            } else {
                node.shard_subscribers(channel) >= 1
            }
        }),
        "Java {} never subscribed to {channel} on its master",
        java.version
    );
}

fn lock_both_ways(cluster: &Cluster, java: &JavaDriver, client: &Client) {
    let name = format!("mixed-lock-{}", flavour(java));
    let node = cluster.owner(&name);
    let channel = format!("redisson_lock__channel:{{{name}}}");

    java.ok("l1", &format!("lock {name}"));
    let lock = client.lock(&name);
    assert!(lock.try_lock().expect("try_lock").is_none());
    let waiter = Waiter::try_lock_for(lock, Duration::from_secs(25));
    assert!(
        eventually(Duration::from_secs(10), || {
            let (_, classic): (String, i64) = node.cmd(&["PUBSUB", "NUMSUB", &channel]);
            client.diagnostics().waiters == 1
                && classic == 1
                && node.shard_subscribers(&channel) == 1
        }),
        "the Rust waiter subscribes in both flavours on the slot's master"
    );
    let released = Instant::now();
    java.ok("l1", &format!("unlock {name}"));
    let took = waiter.woken_within(released, WAKE, Duration::from_secs(25));
    eprintln!("{}: Java lock unlock -> Rust waiter {took:?}", java.version);

    let guard = client.lock(&name).lock().expect("lock");
    java.assert_cannot_take("l2", &name);
    java.send("l2", &format!("lock {name}"));
    java_subscribed(node, java, &channel);
    java.assert_kept_out("l2", Duration::from_millis(200));
    let released = Instant::now();
    guard.unlock().expect("unlock");
    let what = format!("{} lock: Rust unlock -> Java waiter", java.version);
    java.java_woken("l2", released, WAKE, &what);
    java.ok("l2", &format!("unlock {name}"));
}

fn semaphore_both_ways(cluster: &Cluster, java: &JavaDriver, client: &Client) {
    let name = format!("mixed-sem-{}", flavour(java));
    let node = cluster.owner(&name);
    let channel = format!("redisson_sc:{{{name}}}");

    assert!(java.flag("s1", &format!("sem.trySetPermits {name} 1")));
    java.ok("s1", &format!("sem.acquire {name} 1"));
    let sem = client.semaphore(&name);
    assert!(sem.try_acquire(1).expect("try_acquire").is_none());
    let theirs = sem.clone();
    let (woken, join) = spawn_reporting(move || theirs.acquire(1).expect("acquire").forget());
    let mut con = node.con().expect("a connection to the owner");
    let released = release_after_a_reread(&mut con, &name, || {
        java.ok("s1", &format!("sem.release {name} 1"));
    });
    let what = format!("{} semaphore: Java release -> Rust", java.version);
    let took = woken_within(&woken, released, WAKE_BOUND, &what);
    join.join().expect("the Rust waiter");
    eprintln!("{what} {took:?}");

    let reply = java.ok("s2", &format!("sem.tryAcquire {name} 1 0"));
    assert!(!reply.value::<bool>(0), "Java got the permit Rust holds");
    java.send("s2", &format!("sem.acquire {name} 1"));
    java_subscribed(node, java, &channel);
    java.assert_kept_out("s2", Duration::from_millis(200));
    let released = Instant::now();
    sem.release(1).expect("release");
    let what = format!("{} semaphore: Rust release -> Java", java.version);
    java.java_woken("s2", released, WAKE_BOUND, &what);
    java.ok("s2", &format!("sem.release {name} 1"));
}

fn latch_both_ways(cluster: &Cluster, java: &JavaDriver, client: &Client) {
    let name = format!("mixed-latch-j-{}", flavour(java));
    let node = cluster.owner(&name);
    assert!(java.flag("c1", &format!("latch.trySetCount {name} 1")));
    let latch = client.count_down_latch(&name);
    let woken = latch_waiter(&latch);
    let mut con = node.con().expect("a connection to the owner");
    let released = release_after_a_reread(&mut con, &name, || {
        java.ok("c1", &format!("latch.countDown {name}"));
    });
    let what = format!("{} latch: Java count-down -> Rust", java.version);
    let took = woken_within(&woken, released, WAKE_BOUND, &what);
    eprintln!("{what} {took:?}");

    let name = format!("mixed-latch-r-{}", flavour(java));
    let node = cluster.owner(&name);
    let channel = format!("redisson_countdownlatch__channel__{{{name}}}");
    let latch = client.count_down_latch(&name);
    assert!(latch.try_set_count(1).expect("try_set_count"));
    java.send("c2", &format!("latch.await {name}"));
    java_subscribed(node, java, &channel);
    java.assert_kept_out("c2", Duration::from_millis(200));
    let released = Instant::now();
    latch.count_down().expect("count_down");
    let what = format!("{} latch: Rust count-down -> Java", java.version);
    java.java_woken("c2", released, WAKE_BOUND, &what);
}
