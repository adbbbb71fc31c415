//! `Semaphore`, Redisson's RSemaphore (SYNCHRONIZERS §3), on a real
//! redis-server: every operation's effect on the counter key and exactly
//! what it publishes on `redisson_sc:{name}` (seen by a raw subscriber),
//! waiters woken by releases (one permit and several), timed waits, lost
//! replies (never resent), bad input, wrong key types, and in a Redis 7
//! cluster (started once for this binary) the wake-up by `SPUBLISH`.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::Error;
use support::RedisServer;
use support::cluster::{self, Cluster};
use support::proxy::{Fault, Proxy};
use support::sync::{assert_took_ms, permit_waiter, woken_within};

/// Well under the waiters' 3 s safety re-poll: a wake-up this fast came
/// from the message.
const WAKE_BOUND: Duration = Duration::from_millis(1500);

fn channel(name: &str) -> String {
    format!("redisson_sc:{{{name}}}")
}

fn sha(file: &str) -> String {
    let code = std::fs::read_to_string(format!("{}/lua/{file}", env!("CARGO_MANIFEST_DIR")))
        .expect("read the script");
    redis::Script::new(&code).get_hash().to_owned()
}

#[test]
fn every_operation_writes_and_publishes_what_redisson_does() {
    let (server, client) = RedisServer::start_with_client();
    let sem = client.semaphore("s1");
    let mut sub = server.subscriber(&[&channel("s1")]);
    let get = |key: &str| server.cmd::<Option<String>>(&["GET", key]);

    assert_eq!(
        sem.available_permits().expect("available"),
        0,
        "missing = 0"
    );
    assert!(sem.try_acquire(1).expect("try_acquire").is_none());
    assert!(sem.try_set_permits(3).expect("try_set"));
    assert!(!sem.try_set_permits(5).expect("try_set again"));
    assert_eq!(get("s1").as_deref(), Some("3"));
    assert_eq!(sub.payloads_within(Duration::from_millis(300)), ["3"]);

    sem.add_permits(-5).expect("add -5");
    assert_eq!(sem.available_permits().expect("available"), -2);
    sem.add_permits(4).expect("add 4");
    sem.release(3).expect("release");
    assert!(sem.release_if_exists(1).expect("release_if_exists"));
    assert_eq!(get("s1").as_deref(), Some("6"));
    assert_eq!(
        sub.payloads_within(Duration::from_millis(300)),
        ["-2", "2", "5", "6"],
        "add publishes the new value even when negative, releases the new total"
    );

    let taken = sem.try_acquire(2).expect("try_acquire").expect("2 of 6");
    assert_eq!(taken.count(), 2);
    assert_eq!(get("s1").as_deref(), Some("4"));
    assert_eq!(taken.forget(), 2);
    assert_eq!(sem.drain_permits().expect("drain"), 4);
    assert_eq!(get("s1").as_deref(), Some("0"));
    assert_eq!(sem.drain_permits().expect("drain again"), 0);
    assert!(
        sub.messages_within(Duration::from_millis(300)).is_empty(),
        "acquire and drain publish nothing"
    );

    assert!(sem.delete().expect("delete"));
    assert!(!sem.delete().expect("delete again"));
    assert!(!sem.release_if_exists(1).expect("release_if_exists"));
    assert_eq!(get("s1"), None, "release_if_exists does not recreate");
    assert_eq!(sem.drain_permits().expect("drain missing"), 0);
    assert_eq!(get("s1"), None, "drain does not create");
    assert!(
        sub.messages_within(Duration::from_millis(300)).is_empty(),
        "delete and a release_if_exists of nothing publish nothing"
    );
    sem.release(4).expect("release recreates");
    assert_eq!(get("s1").as_deref(), Some("4"));
    assert_eq!(server.cmd::<i64>(&["PTTL", "s1"]), -1);
    assert_eq!(sub.payloads_within(Duration::from_millis(300)), ["4"]);

    // TTLs: try_set with a TTL sets PX; release keeps it; add and drain drop it.
    let ttl = client.semaphore("s1-ttl");
    assert!(
        ttl.try_set_permits_with_ttl(2, Duration::from_secs(60))
            .expect("try_set ttl")
    );
    let pttl = |key: &str| server.cmd::<i64>(&["PTTL", key]);
    assert!((50_000..=60_000).contains(&pttl("s1-ttl")));
    ttl.release(1).expect("release");
    assert!(pttl("s1-ttl") > 50_000, "release keeps the TTL");
    ttl.add_permits(1).expect("add");
    assert_eq!(pttl("s1-ttl"), -1, "add drops the TTL");
    assert!(
        !ttl.try_set_permits_with_ttl(9, Duration::from_secs(9))
            .expect("set")
    );
    let drained = client.semaphore("s1-drain");
    assert!(
        drained
            .try_set_permits_with_ttl(2, Duration::from_secs(60))
            .expect("try_set ttl")
    );
    assert_eq!(drained.drain_permits().expect("drain"), 2);
    assert_eq!(pttl("s1-drain"), -1, "drain drops the TTL");
    assert_eq!(sem.name(), "s1");
}

