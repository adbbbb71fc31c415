//! Interop with real Redisson, both ways: Java (the interop driver, see
//! `interop/java/README.md`) and this crate contend for the same locks on a
//! throwaway redis-server, and each side sees, waits for and is woken by the
//! other's holds.
//!
//! Every scenario runs once per Redisson version of the matrix (the newest
//! release, the pom's default, and 3.24.3, the oldest the crate supports):
//! `newest::<scenario>` and `redisson_3_24_3::<scenario>`, each with its own
//! redis-server and JVM so they can run in parallel.

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error, Lock, LockGuard, Reentrant, RequestId, UnlockOutcome};
use support::RedisServer;
use support::actor::{RustThread, last, take};
use support::assert_waiting;
use support::eventually;
use support::java::{JavaDriver, Redisson, for_each_redisson_version, start_with_watchdog};
use support::mutex::{Keys, java_and_rust_sections};
use support::state::{assert_held_elsewhere, channel, hgetall, numsub, pttl, state};

/// How soon a waiter must get a lock after its holder releases it: a
/// functional bound (woken by the unlock message instead of sleeping out a
/// TTL of 30 s), not a speed target.
const HANDOFF: Duration = Duration::from_millis(200);

/// Redisson's default watchdog timeout, the lease of a lock held without one.
const WATCHDOG_30S: Duration = Duration::from_secs(30);

for_each_redisson_version!(
    java_hold_excludes_rust_and_java_unlock_wakes_rust_waiter,
    rust_hold_excludes_java_and_rust_unlock_wakes_java_waiter,
    rust_reentrant_hold_is_one_lock_for_java_until_last_release,
    java_reentrant_hold_is_visible_to_rust,
    java_force_unlock_marks_rust_guard_lost_and_wakes_rust_waiter,
    watchdogs_of_both_sides_keep_short_leases_alive,
    java_and_rust_threads_exclude_each_other,
    unlock_replayed_with_same_request_id_spares_java_lock,
);

// ---------------------------------------------------------------------------
// Scenarios

/// Java `lock()` (watchdog) excludes Rust; Java's `unlock()` wakes a Rust
/// thread parked in `lock()` although the TTL still had ~30 s to run.
fn java_hold_excludes_rust_and_java_unlock_wakes_rust_waiter(redisson: Redisson) {
    let (server, java) = start_with_watchdog(redisson, WATCHDOG_30S);
    let client = server.client();
    let lock = client.lock("s1");

    java.ok("j", "lock s1");
    let java_field = java.owner_field("j");
    assert_eq!(hgetall(&server, "s1"), state(&[(&java_field, "1")]));
    assert_held_elsewhere(&lock);
    assert!(lock.is_locked().expect("is_locked"));

    let waiter = RustThread::spawn("s1-waiter");
    let acquired = waiter.start_lock(&lock);
    assert_waiting(&client, 1, Duration::from_secs(10));
    thread::sleep(Duration::from_millis(100));
    assert!(
        acquired.try_recv().is_err(),
        "Rust acquired while Java held the lock"
    );
    let pttl = pttl(&server, "s1");
    assert!(
        pttl > 20_000,
        "Java's lease should still run ~30 s, PTTL {pttl}"
    );

    let unlocked = Instant::now();
    java.ok("j", "unlock s1");
    java.rust_woken(&acquired, unlocked, HANDOFF, "Java unlock -> Rust acquire");

    let rust_field = waiter.owner_field(&client);
    assert_eq!(hgetall(&server, "s1"), state(&[(&rust_field, "1")]));
    java.assert_cannot_take("j", "s1");
    waiter.run(|held| held.clear());
    assert!(
        java.flag("j", "tryLockNow s1"),
        "Java cannot take the lock Rust released"
    );
    java.ok("j", "unlock s1");
}

