//! The non-reentrant lock's own behaviour (PROTOCOL §7): a second
//! acquisition by the holder is refused at once, through every acquire
//! method, and never deadlocks; the acquire script's server-side refusal
//! and its phantom-field rule. What every type shares is in
//! `tests/conformance.rs`.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::Error;
use support::RedisServer;
use support::proxy::Proxy;

const AT_ONCE: Duration = Duration::from_millis(100);

fn refused<T: std::fmt::Debug>(result: redisson_lock::Result<T>, name: &str) {
    assert!(
        matches!(&result, Err(Error::NotReentrant { name: n }) if n == name),
        "{result:?}"
    );
}

/// `try_lock`, `try_lock_for`, `try_lock_until` and `lock` by the holder
/// all return `NotReentrant` at once, on this handle, a clone, a fresh
/// handle and one with a lease; no command reaches Redis for them.
#[test]
fn reentry_is_refused_at_once_through_every_acquire_method() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.non_reentrant_lock("once");
    let guard = lock.lock().expect("lock");
    let before = server.command_calls("evalsha") + server.command_calls("eval");
    let started = Instant::now();
    refused(lock.try_lock(), "once");
    refused(lock.try_lock_for(Duration::from_secs(30)), "once");
    refused(
        lock.try_lock_until(Instant::now() + Duration::from_secs(30)),
        "once",
    );
    refused(lock.lock(), "once");
    refused(lock.clone().lock(), "once");
    refused(client.non_reentrant_lock("once").lock(), "once");
    refused(lock.with_lease(Duration::from_secs(5)).lock(), "once");
    assert!(started.elapsed() < AT_ONCE, "took {:?}", started.elapsed());
    let after = server.command_calls("evalsha") + server.command_calls("eval");
    assert_eq!(after, before, "a refused reentry went to Redis");
    assert_eq!(lock.hold_count().expect("count"), 1);
    guard.unlock().expect("unlock");
    assert!(!lock.is_locked().expect("is_locked"));
    // Free again: the same thread takes it once more.
    lock.lock().expect("lock").unlock().expect("unlock");
}

/// A thread that calls `lock()` on a lock it holds, as a reentrant design
/// would, returns an error instead of waiting for itself forever.
#[test]
fn a_reentry_never_deadlocks() {
    let (_server, client) = RedisServer::start_with_client();
    let lock = client.non_reentrant_lock("self");
    let (done, finished) = mpsc::channel();
    thread::spawn(move || {
        let guard = lock.lock().expect("lock");
        let again = lock.lock().map(drop);
        let _ = done.send(again);
        drop(guard);
    });
    let again = finished
        .recv_timeout(Duration::from_secs(5))
        .expect("the reentry deadlocked");
    refused(again, "self");
}

/// Another thread of the same client is another owner: it waits for the
/// holder and gets the lock when released (woken by the unlock message).
#[test]
fn another_thread_of_the_same_client_waits_and_is_woken() {
    let (_server, client) = RedisServer::start_with_client();
    let lock = client.non_reentrant_lock("threads");
    let guard = lock.lock().expect("lock");
    let other = lock.clone();
    let waiting = thread::spawn(move || {
        let got = other.try_lock_for(Duration::from_secs(20)).expect("wait");
        (got.map(|guard| guard.unlock()), Instant::now())
    });
    thread::sleep(Duration::from_millis(300));
    let released = Instant::now();
    guard.unlock().expect("unlock");
    let (got, at) = waiting.join().expect("waiter");
    assert!(matches!(got, Some(Ok(()))), "{got:?}");
    assert!(at.saturating_duration_since(released) < Duration::from_millis(200));
}

/// An acquire whose reply is lost is sent again; the resend finds the field
/// its first attempt wrote, which the thread counts no hold on, and takes
/// the lock afresh (count 1) instead of refusing the thread its own lock.
#[test]
fn a_lost_acquire_reply_is_not_refused_as_a_reentry() {
    let (_server, proxy, client) = Proxy::with_client();
    let lock = client.non_reentrant_lock("phantom");
    lock.lock().expect("warm-up").unlock().expect("warm-up");
    let guard = proxy.losing_the_reply_to("phantom", || lock.lock().expect("the resent acquire"));
    assert_eq!(lock.hold_count().expect("count"), 1);
    guard.unlock().expect("unlock");
    assert!(!lock.is_locked().expect("is_locked"));
}

/// The script itself, on the wire: a caller that counts a hold gets the
/// error reply `NON_REENTRANT_REACQUIRE` (Redisson's text), one that counts
/// none re-takes its own field with count 1, another owner gets the PTTL.
#[test]
fn the_acquire_script_refuses_a_counted_hold_and_retakes_a_phantom() {
    let server = RedisServer::start();
    let mut con = server.con();
    let script = redis::Script::new(include_str!("../lua/nonreentrant_acquire.lua"));
    let run = |con: &mut redis::Connection, field: &str, known: u32| {
        script
            .key("raw")
            .arg(30_000)
            .arg(field)
            .arg(known)
            .arg("NON_REENTRANT_REACQUIRE")
            .invoke::<Option<i64>>(con)
    };
    assert_eq!(run(&mut con, "me:1", 0).expect("free"), None);
    let error = run(&mut con, "me:1", 1).expect_err("a counted hold is refused");
    // What the crate maps to `Error::NotReentrant`: the text as the code,
    // or in the detail after `ERR` (Redis 7).
    let code = error.code();
    let detail = error.detail().unwrap_or_default();
    assert!(
        code == Some("NON_REENTRANT_REACQUIRE") || detail.contains("NON_REENTRANT_REACQUIRE"),
        "{error}"
    );
    assert_eq!(run(&mut con, "me:1", 0).expect("phantom"), None);
    let count: String = server.cmd(&["HGET", "raw", "me:1"]);
    assert_eq!(count, "1");
    let ttl = run(&mut con, "other:1", 0).expect("held by another");
    assert!(ttl.is_some_and(|ttl| ttl > 0), "{ttl:?}");
}
