//! Fault: wake-ups that go missing.
//!
//! The subscriber connection is killed while threads wait (`CLIENT KILL TYPE
//! pubsub`), so unlock messages published meanwhile are lost: every waiter
//! must still get the lock, at worst one TTL slice late, and wake-ups must work
//! again once the subscriber is back. And a release that races a waiter's
//! subscription must never be missed, whether it lands before the
//! subscription (the message reaches nobody) or between the attempt made once
//! subscribed and the wait (the message reaches nobody waiting yet).

mod support;

use std::sync::mpsc::channel;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::Client;
use support::proxy::{Fault, Proxy};
use support::state::{command_calls, numsub};
use support::{RedisServer, assert_waiting, eventually};

const CHANNEL: &str = "redisson_lock__channel:{woken}";

fn kill_pubsub(server: &RedisServer) -> u64 {
    server.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"])
}

#[test]
fn waiters_survive_a_killed_subscriber_and_wake_ups_resume() {
    let server = RedisServer::start();
    // The holder's lease is 1 s (renewed): a lost message costs a waiter at
    // most one such TTL slice.
    let holder = server.watchdog_client(Duration::from_secs(1));
    let waiters = support::builder(server.url())
        .build()
        .expect("waiter client");
    let name = "woken";
    let (held_tx, held_rx) = channel();
    let (release_tx, release_rx) = channel::<()>();
    let holding = {
        let lock = holder.lock(name);
        thread::spawn(move || {
            let guard = lock.lock().expect("holder lock");
            held_tx.send(()).expect("send");
            release_rx.recv().expect("told to release");
            guard.unlock().expect("holder unlock");
            Instant::now()
        })
    };
    held_rx.recv().expect("held");

    const WAITERS: usize = 4;
    let (acquired_tx, acquired_rx) = channel();
    let threads: Vec<_> = (0..WAITERS)
        .map(|_| {
            let lock = waiters.lock(name);
            let acquired_tx = acquired_tx.clone();
            thread::spawn(move || {
                let guard = lock
                    .try_lock_for(Duration::from_secs(30))
                    .expect("try_lock_for")
                    .expect("every waiter gets the lock");
                acquired_tx.send(Instant::now()).expect("send");
                thread::sleep(Duration::from_millis(20));
                guard.unlock().expect("waiter unlock");
            })
        })
        .collect();
    assert_waiting(&waiters, WAITERS, Duration::from_secs(5));
    assert_eq!(server.client_count("pubsub"), 1);

    // Kill the subscriber, and release while it is (probably) reconnecting.
    assert_eq!(kill_pubsub(&server), 1);
    release_tx.send(()).expect("release");
    let released = holding.join().expect("holder thread");

    let mut acquisitions = Vec::new();
    for _ in 0..WAITERS {
        acquisitions.push(
            acquired_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("a waiter hangs after the subscriber was killed"),
        );
    }
    for thread in threads {
        thread.join().expect("waiter thread");
    }
    let mut previous = released;
    for (n, at) in acquisitions.iter().enumerate() {
        let gap = at.saturating_duration_since(previous);
        assert!(
            gap < Duration::from_millis(1500),
            "waiter {n} got the lock {gap:?} after it was free (TTL slice is 1 s)"
        );
        previous = *at;
    }
    eprintln!(
        "hand-offs after the kill: {:?}",
        acquisitions
            .iter()
            .scan(released, |previous, at| {
                let gap = at.saturating_duration_since(*previous);
                *previous = *at;
                Some(gap)
            })
            .collect::<Vec<_>>()
    );
    assert_eq!(waiters.diagnostics().waiters, 0);
    assert!(eventually(Duration::from_secs(2), || {
        waiters.diagnostics().subscribed_channels == 0
    }));

    // The subscriber is back: a fresh wait is woken by the message, long
    // before the 30 s TTL of a default-lease holder.
    let patient = support::builder(server.url())
        .build()
        .expect("client with a 30 s lease");
    assert_woken_promptly(&server, &patient, &waiters, name, false);

    // Killed while a thread waits on a 30 s lease: the subscriber comes back,
    // subscribes again, and the release wakes the waiter at once.
    assert_woken_promptly(&server, &patient, &waiters, name, true);
}