#[test]
fn permits_go_back_on_drop_and_zero_permits_cost_no_round_trip() {
    let (server, client) = RedisServer::start_with_client();
    let sem = client.semaphore("s2");
    assert!(sem.try_set_permits(2).expect("try_set"));

    let calls = server.command_calls("evalsha") + server.command_calls("eval");
    let zero = sem.acquire(0).expect("acquire 0");
    assert_eq!(zero.count(), 0);
    drop(zero);
    assert!(sem.try_acquire(0).expect("try_acquire 0").is_some());
    assert!(
        sem.try_acquire_for(0, Duration::from_secs(1))
            .expect("0")
            .is_some()
    );
    sem.release(0).expect("release 0");
    assert!(!sem.release_if_exists(0).expect("release_if_exists 0"));
    assert_eq!(
        server.command_calls("evalsha") + server.command_calls("eval"),
        calls,
        "0 permits never reach Redis"
    );

    let held = sem.acquire(2).expect("acquire 2");
    assert_eq!(sem.available_permits().expect("available"), 0);
    // The guard is Send: another thread may return the permits.
    thread::spawn(move || drop(held)).join().expect("drop");
    assert_eq!(sem.available_permits().expect("available"), 2);
    let held = sem.acquire(1).expect("acquire 1");
    held.release().expect("explicit release");
    assert_eq!(sem.available_permits().expect("available"), 2);
    let kept = sem.acquire(2).expect("acquire 2");
    assert_eq!(kept.forget(), 2);
    assert_eq!(sem.available_permits().expect("available"), 0);
    // Anyone may release permits it never took.
    client.semaphore("s2").release(2).expect("release");
    assert_eq!(sem.available_permits().expect("available"), 2);
}

#[test]
fn releases_wake_rust_waiters_within_the_message_path() {
    let (_server, client) = RedisServer::start_with_client();
    let sem = client.semaphore("s3");

    let waiters: Vec<_> = (0..3).map(|_| permit_waiter(&sem, 1)).collect();
    thread::sleep(Duration::from_millis(500));
    for rx in &waiters {
        assert!(rx.try_recv().is_err(), "acquired from an empty semaphore");
    }
    let released = Instant::now();
    client.semaphore("s3").release(3).expect("release 3");
    for rx in &waiters {
        woken_within(rx, released, WAKE_BOUND, "release 3");
    }
    assert_eq!(sem.available_permits().expect("available"), 0);
}

