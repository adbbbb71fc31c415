//! The shared subscriber's parking lot, its refusals and its writes.
//!
//! - Locks whose names map to one channel (`a` and `{a}` both announce on
//!   `redisson_lock__channel:{a}`) each have their own entry, as in
//!   Redisson: an unlock message reaches a waiter of every lock on the
//!   channel, one server subscription serves them all, and a release of one
//!   lock never leaves the other lock's waiter asleep for the holder's TTL.
//! - A subscription the server refuses (an ACL without the channel) fails
//!   the waiters that need it at once, and the next waiter again at once,
//!   instead of leaving them to poll at the holder's TTL; waiters on other
//!   channels are not disturbed.
//! - A write to the subscriber's socket that stalls (the server stops
//!   reading) never blocks the unlock of an unrelated lock, nor the client's
//!   diagnostics.

mod support;

use std::sync::mpsc::{Receiver, channel};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error};
use support::proxy::Proxy;
use support::state::numsub;
use support::{RedisServer, assert_waiting, eventually};

/// The channel that locks `a` and `{a}` share.
const SHARED_CHANNEL: &str = "redisson_lock__channel:{a}";

/// A thread waiting up to `budget` for `name`; it reports when it got the
/// lock, or `None` if it did not, and keeps the lock for `hold`.
fn waiter(
    client: &Client,
    name: &str,
    budget: Duration,
    hold: Duration,
) -> Receiver<Option<Instant>> {
    let (tx, rx) = channel();
    let lock = client.lock(name);
    thread::spawn(move || {
        let guard = lock.try_lock_for(budget).expect("try_lock_for");
        let _ = tx.send(guard.as_ref().map(|_| Instant::now()));
        thread::sleep(hold);
        drop(guard);
    });
    rx
}

/// Starts a waiter (see [`waiter`]) and returns once it is parked:
/// registered with the subscriber and given time to make its second attempt
/// and go to sleep.
fn parked_waiter(
    client: &Client,
    name: &str,
    budget: Duration,
    hold: Duration,
) -> Receiver<Option<Instant>> {
    let before = client.diagnostics().waiters;
    let rx = waiter(client, name, budget, hold);
    assert_waiting(client, before + 1, Duration::from_secs(5));
    thread::sleep(Duration::from_millis(200));
    rx
}

/// The waiter behind `rx` got the lock less than `bound` after `since`.
fn assert_woken(rx: &Receiver<Option<Instant>>, name: &str, since: Instant, bound: Duration) {
    let acquired = rx
        .recv_timeout(bound + Duration::from_secs(2))
        .unwrap_or_else(|_| panic!("the waiter on `{name}` was not woken"))
        .unwrap_or_else(|| panic!("the waiter on `{name}` never got the lock"));
    let after = acquired.saturating_duration_since(since);
    assert!(
        after < bound,
        "the waiter on `{name}` got the lock {after:?} after its release"
    );
}

/// Both locks held by `holder` (30 s watchdog lease), one waiter of
/// `waiters` parked on each, `first_parked` first; then `released` is
/// released, and its waiter must get it at once.
fn release_wakes_its_own_waiter(first_parked: &str, released: &str) {
    let server = RedisServer::start();
    let holder = Client::open(server.url()).expect("holder client");
    let waiters = Client::open(server.url()).expect("waiter client");
    let mut guard_a = Some(holder.lock("a").lock().expect("hold a"));
    let mut guard_braced = Some(holder.lock("{a}").lock().expect("hold {a}"));

    let second_parked = if first_parked == "a" { "{a}" } else { "a" };
    let budget = Duration::from_secs(10);
    let first = parked_waiter(&waiters, first_parked, budget, Duration::ZERO);
    let second = parked_waiter(&waiters, second_parked, budget, Duration::ZERO);
    // One server subscription serves both locks.
    assert_eq!(numsub(&server, SHARED_CHANNEL), 1);
    assert_eq!(server.client_count("pubsub"), 1);
    assert_eq!(waiters.diagnostics().subscribed_channels, 1);
    assert_eq!(waiters.diagnostics().waiters, 2);

    let (woken, still_waiting, other) = if released == first_parked {
        (first, second, second_parked)
    } else {
        (second, first, first_parked)
    };
    let since = Instant::now();
    if released == "a" {
        drop(guard_a.take());
    } else {
        drop(guard_braced.take());
    }
    assert_woken(&woken, released, since, Duration::from_secs(1));

    // The other lock's waiter is still there, and its own release wakes it.
    assert!(still_waiting.try_recv().is_err());
    let since = Instant::now();
    drop(guard_a.take());
    drop(guard_braced.take());
    assert_woken(&still_waiting, other, since, Duration::from_secs(1));
    assert!(eventually(Duration::from_secs(2), || {
        numsub(&server, SHARED_CHANNEL) == 0 && waiters.diagnostics().subscribed_channels == 0
    }));
}

