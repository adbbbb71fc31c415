//! The spin lock's own behaviour (PROTOCOL §6): no pub/sub whatsoever, the
//! RLock layout (so it and an RLock of the same name exclude each other),
//! the configurable backoff, and lost replies. What every type shares is in
//! `tests/conformance.rs`.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, RequestId, UnlockOutcome};
use support::RedisServer;
use support::proxy::{Fault, Proxy};
use support::state::{assert_no_phantom_hold, lock_twice, numsub};
use support::waiter::Waiter;

fn client(server: &RedisServer) -> Client {
    server.client()
}

fn active_channels(server: &RedisServer) -> Vec<String> {
    server.cmd(&["PUBSUB", "CHANNELS"])
}

/// A waiter polls; neither the client nor the server sees a subscription.
#[test]
fn waiting_on_a_spin_lock_never_subscribes() {
    let server = RedisServer::start();
    let holder = client(&server);
    let waiter = client(&server);
    let guard = holder.spin_lock("quiet").lock().expect("lock");
    let lock = waiter.spin_lock("quiet");
    let waiting = thread::spawn(move || {
        let got = lock.try_lock_for(Duration::from_secs(10)).expect("wait");
        got.map(|guard| guard.unlock())
    });
    thread::sleep(Duration::from_millis(400));
    let diagnostics = waiter.diagnostics();
    assert_eq!(diagnostics.subscribed_channels, 0, "{diagnostics:?}");
    assert_eq!(diagnostics.waiters, 0, "{diagnostics:?}");
    assert_eq!(numsub(&server, "redisson_lock__channel:{quiet}"), 0);
    assert!(active_channels(&server).is_empty());
    guard.unlock().expect("unlock");
    let got = waiting.join().expect("waiter");
    assert!(matches!(got, Some(Ok(()))), "{got:?}");
    assert_eq!(server.command_calls("subscribe"), 0);
    assert_eq!(server.command_calls("psubscribe"), 0);
    assert_eq!(server.command_calls("ssubscribe"), 0);
    assert_eq!(waiter.diagnostics().subscribed_channels, 0);
    assert_eq!(holder.diagnostics().subscribed_channels, 0);
}

/// Guard release, reentrant release, latched unlock and force unlock: a raw
/// subscriber on every channel sees nothing, the server counts no PUBLISH.
#[test]
fn unlock_and_force_unlock_publish_nothing() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut all = server.psubscriber(&["*"]);
    let lock = client.spin_lock("silent");

    let (outer, inner) = lock_twice(&lock);
    assert_eq!(lock.hold_count().expect("count"), 2);
    inner.unlock().expect("partial release");
    outer.unlock().expect("last release");
    assert!(!lock.is_locked().expect("is_locked"));

    let guard = lock.lock().expect("lock");
    let outcome = lock
        .unlock_with_request_id(&RequestId::new())
        .expect("latched unlock");
    assert_eq!(outcome, UnlockOutcome::Released);
    drop(guard);

    let _guard = lock.lock().expect("lock");
    assert!(lock.force_unlock().expect("force unlock"));
    assert!(!lock.is_locked().expect("is_locked"));

    let seen = all.messages_within(Duration::from_millis(300));
    assert!(seen.is_empty(), "a spin lock published {seen:?}");
    assert_eq!(server.command_calls("publish"), 0);
    assert_eq!(server.command_calls("spublish"), 0);
}

