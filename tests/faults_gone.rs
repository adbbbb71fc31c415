//! Fault: the server goes away while threads wait for a lock.
//!
//! A waiter parks for up to the holder's TTL (30 s here). If the server dies,
//! freezes or refuses new connections meanwhile, `lock()` and `try_lock_for()`
//! must return an error within the configured connect and response timeouts,
//! not sleep out the TTL or hang on a connection; and once the server is back,
//! the same client works.

mod support;

use std::sync::mpsc::channel;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, LockGuard};
use support::{RedisServer, assert_waiting};

const TIMEOUT: Duration = Duration::from_secs(1);

fn waiter_client(server: &RedisServer, pool_size: u32) -> Client {
    support::builder(server.url())
        .connect_timeout(TIMEOUT)
        .response_timeout(TIMEOUT)
        .pool_size(pool_size)
        .build()
        .expect("waiter client")
}

#[derive(Clone, Copy, Debug)]
enum Wait {
    Lock,
    TryLockFor,
}

/// Starts a thread per entry of `waits` that waits for `name` and reports
/// the outcome and when it came.
fn start_waiters(client: &Client, name: &str, waits: &[Wait]) -> Outcomes {
    let (tx, rx) = channel();
    for &wait in waits {
        let lock = client.lock(name);
        let tx = tx.clone();
        thread::spawn(move || {
            let outcome = match wait {
                Wait::Lock => lock.lock().map(|guard| {
                    drop(guard);
                    true
                }),
                Wait::TryLockFor => lock
                    .try_lock_for(Duration::from_secs(60))
                    .map(|guard| guard.is_some()),
            };
            let _ = tx.send((wait, outcome, Instant::now()));
        });
    }
    assert_waiting(client, waits.len(), Duration::from_secs(5));
    rx
}

type Outcomes = std::sync::mpsc::Receiver<(Wait, Result<bool, redisson_lock::Error>, Instant)>;

/// Every one of `waits` returns a transient error less than `bound` after
/// `since`, when `cause` happened.
fn assert_all_fail_promptly(
    outcomes: &Outcomes,
    waits: &[Wait],
    since: Instant,
    bound: Duration,
    cause: &str,
) {
    for _ in waits {
        let (wait, outcome, at) = outcomes
            .recv_timeout(Duration::from_secs(40))
            .unwrap_or_else(|_| panic!("a waiter hangs after {cause}"));
        let after = at.saturating_duration_since(since);
        eprintln!("{wait:?} returned {outcome:?} {after:?} after {cause}");
        match outcome {
            Err(e) => assert!(e.is_transient(), "{wait:?}: {e} should be transient"),
            Ok(acquired) => panic!("{wait:?} returned Ok({acquired}) after {cause}"),
        }
        assert!(
            after < bound,
            "{wait:?} took {after:?} to fail (connect and response timeouts of {TIMEOUT:?})"
        );
    }
}

/// A thread of `waiter` waits for `name`, and `release` (which frees it)
/// wakes it within 500 ms.
fn assert_woken_by_release(waiter: &Client, name: &str, release: impl FnOnce()) {
    let woken = {
        let lock = waiter.lock(name);
        thread::spawn(move || {
            lock.try_lock_for(Duration::from_secs(20))
                .expect("try_lock_for")
                .map(|guard| {
                    drop(guard);
                    Instant::now()
                })
        })
    };
    assert_waiting(waiter, 1, Duration::from_secs(5));
    thread::sleep(Duration::from_millis(100));
    let released = Instant::now();
    release();
    let at = woken.join().expect("waiter").expect("woken by the release");
    assert!(at.saturating_duration_since(released) < Duration::from_millis(500));
}