/// A Rust hold (watchdog) excludes Java; the Rust unlock wakes a Java actor
/// parked in `lock()`.
fn rust_hold_excludes_java_and_rust_unlock_wakes_java_waiter(redisson: Redisson) {
    let (server, java) = start_with_watchdog(redisson, WATCHDOG_30S);
    let client = server.client();
    let holder = RustThread::spawn("s2-holder");
    holder.lock(&client.lock("s2"));
    let rust_field = holder.owner_field(&client);
    assert_eq!(hgetall(&server, "s2"), state(&[(&rust_field, "1")]));

    let reply = java.ok("j1", "tryLock s2 0");
    assert!(!reply.value::<bool>(0), "Java took a lock Rust holds");
    assert!(java.flag("j1", "isLocked s2"));
    assert!(!java.flag("j1", "isHeldByCurrentThread s2"));

    java.send("j2", "lock s2");
    assert!(
        eventually(Duration::from_secs(10), || numsub(&server, &channel("s2"))
            == 1),
        "the Java actor never subscribed to {}",
        channel("s2")
    );
    assert!(
        java.try_recv("j2", Duration::from_millis(100)).is_none(),
        "Java acquired while Rust held the lock"
    );

    let released = Instant::now();
    holder.unlock_last::<Reentrant>().expect("unlock");
    java.java_woken("j2", released, HANDOFF, "Rust unlock -> Java reply");

    let java_field = java.owner_field("j2");
    assert_eq!(hgetall(&server, "s2"), state(&[(&java_field, "1")]));
    java.ok("j2", "unlock s2");
    assert!(!client.lock("s2").is_locked().expect("is_locked"));
}

/// Three Rust holds by one thread are one lock for Java, with Redisson's
/// 30 s lease, free only after the third release.
fn rust_reentrant_hold_is_one_lock_for_java_until_last_release(redisson: Redisson) {
    let (server, java) = start_with_watchdog(redisson, WATCHDOG_30S);
    let client = server.client();
    let holder = RustThread::spawn("s3-holder");
    let lock = client.lock("s3");
    let (rust_field, count) = holder.run({
        let (client, lock) = (client.clone(), lock.clone());
        move |held| {
            for _ in 0..3 {
                held.push(Box::new(lock.lock().expect("lock")));
            }
            (client.owner_field(), lock.hold_count().expect("hold_count"))
        }
    });
    assert_eq!(count, 3);
    assert_eq!(hgetall(&server, "s3"), state(&[(&rust_field, "3")]));
    assert!(java.flag("j", "isLocked s3"));
    let ttl: i64 = java.ok("j", "remainTimeToLive s3").value(0);
    assert!(
        ttl > 25_000 && ttl <= 30_000,
        "Java sees a remaining lease of {ttl} ms"
    );
    assert_eq!(java.ok("j", "holdCount s3").value::<u64>(0), 0);

    for left in [2, 1] {
        let count = holder.run({
            let lock = lock.clone();
            move |held| {
                drop(held.pop());
                lock.hold_count().expect("hold_count")
            }
        });
        assert_eq!(count, left);
        java.assert_cannot_take("j", "s3");
        assert_eq!(
            hgetall(&server, "s3"),
            state(&[(&rust_field, &left.to_string())])
        );
    }
    holder.run(|held| drop(held.pop()));
    assert!(
        java.flag("j", "tryLockNow s3"),
        "the third Rust release did not free the lock"
    );
    assert_eq!(java.ok("j", "holdCount s3").value::<u64>(0), 1);
    java.ok("j", "unlock s3");
    assert!(!lock.is_locked().expect("is_locked"));
}

/// Two Java holds by one actor: Rust sees a lock held by someone else, with
/// the full lease, and cannot release it.
fn java_reentrant_hold_is_visible_to_rust(redisson: Redisson) {
    let (server, java) = start_with_watchdog(redisson, WATCHDOG_30S);
    let client = server.client();
    let lock = client.lock("s4");
    java.ok("j", "lock s4");
    java.ok("j", "lock s4");
    assert_eq!(java.ok("j", "holdCount s4").value::<u64>(0), 2);
    let java_field = java.owner_field("j");
    assert_eq!(hgetall(&server, "s4"), state(&[(&java_field, "2")]));

    assert!(lock.is_locked().expect("is_locked"));
    assert!(
        !lock
            .is_held_by_current_thread()
            .expect("is_held_by_current_thread")
    );
    assert_eq!(lock.hold_count().expect("hold_count"), 0);
    let ttl = lock.remaining_ttl().expect("remaining_ttl").expect("a TTL");
    assert!(
        ttl > Duration::from_secs(25) && ttl <= WATCHDOG_30S,
        "Rust sees a remaining lease of {ttl:?}"
    );
    assert!(lock.try_lock().expect("try_lock").is_none());
    match lock.unlock_with_request_id(&RequestId::new()) {
        Err(Error::NotHeld { .. }) => {}
        other => panic!("Rust released a Java hold: {other:?}"),
    }
    assert_eq!(hgetall(&server, "s4"), state(&[(&java_field, "2")]));

    java.ok("j", "unlock s4");
    assert!(
        lock.try_lock().expect("try_lock").is_none(),
        "one Java release freed two holds"
    );
    assert_eq!(hgetall(&server, "s4"), state(&[(&java_field, "1")]));
    java.ok("j", "unlock s4");
    let guard = lock
        .try_lock()
        .expect("try_lock")
        .expect("free after Java's last release");
    guard.unlock().expect("unlock");
}