/// Same hash, same fields: a spin lock and an RLock of one name exclude
/// each other, and each gets it once the other is released.
#[test]
fn excludes_an_rlock_of_the_same_name_in_both_directions() {
    let server = RedisServer::start();
    let a = client(&server);
    let b = client(&server);

    let spin = a.spin_lock("shared").lock().expect("spin lock");
    assert!(b.lock("shared").try_lock().expect("try_lock").is_none());
    let field: Option<String> = server.cmd(&["HGET", "shared", &a.owner_field()]);
    assert_eq!(
        field.as_deref(),
        Some("1"),
        "the spin hold is RLock's field"
    );
    spin.unlock().expect("unlock");
    let rlock = b.lock("shared").try_lock().expect("try_lock");
    let rlock = rlock.expect("the RLock is free once the spin lock is released");

    assert!(
        a.spin_lock("shared")
            .try_lock()
            .expect("try_lock")
            .is_none()
    );
    // A spin waiter behind an RLock holder polls and notices the release.
    let lock = a.spin_lock("shared");
    let waiter = Waiter::try_lock_for(lock, Duration::from_secs(10));
    thread::sleep(Duration::from_millis(500));
    let released = Instant::now();
    rlock.unlock().expect("unlock");
    let bound = Duration::from_millis(128 + 100);
    waiter.woken_within(released, bound, Duration::from_secs(30));
}

/// `with_backoff` sets the sleeps between attempts: a constant 200 ms
/// backoff polls about five times a second, the default about a dozen
/// times in its first second; a zero backoff is raised to 1 ms.
#[test]
fn the_backoff_is_configurable_and_bounds_the_polling() {
    let server = RedisServer::start();
    let holder = client(&server);
    let waiter = client(&server);
    let _guard = holder.spin_lock("polled").lock().expect("lock");
    let lock = waiter.spin_lock("polled");
    assert_eq!(
        lock.backoff(),
        (Duration::from_millis(1), Duration::from_millis(128))
    );
    assert_eq!(
        lock.with_backoff(Duration::ZERO, Duration::ZERO).backoff(),
        (Duration::from_millis(1), Duration::from_millis(1))
    );

    let attempts = |lock: &redisson_lock::SpinLock| {
        let before = server.command_calls("evalsha");
        let got = lock.try_lock_for(Duration::from_secs(1)).expect("wait");
        assert!(got.is_none());
        server.command_calls("evalsha") - before
    };
    let constant = lock.with_backoff(Duration::from_millis(200), Duration::from_millis(200));
    let slow = attempts(&constant);
    assert!((4..=8).contains(&slow), "{slow} attempts at 200 ms");
    let default = attempts(&lock);
    assert!((8..=30).contains(&default), "{default} attempts by default");
    // The backoff survives `with_lease`.
    let leased = constant.with_lease(Duration::from_secs(5));
    assert_eq!(leased.backoff(), constant.backoff());
}

/// A reentry whose reply is lost is sent again and counts once.
#[test]
fn a_lost_reentry_reply_counts_once() {
    let (_server, proxy, client) = Proxy::with_client();
    let lock = client.spin_lock("lost-reentry");
    let outer = lock.lock().expect("lock");
    let inner = proxy.losing_the_reply_to("lost-reentry", || lock.lock().expect("reentry"));
    assert_eq!(lock.hold_count().expect("count"), 2);
    inner.unlock().expect("unlock");
    outer.unlock().expect("unlock");
    assert_no_phantom_hold(&lock);
}

/// A guard's release whose reply is lost is sent again, reports the
/// release, frees the lock and still publishes nothing.
#[test]
fn a_lost_release_reply_is_resent_and_frees_the_lock() {
    let (server, proxy, client) = Proxy::with_client();
    let mut all = server.psubscriber(&["*"]);
    let lock = client.spin_lock("lost-release");
    let guard = lock.lock().expect("lock");
    let release = redis::Script::new(include_str!("../lua/spin_release.lua"));
    // Load the script, so that the faulted command is the release itself.
    let _: redis::Value = server.cmd(&["SCRIPT", "LOAD", include_str!("../lua/spin_release.lua")]);
    proxy.arm(release.get_hash(), Fault::DropReplyAndClose);
    guard
        .unlock()
        .expect("the resent release reports the first one's");
    assert_eq!(proxy.injected(), 1, "the reply was not dropped");
    assert!(!lock.is_locked().expect("is_locked"));
    assert!(all.messages_within(Duration::from_millis(200)).is_empty());
}
