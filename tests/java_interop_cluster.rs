//! Interop with real Redisson in a Redis Cluster (`useClusterServers`,
//! Redisson's defaults: sharded pub/sub chosen automatically), both ways,
//! for names served by each of the 3 masters: a Java waiter is woken by a
//! Rust unlock and a Rust waiter by a Java unlock, each within 200 ms, and
//! both sides use the same flavour (`SSUBSCRIBE` on the slot's master); the
//! same for the fair lock (a channel per waiter), the write lock and the
//! fenced lock.
//! Redisson 4.7.0 probes with `PUBSUB SHARDNUMSUB 0`, 3.24.3 with
//! `SPUBLISH "" ""`; the crate's `Auto` must agree with both on Redis 7.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::Client;
use support::assert_waiting;
use support::cluster::Node;
use support::eventually;
use support::java::{Redisson, for_each_redisson_version, start_cluster};
use support::state::channel;
use support::waiter::Waiter;

/// How soon a waiter must get a lock after its holder releases it: woken
/// by the unlock message, not by a 30 s TTL.
const HANDOFF: Duration = Duration::from_millis(200);

for_each_redisson_version!(
    rust_unlock_wakes_java_waiters_on_every_master,
    java_unlock_wakes_rust_waiters_on_every_master,
    fair_write_and_fenced_locks_wake_across_languages,
);

fn prefix(redisson: Redisson, scenario: &str) -> String {
    format!("{scenario}-{}-", redisson.version())
}

fn rust_unlock_wakes_java_waiters_on_every_master(redisson: Redisson) {
    let (cluster, java, client) = start_cluster(redisson);
    for name in cluster.names_on_different_masters(&prefix(redisson, "r2j"), 3) {
        let owner = cluster.owner(&name);
        let guard = client.lock(&name).lock().expect("lock");
        let reply = java.ok("j1", &format!("tryLock {name} 0"));
        assert!(!reply.value::<bool>(0), "Java took a lock Rust holds");
        java.send("j2", &format!("lock {name}"));
        assert!(
            eventually(Duration::from_secs(10), || owner
                .shard_subscribers(&channel(&name))
                == 1),
            "the Java waiter never SSUBSCRIBEd on the slot's master"
        );
        java.assert_kept_out("j2", Duration::from_millis(100));
        let released = Instant::now();
        guard.unlock().expect("unlock");
        java.java_woken("j2", released, HANDOFF, "Rust unlock -> Java reply");
        let field = java.owner_field("j2");
        let count: Option<String> = owner.cmd(&["HGET", &name, &field]);
        assert_eq!(count.as_deref(), Some("1"));
        java.ok("j2", &format!("unlock {name}"));
    }
}

fn java_unlock_wakes_rust_waiters_on_every_master(redisson: Redisson) {
    let (cluster, java, client) = start_cluster(redisson);
    for name in cluster.names_on_different_masters(&prefix(redisson, "j2r"), 3) {
        let owner = cluster.owner(&name);
        java.ok("j", &format!("lock {name}"));
        assert!(client.lock(&name).try_lock().expect("try_lock").is_none());
        let waiter = Waiter::lock(client.lock(&name));
        assert!(
            eventually(Duration::from_secs(10), || client.diagnostics().waiters
                == 1
                && owner.shard_subscribers(&channel(&name)) == 1),
            "the Rust waiter never SSUBSCRIBEd on the slot's master"
        );
        let released = Instant::now();
        java.ok("j", &format!("unlock {name}"));
        let handoff = waiter.woken_within(released, HANDOFF, Duration::from_secs(10));
        eprintln!("{}: Java unlock -> Rust lock {handoff:?}", java.version);
    }
}

/// Shard channels on `node` that mention `{name}`.
fn shard_channels(node: &Node, name: &str) -> usize {
    let pattern = format!("*{{{name}}}*");
    let channels: Vec<String> = node.cmd(&["PUBSUB", "SHARDCHANNELS", &pattern]);
    channels.len()
}

/// For the fair lock (a channel per waiter), the write lock (the read/write
/// lock's channel) and the fenced lock: a Rust unlock wakes a Java waiter
/// and a Java unlock wakes a Rust waiter, within 200 ms, on sharded pub/sub.
fn fair_write_and_fenced_locks_wake_across_languages(redisson: Redisson) {
    let (cluster, java, client) = start_cluster(redisson);
    macro_rules! both_ways {
        ($java_type:literal, $rust_lock:expr) => {{
            let name = format!("{}{}", prefix(redisson, "family"), $java_type);
            let owner = cluster.owner(&name);
            let java_name = format!("{}/{name}", $java_type);
            let rust_lock = |client: &Client| $rust_lock(client, name.clone());

            // Rust holds, Java waits.
            let guard = rust_lock(&client).lock().expect("lock");
            java.send("jw", &format!("lock {java_name}"));
            assert!(
                eventually(Duration::from_secs(10), || shard_channels(owner, &name)
                    >= 1),
                "the Java waiter never SSUBSCRIBEd on the slot's master"
            );
            java.assert_kept_out("jw", Duration::from_millis(100));
            let released = Instant::now();
            guard.unlock().expect("unlock");
            let what = format!("{java_name}: Rust unlock -> Java");
            java.java_woken("jw", released, HANDOFF, &what);

            // Java holds (the same actor), Rust waits.
            let (tx, rx) = mpsc::channel();
            let waiter = {
                let (client, lock) = (client.clone(), rust_lock(&client));
                thread::spawn(move || {
                    let guard = lock.lock().expect("lock");
                    tx.send(Instant::now()).expect("send");
                    guard.unlock().expect("unlock");
                    drop(client);
                })
            };
            assert_waiting(&client, 1, Duration::from_secs(10));
            thread::sleep(Duration::from_millis(50));
            let released = Instant::now();
            java.ok("jw", &format!("unlock {java_name}"));
            let woke = rx.recv_timeout(Duration::from_secs(10)).expect("woken");
            waiter.join().expect("waiter");
            let handoff = woke.saturating_duration_since(released);
            eprintln!(
                "{} {java_name}: Java unlock -> Rust {handoff:?}",
                java.version
            );
            assert!(
                handoff < HANDOFF,
                "{java_name}: Rust got it {handoff:?} after"
            );
        }};
    }
    both_ways!("fair", |c: &Client, n: String| c.fair_lock(n));
    both_ways!("write", |c: &Client, n: String| c
        .read_write_lock(n)
        .write_lock());
    both_ways!("fenced", |c: &Client, n: String| c.fenced_lock(n));
}
