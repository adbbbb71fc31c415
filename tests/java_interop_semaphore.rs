//! Interop of `Semaphore` with real Redisson's `RSemaphore`
//! (SYNCHRONIZERS §3), on Redisson's newest release and 3.24.3, both ways:
//! Java's `acquire()` (no timeout, no fallback: only the publish wakes it)
//! woken by a Rust release and the reverse, one Rust `release(5)` waking
//! five Java waiters of one JVM, each side reading the other's writes, and
//! Rust threads and Java actors hammering one semaphore: never more holders
//! than permits, and every permit back at the end.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::Semaphore;
use support::RedisServer;
use support::java::{JavaDriver, Redisson, for_each_redisson_version, start_with_client};
use support::sync::permit_waiter;

/// Far under any fallback: a wake-up this fast came from the message.
const WAKE_BOUND: Duration = Duration::from_millis(2000);

for_each_redisson_version!(
    each_side_reads_what_the_other_writes,
    java_acquire_without_timeout_is_woken_by_a_rust_release,
    rust_acquire_is_woken_by_java_releases,
    one_rust_release_of_five_wakes_five_java_waiters,
    rust_threads_and_java_actors_never_exceed_the_permits,
);

/// A fresh server, a warmed-up Redisson driver on it, and the semaphore
/// `name` of a Rust client of the same server.
fn start_with_semaphore(redisson: Redisson, name: &str) -> (RedisServer, JavaDriver, Semaphore) {
    let (server, java, client) = start_with_client(redisson);
    (server, java, client.semaphore(name))
}

fn each_side_reads_what_the_other_writes(redisson: Redisson) {
    let (server, java, sem) = start_with_semaphore(redisson, "ji-s0");

    assert!(java.flag("j", "sem.trySetPermits ji-s0 4"));
    assert!(!sem.try_set_permits(9).expect("try_set"));
    assert_eq!(sem.available_permits().expect("available"), 4);
    sem.add_permits(-6).expect("add");
    let java_count: i64 = java.ok("j", "sem.availablePermits ji-s0").value(0);
    assert_eq!(java_count, -2);
    java.ok("j", "sem.addPermits ji-s0 5");
    assert_eq!(sem.available_permits().expect("available"), 3);
    let taken = sem.try_acquire(2).expect("try_acquire").expect("2 of 3");
    let java_count: i64 = java.ok("j", "sem.availablePermits ji-s0").value(0);
    assert_eq!(java_count, 1);
    assert_eq!(
        java.ok("j", "sem.tryAcquire ji-s0 2 0").values[0],
        "false",
        "Java took 2 of 1"
    );
    drop(taken);
    assert_eq!(java.ok("j", "sem.tryAcquire ji-s0 3 0").values[0], "true");
    assert_eq!(sem.drain_permits().expect("drain"), 0);
    java.ok("j", "sem.release ji-s0 3");
    let drained: i64 = java.ok("j", "sem.drainPermits ji-s0").value(0);
    assert_eq!(drained, 3);
    assert_eq!(sem.available_permits().expect("available"), 0);

    // A Rust try_set with a TTL is a plain SET PX: Java (3.24.3 included)
    // uses the semaphore all the same.
    let client = server.client();
    let ttl = client.semaphore("ji-s0-ttl");
    assert!(
        ttl.try_set_permits_with_ttl(2, Duration::from_secs(60))
            .expect("ttl")
    );
    assert!(!java.flag("j", "sem.trySetPermits ji-s0-ttl 7"));
    assert_eq!(
        java.ok("j", "sem.tryAcquire ji-s0-ttl 2 0").values[0],
        "true"
    );
    assert!(server.cmd::<i64>(&["PTTL", "ji-s0-ttl"]) > 0);
    if redisson == Redisson::Newest {
        assert!(java.flag("j", "sem.releaseIfExists ji-s0-ttl 1"));
        assert!(!java.flag("j", "sem.releaseIfExists ji-s0-none 1"));
        assert!(
            !client
                .semaphore("ji-s0-none")
                .release_if_exists(1)
                .expect("rie")
        );
        assert_eq!(ttl.available_permits().expect("available"), 1);
    }
}

