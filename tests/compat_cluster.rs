//! `ShardedSubscription::Both` on a Redis 7 cluster (3 masters, started once
//! for this binary), with Rust-only actors standing in for the two Java
//! generations: a raw `SUBSCRIBE` connection (Redisson before 3.22) and a
//! raw `SSUBSCRIBE` connection (Redisson 3.22+ / 4.x) on the slot's master
//! both hear every release of the crate, and a crate waiter in Both mode is
//! woken by a raw `PUBLISH` and by a raw `SPUBLISH` of the unlock message,
//! well within the holder's lease. `redisson_compat("3.21.3")` chooses Both;
//! an explicit `sharded_subscription` wins over it, in either call order.

mod support;

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use redisson_lock::{Client, ClientBuilder, ShardedSubscription};
use support::RawSubscriber;
use support::cluster::{Cluster, Node};
use support::eventually;
use support::waiter::Waiter;

static CLUSTER: LazyLock<Cluster> = LazyLock::new(|| Cluster::start(3, 0));

fn builder() -> ClientBuilder {
    Client::cluster_builder(CLUSTER.urls())
}

/// A client of the cluster with `ShardedSubscription::Both`.
fn both_mode() -> Client {
    builder()
        .sharded_subscription(ShardedSubscription::Both)
        .build()
        .expect("client")
}

/// A classic and a sharded raw subscriber of `channel`, on its slot's
/// master.
fn both_flavours(channel: &str) -> (RawSubscriber, RawSubscriber) {
    let owner = CLUSTER.owner(channel);
    (
        RawSubscriber::on_port(owner.port, "SUBSCRIBE", &[channel]),
        RawSubscriber::on_port(owner.port, "SSUBSCRIBE", &[channel]),
    )
}

/// Whether `subscriber` gets `payload` on `channel` within 2 s.
fn hears(subscriber: &mut RawSubscriber, channel: &str, payload: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    while let Some(message) =
        subscriber.next_message(deadline.saturating_duration_since(Instant::now()))
    {
        if message.channel == channel && message.payload == payload {
            return true;
        }
    }
    false
}

/// Asserts that both raw subscribers of `channel` heard `payload`.
fn both_hear(subs: &mut (RawSubscriber, RawSubscriber), channel: &str, payload: &str) {
    assert!(
        hears(&mut subs.0, channel, payload),
        "a classic (SUBSCRIBE) waiter hears `{payload}` on {channel}"
    );
    assert!(
        hears(&mut subs.1, channel, payload),
        "a sharded (SSUBSCRIBE) waiter hears `{payload}` on {channel}"
    );
}

#[test]
fn every_release_in_both_mode_reaches_classic_and_sharded_subscribers() {
    // Java 3.21 is the fleet's oldest: Both, chosen by the version.
    let client = builder().redisson_compat("3.21.3").build().expect("client");

    // Each case: its channel, what is done (every write that publishes),
    // and the messages both flavours must hear, in order.
    type Writes = fn(&Client, &str);
    let cases: [(&str, &str, Writes, &[&str]); 5] = [
        (
            "both-rlock",
            "redisson_lock__channel:",
            |client, name| {
                let lock = client.lock(name);
                lock.lock().expect("lock").unlock().expect("unlock");
                // The force unlock publishes too.
                let _held = lock.lock().expect("lock");
                assert!(lock.force_unlock().expect("force unlock"));
            },
            &["0", "0"],
        ),
        (
            "both-rw",
            "redisson_rwlock:",
            |client, name| {
                let rw = client.read_write_lock(name);
                rw.write_lock()
                    .lock()
                    .expect("write")
                    .unlock()
                    .expect("unlock");
                rw.read_lock()
                    .lock()
                    .expect("read")
                    .unlock()
                    .expect("unlock");
            },
            &["1", "0"],
        ),
        (
            "both-sem",
            "redisson_sc:",
            |client, name| {
                client.semaphore(name).release(3).expect("release");
            },
            &["3"],
        ),
        (
            "both-pes",
            "redisson_sc:",
            |client, name| {
                let pes = client.permit_expirable_semaphore(name);
                assert!(pes.try_set_permits(1).expect("try_set_permits"));
                pes.acquire(None)
                    .expect("acquire")
                    .release()
                    .expect("release");
            },
            &["1", "1"],
        ),
        (
            "both-latch",
            "redisson_countdownlatch__channel__",
            |client, name| {
                let latch = client.count_down_latch(name);
                assert!(latch.try_set_count(1).expect("try_set_count"));
                latch.count_down().expect("count down");
            },
            &["1", "0"],
        ),
    ];
    for (name, prefix, writes, heard) in cases {
        let channel = format!("{prefix}{{{name}}}");
        let mut subs = both_flavours(&channel);
        writes(&client, name);
        for payload in heard {
            both_hear(&mut subs, &channel, payload);
        }
    }
}

/// Subscribers of `channel` on `node`: `PUBSUB SHARDNUMSUB` when
/// `sharded`, `PUBSUB NUMSUB` otherwise.
fn subscribers(node: &Node, channel: &str, sharded: bool) -> i64 {
    let sub = if sharded { "SHARDNUMSUB" } else { "NUMSUB" };
    let reply: (String, i64) = node.cmd(&["PUBSUB", sub, channel]);
    reply.1
}

