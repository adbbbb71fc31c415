//! Redis Cluster (3 masters + 3 replicas, started once for this binary):
//! slots computed by the crate agree with the server's, every lock type
//! works on names served by different masters, waiters wake promptly,
//! MOVED during acquire, unlock and renewal is followed, and a timed-out
//! acquire is never sent again.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, ShardedSubscription};
use support::cluster::{Cluster, Node};
use support::eventually;
use support::waiter::Waiter;

fn cluster() -> &'static Cluster {
    Cluster::shared()
}

fn client() -> Client {
    Client::cluster_builder(cluster().urls())
        .build()
        .expect("cluster client")
}

#[test]
fn every_lock_type_acquires_excludes_and_releases_on_every_master() {
    let cluster = cluster();
    let names = cluster.names_on_different_masters("types-", 3);
    let (a, b) = (client(), client());
    for name in &names {
        macro_rules! check {
            ($get:ident, $what:literal) => {{
                let name = format!("{}-{}", name, $what);
                let held = a.$get(&name).try_lock().expect("try_lock").expect("free");
                assert!(
                    b.$get(&name).try_lock().expect("try_lock").is_none(),
                    "{} {name} excludes",
                    $what
                );
                assert!(cluster.owner(&name).cmd::<bool>(&["EXISTS", &name]));
                held.unlock().expect("unlock");
                let other = b.$get(&name).try_lock().expect("try_lock");
                assert!(other.is_some(), "{} {name} free after unlock", $what);
                drop(other);
                assert!(!b.$get(&name).is_locked().expect("is_locked"));
            }};
        }
        check!(lock, "lock");
        check!(fair_lock, "fair");
        check!(fenced_lock, "fenced");
        check!(spin_lock, "spin");
        check!(non_reentrant_lock, "nonreentrant");
        check!(non_reentrant_fair_lock, "nonreentrantfair");
        // Read/write: a writer excludes readers and writers; readers share.
        let rw = format!("{name}-rw");
        let write = a
            .read_write_lock(&rw)
            .write_lock()
            .try_lock()
            .expect("w")
            .expect("free");
        assert!(
            b.read_write_lock(&rw)
                .read_lock()
                .try_lock()
                .expect("r")
                .is_none()
        );
        write.unlock().expect("unlock");
        let r1 = a
            .read_write_lock(&rw)
            .read_lock()
            .try_lock()
            .expect("r")
            .expect("free");
        let r2 = b
            .read_write_lock(&rw)
            .read_lock()
            .try_lock()
            .expect("r")
            .expect("shared");
        assert!(
            b.read_write_lock(&rw)
                .write_lock()
                .try_lock()
                .expect("w")
                .is_none()
        );
        drop((r1, r2));
        assert!(
            b.read_write_lock(&rw)
                .write_lock()
                .try_lock()
                .expect("w")
                .is_some()
        );
    }
}

#[test]
fn slots_agree_with_cluster_keyslot() {
    let cluster = cluster();
    let names = [
        "foo",
        "{foo}",
        "redisson_lock__channel:{foo}",
        "redisson_unlock_latch:{foo}:abc",
        "a{b",
        "redisson_lock__channel:a{b",
        "a}b{c}",
        "{}",
        "{}x",
        "x{}y{z}",
        "{{a}}",
        "{a}{b}",
        "user:{42}:profile",
        "ünïcødé{ключ}",
        "",
        "123456789",
    ];
    for name in names {
        assert_eq!(
            redisson_lock::key_slot(name.as_bytes()),
            cluster.slot(name),
            "slot of {name:?}"
        );
    }
    for i in 0..200 {
        let name = format!("k{i}{{t{}}}:{i}", i % 7);
        assert_eq!(
            redisson_lock::key_slot(name.as_bytes()),
            cluster.slot(&name)
        );
    }
}

/// `errorstat_<code>` of `INFO errorstats` on `node`.
fn error_count(node: &support::cluster::Node, code: &str) -> u64 {
    let info: String = node.cmd(&["INFO", "errorstats"]);
    let prefix = format!("errorstat_{code}:count=");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or(0)
}

/// `errorstat_MOVED` of `INFO errorstats` on `node`.
fn moved_count(node: &support::cluster::Node) -> u64 {
    error_count(node, "MOVED")
}

/// Another master than `node`.
fn other_master(node_port: u16) -> &'static support::cluster::Node {
    cluster()
        .masters()
        .into_iter()
        .find(|m| m.port != node_port)
        .expect("another master")
}

