//! Interop with real Redisson under Redis Sentinel, both ways: a Redisson
//! client built with `useSentinelServers` (its defaults: `checkLockSyncedSlaves`
//! on, reads from replicas) and a `Client::sentinel_builder` client (replica
//! sync on by default) find the same master through the same sentinels,
//! exclude each other, and each side's unlock wakes the other side's waiter.
//!
//! The master + 2 replicas + 3 sentinels topology is started once for this
//! binary (tests serialized by its lock); every test starts its own JVM.
//! Each scenario runs once per Redisson version of the matrix.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Kind, Lock};
use support::assert_waiting;
use support::eventually;
use support::java::{JavaDriver, Redisson, for_each_redisson_version};
use support::sentinel::{MASTER_NAME, SentinelSetup, con, role};
use support::state::channel;

/// How soon a waiter must get a lock after the other side releases it: a
/// functional bound (woken by the unlock message, not by a lease running
/// out 30 s later), generous for a WAIT on two replicas and a busy machine.
const HANDOFF: Duration = Duration::from_millis(500);

for_each_redisson_version!(
    reentrant_lock_both_ways,
    fair_lock_both_ways,
    read_write_lock_both_ways,
    java_hold_across_a_failover_wakes_rust_on_the_new_master,
);

/// One 3.x release before the unlock latch (3.24.0) and the publish
/// command in ARGV (3.22.0), from the version matrix of
/// `tests/java_versions.rs`: the reentrant lock's exclusion and wake-ups,
/// both ways, through the same sentinels.
mod redisson_3_21_3 {
    #[test]
    fn reentrant_lock_both_ways() {
        super::reentrant_lock_both_ways(super::Redisson::Exact("3.21.3"))
    }
}

// ---------------------------------------------------------------------------
// Scenarios

/// `getLock`: a Java hold excludes Rust and Java's unlock wakes a parked Rust
/// thread; a Rust hold (replicated before `lock` returns) excludes Java and
/// the Rust unlock wakes a parked Java thread.
fn reentrant_lock_both_ways(redisson: Redisson) {
    both_ways(
        redisson,
        (Side::new("sj-r1", "sj-r1"), |client| client.lock("sj-r1")),
        (Side::new("sj-r2", "sj-r2"), |client| client.lock("sj-r2")),
    );
}

/// `getFairLock`: the same hand-offs through the fair lock's queue and its
/// per-waiter channels.
fn fair_lock_both_ways(redisson: Redisson) {
    both_ways(
        redisson,
        (Side::new("sj-f1", "fair/sj-f1"), |client| {
            client.fair_lock("sj-f1")
        }),
        (Side::new("sj-f2", "fair/sj-f2"), |client| {
            client.fair_lock("sj-f2")
        }),
    );
}

/// `getReadWriteLock`: a Java write hold excludes a Rust reader and its
/// unlock wakes it; a Rust write hold excludes a Java reader and the Rust
/// unlock wakes it.
fn read_write_lock_both_ways(redisson: Redisson) {
    both_ways(
        redisson,
        // Java probes with the write lock: a Rust read hold excludes it.
        (
            Side::new("sj-rw1", "write/sj-rw1").probe("write/sj-rw1"),
            |client| client.read_write_lock("sj-rw1").read_lock(),
        ),
        (Side::new("sj-rw2", "read/sj-rw2"), |client| {
            client.read_write_lock("sj-rw2").write_lock()
        }),
    );
}

