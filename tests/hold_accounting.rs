//! Regression tests for the local hold accounting, from a review of the
//! crate: a thread's own hold count is the truth about its field, a hold that
//! vanished behind a guard is reported lost, and only watchdog-mode
//! acquisitions keep a hold renewed. Each failed before the fixes.

mod support;

use std::time::Duration;

use redisson_lock::{Client, RequestId, UnlockOutcome};
use support::RedisServer;
use support::proxy::Proxy;

/// An old guard whose Redis hold is already gone merges with this
/// thread's *newer* hold (the registry still thinks the old hold is live, so
/// the new acquire is sent as a reentry and joins it). Dropping the old guard
/// then runs a real unlock that deletes the newer hold, returns `Ok`, and the
/// newer guard is neither lost nor holding: another client takes the lock
/// while it believes it holds it, untold until the next watchdog tick.
#[test]
fn old_guard_unlock_must_not_release_this_threads_newer_hold_untold() {
    let (server, client) = RedisServer::start_with_client(); // tick every 10 s
    let other = Client::open(server.url()).expect("other client");
    let lock = client.lock("review-newer-hold");

    let old = lock.lock().expect("lock");
    // The hold goes away behind the guard's back (here: the documented
    // low-level unlock; a force unlock from another client or a Java admin
    // followed by a reentrant lock() before the next tick does the same).
    assert_eq!(
        lock.unlock_with_request_id(&RequestId::new())
            .expect("unlock"),
        UnlockOutcome::Released
    );
    let newer = lock.lock().expect("lock again: the key is free");
    let old_result = old.unlock();

    let still_ours = lock.is_held_by_current_thread().expect("hexists");
    let stolen = other
        .lock("review-newer-hold")
        .try_lock()
        .expect("try_lock")
        .is_some();
    assert!(
        still_ours || newer.is_lost(),
        "old guard's unlock returned {old_result:?} and released the newer hold; \
         another client took the lock (stolen={stolen}) yet newer.is_lost() == false"
    );
}

/// A guard taken with an explicit lease is renewed by the watchdog for
/// as long as it lives once a watchdog-mode reentry has come and gone: the
/// `renew` flag is OR-ed in on reentry and never cleared. `with_lease` says
/// "the watchdog never renews it"; Redisson drops the renewal registration
/// with the reentry's unlock.
#[test]
fn explicit_lease_is_not_renewed_forever_after_a_watchdog_reentry_is_released() {
    let server = RedisServer::start();
    let client = server.watchdog_client(Duration::from_millis(300));
    let lock = client.lock("review-lease");
    let outer = lock
        .with_lease(Duration::from_millis(800))
        .lock()
        .expect("leased lock");
    let inner = lock.lock().expect("watchdog reentry");
    inner.unlock().expect("inner unlock");
    // Lease 800 ms (and the inner unlock re-expired it to 300 ms): by 2 s it
    // must be gone.
    std::thread::sleep(Duration::from_secs(2));
    let locked = lock.is_locked().expect("exists");
    let ttl = lock.remaining_ttl().expect("pttl");
    assert!(
        !locked,
        "an 800 ms lease still held after 2 s (pttl {ttl:?}, outer lost: {}): \
         the watchdog keeps renewing it",
        outer.is_lost()
    );
}

/// `Client::with_connection` sends a command again when its connection
/// drops. For a reentrant acquire that the server already ran, the count is
/// incremented twice; the watchdog keeps the phantom count alive while the
/// thread holds the lock, and after the thread's last unlock the lock stays
/// taken (nobody's, unrenewed) for a whole lease: every other client starves
/// for 30 s. (The code comment says "the lease then expires" it.)
#[test]
fn reentry_resent_after_a_dropped_connection_does_not_leave_the_lock_taken() {
    let (server, proxy, client) = Proxy::with_client();
    let other = Client::open(server.url()).expect("other client");
    let lock = client.lock("review-dup-reentry");

    let outer = lock.lock().expect("lock");
    let inner = proxy.losing_the_reply_to("review-dup-reentry", || {
        lock.lock().expect("reentry (sent twice)")
    });
    drop(inner);
    outer.unlock().expect("unlock");

    let fields: std::collections::HashMap<String, String> =
        server.cmd(&["HGETALL", "review-dup-reentry"]);
    assert!(
        other
            .lock("review-dup-reentry")
            .try_lock()
            .expect("try_lock")
            .is_some(),
        "every guard was released but the lock is still taken: {fields:?}, pttl {:?}",
        lock.remaining_ttl().expect("pttl")
    );
}

/// The same merge without the low-level API: another client (or a Java
/// admin) force-unlocks; this thread re-enters before the next watchdog tick.
/// The re-entry really is a fresh acquire (Redis count 1) but is counted as a
/// reentry (local count 2). Its unlock frees the key and answers `Released`
/// while a guard of the same hold is still alive: the crate can tell right
/// there that the outer guard holds nothing, but does not mark it lost.
#[test]
fn released_reply_with_guards_still_alive_marks_them_lost() {
    let (server, client) = RedisServer::start_with_client(); // tick every 10 s
    let admin = Client::open(server.url()).expect("admin client");
    let lock = client.lock("review-force-reenter");

    let outer = lock.lock().expect("lock");
    assert!(
        admin
            .lock("review-force-reenter")
            .force_unlock()
            .expect("force")
    );
    let inner = lock.lock().expect("'reentry'");
    inner.unlock().expect("inner unlock");
    let stolen = admin
        .lock("review-force-reenter")
        .try_lock()
        .expect("try_lock");
    assert!(
        outer.is_lost(),
        "the key is gone (stolen by another client: {}), yet the outer guard is not lost",
        stolen.is_some()
    );
}