/// A crate waiter in Both mode for `name`, held by a planted Java-like
/// field with a 30 s lease: once it is subscribed with both flavours on the
/// slot's master, the hash is deleted (which alone wakes nobody) and
/// `publish` sends the unlock message; the waiter must get the lock within
/// 2 s, where without the message it would sleep out the 30 s lease.
fn woken_by(publish: &str, name: &str) {
    let client = both_mode();
    let owner = CLUSTER.owner(name);
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let _: () = owner.cmd(&["DEL", name]);
    let _: i64 = owner.cmd(&["HSET", name, "java-client:1", "1"]);
    let _: i64 = owner.cmd(&["PEXPIRE", name, "30000"]);
    let waiter = Waiter::try_lock_for(client.lock(name), Duration::from_secs(20));
    assert!(
        eventually(Duration::from_secs(5), || {
            client.diagnostics().waiters == 1
                && subscribers(owner, &channel, false) == 1
                && subscribers(owner, &channel, true) == 1
        }),
        "the Both waiter subscribes with SUBSCRIBE and SSUBSCRIBE on the slot's master"
    );
    let _: i64 = owner.cmd(&["DEL", name]);
    let sent = Instant::now();
    let _: i64 = owner.cmd(&[publish, &channel, "0"]);
    let after = waiter.woken_within(sent, Duration::from_secs(2), Duration::from_secs(10));
    eprintln!("{publish}: woke {after:?} after the message");
}

#[test]
fn a_both_mode_waiter_wakes_on_a_raw_publish_and_on_a_raw_spublish() {
    woken_by("PUBLISH", "both-woken-classic");
    woken_by("SPUBLISH", "both-woken-sharded");
}

#[test]
fn a_both_mode_fair_waiter_is_woken_by_the_crate_unlock() {
    let (a, b) = (both_mode(), both_mode());
    let name = "both-fair";
    let held = a.fair_lock(name).lock().expect("lock");
    let waiter = Waiter::try_lock_for(b.fair_lock(name), Duration::from_secs(20));
    support::assert_waiting(&b, 1, Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(50));
    let released = Instant::now();
    held.unlock().expect("unlock");
    waiter.woken_within(released, Duration::from_secs(1), Duration::from_secs(10));
}

/// What the two raw subscribers of a lock hear of one crate unlock by a
/// client of `builder`: (classic heard, sharded heard).
fn flavours_heard(builder: ClientBuilder, name: &str) -> (bool, bool) {
    let client = builder.build().expect("client");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let mut subs = both_flavours(&channel);
    client
        .lock(name)
        .lock()
        .expect("lock")
        .unlock()
        .expect("unlock");
    (
        hears(&mut subs.0, &channel, "0"),
        hears(&mut subs.1, &channel, "0"),
    )
}

#[test]
fn an_explicit_sharded_mode_wins_over_redisson_compat_in_either_order() {
    let compat_first = builder()
        .redisson_compat("3.21.3")
        .sharded_subscription(ShardedSubscription::Off);
    assert_eq!(flavours_heard(compat_first, "prec-1"), (true, false));
    let knob_first = builder()
        .sharded_subscription(ShardedSubscription::On)
        .redisson_compat("3.12.4");
    assert_eq!(flavours_heard(knob_first, "prec-2"), (false, true));
    // From 3.22 the version leaves the builder's choice (Auto: sharded on
    // Redis 7).
    let newer = builder().redisson_compat("3.22.0");
    assert_eq!(flavours_heard(newer, "prec-3"), (false, true));
    let oldest = builder().redisson_compat("3.16.8");
    assert_eq!(flavours_heard(oldest, "prec-4"), (true, true));
}

#[test]
fn a_both_mode_waiter_follows_its_slot_to_the_new_master() {
    let (a, b) = (both_mode(), both_mode());
    let name = "both-moved-waiter";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let held = a.lock(name).lock().expect("lock");
    let waiter = Waiter::lock(b.lock(name));
    let from = CLUSTER.owner(name);
    let to = CLUSTER
        .masters()
        .into_iter()
        .find(|node| node.port != from.port)
        .expect("another master");
    assert!(eventually(Duration::from_secs(5), || {
        subscribers(from, &channel, true) == 1 && subscribers(from, &channel, false) == 1
    }));
    CLUSTER.migrate_slot(CLUSTER.slot(name), to);
    // Redis drops the shard subscription at the old master; the waiter
    // subscribes again, with both flavours, at the new one.
    assert!(
        eventually(Duration::from_secs(5), || {
            subscribers(to, &channel, true) == 1 && subscribers(to, &channel, false) == 1
        }),
        "resubscribed with both flavours at the new master"
    );
    assert!(
        eventually(Duration::from_secs(5), || {
            subscribers(from, &channel, false) == 0 && subscribers(from, &channel, true) == 0
        }),
        "nothing left subscribed at the old master"
    );
    assert!(!waiter.has_acquired(), "still waiting: the lock is held");
    let released = Instant::now();
    held.unlock().expect("unlock");
    waiter.woken_within(released, Duration::from_millis(500), Duration::from_secs(5));
}