/// Java's `forceUnlock` on a Rust hold: the Rust watchdog notices within a
/// renewal period and marks the guard lost, its unlock fails without touching
/// the new holder, and a Rust waiter is woken by the force unlock's message.
fn java_force_unlock_marks_rust_guard_lost_and_wakes_rust_waiter(redisson: Redisson) {
    let (server, java) = start_with_watchdog(redisson, WATCHDOG_30S);
    // Renewal every second: the field check finds the hold gone within ~1 s,
    // while the lease alone would only run out 2-3 s after the force unlock.
    let watchdog = Duration::from_secs(3);
    let client = server.watchdog_client(watchdog);
    let lock = client.lock("s5");
    let holder = RustThread::spawn("s5-holder");
    holder.lock(&lock);
    let waiter = RustThread::spawn("s5-waiter");
    let acquired = waiter.start_lock(&lock);
    assert_waiting(&client, 1, Duration::from_secs(10));

    let forced = Instant::now();
    assert!(
        java.flag("j", "forceUnlock s5"),
        "Java found no lock to force-unlock"
    );
    java.rust_woken(
        &acquired,
        forced,
        HANDOFF,
        "Java forceUnlock -> Rust acquire",
    );

    let lost_after = holder.run(move |held| {
        let guard = last::<LockGuard>(held);
        let lost = eventually(Duration::from_secs(10), || guard.is_lost());
        assert!(lost, "the guard never noticed the force unlock");
        forced.elapsed()
    });
    eprintln!(
        "{}: guard lost {lost_after:?} after the force unlock",
        java.version
    );
    let renewal_period = watchdog / 3;
    assert!(
        lost_after < renewal_period + Duration::from_millis(500),
        "the guard was marked lost {lost_after:?} after the force unlock, not within one renewal period"
    );
    let unlocked = holder.unlock_last::<Reentrant>();
    assert!(
        matches!(unlocked, Err(Error::Lost { .. } | Error::NotHeld { .. })),
        "unlocking a force-unlocked guard gave {unlocked:?}"
    );

    let waiter_field = waiter.owner_field(&client);
    assert_eq!(hgetall(&server, "s5"), state(&[(&waiter_field, "1")]));
    assert!(!java.flag("j", "tryLockNow s5"));
    waiter
        .unlock_last::<Reentrant>()
        .expect("the waiter's unlock");
    assert!(java.flag("j", "tryLockNow s5"));
    java.ok("j", "unlock s5");
}

