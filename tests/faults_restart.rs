//! Fault: Redis loses every lock at once, through `FLUSHALL` or a restart
//! without persistence, while locks are held and threads wait for them.
//!
//! Holders' guards must become lost within about one renewal period (not only
//! when the lease runs out by the local clock), waiters must get the locks, no
//! renewal may bring a lost lock back, and the same clients must keep working
//! after the server comes back, without being rebuilt.

mod support;

use std::sync::mpsc::channel;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error, LockGuard};
use support::state::exists;
use support::{RedisServer, assert_waiting, eventually, logs};

/// Long enough that one renewal period (1 s) and the lease clearly differ.
const LEASE: Duration = Duration::from_secs(3);

#[derive(Clone, Copy, Debug)]
enum Wipe {
    FlushAll,
    Restart,
}

fn wipe(server: &mut RedisServer, how: Wipe) {
    match how {
        Wipe::FlushAll => {
            let () = server.cmd(&["FLUSHALL"]);
        }
        Wipe::Restart => server.restart(),
    }
}

#[test]
fn flushall_loses_holds_and_lets_waiters_in() {
    locks_wiped_while_held_and_awaited(Wipe::FlushAll);
}

#[test]
fn restart_loses_holds_and_lets_waiters_in() {
    locks_wiped_while_held_and_awaited(Wipe::Restart);
}

/// A client with the lease [`LEASE`] that gives up on a lost server soon.
fn client(server: &RedisServer) -> Client {
    support::builder(server.url())
        .watchdog_timeout(LEASE)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(1))
        .build()
        .expect("client")
}

fn locks_wiped_while_held_and_awaited(how: Wipe) {
    logs::install();
    let mut server = RedisServer::start();
    let period = LEASE / 3;
    let (holder, waiter) = (client(&server), client(&server));

    // Three locks held with a watchdog; two have waiters from another client.
    let guards: Vec<LockGuard> = ["alone", "awaited-1", "awaited-2"]
        .iter()
        .map(|name| holder.lock(*name).lock().expect("lock"))
        .collect();
    let (acquired_tx, acquired_rx) = channel();
    let waiting: Vec<_> = ["awaited-1", "awaited-2"]
        .iter()
        .map(|name| {
            let lock = waiter.lock(*name);
            let acquired_tx = acquired_tx.clone();
            thread::spawn(move || {
                let guard = lock
                    .try_lock_for(Duration::from_secs(20))
                    .expect("try_lock_for across the wipe")
                    .expect("the waiter gets the wiped lock");
                acquired_tx
                    .send((lock.name().to_owned(), Instant::now()))
                    .expect("send");
                // Hold it past its lease: renewed on the new server.
                thread::sleep(LEASE + LEASE / 6);
                assert!(!guard.is_lost(), "{} lost after the wipe", lock.name());
                guard.unlock().expect("waiter unlock");
            })
        })
        .collect();
    assert_waiting(&waiter, 2, Duration::from_secs(5));
    thread::sleep(period); // a renewal or two before the wipe

    wipe(&mut server, how);
    let wiped = Instant::now();

    // Every guard learns within about one renewal period, by renewal, well
    // before its lease would run out by the local clock.
    assert!(
        eventually(LEASE, || guards.iter().all(LockGuard::is_lost)),
        "{how:?}: guards not lost {:?} after the wipe",
        wiped.elapsed()
    );
    let lost_after = wiped.elapsed();
    eprintln!("{how:?}: all guards lost {lost_after:?} after the wipe");
    assert!(
        lost_after < period + Duration::from_millis(600),
        "{how:?}: took {lost_after:?} to notice, renewal period {period:?}; log: {:#?}",
        logs::lines()
    );

    // Waiters get the locks: woken by a resubscription or, at worst, after
    // one TTL slice (at most the 3 s lease).
    for _ in 0..2 {
        let (name, at) = acquired_rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{how:?}: a waiter never got its wiped lock"));
        let after = at.saturating_duration_since(wiped);
        eprintln!("{how:?}: waiter got {name} {after:?} after the wipe");
        assert!(after < LEASE + Duration::from_secs(1), "{name}: {after:?}");
    }

    // No renewal brings a lost lock back.
    thread::sleep(period * 3);
    assert!(!exists(&server, "alone"), "{how:?}: a lost lock came back");
    for guard in guards {
        let name = redisson_lock::LockGuard::lock_of(&guard).name().to_owned();
        match guard.unlock() {
            Err(Error::Lost { .. }) => {}
            other => panic!("{how:?}: unlock of lost {name} returned {other:?}"),
        }
    }
    for thread in waiting {
        thread.join().expect("waiter thread");
    }
    assert_eq!(holder.diagnostics().registered_holds, 0);
    assert_eq!(waiter.diagnostics().registered_holds, 0);

    // The same clients keep working: lock, unlock, renewal, wait and wake-up.
    let guard = holder.lock("after").lock().expect("lock after the wipe");
    let woken = {
        let lock = waiter.lock("after");
        thread::spawn(move || {
            let guard = lock
                .try_lock_for(Duration::from_secs(20))
                .expect("try_lock_for after the wipe")
                .expect("acquired");
            let at = Instant::now();
            guard.unlock().expect("unlock");
            at
        })
    };
    assert_waiting(&waiter, 1, Duration::from_secs(5));
    thread::sleep(LEASE + LEASE / 6); // renewed meanwhile
    assert!(!guard.is_lost());
    let released = Instant::now();
    guard.unlock().expect("unlock after the wipe");
    let handoff = woken
        .join()
        .expect("waiter")
        .saturating_duration_since(released);
    assert!(
        handoff < Duration::from_millis(200),
        "{how:?}: woken {handoff:?} after the release"
    );
    assert!(!exists(&server, "after"));
}
