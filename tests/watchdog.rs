//! The watchdog: locks taken without a lease stay alive while held, stop
//! being renewed once released, and a guard learns when its lock is gone.
//! An explicit lease is never renewed.

mod support;

use std::collections::{HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error, LostReason};
use support::monitor::monitor_evalsha;
use support::state::{exists, lock_twice, pttl};
use support::{RedisServer, eventually, logs};

const FOREIGN_FIELD: &str = "c0ffee00-1234-4567-89ab-cdef01234567:5";

fn client(server: &RedisServer, watchdog: Duration) -> Client {
    server.watchdog_client(watchdog)
}

#[test]
fn watchdog_keeps_a_held_lock_alive_for_ten_leases_and_stops_after_unlock() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(300);
    let client = client(&server, lease);
    let lock = client.lock("renewed");
    let guard = lock.lock().expect("lock");
    let field = client.owner_field();

    let start = Instant::now();
    let mut samples = 0;
    let mut lowest = i64::MAX;
    while start.elapsed() < lease * 11 {
        let ttl = pttl(&server, "renewed");
        assert!(
            ttl > 0 && ttl <= 300,
            "PTTL {ttl} after {:?}",
            start.elapsed()
        );
        lowest = lowest.min(ttl);
        assert!(!guard.is_lost(), "lost after {:?}", start.elapsed());
        samples += 1;
        thread::sleep(Duration::from_millis(15));
    }
    eprintln!("{samples} samples, lowest PTTL {lowest} ms");
    let state: HashMap<String, String> = server.cmd(&["HGETALL", "renewed"]);
    assert_eq!(state, HashMap::from([(field, "1".to_string())]));
    assert_eq!(client.diagnostics().registered_holds, 1);

    guard.unlock().expect("unlock after 3 s of renewals");
    assert!(!exists(&server, "renewed"));
    assert_eq!(client.diagnostics().registered_holds, 0);
    // Several renewal periods later the watchdog has recreated nothing, and
    // the unlock latch is cleaned up too.
    thread::sleep(lease * 2);
    assert!(eventually(Duration::from_secs(2), || {
        let size: i64 = server.cmd(&["DBSIZE"]);
        size == 0
    }));
    assert!(!exists(&server, "renewed"));
}

#[test]
fn watchdog_renews_a_reentered_lock_until_the_last_hold_is_released() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(300);
    let client = client(&server, lease);
    let lock = client.lock("reentered");
    let (first, second) = lock_twice(&lock);
    second.unlock().expect("partial release");
    thread::sleep(lease * 3);
    assert!(!first.is_lost());
    assert!(pttl(&server, "reentered") > 0);
    assert_eq!(lock.hold_count().expect("count"), 1);
    first.unlock().expect("final release");
    thread::sleep(lease);
    assert!(!exists(&server, "reentered"));
}

#[test]
fn explicit_lease_expires_unrenewed_and_its_late_unlock_leaves_the_next_holder_alone() {
    let server = RedisServer::start();
    // A short watchdog that would renew the lock if it were registered for renewal.
    let client = client(&server, Duration::from_millis(300));
    let lock = client.lock("leased").with_lease(Duration::from_millis(300));
    let taken = Instant::now();
    let guard = lock.lock().expect("lock");
    assert!(!guard.is_lost());

    assert!(
        eventually(Duration::from_secs(2), || !exists(&server, "leased")),
        "the key expires"
    );
    let expired = taken.elapsed();
    assert!(
        expired >= Duration::from_millis(250),
        "expired after {expired:?}"
    );
    assert!(guard.is_lost(), "the guard knows its lease ran out");

    // A Java client takes the lock meanwhile.
    let _: () = server.cmd(&["HSET", "leased", FOREIGN_FIELD, "1"]);
    let _: () = server.cmd(&["PEXPIRE", "leased", "30000"]);
    let result = guard.unlock();
    assert!(
        matches!(result, Err(Error::Lost { .. } | Error::NotHeld { .. })),
        "{result:?}"
    );
    let state: HashMap<String, String> = server.cmd(&["HGETALL", "leased"]);
    assert_eq!(
        state,
        HashMap::from([(FOREIGN_FIELD.to_string(), "1".to_string())])
    );
    assert!(pttl(&server, "leased") > 29_000);
    assert_eq!(client.diagnostics().registered_holds, 0);
}