/// With a 2 s watchdog timeout on both sides, each side keeps its lock for
/// more than five leases while the other keeps failing to take it, then
/// hands it over on release. Both directions run at the same time.
fn watchdogs_of_both_sides_keep_short_leases_alive(redisson: Redisson) {
    let lease = Duration::from_secs(2);
    let hold_for = lease * 5 + Duration::from_millis(500);
    let (server, java) = start_with_watchdog(redisson, lease);
    let client = server.watchdog_client(lease);

    java.ok("jh", "lock s6j");
    let java_field = java.owner_field("jh");
    let holder = RustThread::spawn("s6-holder");
    holder.lock(&client.lock("s6r"));
    let rust_field = holder.owner_field(&client);
    let started = Instant::now();
    let lease_ms = i64::try_from(lease.as_millis()).expect("ms");

    // Rust keeps trying the Java-held lock ...
    let rust_contender = {
        let lock = client.lock("s6j");
        let url = server.url();
        thread::spawn(move || {
            let mut con = redis::Client::open(url)
                .expect("url")
                .get_connection()
                .expect("con");
            let mut tries = 0;
            while started.elapsed() < hold_for {
                let got = lock
                    .try_lock_for(Duration::from_millis(200))
                    .expect("try_lock_for");
                assert!(
                    got.is_none(),
                    "Rust took s6j from Java after {:?}",
                    started.elapsed()
                );
                let pttl: i64 = redis::cmd("PTTL").arg("s6j").query(&mut con).expect("PTTL");
                assert!(
                    pttl > 0 && pttl <= lease_ms,
                    "s6j PTTL {pttl} after {:?}",
                    started.elapsed()
                );
                tries += 1;
            }
            tries
        })
    };
    // ... while Java keeps trying the Rust-held one.
    let mut java_tries = 0;
    while started.elapsed() < hold_for {
        let reply = java.ok("jc", "tryLock s6r 200");
        assert!(
            !reply.value::<bool>(0),
            "Java took s6r from Rust after {:?}",
            started.elapsed()
        );
        let pttl = pttl(&server, "s6r");
        assert!(
            pttl > 0 && pttl <= lease_ms,
            "s6r PTTL {pttl} after {:?}",
            started.elapsed()
        );
        java_tries += 1;
    }
    let rust_tries = rust_contender.join().expect("the Rust contender failed");
    eprintln!(
        "{}: held {:?} (lease {lease:?}); Rust tried {rust_tries}x, Java {java_tries}x",
        java.version,
        started.elapsed()
    );
    assert!(
        rust_tries >= 10 && java_tries >= 10,
        "too few tries: Rust {rust_tries}, Java {java_tries}"
    );
    // Still the first holders, renewed all along.
    assert_eq!(hgetall(&server, "s6j"), state(&[(&java_field, "1")]));
    assert_eq!(hgetall(&server, "s6r"), state(&[(&rust_field, "1")]));

    // Releases hand both locks over.
    java.ok("jh", "unlock s6j");
    let guard = client
        .lock("s6j")
        .try_lock_for(Duration::from_secs(5))
        .expect("try_lock_for")
        .expect("Rust gets s6j after Java's release");
    holder.run(|held| held.clear());
    let reply = java.ok("jc", "tryLock s6r 5000");
    assert!(
        reply.value::<bool>(0),
        "Java does not get s6r after Rust's release"
    );
    guard.unlock().expect("unlock");
    java.ok("jc", "unlock s6r");
}

/// Four Java actors and four Rust threads, 250 critical sections each, on one
/// lock: a non-atomic read-modify-write of a counter loses no update and no
/// two holders are ever inside at once.
fn java_and_rust_threads_exclude_each_other(redisson: Redisson) {
    const ITERATIONS: u64 = 250;
    let (server, java) = start_with_watchdog(redisson, WATCHDOG_30S);
    let client = server.client();
    let started = Instant::now();
    let keys = Keys {
        counter: "s7:counter",
        occupancy: "s7:occ",
    };
    let locks = (0..4).map(|_| client.lock("s7")).collect();
    java_and_rust_sections(&server, &java, ("s7", 4), locks, keys, ITERATIONS);
    eprintln!(
        "{}: 2000 mixed critical sections in {:?}",
        java.version,
        started.elapsed()
    );
    assert!(!client.lock("s7").is_locked().expect("is_locked"));
}