#[test]
fn release_of_a_wakes_its_waiter_when_a_waiter_on_braced_a_parked_first() {
    release_wakes_its_own_waiter("{a}", "a");
}

#[test]
fn release_of_braced_a_wakes_its_waiter_when_a_waiter_on_a_parked_first() {
    release_wakes_its_own_waiter("a", "{a}");
}

/// Both locks held by a foreign owner (as a Java client would), with a 30 s
/// TTL; one waiter parked on each, which keeps the lock 3 s once it has it
/// (so that its own release cannot wake the other).
fn foreign_holds_and_two_waiters(
    server: &RedisServer,
    waiters: &Client,
) -> [Receiver<Option<Instant>>; 2] {
    for name in ["a", "{a}"] {
        let _: () = server.cmd(&["HSET", name, "java-client:1", "1"]);
        let _: () = server.cmd(&["PEXPIRE", name, "30000"]);
    }
    let budget = Duration::from_secs(10);
    let hold = Duration::from_secs(3);
    let braced = parked_waiter(waiters, "{a}", budget, hold);
    let plain = parked_waiter(waiters, "a", budget, hold);
    assert_eq!(numsub(server, SHARED_CHANNEL), 1);
    [plain, braced]
}

#[test]
fn one_unlock_message_wakes_a_waiter_of_each_lock_on_the_channel() {
    let server = RedisServer::start();
    let waiters = Client::open(server.url()).expect("waiter client");
    let [plain, braced] = foreign_holds_and_two_waiters(&server, &waiters);
    // Both locks freed, one message `0`: Redisson's listener of each entry
    // gets it and releases one permit on its own semaphore.
    let _: () = server.cmd(&["DEL", "a", "{a}"]);
    let since = Instant::now();
    let _: i64 = server.cmd(&["PUBLISH", SHARED_CHANNEL, "0"]);
    assert_woken(&plain, "a", since, Duration::from_secs(1));
    assert_woken(&braced, "{a}", since, Duration::from_secs(1));
}

#[test]
fn a_read_unlock_message_wakes_the_waiters_of_every_lock_on_the_channel() {
    let server = RedisServer::start();
    let waiters = Client::open(server.url()).expect("waiter client");
    let [plain, braced] = foreign_holds_and_two_waiters(&server, &waiters);
    let _: () = server.cmd(&["DEL", "a", "{a}"]);
    let since = Instant::now();
    let _: i64 = server.cmd(&["PUBLISH", SHARED_CHANNEL, "1"]);
    assert_woken(&plain, "a", since, Duration::from_secs(1));
    assert_woken(&braced, "{a}", since, Duration::from_secs(1));
}

const LOCKER_PASSWORD: &str = "L0cker-pw-3d1c";

/// A server whose user `locker` may do everything, on every key, but
/// subscribe to the unlock channel of lock `open` only.
fn acl_server() -> RedisServer {
    let password = format!(">{LOCKER_PASSWORD}");
    RedisServer::start_with(&[
        "--user",
        "locker",
        "on",
        &password,
        "~*",
        "&redisson_lock__channel:{open}",
        "+@all",
    ])
}

fn assert_refused(outcome: Result<bool, Error>, what: &str, took: Duration) {
    match outcome {
        Err(Error::Redis(e)) if e.code() == Some("NOPERM") => {}
        other => panic!("{what}: expected the NOPERM refusal, got {other:?} after {took:?}"),
    }
    assert!(
        took < Duration::from_secs(2),
        "{what}: refused only after {took:?}"
    );
}