#[test]
fn deleted_lock_is_reported_lost_with_a_warning_naming_it() {
    logs::install();
    let server = RedisServer::start();
    let client = client(&server, Duration::from_millis(300));
    let lock = client.lock("deleted-under-me");
    let guard = lock.lock().expect("lock");
    let _: () = server.cmd(&["DEL", "deleted-under-me"]);
    let deleted = Instant::now();

    assert!(
        eventually(Duration::from_secs(2), || guard.is_lost()),
        "lost within 2 s"
    );
    eprintln!("noticed after {:?}", deleted.elapsed());
    assert!(eventually(Duration::from_secs(2), || {
        logs::lines()
            .iter()
            .any(|line| line.starts_with("WARN") && line.contains("deleted-under-me"))
    }));
    let result = guard.unlock();
    assert!(
        matches!(result, Err(Error::Lost { ref name, reason: LostReason::KeyGone }) if name == "deleted-under-me")
            || matches!(result, Err(Error::NotHeld { .. })),
        "{result:?}"
    );
    assert_eq!(client.diagnostics().registered_holds, 0);
    thread::sleep(Duration::from_millis(300));
    assert!(!exists(&server, "deleted-under-me"), "nothing recreates it");
}

#[test]
fn lock_taken_over_by_another_owner_is_reported_lost() {
    let server = RedisServer::start();
    let client = client(&server, Duration::from_millis(300));
    let guard = client.lock("taken-over").lock().expect("lock");
    // Someone deletes it and a Java client takes it between two renewals.
    let mut con = server.con();
    let _: () = redis::pipe()
        .atomic()
        .cmd("DEL")
        .arg("taken-over")
        .cmd("HSET")
        .arg("taken-over")
        .arg(FOREIGN_FIELD)
        .arg("1")
        .cmd("PEXPIRE")
        .arg("taken-over")
        .arg("30000")
        .query(&mut con)
        .expect("take over");
    assert!(eventually(Duration::from_secs(2), || guard.is_lost()));
    assert!(guard.unlock().is_err());
    let state: HashMap<String, String> = server.cmd(&["HGETALL", "taken-over"]);
    assert_eq!(
        state,
        HashMap::from([(FOREIGN_FIELD.to_string(), "1".to_string())])
    );
    let ttl = pttl(&server, "taken-over");
    assert!(
        ttl > 29_000,
        "the watchdog did not renew someone else's lock: {ttl}"
    );
}

#[test]
fn a_panic_in_the_critical_section_releases_the_lock_and_its_registration() {
    let server = RedisServer::start();
    let client = client(&server, Duration::from_millis(300));
    let lock = client.lock("panicky");
    let worker = {
        let lock = lock.clone();
        let client = client.clone();
        thread::spawn(move || {
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let (_outer, _inner) = lock_twice(&lock);
                assert_eq!(client.diagnostics().registered_holds, 1);
                panic!("failure inside the critical section");
            }));
            assert!(outcome.is_err(), "the closure panicked");
            (
                lock.is_locked().expect("is_locked"),
                client.diagnostics().registered_holds,
            )
        })
    };
    let (locked, holds) = worker.join().expect("the worker caught its panic");
    assert!(!locked, "unwinding released both holds");
    assert_eq!(holds, 0);
    thread::sleep(Duration::from_millis(300));
    assert!(
        !exists(&server, "panicky"),
        "the watchdog recreated nothing"
    );
}

#[test]
fn a_thread_that_dies_of_a_panic_releases_its_lock() {
    let server = RedisServer::start();
    let client = client(&server, Duration::from_millis(300));
    let lock = client.lock("dead-thread");
    let worker = {
        let lock = lock.clone();
        thread::spawn(move || {
            let _guard = lock.lock().expect("lock");
            panic!("the thread dies holding the lock");
        })
    };
    assert!(worker.join().is_err(), "the thread panicked");
    assert!(!lock.is_locked().expect("is_locked"));
    assert_eq!(client.diagnostics().registered_holds, 0);
    // And another thread gets it at once.
    assert!(lock.try_lock().expect("try_lock").is_some());
}