/// Subscribers of `channel` on `node`: `PUBSUB SHARDNUMSUB` when
/// `sharded`, `PUBSUB NUMSUB` otherwise.
fn subscribers(node: &support::cluster::Node, channel: &str, sharded: bool) -> i64 {
    let sub = if sharded { "SHARDNUMSUB" } else { "NUMSUB" };
    let reply: (String, i64) = node.cmd(&["PUBSUB", sub, channel]);
    reply.1
}

/// A waiter of client `b` for `name`, which `a` holds, wakes within 200 ms
/// of the unlock; it subscribed on the slot's master with the flavour's
/// command.
fn wake_up(mode: ShardedSubscription, sharded: bool, prefix: &str) {
    support::logs::install();
    let cluster = cluster();
    let logged = format!(
        "Redis Cluster with {} pub/sub (sharded_subscription {mode:?})",
        if sharded { "sharded" } else { "classic" }
    );
    let build = || {
        Client::cluster_builder(cluster.urls())
            .sharded_subscription(mode)
            .build()
            .expect("cluster client")
    };
    let (a, b) = (build(), build());
    assert!(
        support::logs::lines()
            .iter()
            .any(|line| line.contains(&logged)),
        "the flavour is logged at build: {logged}"
    );
    for name in cluster.names_on_different_masters(prefix, 3) {
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let held = a.lock(&name).lock().expect("lock");
        let waiter = Waiter::lock(b.lock(&name));
        let owner = cluster.owner(&name);
        assert!(eventually(Duration::from_secs(5), || {
            b.diagnostics().waiters == 1 && subscribers(owner, &channel, sharded) == 1
        }));
        assert_eq!(
            subscribers(owner, &channel, !sharded),
            0,
            "one flavour only"
        );
        thread::sleep(Duration::from_millis(50));
        let released = Instant::now();
        held.unlock().expect("unlock");
        let after =
            waiter.woken_within(released, Duration::from_millis(200), Duration::from_secs(5));
        eprintln!("{name}: woke {after:?} after the unlock");
    }
}

#[test]
fn sharded_waiters_wake_within_200_ms_of_the_unlock_on_every_master() {
    // Redis 7: Auto probes PUBSUB SHARDNUMSUB 0 and picks sharded pub/sub.
    wake_up(ShardedSubscription::Auto, true, "wake-auto-");
    wake_up(ShardedSubscription::On, true, "wake-on-");
}

#[test]
fn classic_waiters_wake_within_200_ms_of_the_unlock_on_every_master() {
    wake_up(ShardedSubscription::Off, false, "wake-off-");
}

#[test]
fn a_sharded_waiter_follows_its_slot_to_the_new_master() {
    let cluster = cluster();
    let name = "moved-waiter";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let (a, b) = (client(), client());
    let held = a.lock(name).lock().expect("lock");
    let waiter = Waiter::lock(b.lock(name));
    let from = cluster.owner(name);
    let to = other_master(from.port);
    assert!(eventually(Duration::from_secs(5), || subscribers(
        from, &channel, true
    ) == 1));
    cluster.migrate_slot(cluster.slot(name), to);
    // Redis drops the old master's shard subscription (an unsolicited
    // `sunsubscribe`); the waiter subscribes again at the new master.
    assert!(
        eventually(Duration::from_secs(5), || subscribers(to, &channel, true)
            == 1),
        "resubscribed at the new master"
    );
    assert_eq!(subscribers(from, &channel, true), 0);
    assert!(!waiter.has_acquired(), "still waiting: the lock is held");
    let released = Instant::now();
    held.unlock().expect("unlock");
    waiter.woken_within(released, Duration::from_millis(200), Duration::from_secs(5));
}

#[test]
fn acquire_follows_moved_to_the_new_owner() {
    let cluster = cluster();
    let name = "moved-acquire";
    let client = client();
    assert!(!client.lock(name).is_locked().expect("is_locked"));
    let from = cluster.owner(name);
    let to = other_master(from.port);
    let moved_before = moved_count(from);
    cluster.migrate_slot(cluster.slot(name), to);
    let guard = client
        .lock(name)
        .try_lock()
        .expect("try_lock")
        .expect("free");
    assert!(
        moved_count(from) > moved_before,
        "the client's table was stale"
    );
    assert_eq!(cluster.owner(name).port, to.port);
    assert!(to.cmd::<bool>(&["EXISTS", name]));
    assert_eq!(
        redisson_lock::LockGuard::lock_of(&guard)
            .hold_count()
            .expect("count"),
        1
    );
    guard.unlock().expect("unlock");
    assert!(!to.cmd::<bool>(&["EXISTS", name]));
}