fn java_acquire_without_timeout_is_woken_by_a_rust_release(redisson: Redisson) {
    let (_server, java, sem) = start_with_semaphore(redisson, "ji-s1");

    java.send("j", "sem.acquire ji-s1 2");
    thread::sleep(Duration::from_millis(800));
    assert!(
        java.try_recv("j", Duration::ZERO).is_none(),
        "Java acquired from an empty semaphore"
    );
    sem.release(1).expect("release 1");
    assert!(
        java.try_recv("j", Duration::from_millis(500)).is_none(),
        "Java took 2 permits of 1"
    );
    let released = Instant::now();
    sem.release(1).expect("release 1 more");
    java.java_woken("j", released, WAKE_BOUND, "Rust release -> Java acquire");
    assert_eq!(sem.available_permits().expect("available"), 0);
}

fn rust_acquire_is_woken_by_java_releases(redisson: Redisson) {
    let (_server, java, sem) = start_with_semaphore(redisson, "ji-s2");

    let rx = permit_waiter(&sem, 3);
    thread::sleep(Duration::from_millis(300));
    java.ok("j", "sem.release ji-s2 1");
    java.ok("j", "sem.addPermits ji-s2 1");
    assert!(
        rx.recv_timeout(Duration::from_millis(500)).is_err(),
        "Rust took 3 permits of 2"
    );
    java.ok("j", "sem.release ji-s2 1");
    let released = Instant::now();
    java.rust_woken(&rx, released, WAKE_BOUND, "Java release -> Rust acquire");
    let java_count: i64 = java.ok("j", "sem.availablePermits ji-s2").value(0);
    assert_eq!(java_count, 0);
}

fn one_rust_release_of_five_wakes_five_java_waiters(redisson: Redisson) {
    let (_server, java, sem) = start_with_semaphore(redisson, "ji-s3");
    let actors = ["j1", "j2", "j3", "j4", "j5"];
    for actor in actors {
        java.send(actor, "sem.acquire ji-s3 1");
    }
    thread::sleep(Duration::from_millis(1500));
    for actor in actors {
        assert!(java.try_recv(actor, Duration::ZERO).is_none(), "{actor}");
    }
    let released = Instant::now();
    sem.release(5).expect("release 5");
    for actor in actors {
        java.java_woken(actor, released, WAKE_BOUND, "a Rust release of 5");
    }
    assert_eq!(sem.available_permits().expect("available"), 0);
}

fn rust_threads_and_java_actors_never_exceed_the_permits(redisson: Redisson) {
    const PERMITS: i64 = 3;
    const ROUNDS: u32 = 25;
    let (server, java, sem) = start_with_semaphore(redisson, "ji-s4");
    let occupancy = "ji-s4-holders";
    assert!(sem.try_set_permits(PERMITS as u32).expect("try_set"));

    let java_actors = ["h1", "h2", "h3"];
    for actor in java_actors {
        java.send(actor, &format!("sem.hammer ji-s4 {occupancy} {ROUNDS} 2"));
    }
    let rust: Vec<_> = (0..3)
        .map(|_| {
            let sem = sem.clone();
            let mut con = server.con();
            thread::spawn(move || {
                let mut most = 0;
                for _ in 0..ROUNDS {
                    let permit = sem.acquire(1).expect("acquire");
                    let holders: i64 = redis::cmd("INCR")
                        .arg(occupancy)
                        .query(&mut con)
                        .expect("INCR");
                    most = most.max(holders);
                    thread::sleep(Duration::from_millis(2));
                    let _: i64 = redis::cmd("DECR")
                        .arg(occupancy)
                        .query(&mut con)
                        .expect("DECR");
                    permit.release().expect("release");
                }
                most
            })
        })
        .collect();
    let mut most = 0;
    for handle in rust {
        most = most.max(handle.join().expect("Rust hammer"));
    }
    for actor in java_actors {
        let reply = java.recv(actor);
        assert!(reply.ok, "{}", reply.line);
        assert_eq!(reply.value::<u32>(0), ROUNDS);
        most = most.max(reply.value::<i64>(1));
    }
    eprintln!("{}: at most {most} holders of {PERMITS}", java.version);
    assert!(most <= PERMITS, "{most} holders of {PERMITS} permits");
    assert_eq!(sem.available_permits().expect("available"), PERMITS);
    assert_eq!(server.cmd::<i64>(&["GET", occupancy]), 0);
}