/// `holder` takes `name` with a 30 s lease, a thread of `waiters` waits for
/// it (its subscriber killed meanwhile if `kill`), and must be woken within
/// 200 ms of the release.
fn assert_woken_promptly(
    server: &RedisServer,
    holder: &Client,
    waiters: &Client,
    name: &str,
    kill: bool,
) {
    let guard = holder.lock(name).lock().expect("holder lock");
    let ttl = holder
        .lock(name)
        .remaining_ttl()
        .expect("pttl")
        .expect("ttl");
    assert!(ttl > Duration::from_secs(25));
    let waiter = {
        let lock = waiters.lock(name);
        thread::spawn(move || {
            let _guard = lock
                .try_lock_for(Duration::from_secs(20))
                .expect("try_lock_for")
                .expect("acquired");
            Instant::now()
        })
    };
    assert!(eventually(Duration::from_secs(5), || {
        waiters.diagnostics().waiters == 1 && numsub(server, CHANNEL) == 1
    }));
    if kill {
        assert_eq!(kill_pubsub(server), 1);
        assert!(
            eventually(Duration::from_secs(5), || numsub(server, CHANNEL) == 1),
            "the subscriber did not come back"
        );
    }
    let released = Instant::now();
    guard.unlock().expect("unlock");
    let acquired = waiter.join().expect("waiter");
    let handoff = acquired.saturating_duration_since(released);
    assert!(
        handoff < Duration::from_millis(200),
        "woken {handoff:?} after the release (holder TTL 30 s)"
    );
}

#[test]
fn release_racing_a_waiters_subscription_is_never_missed() {
    let server = RedisServer::start();
    let holder = support::builder(server.url())
        .build()
        .expect("holder client");
    let waiter = support::builder(server.url())
        .build()
        .expect("waiter client");
    let mut seed = u64::from(std::process::id()) ^ 0x9e37_79b9_7f4a_7c15;
    let mut worst = Duration::ZERO;
    for round in 0..200 {
        // xorshift: 0-3 ms between the waiter starting and the release.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_micros(seed % 3_000);

        let name = format!("race-{}", round % 4);
        let guard = holder.lock(name.as_str()).lock().expect("holder lock");
        let start = Arc::new(Barrier::new(2));
        let waiting = {
            let lock = waiter.lock(name.as_str());
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                let began = Instant::now();
                let guard = lock
                    .try_lock_for(Duration::from_secs(10))
                    .expect("try_lock_for");
                let waited = began.elapsed();
                assert!(guard.is_some(), "round {round}: not acquired in 10 s");
                waited
            })
        };
        start.wait();
        thread::sleep(delay);
        guard.unlock().expect("holder unlock");
        let waited = waiting.join().expect("waiter thread");
        assert!(
            waited < Duration::from_secs(1),
            "round {round}: release {delay:?} after the waiter started was missed; \
             it waited {waited:?} (holder TTL 30 s)"
        );
        worst = worst.max(waited);
    }
    eprintln!("worst wait over 200 racing releases: {worst:?}");
    assert!(eventually(Duration::from_secs(2), || {
        let d = waiter.diagnostics();
        d.subscribed_channels == 0 && d.waiters == 0
    }));
    assert_eq!(holder.diagnostics().registered_holds, 0);
    assert_eq!(waiter.diagnostics().registered_holds, 0);
}

fn info_field(con: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    let prefix = format!("{field}:");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map_or(0, |value| value.trim().parse().expect("a number"))
}

#[test]
fn subscriber_refused_by_the_server_backs_off_and_waiters_do_not_spin() {
    let server = RedisServer::start();
    let holder = support::builder(server.url())
        .build()
        .expect("holder client");
    let waiters = support::builder(server.url())
        .build()
        .expect("waiter client");
    let name = "crowded";
    let channel = "redisson_lock__channel:{crowded}";
    let guard = holder.lock(name).lock().expect("holder lock");
    let waiter = {
        let lock = waiters.lock(name);
        thread::spawn(move || {
            lock.try_lock_for(Duration::from_secs(30))
                .expect("try_lock_for")
                .map(|guard| {
                    drop(guard);
                    Instant::now()
                })
        })
    };
    assert!(eventually(Duration::from_secs(5), || {
        waiters.diagnostics().waiters == 1 && numsub(&server, channel) == 1
    }));

    // The server accepts the subscriber's reconnects and closes them at once
    // ("max number of clients reached"): a reconnect that never got a reply
    // must back off like a refused one, and must not keep waking the waiter.
    let mut admin = server.con();
    let connected = info_field(&mut admin, "clients", "connected_clients");
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg(connected - 1)
        .query(&mut admin)
        .expect("CONFIG SET maxclients");
    let rejected_before = info_field(&mut admin, "stats", "rejected_connections");
    let attempts_before = evalsha_calls(&mut admin);
    let killed: u64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut admin)
        .expect("CLIENT KILL");
    assert_eq!(killed, 1);
    thread::sleep(Duration::from_secs(1));
    let rejected = info_field(&mut admin, "stats", "rejected_connections") - rejected_before;
    let attempts = evalsha_calls(&mut admin) - attempts_before;
    eprintln!("in 1 s: {rejected} rejected reconnects, {attempts} acquire attempts");
    assert!(
        rejected <= 20,
        "the subscriber reconnected {rejected} times in 1 s"
    );
    assert!(
        attempts <= 20,
        "the waiter made {attempts} acquire attempts in 1 s"
    );

    // Let it back in: it resubscribes, and the release wakes the waiter.
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg(10_000)
        .query(&mut admin)
        .expect("CONFIG SET maxclients");
    assert!(
        eventually(Duration::from_secs(5), || numsub(&server, channel) == 1),
        "the subscriber never came back"
    );
    let released = Instant::now();
    guard.unlock().expect("holder unlock");
    let acquired = waiter.join().expect("waiter").expect("acquired");
    let handoff = acquired.saturating_duration_since(released);
    assert!(
        handoff < Duration::from_millis(200),
        "woken {handoff:?} after the release"
    );
}