/// Asserts that the lock `name` is gone from `to`, its new owner.
fn assert_released_on(to: &Node, name: &str) {
    assert!(
        !to.cmd::<bool>(&["EXISTS", name]),
        "released on the new owner"
    );
}

#[test]
fn unlock_follows_moved_with_the_lock_migrated() {
    let cluster = cluster();
    let name = "moved-unlock";
    let client = client();
    let guard = client.lock(name).lock().expect("lock");
    let from = cluster.owner(name);
    let to = other_master(from.port);
    let moved_before = moved_count(from);
    cluster.migrate_slot(cluster.slot(name), to);
    assert!(to.cmd::<bool>(&["EXISTS", name]), "MIGRATE moved the hash");
    guard.unlock().expect("unlock after the move");
    assert!(
        moved_count(from) > moved_before,
        "the client's table was stale"
    );
    assert_released_on(to, name);
}

#[test]
fn renewal_follows_moved_with_the_lock_migrated() {
    let cluster = cluster();
    let name = "moved-renewal";
    let client = Client::cluster_builder(cluster.urls())
        .watchdog_timeout(Duration::from_millis(1200))
        .build()
        .expect("client");
    let guard = client.lock(name).lock().expect("lock");
    let from = cluster.owner(name);
    let to = other_master(from.port);
    let moved_before = moved_count(from);
    cluster.migrate_slot(cluster.slot(name), to);
    // Several leases long: only renewals on the new owner keep it.
    thread::sleep(Duration::from_millis(3000));
    assert!(
        moved_count(from) > moved_before,
        "a renewal went to the old owner"
    );
    assert!(!guard.is_lost(), "lost: {:?}", guard.lost_reason());
    let ttl: i64 = to.cmd(&["PTTL", name]);
    assert!(ttl > 0, "renewed on the new owner, PTTL {ttl}");
    guard.unlock().expect("unlock");
    assert!(!to.cmd::<bool>(&["EXISTS", name]));
}

#[test]
fn a_timed_out_acquire_is_not_sent_again_while_the_master_is_paused() {
    let cluster = cluster();
    let name = "paused-acquire";
    let client = Client::cluster_builder(cluster.urls())
        .response_timeout(Duration::from_millis(300))
        .build()
        .expect("client");
    let lock = client.lock(name);
    lock.try_lock()
        .expect("warm up")
        .expect("free")
        .unlock()
        .expect("unlock");
    let owner = cluster.owner(name);
    let _: () = owner.cmd(&["CLIENT", "PAUSE", "1500", "WRITE"]);
    let started = Instant::now();
    let result = lock.try_lock();
    assert!(
        matches!(result, Err(redisson_lock::Error::Timeout { .. })),
        "a timeout, got {:?}",
        result.map(|g| g.is_some())
    );
    // One response timeout, no resend (each would cost another 300 ms).
    let took = started.elapsed();
    assert!(took < Duration::from_millis(600), "returned after {took:?}");
    // Once the pause ends, the acquire runs at most once (Redis drops the
    // command of a client that closed its connection meanwhile, as this
    // one does after a timeout); never a count of 2 or more.
    thread::sleep(Duration::from_millis(1800).saturating_sub(started.elapsed()));
    thread::sleep(Duration::from_millis(500));
    let counts: Vec<String> = owner.cmd(&["HVALS", name]);
    assert!(
        counts.is_empty() || counts == ["1"],
        "hold count {counts:?}"
    );
    let _: () = owner.cmd(&["DEL", name]);
}