/// The unlock latch across languages. An unlock whose reply is lost has
/// still run; Java takes the lock (woken by its message); replaying the unlock
/// with the same request id returns the first outcome from the latch and
/// leaves Java's hold alone, whether the crate retries by itself or the
/// caller replays through `Lock::unlock_with_request_id`.
fn unlock_replayed_with_same_request_id_spares_java_lock(redisson: Redisson) {
    let (server, java) = start_with_watchdog(redisson, WATCHDOG_30S);
    let relay = ReplyCutter::start(server.port());
    let java_field = java.owner_field("j");

    // 1. The caller replays: no automatic retries.
    let client = Client::builder(relay.url())
        .unlock_retries(0, Duration::from_millis(500))
        .build()
        .expect("client");
    // Load the crate's scripts first, so that the reply to be lost is the
    // unlock's own and not the NOSCRIPT that would precede it.
    client
        .lock("s8-warm-up")
        .lock()
        .expect("lock")
        .unlock()
        .expect("unlock");
    // ... and the unlock with a request id, which guards do not use.
    let _: String = server.cmd(&["SCRIPT", "LOAD", include_str!("../lua/rlock_unlock.lua")]);
    let lock = client.lock("s8");
    let rust = RustThread::spawn("s8-rust");
    rust.lock(&lock);
    java_waits_for_s8(&java, &server);
    let id = RequestId::new();
    relay.cut_replies_to(id.as_str());
    let first = rust.run({
        let lock = lock.clone();
        let id = id.clone();
        move |_| lock.unlock_with_request_id(&id)
    });
    match &first {
        Err(e) if e.is_transient() => {}
        other => panic!("the unlock whose reply was cut returned {other:?}"),
    }
    relay.stop_cutting();
    let reply = java.recv("j");
    assert!(
        reply.ok,
        "Java was not woken by the unlock that ran: `{}`",
        reply.line
    );
    assert_eq!(hgetall(&server, "s8"), state(&[(&java_field, "1")]));
    assert_replay_spares_java(&rust, &lock, &id, (&java, &java_field), &server);
    // The guard whose hold went away that way reports it, and leaves Java alone.
    let dropped = rust.unlock_last::<Reentrant>();
    assert!(
        matches!(dropped, Err(Error::NotHeld { .. } | Error::Lost { .. })),
        "{dropped:?}"
    );
    assert!(
        java.flag("j", "isHeldByCurrentThread s8"),
        "a stale guard released Java's lock"
    );

    // 2. The reply was received, the guard dropped, and the id is replayed
    // later (after the background latch cleanup would have run): the latch of
    // a caller's id outlives the call, so the replay still returns the first
    // outcome and spares Java.
    java.ok("j", "unlock s8");
    let id = RequestId::new();
    let (first, dropped) = rust.run({
        let (lock, id) = (lock.clone(), id.clone());
        move |_| {
            let guard = lock.lock().expect("lock");
            let first = lock.unlock_with_request_id(&id);
            (first, guard.unlock())
        }
    });
    assert_eq!(first.expect("unlock"), UnlockOutcome::Released);
    assert!(
        matches!(dropped, Err(Error::NotHeld { .. } | Error::Lost { .. })),
        "{dropped:?}"
    );
    java.ok("j", "lock s8");
    thread::sleep(Duration::from_millis(300));
    let latch = format!("redisson_unlock_latch:{{s8}}:{id}");
    assert!(
        server.cmd::<bool>(&["EXISTS", &latch]),
        "the latch {latch} is gone"
    );
    assert_replay_spares_java(&rust, &lock, &id, (&java, &java_field), &server);
    java.ok("j", "unlock s8");

    // 3. A guard's release retries by itself: it finds the field its first
    // attempt removed (Java holds the lock by then) and reports the release.
    let client = Client::builder(relay.url())
        .unlock_retries(2, Duration::from_secs(1))
        .build()
        .expect("client");
    let lock = client.lock("s8");
    rust.lock(&lock);
    java_waits_for_s8(&java, &server);
    // Replies are lost until Java has the lock; the crate's next retry
    // (1 s later) then gets through.
    // A guard's release carries the channel as a key (and no latch).
    relay.cut_replies_to("redisson_lock__channel:{s8}");
    let unlocked = rust.start(|held| {
        let unlocked = take::<LockGuard>(held).unlock();
        (unlocked, Instant::now())
    });
    let reply = java.recv("j");
    assert!(reply.ok, "`{}`", reply.line);
    relay.stop_cutting();
    let (unlocked, returned) = unlocked
        .recv_timeout(Duration::from_secs(30))
        .expect("the Rust thread panicked or hung");
    unlocked.expect("the retried release should report the first attempt's release");
    assert!(reply.at < returned);
    assert!(
        java.flag("j", "isHeldByCurrentThread s8"),
        "the retried unlock released Java's lock"
    );
    assert_eq!(hgetall(&server, "s8"), state(&[(&java_field, "1")]));
    assert!(relay.cuts() >= 2, "{} replies lost", relay.cuts());
    java.ok("j", "unlock s8");
}

// ---------------------------------------------------------------------------
// Helpers