#[test]
fn renewal_survives_a_script_cache_flush() {
    // The pipelined renewal meets NOSCRIPT for every chunk: it loads the
    // script and sends those chunks again, in the same run.
    let server = RedisServer::start();
    let lease = Duration::from_millis(600);
    let client = server.watchdog_client(lease);
    let guards: Vec<_> = (0..250)
        .map(|i| client.lock(format!("flushed-{i}")).lock().expect("lock"))
        .collect();
    for _ in 0..3 {
        let _: () = server.cmd(&["SCRIPT", "FLUSH"]);
        std::thread::sleep(lease / 2);
    }
    std::thread::sleep(lease);
    assert!(
        guards.iter().all(|guard| !guard.is_lost()),
        "a lease was lost"
    );
    let held: i64 = server.cmd(&["DBSIZE"]);
    assert_eq!(held, 250);
    for guard in guards {
        guard.unlock().expect("unlock");
    }
}

/// 4,500 locks held by `client` on names `prefix-0000`...: 45 chunks of 100
/// locks a tick, 3 round trips of up to 20 chunks.
fn hold_many(client: &Client, prefix: &str) -> (Vec<String>, Vec<redisson_lock::LockGuard>) {
    let names: Vec<String> = (0..4500).map(|i| format!("{prefix}-{i:04}")).collect();
    let guards = names
        .iter()
        .map(|name| client.lock(name.as_str()).lock().expect("lock"))
        .collect();
    (names, guards)
}

/// Every 97th of `names` has a TTL within its `lease`, and no guard reads
/// as lost.
fn all_renewed(
    con: &mut redis::Connection,
    names: &[String],
    guards: &[redisson_lock::LockGuard],
    lease: Duration,
) {
    for name in names.iter().step_by(97) {
        let ttl: i64 = redis::cmd("PTTL").arg(name).query(con).expect("PTTL");
        assert!(
            ttl > 0 && ttl <= lease.as_millis() as i64,
            "{name}: PTTL {ttl}"
        );
    }
    assert!(guards.iter().all(|guard| !guard.is_lost()));
}

/// A field of `INFO <section>`.
fn info_field(con: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO {section}: {field}"))
}

#[test]
fn beyond_two_thousand_locks_every_other_renewal_round_trip_goes_out_on_a_second_watchdog_connection()
 {
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(1500);
    let client = client(&server, watchdog);
    let (names, guards) = hold_many(&client, "many");
    let taken = Instant::now();
    // Two whole ticks' renewal calls (100 locks each; an acquire names 1 or
    // 2 keys).
    let seen = monitor_evalsha(&server, Duration::from_secs(10), |calls| {
        calls.iter().filter(|call| call.keys == 100).count() >= 90
    });
    let renewals: Vec<_> = seen.iter().filter(|call| call.keys == 100).collect();
    assert!(renewals.len() >= 90, "{} renewal calls", renewals.len());
    let connections: HashSet<&str> = renewals.iter().map(|call| call.client.as_str()).collect();
    assert_eq!(
        connections.len(),
        2,
        "the watchdog's two connections: {connections:?}"
    );
    // Both lines renewed their locks: every one outlives its first lease.
    thread::sleep(watchdog.saturating_sub(taken.elapsed()) + watchdog / 3);
    all_renewed(&mut server.con(), &names, &guards, watchdog);
    drop(guards);
    assert_eq!(client.diagnostics().registered_holds, 0);
}

#[test]
fn beyond_two_thousand_locks_the_first_connection_renews_them_all_when_no_second_can_be_opened() {
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(1500);
    let client = client(&server, watchdog);
    // The client's connections opened (its watchdog's first line, a
    // command socket), the test's own, then no room for another: not for
    // the renewals' second line.
    drop(client.lock("crowded-first").lock().expect("lock"));
    let mut con = server.con();
    let connected = info_field(&mut con, "clients", "connected_clients").to_string();
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxclients", connected.as_str()])
        .query(&mut con)
        .expect("CONFIG SET maxclients");
    let (names, guards) = hold_many(&client, "crowded");
    let taken = Instant::now();
    // Two leases: every lock renewed on the first line alone.
    thread::sleep((watchdog * 2).saturating_sub(taken.elapsed()));
    all_renewed(&mut con, &names, &guards, watchdog);
    assert!(
        info_field(&mut con, "stats", "rejected_connections") >= 1,
        "the second line was tried"
    );
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxclients", "10000"])
        .query(&mut con)
        .expect("CONFIG SET maxclients");
    drop(guards);
    assert_eq!(client.diagnostics().registered_holds, 0);
}
