//! Redis Sentinel: a master, two replicas and three sentinels (started once
//! for this binary, tests serialized). The client finds the master through
//! the sentinels, wakes waiters through the master's pub/sub (every lock
//! type), and follows a
//! `SENTINEL FAILOVER`: a lock held across it is renewed on the new master,
//! a waiting thread gets the lock when it is released there, and locks
//! taken after the switch are on the new master, not on the demoted one.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;
use redisson_lock::{Client, Error, LostReason};
use support::every_kind::{Wake, every_kind};
use support::sentinel::{MASTER_NAME, SentinelSetup, con, role};

fn client(setup: &SentinelSetup, watchdog: Duration) -> Client {
    support::connections(Client::sentinel_builder(MASTER_NAME, setup.sentinel_urls()))
        .watchdog_timeout(watchdog)
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("build a Sentinel client")
}

/// Starts a thread that takes `name` and reports when.
fn wait_in_thread(
    client: &Client,
    name: &str,
) -> (mpsc::Receiver<Instant>, thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let lock = client.lock(name);
    let handle = thread::spawn(move || {
        let guard = lock.lock().expect("the waiter gets the lock");
        tx.send(Instant::now()).expect("send");
        drop(guard);
    });
    (rx, handle)
}

fn await_waiting(client: &Client) {
    assert!(
        support::eventually(Duration::from_secs(5), || client.diagnostics().waiters == 1),
        "the waiter waits through the subscriber"
    );
    thread::sleep(Duration::from_millis(100));
}

#[test]
fn lock_and_wake_up_through_the_sentinel_master() {
    let (setup, _serial) = SentinelSetup::shared();
    setup.flush();
    let holder = client(setup, Duration::from_secs(30));
    let waiter = client(setup, Duration::from_secs(30));
    let guard = holder.lock("s-wake").lock().expect("lock");
    let field: Option<i64> = con(setup.master_port())
        .hget("s-wake", holder.owner_field())
        .expect("HGET");
    assert_eq!(
        field,
        Some(1),
        "the lock is on the master the sentinels name"
    );

    let (rx, handle) = wait_in_thread(&waiter, "s-wake");
    await_waiting(&waiter);
    let released = Instant::now();
    guard.unlock().expect("unlock");
    let woken = rx.recv_timeout(Duration::from_secs(5)).expect("woken");
    let handoff = woken.duration_since(released);
    eprintln!("Sentinel handoff {handoff:?}");
    assert!(
        handoff < Duration::from_millis(200),
        "woken by the unlock message: {handoff:?}"
    );
    handle.join().expect("waiter");
    assert_eq!(
        support::threads_named("rlock-sentinel"),
        2,
        "one thread per client"
    );
    drop(holder);
    drop(waiter);
    assert_sentinel_threads_end();
}

/// Asserts that the Sentinel threads end with their clients (within 3 s).
fn assert_sentinel_threads_end() {
    assert!(
        support::eventually(Duration::from_secs(3), || {
            support::threads_named("rlock-sentinel") == 0
        }),
        "the Sentinel threads end with their clients"
    );
}

/// Every lock type (fenced, spin, non-reentrant and non-reentrant fair as
/// well as the reentrant, fair and read/write ones) through the master the
/// sentinels name: taken there, refused to another client, handed to that
/// client's waiter by the unlock message (the spin lock: within its backoff).
#[test]
fn every_lock_type_locks_excludes_and_wakes_through_the_sentinel_master() {
    let (setup, _serial) = SentinelSetup::shared();
    setup.flush();
    let holder = client(setup, Duration::from_secs(30));
    let waiter = client(setup, Duration::from_secs(30));
    let first = setup.master_port();
    let name_for = |kind: &str| format!("s-every-{kind}");
    let handoffs = every_kind(&holder, &waiter, &name_for, &|name, wake| {
        // On the master the sentinels name now: a failover they start on
        // their own while the machine is loaded (down-after is 1 s) moves
        // the lock with it (replica sync is on), and the demoted node
        // drops its data to resync (seen once in CI, 2026-11-29: the name
        // missing on the first master, the clients agreeing it was held).
        let mut master = setup.master_port();
        let held = support::eventually(Duration::from_secs(5), || {
            master = setup.master_port();
            redis::Commands::exists(&mut con(master), name).unwrap_or(false)
        });
        assert!(
            held,
            "{name} is held on the master {master} (the first master: {first})"
        );
        let mut con = con(master);
        if wake == Wake::Message {
            let subscribed = || {
                let clients: String = redis::cmd("CLIENT")
                    .arg("LIST")
                    .arg("TYPE")
                    .arg("pubsub")
                    .query(&mut con)
                    .expect("CLIENT LIST");
                clients.lines().any(|line| !line.trim().is_empty())
            };
            assert!(
                support::eventually(Duration::from_secs(5), subscribed),
                "{name}: the waiter subscribed on the master {master}"
            );
        }
    });
    assert_eq!(handoffs.len(), support::every_kind::KINDS.len());
    // Gone before the next test: a failover must not reach these clients.
    drop((holder, waiter));
    assert_sentinel_threads_end();
}

