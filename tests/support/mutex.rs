//! The mutual-exclusion worker: critical sections that count, in Redis, how
//! many holders are inside at once, around a read-modify-write of a counter
//! that is not atomic. A lock that lets two holders in shows it as an
//! occupancy above 1 or as a lost update of the counter.
//!
//! The Java interop driver's `mutex` command runs the same loop in Java, so
//! that Rust threads and Java actors can share one run.

use std::thread;
use std::time::Duration;

use redisson_lock::{Kind, Lock};

use super::RedisServer;
use super::java::JavaDriver;

/// The two keys of one run: the counter and the occupancy.
#[derive(Clone, Copy, Debug)]
pub struct Keys<'a> {
    pub counter: &'a str,
    pub occupancy: &'a str,
}

/// Runs `sections` critical sections on `lock` over a connection of its own
/// to `url`. Each counts itself in (INCR occupancy), reads the counter,
/// waits `pause(section)` (yields when zero), writes the counter plus one,
/// counts itself out and checks that its guard was not lost. Returns the
/// highest occupancy seen: 1 when no two holders were ever inside at once.
pub fn critical_sections<K: Kind>(
    url: &str,
    lock: &Lock<K>,
    keys: Keys<'_>,
    sections: u64,
    pause: impl Fn(u64) -> Duration,
) -> i64 {
    let mut con = redis::Client::open(url)
        .expect("url")
        .get_connection()
        .expect("connect");
    let mut max_occupancy = 0;
    for section in 0..sections {
        let guard = lock.lock().expect("lock");
        let occupancy: i64 = redis::cmd("INCR")
            .arg(keys.occupancy)
            .query(&mut con)
            .expect("INCR");
        max_occupancy = max_occupancy.max(occupancy);
        let value: Option<i64> = redis::cmd("GET")
            .arg(keys.counter)
            .query(&mut con)
            .expect("GET");
        match pause(section) {
            Duration::ZERO => thread::yield_now(),
            pause => thread::sleep(pause),
        }
        let () = redis::cmd("SET")
            .arg(keys.counter)
            .arg(value.unwrap_or(0) + 1)
            .query(&mut con)
            .expect("SET");
        let _: i64 = redis::cmd("DECR")
            .arg(keys.occupancy)
            .query(&mut con)
            .expect("DECR");
        assert!(!guard.is_lost(), "a guard was lost inside its section");
        guard.unlock().expect("unlock");
    }
    max_occupancy
}

/// Runs [`critical_sections`] on each of `locks` in a thread of its own,
/// `sections` each, and asserts that no thread saw another holder inside.
/// Thread `n` pauses `(n + section) % 2` ms between the read and the write.
pub fn run_threads<K: Kind>(
    server: &RedisServer,
    locks: Vec<Lock<K>>,
    keys: Keys<'static>,
    sections: u64,
) {
    let threads: Vec<_> = (0u64..)
        .zip(locks)
        .map(|(n, lock)| {
            let url = server.url();
            thread::spawn(move || {
                critical_sections(&url, &lock, keys, sections, |section| {
                    Duration::from_millis((n + section) % 2)
                })
            })
        })
        .collect();
    for thread in threads {
        let max_occupancy = thread.join().expect("a Rust thread failed");
        assert_eq!(
            max_occupancy, 1,
            "a Rust thread saw {max_occupancy} holders inside"
        );
    }
}

/// Java actors `m0`, `m1`, ... and one Rust thread per lock of `locks` run
/// `sections` critical sections each on the same lock (`java_lock` is its
/// name for the driver, e.g. `fair/f5`): no side ever sees two holders
/// inside, and the counter ends at the total, no update lost.
pub fn java_and_rust_sections<K: Kind>(
    server: &RedisServer,
    java: &JavaDriver,
    (java_lock, java_actors): (&str, u64),
    locks: Vec<Lock<K>>,
    keys: Keys<'static>,
    sections: u64,
) {
    let Keys { counter, occupancy } = keys;
    for actor in 0..java_actors {
        let sleep_ms = actor % 2; // 0 or 1 ms between GET and SET
        java.send(
            &format!("m{actor}"),
            &format!("mutex {java_lock} {counter} {occupancy} {sections} {sleep_ms}"),
        );
    }
    let rust_threads = locks.len() as u64;
    run_threads(server, locks, keys, sections);
    for actor in 0..java_actors {
        let reply = java.recv(&format!("m{actor}"));
        assert!(reply.ok, "Java mutex failed: `{}`", reply.line);
        assert_eq!(reply.value::<u64>(0), sections, "`{}`", reply.line);
        assert_eq!(
            reply.value::<i64>(1),
            1,
            "a Java actor saw several holders inside: `{}`",
            reply.line
        );
    }
    let total: i64 = server.cmd(&["GET", counter]);
    assert_eq!(
        total,
        ((java_actors + rust_threads) * sections) as i64,
        "lost updates: the lock let two holders in"
    );
    let inside: i64 = server.cmd(&["GET", occupancy]);
    assert_eq!(inside, 0);
}