#[test]
fn a_multi_permit_waiter_rechecks_after_every_message() {
    let (_server, client) = RedisServer::start_with_client();
    let sem = client.semaphore("s4");
    let rx = permit_waiter(&sem, 3);
    thread::sleep(Duration::from_millis(300));
    for expected in 1..=2 {
        sem.release(1).expect("release 1");
        assert!(
            rx.recv_timeout(Duration::from_millis(400)).is_err(),
            "acquired 3 with {expected}"
        );
        assert_eq!(sem.available_permits().expect("available"), expected);
    }
    let released = Instant::now();
    sem.release(1).expect("third release");
    woken_within(&rx, released, WAKE_BOUND, "the third release");
    assert_eq!(sem.available_permits().expect("available"), 0);

    // An add (the same channel, any value) wakes as well.
    let rx = permit_waiter(&sem, 2);
    thread::sleep(Duration::from_millis(300));
    let added = Instant::now();
    sem.add_permits(2).expect("add");
    woken_within(&rx, added, WAKE_BOUND, "add");
}

#[test]
fn try_acquire_for_waits_its_budget_and_no_more() {
    let (server, client) = RedisServer::start_with_client();
    let sem = client.semaphore("s5");
    assert!(sem.try_acquire(1).expect("loads the script").is_none());

    let calls = server.command_calls("evalsha");
    let started = Instant::now();
    assert!(
        sem.try_acquire_for(1, Duration::ZERO)
            .expect("zero")
            .is_none()
    );
    assert!(started.elapsed() < Duration::from_millis(200));
    assert_eq!(
        server.command_calls("evalsha"),
        calls + 1,
        "exactly one attempt"
    );

    let started = Instant::now();
    assert!(
        sem.try_acquire_for(1, Duration::from_millis(600))
            .expect("timed")
            .is_none()
    );
    assert_took_ms(started, 600..1100);

    let releaser = {
        let sem = sem.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(300));
            sem.release(1).expect("release");
        })
    };
    let started = Instant::now();
    let permits = sem
        .try_acquire_for(1, Duration::from_secs(5))
        .expect("timed")
        .expect("released within the wait");
    assert_took_ms(started, 250..1300);
    releaser.join().expect("releaser");
    drop(permits);
    assert_eq!(sem.available_permits().expect("available"), 1);
}

#[test]
fn a_lost_reply_is_outcome_unknown_and_never_resent() {
    let (server, proxy) = Proxy::with_server();
    let client = proxy.client_with_response_timeout(Duration::from_millis(300));
    let sem = client.semaphore("s6");
    // Load the scripts first, so that the armed command is the one that runs.
    assert!(sem.try_set_permits(10).expect("try_set"));
    drop(sem.acquire(1).expect("warm-up"));
    let acquire = sha("semaphore_try_acquire.lua");
    let release = sha("semaphore_release.lua");
    let get = || server.cmd::<String>(&["GET", "s6"]);

    let mut expected = 10;
    for fault in [
        Fault::DropReplyAndClose,
        Fault::DelayReply(Duration::from_millis(600)),
    ] {
        // 400 ms: time for a delayed reply to land.
        let settle = Duration::from_millis(400);
        proxy.outcome_unknown((&acquire, fault), "acquire", settle, || sem.try_acquire(2));
        expected -= 2;
        assert_eq!(get(), expected.to_string(), "{fault:?}: ran once");

        proxy.outcome_unknown((&release, fault), "release", settle, || sem.release(3));
        expected += 3;
        assert_eq!(get(), expected.to_string(), "{fault:?}: ran once");
    }
    // A request lost before it ran is as unknown to the client.
    proxy.arm(&release, Fault::DropRequestAndClose);
    let e = sem.release(1).expect_err("lost request");
    assert!(matches!(e, Error::OutcomeUnknown { .. }), "{e:?}");
    assert_eq!(get(), expected.to_string());
    assert_eq!(proxy.injected(), 5);
    // The client still works.
    assert!(sem.try_acquire(1).expect("after faults").is_some());
}

