//! Fault: Redis is busy running a long script and answers `BUSY` to everyone.
//!
//! The server runs with `--busy-reply-threshold 100`; a raw connection runs a
//! Lua loop for a set time. Renewals that meet `BUSY` are retried within the
//! lease: a busy spell shorter than the lease is survived, one longer than
//! the lease marks the guard lost (never silently kept).

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error, Lock, Reentrant};
use support::state::{exists, pttl};
use support::{RedisServer, eventually};

fn busy_server() -> RedisServer {
    RedisServer::start_with(&["--busy-reply-threshold", "100"])
}

/// Runs the busy script for `busy` on its own connection, in a thread.
fn keep_busy(server: &RedisServer, busy: Duration) -> thread::JoinHandle<()> {
    let mut con = server.con();
    con.set_read_timeout(Some(busy + Duration::from_secs(10)))
        .expect("read timeout");
    let ms = busy.as_millis().to_string();
    thread::spawn(move || {
        let done: i64 = redis::cmd("EVAL")
            .arg(support::BUSY_SCRIPT)
            .arg(0)
            .arg(ms)
            .query(&mut con)
            .expect("busy script");
        assert_eq!(done, 1);
    })
}

/// A busy-ready server, a client of it with the watchdog timeout `lease`
/// that gives up on a reply after `response_timeout`, and its lock `name`.
fn busy_lock(
    name: &str,
    lease: Duration,
    response_timeout: Duration,
) -> (RedisServer, Client, Lock<Reentrant>) {
    let server = busy_server();
    let client = support::builder(server.url())
        .watchdog_timeout(lease)
        .response_timeout(response_timeout)
        .build()
        .expect("client");
    let lock = client.lock(name);
    (server, client, lock)
}

/// How many `BUSY` errors the server has replied.
fn busy_replies(server: &RedisServer) -> u64 {
    let info: String = server.cmd(&["INFO", "errorstats"]);
    info.lines()
        .find_map(|line| line.strip_prefix("errorstat_BUSY:count="))
        .map_or(0, |count| count.trim().parse().expect("a count"))
}

/// Waits for the watchdog to renew `name` (its PTTL jumps back up) and
/// returns right after.
fn just_renewed(server: &RedisServer, name: &str) -> Instant {
    let mut con = server.con();
    let mut last: i64 = redis::cmd("PTTL").arg(name).query(&mut con).expect("PTTL");
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        thread::sleep(Duration::from_millis(2));
        let ttl: i64 = redis::cmd("PTTL").arg(name).query(&mut con).expect("PTTL");
        if ttl > last {
            return Instant::now();
        }
        last = ttl;
    }
    panic!("{name} was not renewed within 5 s");
}

#[test]
fn busy_spell_shorter_than_the_lease_is_survived() {
    let (name, lease) = ("busy-short", Duration::from_millis(1500));
    let (server, client, lock) = busy_lock(name, lease, Duration::from_secs(1));
    let guard = lock.lock().expect("lock");
    let field = client.owner_field();

    // Busy spells of 700 ms starting at several offsets after a renewal: the
    // one at 350 ms swallows two renewal ticks (at 500 and 1000 ms), so a
    // watchdog that only retries at the next tick loses a 1.5 s lease to a
    // 700 ms spell.
    for offset_ms in [350, 100, 250] {
        let renewed = just_renewed(&server, name);
        thread::sleep(Duration::from_millis(offset_ms).saturating_sub(renewed.elapsed()));
        keep_busy(&server, Duration::from_millis(700))
            .join()
            .expect("busy thread");
        // Renewed once the server answers again, before the lease ran out.
        let renewed = eventually(lease, || {
            let ttl = pttl(&server, name);
            ttl > 1200 || guard.is_lost()
        });
        assert!(
            renewed && !guard.is_lost(),
            "a 700 ms busy spell {offset_ms} ms after a renewal lost the 1.5 s lease"
        );
        let count: Option<String> = server.cmd(&["HGET", name, &field]);
        assert_eq!(count.as_deref(), Some("1"));
    }
    let busy_replies = busy_replies(&server);
    eprintln!("{busy_replies} BUSY replies");
    assert!(busy_replies >= 3, "the busy spells never met a renewal");
    guard.unlock().expect("unlock");
    assert!(!exists(&server, name));
}

#[test]
fn busy_spell_longer_than_the_lease_loses_the_lock() {
    let (name, lease) = ("busy-long", Duration::from_millis(600));
    let (server, _client, lock) = busy_lock(name, lease, Duration::from_millis(500));
    let guard = lock.lock().expect("lock");
    thread::sleep(lease); // renewed a few times

    let busy = Duration::from_millis(2500);
    let started = Instant::now();
    let busy_thread = keep_busy(&server, busy);
    assert!(
        eventually(lease + Duration::from_millis(500), || guard.is_lost()),
        "still not lost {:?} into a {busy:?} busy spell with a {lease:?} lease",
        started.elapsed()
    );
    let lost_after = started.elapsed();
    assert!(
        lost_after < busy,
        "lost only after the spell ({lost_after:?})"
    );
    busy_thread.join().expect("busy thread");

    // Never silently kept: the key expired during the spell, nothing renews
    // it, and the guard stays lost.
    thread::sleep(lease / 3 * 2);
    assert!(
        !exists(&server, name),
        "the lock outlived its lease by the busy spell"
    );
    assert!(guard.is_lost());
    match guard.unlock() {
        Err(Error::Lost { .. }) => {}
        other => panic!("unlock of a lost guard returned {other:?}"),
    }

    // And the client works: a new hold is renewed past its lease.
    let guard = lock.lock().expect("lock after the spell");
    thread::sleep(lease * 2);
    assert!(!guard.is_lost());
    guard.unlock().expect("unlock");
}