#[test]
fn a_refused_subscription_fails_every_waiter_at_once_and_spares_other_channels() {
    let server = acl_server();
    let holder = Client::open(server.url()).expect("holder client");
    let open_guard = holder.lock("open").lock().expect("hold open");
    let _closed_guard = holder.lock("closed").lock().expect("hold closed");
    let locker = Client::builder(format!(
        "redis://locker:{LOCKER_PASSWORD}@127.0.0.1:{}/",
        server.port()
    ))
    .response_timeout(Duration::from_secs(2))
    .build()
    .expect("locker client");

    // A waiter on a channel the ACL allows, parked through the subscriber.
    let open_waiter = parked_waiter(&locker, "open", Duration::from_secs(20), Duration::ZERO);
    assert_eq!(numsub(&server, "redisson_lock__channel:{open}"), 1);

    // Waiters on a refused channel learn it from the refusal, well within
    // the subscription timeout (7.5 s), whether they wait with a budget or
    // without one.
    let start = Instant::now();
    let outcome = locker
        .lock("closed")
        .try_lock_for(Duration::from_secs(5))
        .map(|guard| guard.is_some());
    assert_refused(outcome, "try_lock_for", start.elapsed());

    // Several at once, sharing the refused subscription.
    let started = Instant::now();
    let together: Vec<JoinHandle<(Result<bool, Error>, Duration)>> = (0..3)
        .map(|_| {
            let lock = locker.lock("closed");
            thread::spawn(move || {
                let outcome = lock
                    .try_lock_for(Duration::from_secs(5))
                    .map(|guard| guard.is_some());
                (outcome, started.elapsed())
            })
        })
        .collect();
    for waiter in together {
        let (outcome, took) = waiter.join().expect("waiter thread");
        assert_refused(outcome, "concurrent try_lock_for", took);
    }

    // The next one asks the server again and is refused again, at once.
    let start = Instant::now();
    let outcome = locker.lock("closed").lock().map(|_guard| true);
    assert_refused(outcome, "lock", start.elapsed());

    // The refusals touched nothing else: the open waiter still waits on its
    // subscription, on the one subscriber connection, and is woken by the
    // release.
    assert_eq!(locker.diagnostics().waiters, 1);
    assert_eq!(numsub(&server, "redisson_lock__channel:{open}"), 1);
    assert_eq!(server.client_count("pubsub"), 1);
    let since = Instant::now();
    drop(open_guard);
    assert_woken(&open_waiter, "open", since, Duration::from_secs(1));
    assert!(eventually(Duration::from_secs(2), || {
        locker.diagnostics().subscribed_channels == 0
    }));
}

#[test]
fn a_stalled_subscriber_write_does_not_block_unlocks_of_other_locks() {
    let (server, proxy) = Proxy::with_server();
    let holder = Client::open(server.url()).expect("holder client");
    // Through the proxy: its command connections keep working while its
    // subscriber connection is frozen. The old write timeout was the connect
    // timeout (10 s); an unlock must not wait for it.
    let client = Client::builder(proxy.url())
        .connect_timeout(Duration::from_secs(10))
        .response_timeout(Duration::from_secs(1))
        .build()
        .expect("client through the proxy");

    // A waiter parked through the subscriber (its connection now exists).
    let x_guard = holder.lock("x").lock().expect("hold x");
    let x_waiter = parked_waiter(&client, "x", Duration::from_secs(30), Duration::ZERO);

    // The server stops reading the subscriber connection, and a second waiter
    // needs a subscription whose command is far larger than the socket
    // buffers (a lock name of 8 MiB): that write stalls.
    proxy.freeze_subscribers(true);
    let huge = format!("stall:{}", "y".repeat(8 << 20));
    let _huge_guard = holder
        .lock(huge.clone())
        .lock()
        .expect("hold the huge lock");
    let attempts = server.command_calls("evalsha");
    let huge_budget = Duration::from_secs(3);
    let huge_waiter = {
        let lock = client.lock(huge);
        thread::spawn(move || {
            let start = Instant::now();
            let outcome = lock.try_lock_for(huge_budget).map(|g| g.is_some());
            (outcome, start.elapsed())
        })
    };
    assert!(eventually(Duration::from_secs(10), || {
        server.command_calls("evalsha") > attempts
    }));
    // Its first attempt is answered; it now subscribes, and its write stalls.
    thread::sleep(Duration::from_millis(500));

    // An unrelated lock is taken and released (a final unlock asks the
    // subscriber whether a thread waits for it), and the client's
    // diagnostics are read: neither waits for the stalled write.
    let start = Instant::now();
    let guard = client.lock("z").lock().expect("lock z");
    guard.unlock().expect("unlock z");
    let unlock_took = start.elapsed();
    let start = Instant::now();
    let _ = client.diagnostics();
    let diagnostics_took = start.elapsed();
    assert!(
        unlock_took < Duration::from_millis(500),
        "lock + unlock of an unrelated lock took {unlock_took:?}"
    );
    assert!(
        diagnostics_took < Duration::from_millis(500),
        "diagnostics took {diagnostics_took:?}"
    );

    // The stalled waiter itself keeps to its budget: its write gave up in
    // time, and its attempts go through the working command connections.
    let (outcome, took) = huge_waiter.join().expect("huge waiter thread");
    eprintln!(
        "unrelated lock + unlock {unlock_took:?}, diagnostics {diagnostics_took:?}, \
         stalled waiter {outcome:?} after {took:?}"
    );
    assert!(
        matches!(outcome, Ok(false)),
        "the stalled waiter: {outcome:?}"
    );
    assert!(
        took < huge_budget + Duration::from_millis(1500),
        "the stalled waiter returned after {took:?}"
    );

    // Once the server reads again, wake-ups work again (the holder's lease
    // is 30 s: the waiter is woken, not polling).
    proxy.freeze_subscribers(false);
    let since = Instant::now();
    drop(x_guard);
    assert_woken(&x_waiter, "x", since, Duration::from_secs(5));
}