/// A Java hold survives `SENTINEL FAILOVER` (Redisson synced it to the
/// replicas) and keeps the Rust waiter out on the new master; once both
/// clients follow the switch, Java's unlock on the new master wakes the Rust
/// waiter through its subscriber, moved there.
fn java_hold_across_a_failover_wakes_rust_on_the_new_master(redisson: Redisson) {
    let (setup, _serial) = SentinelSetup::shared();
    setup.flush();
    let java = start_java(setup, redisson);
    let client = rust_client(setup);
    let key = "sj-fo";

    java.ok("j", &format!("lock {key}"));
    let field = java.owner_field("j");
    let holder = Holder::start(client.lock(key));
    assert_waiting(&client, 1, Duration::from_secs(10));

    let (old, new) = setup.failover();
    eprintln!("{}: failover {old} -> {new}", java.version);
    let held: Option<i64> = redis::cmd("HGET")
        .arg(key)
        .arg(&field)
        .query(&mut con(new))
        .expect("HGET on the new master");
    assert_eq!(held, Some(1), "Java's hold replicated to the new master");
    // Both clients look the master up every second; the demoted master
    // refuses writes from then on.
    assert!(
        eventually(Duration::from_secs(30), || role(old).as_deref()
            == Some("slave")),
        "the sentinels demote the former master"
    );
    let channel = channel(key);
    assert!(
        eventually(Duration::from_secs(10), || {
            let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&channel)
                .query(&mut con(new))
                .unwrap_or_default();
            counts.first().is_some_and(|(_, n)| *n >= 1)
        }),
        "the Rust subscriber moved to the new master"
    );
    thread::sleep(Duration::from_millis(1500));
    assert!(
        holder.acquired.try_recv().is_err(),
        "Rust acquired {key} while Java held it across the failover"
    );

    let unlocked = Instant::now();
    java.ok("j", &format!("unlock {key}"));
    let what = format!("{key}: Java unlock -> Rust acquire after the failover");
    java.rust_woken(&holder.acquired, unlocked, HANDOFF, &what);
    let java_left: Option<i64> = redis::cmd("HGET")
        .arg(key)
        .arg(&field)
        .query(&mut con(new))
        .expect("HGET");
    assert_eq!(java_left, None, "Java released on the new master");
    let fields: i64 = redis::cmd("HLEN")
        .arg(key)
        .query(&mut con(new))
        .expect("HLEN");
    assert_eq!(fields, 1, "only the Rust hold is on the new master");
    holder.release();
}

// ---------------------------------------------------------------------------
// The two hand-offs

/// Both hand-offs of one lock type, on a fresh JVM and Rust client: the
/// first lock is held by Java and waited for by Rust ([`java_unlock_wakes_rust`]),
/// the second held by Rust and waited for by Java ([`rust_unlock_wakes_java`]).
fn both_ways<A: Kind + Send + 'static, B: Kind + Send + 'static>(
    redisson: Redisson,
    (java_holds, rust_waits): (Side<'_>, fn(&Client) -> Lock<A>),
    (rust_holds, its_rust_lock): (Side<'_>, fn(&Client) -> Lock<B>),
) {
    let (setup, _serial) = SentinelSetup::shared();
    setup.flush();
    let java = start_java(setup, redisson);
    let client = rust_client(setup);
    java_unlock_wakes_rust(
        setup,
        &java,
        &client,
        java_holds,
        rust_waits(&client),
        || could_take(&rust_waits(&client)),
    );
    rust_unlock_wakes_java(setup, &java, rust_holds, its_rust_lock(&client), || {
        could_take(&its_rust_lock(&client))
    });
}

/// One lock seen from Java: its Redis key, the driver's name for it (with
/// its type prefix) and the name Java probes exclusion with.
struct Side<'a> {
    key: &'a str,
    java: &'a str,
    probe: &'a str,
}

impl<'a> Side<'a> {
    fn new(key: &'a str, java: &'a str) -> Side<'a> {
        Side {
            key,
            java,
            probe: java,
        }
    }

    fn probe(self, probe: &'a str) -> Side<'a> {
        Side { probe, ..self }
    }
}

/// Java holds `side.java`; `rust` waits for it in a thread and is woken by
/// Java's unlock within [`HANDOFF`]; then the Rust hold keeps Java out of
/// `side.probe` until it is released. `rust_can_take` tries the lock once
/// from Rust (and releases it) and says whether it got it.
fn java_unlock_wakes_rust<K: Kind + Send + 'static>(
    setup: &SentinelSetup,
    java: &JavaDriver,
    client: &Client,
    side: Side<'_>,
    rust: Lock<K>,
    rust_can_take: impl Fn() -> bool,
) {
    java.ok("j", &format!("lock {}", side.java));
    assert!(
        !rust_can_take(),
        "Rust took {} while Java holds it",
        side.key
    );

    let holder = Holder::start(rust);
    assert_waiting(client, 1, Duration::from_secs(10));
    assert!(
        holder
            .acquired
            .recv_timeout(Duration::from_millis(100))
            .is_err(),
        "Rust acquired {} while Java held it",
        side.key
    );
    let unlocked = Instant::now();
    java.ok("j", &format!("unlock {}", side.java));
    let what = format!("{}: Java unlock -> Rust acquire", side.java);
    java.rust_woken(&holder.acquired, unlocked, HANDOFF, &what);
    assert_replicated(setup, side.key);

    assert!(
        !java.flag("j", &format!("tryLockNow {}", side.probe)),
        "Java took {} while Rust holds {}",
        side.probe,
        side.key
    );
    holder.release();
    assert!(
        java.flag("j", &format!("tryLockNow {}", side.probe)),
        "Java cannot take {} after the Rust release",
        side.probe
    );
    java.ok("j", &format!("unlock {}", side.probe));
}