/// Java's actor `j` waits in `lock s8`, subscribed to the lock's channel.
fn java_waits_for_s8(java: &JavaDriver, server: &RedisServer) {
    java.send("j", "lock s8");
    let subscribed = eventually(Duration::from_secs(10), || {
        numsub(server, &channel("s8")) == 1
    });
    assert!(
        subscribed,
        "the Java actor never subscribed to s8's channel"
    );
}

/// Replays the unlock of `s8` with `id` from the Rust thread: it returns the
/// first outcome (released) from the latch and leaves Java's hold alone.
fn assert_replay_spares_java(
    rust: &RustThread,
    lock: &Lock,
    id: &RequestId,
    (java, java_field): (&JavaDriver, &str),
    server: &RedisServer,
) {
    let replay = rust.run({
        let (lock, id) = (lock.clone(), id.clone());
        move |_| lock.unlock_with_request_id(&id)
    });
    assert_eq!(replay.expect("replayed unlock"), UnlockOutcome::Released);
    assert!(
        java.flag("j", "isHeldByCurrentThread s8"),
        "the replay released Java's lock"
    );
    assert_eq!(hgetall(server, "s8"), state(&[(java_field, "1")]));
}

/// A TCP relay in front of redis-server that can lose replies: the request
/// reaches Redis and runs, but the client never hears back (its connection is
/// closed instead), which is what a lost reply looks like to a client.
struct ReplyCutter {
    port: u16,
    armed: Arc<Mutex<Option<String>>>,
    cuts: Arc<Mutex<u32>>,
    stop: Arc<AtomicBool>,
}

impl ReplyCutter {
    fn start(redis_port: u16) -> ReplyCutter {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let port = listener.local_addr().expect("addr").port();
        let armed: Arc<Mutex<Option<String>>> = Arc::default();
        let cuts: Arc<Mutex<u32>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (armed, cuts, stop) = (armed.clone(), cuts.clone(), stop.clone());
            thread::spawn(move || {
                for client in listener.incoming() {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let Ok(server) = TcpStream::connect(("127.0.0.1", redis_port)) else {
                        continue;
                    };
                    relay(client, server, armed.clone(), cuts.clone());
                }
            });
        }
        ReplyCutter {
            port,
            armed,
            cuts,
            stop,
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Loses the replies to every request containing `marker` from now on.
    fn cut_replies_to(&self, marker: &str) {
        *self.armed.lock().expect("relay") = Some(marker.to_owned());
    }

    /// Lets all replies through again.
    fn stop_cutting(&self) {
        *self.armed.lock().expect("relay") = None;
    }

    /// Replies lost so far.
    fn cuts(&self) -> u32 {
        *self.cuts.lock().expect("relay")
    }
}

impl Drop for ReplyCutter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(("127.0.0.1", self.port)); // unblocks accept
    }
}

/// Pumps bytes both ways; a request containing the armed marker gets its
/// connection closed as soon as the reply starts to come back.
fn relay(
    client: TcpStream,
    server: TcpStream,
    armed: Arc<Mutex<Option<String>>>,
    cuts: Arc<Mutex<u32>>,
) {
    let cut = Arc::new(AtomicBool::new(false));
    let (client_in, server_out) = (
        client.try_clone().expect("clone"),
        server.try_clone().expect("clone"),
    );
    let (server_in, client_out) = (server, client);
    {
        let cut = cut.clone();
        thread::spawn(move || {
            pump(client_in, &server_out, |request| {
                let armed = armed.lock().expect("relay");
                if let Some(marker) = armed.as_deref()
                    && String::from_utf8_lossy(request).contains(marker)
                {
                    cut.store(true, Ordering::Release);
                }
                true
            });
        });
    }
    thread::spawn(move || {
        pump(server_in.try_clone().expect("clone"), &client_out, |_| {
            let cutting = cut.load(Ordering::Acquire);
            if cutting {
                *cuts.lock().expect("relay") += 1;
            }
            !cutting
        });
        let _ = server_in.shutdown(Shutdown::Both);
    });
}

/// Copies `from` to `to` chunk by chunk until either side closes or
/// `pass(chunk)` says not to pass a chunk on; then shuts `to` down.
fn pump(mut from: TcpStream, mut to: &TcpStream, mut pass: impl FnMut(&[u8]) -> bool) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if !pass(&buf[..n]) || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
}