#[test]
fn a_lock_held_across_a_failover_is_renewed_on_the_new_master() {
    let (setup, _serial) = SentinelSetup::shared();
    setup.flush();
    // Renewed every 2 s: the renewals after the switch must reach the new
    // master, or the 6 s lease runs out there.
    let holder = client(setup, Duration::from_secs(6));
    let waiter = client(setup, Duration::from_secs(6));
    let guard = holder.lock("s-failover").lock().expect("lock");
    // Replica sync is on by default under Sentinel: `lock` returned after
    // both replicas acknowledged the hold, so whichever is promoted has it.
    let master = setup.master_port();
    for &replica in setup.data_ports.iter().filter(|&&port| port != master) {
        let count: Option<i64> = con(replica)
            .hget("s-failover", holder.owner_field())
            .expect("HGET on a replica");
        assert_eq!(count, Some(1), "the hold is on replica {replica} already");
    }
    let (rx, handle) = wait_in_thread(&waiter, "s-failover");
    await_waiting(&waiter);

    let switched = Instant::now();
    let (old, new) = setup.failover();
    eprintln!("failover {old} -> {new} in {:?}", switched.elapsed());
    // Longer than a lease after the switch: the copy the new master
    // replicated lives only if the watchdog renews it there.
    thread::sleep(Duration::from_secs(7));
    assert!(!guard.is_lost(), "lost: {:?}", guard.lost_reason());
    let mut master = con(new);
    let count: Option<i64> = master
        .hget("s-failover", holder.owner_field())
        .expect("HGET");
    assert_eq!(count, Some(1), "the hold is on the new master");
    let ttl: i64 = master.pttl("s-failover").expect("PTTL");
    assert!(ttl > 1000, "renewed on the new master (PTTL {ttl} ms)");
    assert!(
        rx.try_recv().is_err(),
        "the waiter stays out while the lock is held"
    );

    let released = Instant::now();
    guard.unlock().expect("unlock on the new master");
    let woken = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the waiter gets the lock");
    eprintln!(
        "handoff after the failover {:?}",
        woken.duration_since(released)
    );
    assert!(
        woken.duration_since(released) < Duration::from_millis(200),
        "woken through the subscriber moved to the new master"
    );
    handle.join().expect("waiter");
    let left: bool = master.exists("s-failover").expect("EXISTS");
    assert!(!left, "released on the new master");
}

#[test]
fn no_lock_is_taken_on_the_demoted_master_after_the_switch() {
    let (setup, _serial) = SentinelSetup::shared();
    setup.flush();
    let client = client(setup, Duration::from_secs(30));
    drop(client.lock("s-warmup").lock().expect("lock before"));
    let (old, new) = setup.failover();
    // The client looks the master up every second.
    thread::sleep(Duration::from_millis(1500));
    let mut master = con(new);
    for i in 0..20 {
        let name = format!("s-after-{i}");
        let guard = client.lock(&name).lock().expect("lock after the switch");
        let count: Option<i64> = master.hget(&name, client.owner_field()).expect("HGET");
        assert_eq!(
            count,
            Some(1),
            "lock {name} is on the new master {new}, not on {old}"
        );
        guard.unlock().expect("unlock");
    }
}

#[test]
fn a_lock_the_new_master_never_got_is_reported_lost() {
    let (setup, _serial) = SentinelSetup::shared();
    setup.flush();
    let holder = client(setup, Duration::from_secs(6));
    let other = client(setup, Duration::from_secs(6));
    let lock = holder.lock("s-lost");
    let mut guard = None;
    let (old, new) = setup.failover_losing_writes(|| {
        guard = Some(lock.lock().expect("lock on the master alone"));
    });
    let guard = guard.expect("taken");
    let switched = Instant::now();
    eprintln!("lossy failover {old} -> {new}");
    // The watchdog's first renewal on the new master finds the hold gone.
    assert!(
        support::eventually(Duration::from_secs(10), || guard.is_lost()),
        "the hold is reported lost after the failover"
    );
    eprintln!("reported lost {:?} after the switch", switched.elapsed());
    assert_eq!(guard.lost_reason(), Some(LostReason::KeyGone));
    // The hazard itself: another client takes the same lock on the new master.
    let theirs = other
        .lock("s-lost")
        .try_lock()
        .expect("try_lock")
        .expect("the new master never saw the first hold");
    match guard.unlock() {
        Err(Error::Lost { reason, .. }) => assert_eq!(reason, LostReason::KeyGone),
        other => panic!("unlock of a lost hold: {other:?}"),
    }
    drop(theirs);
}