/// Rust holds `rust` (on every replica when `lock` returns); Java cannot
/// take `side.java` and waits for it; the Rust unlock wakes the Java thread
/// within [`HANDOFF`]; then the Java hold keeps Rust out.
fn rust_unlock_wakes_java<K: Kind + Send + 'static>(
    setup: &SentinelSetup,
    java: &JavaDriver,
    side: Side<'_>,
    rust: Lock<K>,
    rust_can_take: impl Fn() -> bool,
) {
    let holder = Holder::start(rust);
    holder
        .acquired
        .recv_timeout(Duration::from_secs(30))
        .expect("Rust takes the free lock");
    assert_replicated(setup, side.key);

    let reply = java.ok("j1", &format!("tryLock {} 0", side.probe));
    assert!(
        !reply.value::<bool>(0),
        "Java took {} while Rust holds {}",
        side.probe,
        side.key
    );
    java.send("j2", &format!("lock {}", side.java));
    let master = setup.master_port();
    assert!(
        eventually(Duration::from_secs(10), || {
            let channels: Vec<String> = redis::cmd("PUBSUB")
                .arg("CHANNELS")
                .arg(format!("*{{{}}}*", side.key))
                .query(&mut con(master))
                .unwrap_or_default();
            !channels.is_empty()
        }),
        "the Java thread never subscribed on the master for {}",
        side.key
    );
    assert!(
        java.try_recv("j2", Duration::from_millis(100)).is_none(),
        "Java acquired {} while Rust held it",
        side.key
    );

    let released = holder.release();
    let what = format!("{}: Rust unlock -> Java reply", side.java);
    java.java_woken("j2", released, HANDOFF, &what);
    assert!(
        !rust_can_take(),
        "Rust took {} while Java holds it",
        side.key
    );
    java.ok("j2", &format!("unlock {}", side.java));
    assert!(
        rust_can_take(),
        "Rust cannot take {} after Java's release",
        side.key
    );
}

// ---------------------------------------------------------------------------
// Helpers

fn start_java(setup: &SentinelSetup, redisson: Redisson) -> JavaDriver {
    let target = format!("sentinel:{MASTER_NAME}:{}", setup.sentinel_urls().join(","));
    let java = JavaDriver::start(redisson, &target, Duration::from_secs(30));
    java.warm_up();
    java
}

fn rust_client(setup: &SentinelSetup) -> Client {
    Client::sentinel_builder(MASTER_NAME, setup.sentinel_urls())
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("build a Sentinel client")
}

/// Takes `lock` at once if it is free (and releases it): whether it was.
fn could_take<K: Kind>(lock: &Lock<K>) -> bool {
    match lock.try_lock().expect("try_lock") {
        Some(guard) => {
            guard.unlock().expect("unlock");
            true
        }
        None => false,
    }
}

/// Every replica of the current master has `key`: the hold was replicated
/// before the call that made it returned (the Rust client's WAIT).
fn assert_replicated(setup: &SentinelSetup, key: &str) {
    let master = setup.master_port();
    for &port in setup.data_ports.iter().filter(|&&port| port != master) {
        let exists: bool = redis::cmd("EXISTS")
            .arg(key)
            .query(&mut con(port))
            .expect("EXISTS on a replica");
        assert!(exists, "{key} is not on the replica {port} yet");
    }
}

/// A Rust thread that takes a lock (waiting as long as it takes), reports
/// when, and holds it until told to release it.
struct Holder {
    acquired: mpsc::Receiver<Instant>,
    release: mpsc::Sender<()>,
    released: mpsc::Receiver<Instant>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Holder {
    fn start<K: Kind + Send + 'static>(lock: Lock<K>) -> Holder {
        let (acquired_tx, acquired) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let (released_tx, released) = mpsc::channel();
        let handle = thread::spawn(move || {
            let guard = lock.lock().expect("the Rust thread takes the lock");
            acquired_tx.send(Instant::now()).expect("report");
            // Also released when the test gives up (the sender dropped).
            let _ = release_rx.recv();
            let at = Instant::now();
            guard.unlock().expect("the Rust unlock");
            let _ = released_tx.send(at);
        });
        Holder {
            acquired,
            release,
            released,
            handle: Some(handle),
        }
    }

    /// Unlocks; returns when the unlock was sent.
    fn release(mut self) -> Instant {
        self.release.send(()).expect("the holder thread waits");
        let at = self
            .released
            .recv_timeout(Duration::from_secs(30))
            .expect("the Rust unlock returns");
        self.handle
            .take()
            .expect("once")
            .join()
            .expect("the holder thread");
        at
    }
}
