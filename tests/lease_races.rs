//! `is_lost()` turns true no later than Redis expires the key, whatever the
//! interleaving of watchdog renewals with reentries and partial unlocks that
//! set a shorter lease.
//!
//! The watchdog's renewal reply is held back by the test proxy, so that a
//! shorter lease set meanwhile runs *after* the renewal in Redis while its
//! reply arrives *before* the renewal's. A client that trusts the renewal's
//! reply (`sent + watchdog timeout`) believes it holds the lock for seconds
//! after another client took it.

mod support;

use std::time::{Duration, Instant};

use redisson_lock::{Client, LostReason};
use support::proxy::{Fault, Proxy};
use support::state::pttl;
use support::{RedisServer, eventually};

const WATCHDOG: Duration = Duration::from_secs(3);
const SHORT: Duration = Duration::from_millis(500);
const RENEWAL_REPLY_DELAY: Duration = Duration::from_millis(150);

fn renewal_script_sha(server: &RedisServer) -> String {
    // Loaded up front so that the first renewal is not a NOSCRIPT round.
    server.cmd(&[
        "SCRIPT",
        "LOAD",
        include_str!("../lua/rlock_renew_batch.lua"),
    ])
}

/// Arms a slow reply on the next renewal and returns once Redis has run it
/// (its reply is then held by the proxy for [`RENEWAL_REPLY_DELAY`]).
fn wait_for_a_slow_renewal(proxy: &Proxy, sha: &str) {
    let before = proxy.injected();
    proxy.arm(sha, Fault::DelayReply(RENEWAL_REPLY_DELAY));
    assert!(
        eventually(WATCHDOG, || proxy.injected() > before),
        "no renewal within a watchdog timeout"
    );
}

/// Another client takes the lock as soon as Redis lets it; returns when.
fn rival_takes(server: &RedisServer, name: &str) -> Instant {
    let rival = Client::open(server.url()).expect("rival client");
    let lock = rival.lock(name);
    let deadline = Instant::now() + WATCHDOG * 2;
    loop {
        if let Some(guard) = lock.try_lock().expect("rival try_lock") {
            let at = Instant::now();
            drop(guard);
            return at;
        }
        assert!(Instant::now() < deadline, "the rival never got the lock");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A fresh server, the SHA of its renewal script and a proxy in front of it.
fn proxied_with_renewal_sha() -> (RedisServer, String, Proxy) {
    let (server, proxy) = Proxy::with_server();
    let sha = renewal_script_sha(&server);
    (server, sha, proxy)
}

#[test]
fn a_late_renewal_reply_does_not_hide_a_shorter_reentry_lease() {
    let (server, sha, proxy) = proxied_with_renewal_sha();
    let client = support::watchdog_client(&proxy.url(), WATCHDOG);
    let lock = client.lock("renewal-vs-reentry");
    let watched = lock.lock().expect("lock");

    wait_for_a_slow_renewal(&proxy, &sha);
    // Redis ran the renewal; the reentry runs after it: PTTL 500 ms.
    let reentry = lock.with_lease(SHORT).lock().expect("reentry");
    let ttl = pttl(&server, "renewal-vs-reentry");
    assert!(ttl <= 500, "the reentry set the lease last, PTTL {ttl}");

    let taken = rival_takes(&server, "renewal-vs-reentry");
    assert!(
        watched.is_lost() && reentry.is_lost(),
        "another client took the lock while both guards said they held it"
    );
    assert_eq!(watched.lost_reason(), Some(LostReason::LeaseExpired));
    eprintln!("rival took it {taken:?}");
}

#[test]
fn a_late_renewal_reply_does_not_hide_a_partial_unlock_with_a_shorter_lease() {
    let (server, sha, proxy) = proxied_with_renewal_sha();
    let client = support::watchdog_client(&proxy.url(), WATCHDOG);
    let lock = client.lock("renewal-vs-partial-unlock");
    // The explicit-lease hold first, then a watchdog-mode reentry keeps the
    // whole hold renewed.
    let short = lock.with_lease(SHORT).lock().expect("lock with a lease");
    let watched = lock.lock().expect("reentry in watchdog mode");

    wait_for_a_slow_renewal(&proxy, &sha);
    // The partial unlock resets the TTL to its own handle's lease (Redisson's
    // internalLockLeaseTime), after the renewal ran.
    short.unlock().expect("partial unlock");
    let ttl = pttl(&server, "renewal-vs-partial-unlock");
    assert!(
        ttl <= 500,
        "the partial unlock set the lease last, PTTL {ttl}"
    );

    rival_takes(&server, "renewal-vs-partial-unlock");
    assert!(
        watched.is_lost(),
        "another client took the lock while the remaining guard said it held it"
    );
}

/// A control, not a regression test: the old code never made this mistake.
/// It guards the fix against erring the other way, reporting a lock lost
/// that Redis still holds for us.
#[test]
fn renewals_that_race_nothing_keep_the_lock_alive() {
    let (server, sha, proxy) = proxied_with_renewal_sha();
    let client = support::watchdog_client(&proxy.url(), Duration::from_millis(900));
    let lock = client.lock("renewed-with-slow-replies");
    let guard = lock.lock().expect("lock");
    let again = lock
        .with_lease(Duration::from_secs(60))
        .lock()
        .expect("reentry");
    for _ in 0..4 {
        wait_for_a_slow_renewal(&proxy, &sha);
    }
    assert!(!guard.is_lost() && !again.is_lost());
    let held: bool = server.cmd(&["EXISTS", "renewed-with-slow-replies"]);
    assert!(held);
    again.unlock().expect("partial unlock");
    guard.unlock().expect("unlock");
}