fn evalsha_calls(con: &mut redis::Connection) -> u64 {
    command_calls(con, &["evalsha"])
}

/// A lock held by a "Java" owner (a foreign field) with a 30 s TTL, released
/// on demand with plain `DEL` + `PUBLISH 0`, as Redisson's unlock does.
struct ForeignHolder<'a> {
    server: &'a RedisServer,
    name: &'a str,
}

impl<'a> ForeignHolder<'a> {
    fn take(server: &'a RedisServer, name: &'a str) -> Self {
        let _: i64 = server.cmd(&["HSET", name, "7a1c0f3e-0000-4000-8000-00000000beef:1", "1"]);
        let _: i64 = server.cmd(&["PEXPIRE", name, "30000"]);
        ForeignHolder { server, name }
    }

    /// Releases the lock; the number of subscribers the message reached.
    fn release(&self) -> i64 {
        let _: i64 = self.server.cmd(&["DEL", self.name]);
        self.server.cmd(&[
            "PUBLISH",
            &format!("redisson_lock__channel:{{{}}}", self.name),
            "0",
        ])
    }
}

/// Starts a thread that waits (up to 20 s) for `lock` and returns how long it took.
fn wait_in_thread(lock: redisson_lock::Lock) -> thread::JoinHandle<Duration> {
    thread::spawn(move || {
        let began = Instant::now();
        let guard = lock
            .try_lock_for(Duration::from_secs(20))
            .expect("try_lock_for");
        assert!(guard.is_some(), "not acquired within 20 s");
        began.elapsed()
    })
}

#[test]
fn release_between_a_failed_attempt_and_the_subscription_is_not_missed() {
    let (server, proxy) = Proxy::with_server();
    let waiters = support::builder(proxy.url())
        .build()
        .expect("waiter client");
    let name = "gap-before-subscribe";
    let holder = ForeignHolder::take(&server, name);

    // The waiter's first attempt fails (TTL 30 s); its SUBSCRIBE is then held
    // in the proxy, and the lock is released right then: the unlock message
    // reaches nobody.
    proxy.arm("SUBSCRIBE", Fault::DelayRequest(Duration::from_millis(300)));
    let waiting = wait_in_thread(waiters.lock(name));
    assert!(
        eventually(Duration::from_secs(5), || proxy.injected() == 1),
        "the waiter never subscribed"
    );
    assert_eq!(holder.release(), 0, "the message must be missed");

    // The attempt made once the subscription is confirmed finds the lock free.
    let waited = waiting.join().expect("waiter");
    assert!(
        waited < Duration::from_secs(5),
        "a release before the subscription cost {waited:?} (holder TTL 30 s)"
    );
    assert!(eventually(Duration::from_secs(2), || {
        waiters.diagnostics().subscribed_channels == 0
    }));
}

#[test]
fn release_between_the_second_attempt_and_the_wait_is_not_missed() {
    let (server, proxy) = Proxy::with_server();
    let waiters = support::builder(proxy.url())
        .build()
        .expect("waiter client");
    let name = "gap-before-wait";
    let holder = ForeignHolder::take(&server, name);

    // Subscribe, then make the second attempt's reply (the holder's TTL)
    // late: the lock is released after Redis answered it but before the
    // waiter parks, so the message arrives while nobody waits on the channel.
    proxy.arm("SUBSCRIBE", Fault::DelayRequest(Duration::from_millis(100)));
    let waiting = wait_in_thread(waiters.lock(name));
    assert!(
        eventually(Duration::from_secs(5), || proxy.injected() == 1),
        "the waiter never subscribed"
    );
    proxy.arm(name, Fault::DelayReply(Duration::from_millis(500)));
    assert!(
        eventually(Duration::from_secs(5), || proxy.injected() == 2),
        "the second attempt never came"
    );
    assert_eq!(holder.release(), 1, "the waiter's subscription must get it");

    // The message left a permit: the wait returns at once and the next
    // attempt acquires.
    let waited = waiting.join().expect("waiter");
    assert!(
        waited < Duration::from_secs(5),
        "a release before the wait cost {waited:?} (holder TTL 30 s)"
    );
}