#[test]
fn ask_and_tryagain_during_a_slot_migration() {
    let cluster = cluster();
    let name = "migrating-lock";
    let client = client();
    assert!(!client.lock(name).is_locked().expect("is_locked"));
    let slot = cluster.slot(name);
    let from = cluster.owner(name);
    let to = other_master(from.port);
    let (asks, tryagains) = (error_count(from, "ASK"), error_count(to, "TRYAGAIN"));
    cluster.begin_migration(slot, to);
    // The source lacks the lock's key: ASK; the target, sent ASKING and the
    // one-key acquire, serves it.
    let guard = client
        .lock(name)
        .try_lock()
        .expect("try_lock")
        .expect("free");
    assert!(error_count(from, "ASK") > asks, "the source answered ASK");
    let mut con = to.con().expect("connect the importing node");
    let (_, exists): ((), bool) = redis::pipe()
        .cmd("ASKING")
        .cmd("EXISTS")
        .arg(name)
        .query(&mut con)
        .expect("ASKING EXISTS");
    assert!(exists, "taken on the importing node");
    // The unlock's keys are the lock and its channel (never a key): the
    // importing node answers TRYAGAIN until the migration ends, and the
    // client retries until then.
    let finisher = thread::spawn(move || {
        thread::sleep(Duration::from_millis(600));
        cluster.finish_migration(slot, to);
    });
    let started = Instant::now();
    guard.unlock().expect("unlock across the migration");
    let took = started.elapsed();
    finisher.join().expect("finisher");
    assert!(
        took >= Duration::from_millis(500),
        "unlocked only after the migration: {took:?}"
    );
    assert!(
        error_count(to, "TRYAGAIN") > tryagains,
        "the target answered TRYAGAIN"
    );
    assert_released_on(to, name);
}

#[test]
fn the_watchdog_renews_every_renewal_kind_on_every_master() {
    let cluster = cluster();
    let client = Client::cluster_builder(cluster.urls())
        .watchdog_timeout(Duration::from_millis(900))
        .build()
        .expect("client");
    let names = cluster.names_on_different_masters("renew-", 3);
    // Per master: a reentrant hold (its field), a reader (its own markers),
    // and a fair hold, in one run of the watchdog.
    let plain: Vec<_> = names
        .iter()
        .map(|n| client.lock(n.clone()).lock().expect("lock"))
        .collect();
    let readers: Vec<_> = names
        .iter()
        .map(|n| {
            client
                .read_write_lock(format!("{n}-rw"))
                .read_lock()
                .lock()
                .expect("read lock")
        })
        .collect();
    let fair: Vec<_> = names
        .iter()
        .map(|n| {
            client
                .fair_lock(format!("{n}-fair"))
                .lock()
                .expect("fair lock")
        })
        .collect();
    thread::sleep(Duration::from_millis(3000));
    for name in &names {
        for key in [name.clone(), format!("{name}-rw"), format!("{name}-fair")] {
            let ttl: i64 = cluster.owner(&key).cmd(&["PTTL", &key]);
            assert!(ttl > 0, "{key} renewed on its master, PTTL {ttl}");
        }
    }
    assert!(plain.iter().all(|g| !g.is_lost()));
    assert!(readers.iter().all(|g| !g.is_lost()));
    assert!(fair.iter().all(|g| !g.is_lost()));
}

/// A raw subscriber connection (`SUBSCRIBE` or `SSUBSCRIBE`) to `node`,
/// kept open while it lives.
fn raw_subscriber(node: &Node, command: &str, channel: &str) -> std::net::TcpStream {
    use std::io::{BufRead, BufReader, Write};
    let mut con = std::net::TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
    let request = format!(
        "*2\r\n${}\r\n{command}\r\n${}\r\n{channel}\r\n",
        command.len(),
        channel.len()
    );
    con.write_all(request.as_bytes()).expect("subscribe");
    let mut reader = BufReader::new(con.try_clone().expect("clone"));
    let mut line = String::new();
    reader.read_line(&mut line).expect("confirmation");
    assert!(line.starts_with('*'), "{command}: {line}");
    con
}

/// Issue 34: `pubsub-flavour-split`, a Redisson 3.21 waiter (classic) and
/// a 3.22+ one (sharded) in one cluster, as the doctor reports it.
#[test]
fn the_doctor_reports_classic_and_sharded_redisson_subscribers_in_one_cluster() {
    let cluster = cluster();
    let classic_channel = "redisson_lock__channel:{doctor-classic}";
    let sharded_channel = "redisson_lock__channel:{doctor-sharded}";
    let _classic = raw_subscriber(cluster.owner(classic_channel), "SUBSCRIBE", classic_channel);
    let _sharded = raw_subscriber(
        cluster.owner(sharded_channel),
        "SSUBSCRIBE",
        sharded_channel,
    );
    let report = client().doctor().run().expect("doctor");
    let split = report
        .findings
        .iter()
        .find(|f| f.kind == "pubsub-flavour-split")
        .unwrap_or_else(|| panic!("no split reported: {:?}", report.findings));
    assert_eq!(split.severity, redisson_lock::Severity::Error);
    assert_eq!(report.masters, 3);
}