#[test]
fn waiters_fail_promptly_when_the_server_dies() {
    let mut server = RedisServer::start();
    // Short timeouts and no unlock retries: its unlock, after the server
    // died, fails fast.
    let holder = support::builder(server.url())
        .connect_timeout(TIMEOUT)
        .response_timeout(TIMEOUT)
        .unlock_retries(0, Duration::ZERO)
        .build()
        .expect("holder client");
    let guard: LockGuard = holder.lock("gone").lock().expect("holder lock");
    let waiter = waiter_client(&server, 4);
    let waits = [Wait::Lock, Wait::TryLockFor];
    let outcomes = start_waiters(&waiter, "gone", &waits);
    thread::sleep(Duration::from_millis(200));

    server.stop();
    let stopped = Instant::now();
    let bound = TIMEOUT * 2 + Duration::from_secs(2);
    assert_all_fail_promptly(&outcomes, &waits, stopped, bound, "the server died");
    assert_waiting(&waiter, 0, Duration::from_secs(2));
    drop(guard); // its unlock fails, and is logged
}

#[test]
fn waiters_fail_promptly_when_the_server_freezes_and_work_after_it_thaws() {
    let server = RedisServer::start();
    let holder = support::builder(server.url())
        .build()
        .expect("holder client");
    let guard = holder.lock("frozen").lock().expect("holder lock");
    // One pooled connection for two waiters: neither may hang on it.
    let waiter = waiter_client(&server, 1);
    let waits = [Wait::Lock, Wait::TryLockFor];
    let outcomes = start_waiters(&waiter, "frozen", &waits);
    thread::sleep(Duration::from_millis(200));

    server.pause();
    let paused = Instant::now();
    let bound = Duration::from_secs(10);
    let mut results = Vec::new();
    for _ in waits {
        let received = outcomes.recv_timeout(bound.saturating_sub(paused.elapsed()));
        results.push((received, paused.elapsed()));
    }
    server.resume();
    for (received, after) in results {
        let (wait, outcome, _) = received.unwrap_or_else(|_| {
            panic!("a waiter was still waiting {after:?} after the server froze")
        });
        eprintln!("{wait:?} returned {outcome:?} {after:?} after the server froze");
        match outcome {
            Err(e) => assert!(e.is_transient(), "{wait:?}: {e} should be transient"),
            Ok(acquired) => panic!("{wait:?} returned Ok({acquired}) from a frozen server"),
        }
    }

    // Thawed: the same client works again, and the holder kept its lock.
    let lock = waiter.lock("frozen");
    assert!(lock.is_locked().expect("is_locked after the thaw"));
    assert!(
        lock.try_lock_for(Duration::from_millis(300))
            .expect("try_lock_for after the thaw")
            .is_none()
    );
    assert!(!guard.is_lost());
    assert_woken_by_release(&waiter, "frozen", || {
        guard.unlock().expect("holder unlock");
    });
}

#[test]
fn waiters_fail_promptly_when_the_server_refuses_connections_and_recover_after() {
    let server = RedisServer::start();
    let holder = support::builder(server.url())
        .build()
        .expect("holder client");
    let guard = holder.lock("crowded").lock().expect("holder lock");
    let waiter = waiter_client(&server, 2);
    let waits = [Wait::Lock, Wait::TryLockFor];
    let outcomes = start_waiters(&waiter, "crowded", &waits);
    thread::sleep(Duration::from_millis(200));

    // The server takes no new client (the admin connection already fills
    // `maxclients`), and the waiter client's connections are cut: its
    // subscriber wakes the waiters, and every connection they need is refused.
    let mut admin = server.con();
    let clients: u64 = redis::cmd("INFO")
        .arg("clients")
        .query::<String>(&mut admin)
        .expect("INFO clients")
        .lines()
        .find_map(|line| line.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("connected_clients");
    assert!(clients > 1);
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxclients", "1"])
        .query(&mut admin)
        .expect("CONFIG SET maxclients");
    let cut = Instant::now();
    for kind in ["normal", "pubsub"] {
        let _: u64 = redis::cmd("CLIENT")
            .arg(&["KILL", "TYPE", kind, "SKIPME", "yes"])
            .query(&mut admin)
            .expect("CLIENT KILL");
    }
    let bound = TIMEOUT * 2 + Duration::from_secs(3);
    assert_all_fail_promptly(&outcomes, &waits, cut, bound, "connections were refused");

    // Room again: the same client reconnects and waits as before.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxclients", "10000"])
        .query(&mut admin)
        .expect("CONFIG SET maxclients");
    assert_woken_by_release(&waiter, "crowded", || drop(guard));
}