#[test]
fn a_readonly_reply_makes_the_client_follow_the_master_at_once() {
    let (setup, _serial) = SentinelSetup::shared();
    setup.flush();
    // No periodic look-up during the test: only the demoted master's
    // READONLY (or its dropping the connection) can move the client.
    support::logs::install();
    let client = Client::sentinel_builder(MASTER_NAME, setup.sentinel_urls())
        .sentinel_scan_interval(Duration::from_secs(3600))
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("build a Sentinel client");
    drop(client.lock("s-ro-warmup").lock().expect("lock before"));
    // Only what is logged from here on (other tests' clients log too).
    let seen = support::logs::lines().len();
    let moves = |to: u16| {
        support::logs::lines()
            .iter()
            .skip(seen)
            .filter(|line| line.contains(&format!("is now 127.0.0.1:{to}")))
            .count()
    };
    let (old, new) = setup.failover();
    assert!(
        support::eventually(Duration::from_secs(30), || role(old).as_deref()
            == Some("slave")),
        "the sentinels demote the former master"
    );
    let started = Instant::now();
    let guard = client
        .lock("s-ro")
        .lock()
        .expect("the lock is taken on the new master, not refused");
    eprintln!("lock after the demotion took {:?}", started.elapsed());
    // Moved once: during the lock call (the demoted master's READONLY), or
    // just before it if the sentinels' reconfiguration of the former master
    // (which kills its clients) dropped one of this client's connections
    // first. Either way not by the hourly look-up. (The Sentinel thread
    // logs the move right after it made it, so the lock may be taken on
    // the new master a moment before the line is written.)
    support::eventually(Duration::from_secs(2), || moves(new) > 0);
    assert_eq!(moves(new), 1, "the client followed the master once");
    let count: Option<i64> = con(new).hget("s-ro", client.owner_field()).expect("HGET");
    assert_eq!(count, Some(1), "taken on the new master {new}");
    guard.unlock().expect("unlock on the new master");
}

#[test]
fn sentinel_settings_need_a_sentinel_builder() {
    for builder in [
        Client::builder("redis://127.0.0.1:1/").sentinel_master_url("redis://127.0.0.1:2/"),
        Client::builder("redis://127.0.0.1:1/").sentinel_scan_interval(Duration::from_secs(1)),
        Client::sentinel_builder(MASTER_NAME, ["redis://127.0.0.1:1/"])
            .sentinel_scan_interval(Duration::ZERO),
        Client::sentinel_builder("", ["redis://127.0.0.1:1/"]),
        Client::sentinel_builder(MASTER_NAME, Vec::<String>::new()),
    ] {
        let error = builder.build().expect_err("a misused Sentinel setting");
        assert!(matches!(error, Error::InvalidArgument(_)), "{error:?}");
    }
}

#[test]
fn the_sentinel_urls_database_is_the_masters() {
    // A sentinel has no databases (`SELECT` is an unknown command there):
    // the database in the URL is used on the master only.
    let (setup, _serial) = SentinelSetup::shared();
    setup.flush();
    let urls: Vec<String> = setup
        .sentinel_urls()
        .into_iter()
        .map(|url| format!("{url}3"))
        .collect();
    let client = Client::sentinel_builder(MASTER_NAME, urls)
        .build()
        .expect("a Sentinel client for database 3");
    let guard = client.lock("s-db").lock().expect("lock");
    let mut master = con(setup.master_port());
    let in_db0: bool = master.exists("s-db").expect("EXISTS");
    redis::cmd("SELECT")
        .arg(3)
        .exec(&mut master)
        .expect("SELECT");
    let in_db3: bool = master.exists("s-db").expect("EXISTS");
    assert!(in_db3 && !in_db0, "db 3: {in_db3}, db 0: {in_db0}");
    guard.unlock().expect("unlock");
}

#[test]
fn lookups_reuse_their_sentinel_connection() {
    let (setup, _serial) = SentinelSetup::shared();
    let connections = || -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("stats")
            .query(&mut con(setup.sentinel_ports[0]))
            .expect("INFO stats");
        info.lines()
            .find_map(|line| line.strip_prefix("total_connections_received:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("total_connections_received")
    };
    let client = Client::sentinel_builder(MASTER_NAME, setup.sentinel_urls())
        .sentinel_scan_interval(Duration::from_millis(100))
        .build()
        .expect("client");
    let before = connections();
    thread::sleep(Duration::from_millis(1500));
    // About 15 lookups, asked on the one connection the build opened (and
    // this test's own two connections for INFO).
    let opened = connections() - before;
    assert!(opened <= 2, "{opened} connections for 15 lookups");
    drop(client);
}