#[test]
fn bad_input_is_refused_before_any_round_trip() {
    let (server, client) = RedisServer::start_with_client();
    let sem = client.semaphore("s7");
    let big = i32::MAX as u32 + 1;
    let invalid = |r: Result<(), Error>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(sem.acquire(big).map(drop)));
    assert!(invalid(sem.try_acquire(big).map(drop)));
    assert!(invalid(sem.try_acquire_for(big, Duration::ZERO).map(drop)));
    assert!(invalid(sem.release(big)));
    assert!(invalid(sem.release_if_exists(big).map(drop)));
    assert!(invalid(sem.try_set_permits(big).map(drop)));
    assert!(invalid(sem.add_permits(i64::from(i32::MAX) + 1)));
    assert!(invalid(sem.add_permits(i64::from(i32::MIN) - 1)));
    assert!(invalid(
        sem.try_set_permits_with_ttl(1, Duration::from_micros(10))
            .map(drop)
    ));
    assert!(invalid(client.semaphore("").release(1)));
    assert!(invalid(client.semaphore("").available_permits().map(drop)));
    assert_eq!(server.cmd::<Option<String>>(&["GET", "s7"]), None);

    // Totals stay within a Java int.
    assert!(sem.try_set_permits(i32::MAX as u32).expect("max"));
    let e = sem.release(1).expect_err("past i32::MAX");
    assert!(e.to_string().contains("2147483647"), "{e}");
    let e = sem.add_permits(1).expect_err("past i32::MAX");
    assert!(e.to_string().contains("Java int"), "{e}");
    assert_eq!(
        sem.available_permits().expect("available"),
        i64::from(i32::MAX)
    );
}

#[test]
fn a_key_of_another_type_is_a_clear_error() {
    let (server, client) = RedisServer::start_with_client();
    let _: () = server.cmd(&["HSET", "s8", "field", "1"]);
    let sem = client.semaphore("s8");
    let wrongtype = |e: Error| assert!(e.to_string().contains("WRONGTYPE"), "{e}");
    wrongtype(sem.available_permits().expect_err("hash"));
    wrongtype(sem.try_acquire(1).map(drop).expect_err("hash"));
    wrongtype(sem.release(1).expect_err("hash"));
    wrongtype(sem.add_permits(1).expect_err("hash"));
    wrongtype(sem.drain_permits().map(drop).expect_err("hash"));
    wrongtype(sem.try_set_permits(1).map(drop).expect_err("hash"));

    let _: () = server.cmd(&["SET", "s9", "many"]);
    let sem = client.semaphore("s9");
    let e = sem.available_permits().expect_err("text");
    assert!(matches!(e, Error::UnexpectedReply(_)), "{e:?}");
    let e = sem.try_acquire(1).map(drop).expect_err("text");
    assert!(e.to_string().contains("not an integer"), "{e}");
    assert_eq!(server.cmd::<String>(&["GET", "s9"]), "many");
}

#[test]
fn in_a_cluster_releases_spublish_and_wake_waiters() {
    let cluster = Cluster::shared();
    let client = cluster.client();
    for name in cluster.names_on_different_masters("sem-", 3) {
        let sem = client.semaphore(&name);
        let owner = cluster.owner(&name);
        assert!(sem.try_set_permits(1).expect("try_set"), "{name}");
        let first = sem.acquire(1).expect("acquire");
        let rx = permit_waiter(&sem, 1);
        thread::sleep(Duration::from_millis(500));
        assert!(rx.try_recv().is_err(), "{name}: two holders of one permit");
        let (spublish, publish) = (
            cluster::calls(owner, "spublish"),
            cluster::calls(owner, "publish"),
        );
        let released = Instant::now();
        first.release().expect("release");
        woken_within(&rx, released, WAKE_BOUND, &name);
        assert_eq!(cluster::calls(owner, "spublish"), spublish + 1, "{name}");
        assert_eq!(cluster::calls(owner, "publish"), publish, "{name}");
        assert_eq!(sem.available_permits().expect("available"), 0);
        sem.add_permits(2).expect("add");
        assert_eq!(sem.drain_permits().expect("drain"), 2);
        assert!(sem.delete().expect("delete"));
    }
}
