//! The same named cases, stamped on every lock type of the family by
//! `conformance!` (the way crossbeam-channel repeats its tests per flavour).
//! Each type's own behaviour is tested in its own file; this is what they all
//! share: exclusion, reentry or its refusal, prompt wake-ups, the wait budget,
//! the watchdog, force unlock, a lost acquire reply, bad input.
//!
//! One `redis-server` per test binary would be cheaper, but every case here
//! needs its own clean server (key counts, proxies, PTTLs), and the cases run
//! in parallel; each starts its own.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error, Kind, Lock, LostReason, Read};
use support::RedisServer;
use support::proxy::Proxy;
use support::state::assert_no_phantom_hold;
use support::waiter::Waiter;

/// How a type's waiters are woken: by a message, or by a spin backoff that
/// may sleep up to its cap before it notices a release.
#[derive(Clone, Copy)]
pub enum Wake {
    Message,
    Spin { cap: Duration },
}

/// What the shared cases need to know of a type.
pub struct Spec<K: Kind> {
    pub make: fn(&Client, &str) -> Lock<K>,
    pub reentrant: bool,
    pub wake: Wake,
}

fn client(server: &RedisServer) -> Client {
    server.client()
}

/// Threads of two clients increment a counter in a critical section that is
/// not atomic, and count how many are inside at once.
pub fn exclusion_under_contention_between_clients<K: Kind>(spec: Spec<K>) {
    let server = RedisServer::start();
    let clients = [client(&server), client(&server)];
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let counter = Arc::new(AtomicI64::new(0));
    let mut threads = Vec::new();
    for client in &clients {
        for _ in 0..3 {
            let lock = (spec.make)(client, "contended");
            let (inside, overlaps, counter) = (inside.clone(), overlaps.clone(), counter.clone());
            threads.push(thread::spawn(move || {
                for _ in 0..15 {
                    let guard = lock.lock().expect("lock");
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    let seen = counter.load(Ordering::SeqCst);
                    thread::sleep(Duration::from_micros(300));
                    counter.store(seen + 1, Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().expect("unlock");
                }
            }));
        }
    }
    for thread in threads {
        thread.join().expect("worker");
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    assert_eq!(counter.load(Ordering::SeqCst), 6 * 15, "lost updates");
    let lock = (spec.make)(&clients[0], "contended");
    assert!(!lock.is_locked().expect("is_locked"));
}

/// A second acquisition by the holder: one more hold, or a typed refusal at
/// once for a non-reentrant type.
pub fn reentry_or_its_refusal<K: Kind>(spec: Spec<K>) {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = (spec.make)(&client, "again");
    let first = lock.lock().expect("lock");
    let started = Instant::now();
    let second = lock.try_lock_for(Duration::from_secs(5));
    if spec.reentrant {
        let second = second.expect("reentry").expect("reentry granted");
        assert_eq!(lock.hold_count().expect("count"), 2);
        drop(second);
        assert_eq!(lock.hold_count().expect("count"), 1);
    } else {
        assert!(
            matches!(second, Err(Error::NotReentrant { ref name }) if name == "again"),
            "{second:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "refused at once"
        );
        assert_eq!(lock.hold_count().expect("count"), 1);
    }
    first.unlock().expect("unlock");
    assert!(!lock.is_locked().expect("is_locked"));
}

/// A waiter on another client gets the lock soon after the release: within
/// 200 ms when woken by a message, within its backoff cap when spinning.
pub fn waiter_woken_promptly_by_a_release<K: Kind>(spec: Spec<K>) {
    let server = RedisServer::start();
    let holder = client(&server);
    let waiter = client(&server);
    let guard = (spec.make)(&holder, "woken").lock().expect("lock");
    let lock = (spec.make)(&waiter, "woken");
    let waiter = Waiter::try_lock_for(lock, Duration::from_secs(20));
    // Long enough for the waiter to park (or to back off to its cap).
    thread::sleep(Duration::from_millis(600));
    let bound = match spec.wake {
        Wake::Message => Duration::from_millis(200),
        Wake::Spin { cap } => cap + Duration::from_millis(100),
    };
    let released = Instant::now();
    guard.unlock().expect("unlock");
    waiter.woken_within(released, bound, Duration::from_secs(30));
}

/// `lock`'s `try_lock_for` on a lock held elsewhere gives up when its 400 ms
/// budget is spent, not before, not long after; `try_lock` gives up at once.
fn assert_gives_up_after_its_budget<K: Kind>(lock: &Lock<K>, acquired: &str) {
    let budget = Duration::from_millis(400);
    let started = Instant::now();
    let got = lock.try_lock_for(budget).expect("try_lock_for");
    let took = started.elapsed();
    assert!(got.is_none(), "{acquired}");
    assert!(took >= budget, "gave up after {took:?}");
    assert!(
        took < budget + Duration::from_secs(1),
        "gave up after {took:?}"
    );
    assert!(lock.try_lock().expect("try_lock").is_none());
}

/// `try_lock_for` gives up when its budget is spent, not before, not long after.
pub fn try_lock_for_keeps_to_its_budget<K: Kind>(spec: Spec<K>) {
    let server = RedisServer::start();
    let holder = client(&server);
    let other = client(&server);
    let guard = (spec.make)(&holder, "budget").lock().expect("lock");
    let lock = (spec.make)(&other, "budget");
    assert_gives_up_after_its_budget(&lock, "acquired a held lock");
    guard.unlock().expect("unlock");
}

/// Held without an explicit lease past several leases: renewed.
pub fn watchdog_keeps_a_short_lease_alive<K: Kind>(spec: Spec<K>) {
    let server = RedisServer::start();
    let lease = Duration::from_millis(600);
    let client = server.watchdog_client(lease);
    let lock = (spec.make)(&client, "renewed");
    let guard = lock.lock().expect("lock");
    thread::sleep(lease * 4);
    assert!(!guard.is_lost(), "lost despite the watchdog");
    assert!(lock.is_locked().expect("is_locked"));
    guard.unlock().expect("unlock");
    assert!(!lock.is_locked().expect("is_locked"));
}

/// Force unlock deletes the lock and marks this client's holder lost.
pub fn force_unlock_marks_the_holder_lost<K: Kind>(spec: Spec<K>) {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = (spec.make)(&client, "forced");
    let guard = lock.lock().expect("lock");
    assert!(lock.force_unlock().expect("force_unlock"));
    assert!(!lock.is_locked().expect("is_locked"));
    assert_eq!(guard.lost_reason(), Some(LostReason::ForceUnlocked));
    assert!(matches!(guard.unlock(), Err(Error::Lost { .. })));
    assert!(!lock.force_unlock().expect("force_unlock of nothing"));
}

/// An acquire whose reply is lost with its connection is sent again and
/// counts once: the last unlock frees the lock.
pub fn a_lost_acquire_reply_counts_once<K: Kind>(spec: Spec<K>) {
    let (_server, proxy, client) = Proxy::with_client();
    let lock = (spec.make)(&client, "lost-reply");
    // Load the scripts first, so that the dropped reply is the acquire's.
    lock.lock()
        .expect("warm-up")
        .unlock()
        .expect("warm-up unlock");
    let guard = proxy.losing_the_reply_to("lost-reply", || lock.lock().expect("lock"));
    assert_eq!(lock.hold_count().expect("count"), 1);
    guard.unlock().expect("unlock");
    assert_no_phantom_hold(&lock);
}

/// Bad input is a typed error, never a panic.
pub fn bad_input_is_a_typed_error<K: Kind>(spec: Spec<K>) {
    let server = RedisServer::start();
    let client = client(&server);
    let empty = (spec.make)(&client, "");
    assert!(matches!(empty.lock(), Err(Error::InvalidArgument(_))));
    assert!(matches!(empty.is_locked(), Err(Error::InvalidArgument(_))));
    let lock = (spec.make)(&client, "bad-lease");
    let zero = lock.with_lease(Duration::ZERO);
    assert!(matches!(zero.try_lock(), Err(Error::InvalidArgument(_))));
    let huge = lock.with_lease(Duration::MAX);
    assert!(matches!(huge.lock(), Err(Error::InvalidArgument(_))));
}

/// Readers of two clients and writers of both share a section: a writer is
/// always alone in it, and several readers are inside at once at some point.
pub fn readers_share_and_exclude_writers_under_contention(spec: Spec<Read>) {
    let server = RedisServer::start();
    let clients = [client(&server), client(&server)];
    let readers = Arc::new(AtomicUsize::new(0));
    let writers = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let shared = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for client in &clients {
        for _ in 0..3 {
            let lock = (spec.make)(client, "contended");
            let (readers, writers, overlaps, shared) = (
                readers.clone(),
                writers.clone(),
                overlaps.clone(),
                shared.clone(),
            );
            threads.push(thread::spawn(move || {
                for _ in 0..15 {
                    let guard = lock.lock().expect("read lock");
                    if readers.fetch_add(1, Ordering::SeqCst) > 0 {
                        shared.fetch_add(1, Ordering::SeqCst);
                    }
                    if writers.load(Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    thread::sleep(Duration::from_millis(2));
                    readers.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().expect("read unlock");
                }
            }));
        }
        let write = client.read_write_lock("contended").write_lock();
        let (readers, writers, overlaps) = (readers.clone(), writers.clone(), overlaps.clone());
        threads.push(thread::spawn(move || {
            for _ in 0..10 {
                let guard = write.lock().expect("write lock");
                if writers.fetch_add(1, Ordering::SeqCst) != 0
                    || readers.load(Ordering::SeqCst) != 0
                {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                thread::sleep(Duration::from_micros(300));
                writers.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().expect("write unlock");
            }
        }));
    }
    for thread in threads {
        thread.join().expect("worker");
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "a writer was not alone");
    assert!(shared.load(Ordering::SeqCst) > 0, "readers never shared");
    let lock = (spec.make)(&clients[0], "contended");
    assert!(!lock.is_locked().expect("is_locked"));
}

/// A reader on another client gets the lock within 200 ms of a writer's
/// release (message `1`).
pub fn reader_woken_promptly_by_a_write_release(spec: Spec<Read>) {
    let server = RedisServer::start();
    let holder = client(&server);
    let waiter = client(&server);
    let guard = holder
        .read_write_lock("woken")
        .write_lock()
        .lock()
        .expect("write lock");
    let lock = (spec.make)(&waiter, "woken");
    let waiter = Waiter::try_lock_for(lock, Duration::from_secs(20));
    thread::sleep(Duration::from_millis(600));
    let released = Instant::now();
    guard.unlock().expect("unlock");
    waiter.woken_within(
        released,
        Duration::from_millis(200),
        Duration::from_secs(30),
    );
}

/// A reader's `try_lock_for` against a writer gives up when its budget is
/// spent, not before, not long after.
pub fn read_try_lock_for_keeps_to_its_budget_against_a_writer(spec: Spec<Read>) {
    let server = RedisServer::start();
    let holder = client(&server);
    let other = client(&server);
    let guard = holder
        .read_write_lock("budget")
        .write_lock()
        .lock()
        .expect("write lock");
    let lock = (spec.make)(&other, "budget");
    assert_gives_up_after_its_budget(&lock, "read a write-locked lock");
    guard.unlock().expect("unlock");
}

/// Stamps every shared case on one type: `conformance!(module, spec)`.
/// A type whose holders share (the read lock) passes `readers_share`: its
/// exclusion, wake-up and budget cases are stamped against a writer instead.
macro_rules! conformance {
    ($module:ident, $spec:expr) => {
        conformance!(
            @stamp $module, $spec,
            exclusion_under_contention_between_clients,
            waiter_woken_promptly_by_a_release,
            try_lock_for_keeps_to_its_budget
        );
    };
    ($module:ident, $spec:expr, readers_share) => {
        conformance!(
            @stamp $module, $spec,
            readers_share_and_exclude_writers_under_contention,
            reader_woken_promptly_by_a_write_release,
            read_try_lock_for_keeps_to_its_budget_against_a_writer
        );
    };
    (@stamp $module:ident, $spec:expr, $exclusion:ident, $woken:ident, $budget:ident) => {
        mod $module {
            use super::*;

            #[test]
            fn exclusion_under_contention_between_clients() {
                super::$exclusion($spec);
            }

            #[test]
            fn reentry_or_its_refusal() {
                super::reentry_or_its_refusal($spec);
            }

            #[test]
            fn waiter_woken_promptly_by_a_release() {
                super::$woken($spec);
            }

            #[test]
            fn try_lock_for_keeps_to_its_budget() {
                super::$budget($spec);
            }

            #[test]
            fn watchdog_keeps_a_short_lease_alive() {
                super::watchdog_keeps_a_short_lease_alive($spec);
            }

            #[test]
            fn force_unlock_marks_the_holder_lost() {
                super::force_unlock_marks_the_holder_lost($spec);
            }

            #[test]
            fn a_lost_acquire_reply_counts_once() {
                super::a_lost_acquire_reply_counts_once($spec);
            }

            #[test]
            fn bad_input_is_a_typed_error() {
                super::bad_input_is_a_typed_error($spec);
            }
        }
    };
}

conformance!(
    reentrant,
    Spec {
        make: |c, n| c.lock(n),
        reentrant: true,
        wake: Wake::Message
    }
);
conformance!(
    fenced,
    Spec {
        make: |c, n| c.fenced_lock(n),
        reentrant: true,
        wake: Wake::Message
    }
);
conformance!(
    fair,
    Spec {
        make: |c, n| c.fair_lock(n),
        reentrant: true,
        wake: Wake::Message
    }
);
conformance!(
    write,
    Spec {
        make: |c, n| c.read_write_lock(n).write_lock(),
        reentrant: true,
        wake: Wake::Message
    }
);
conformance!(
    non_reentrant_fair,
    Spec {
        make: |c, n| c.non_reentrant_fair_lock(n),
        reentrant: false,
        wake: Wake::Message
    }
);
conformance!(
    spin,
    Spec {
        make: |c, n| c.spin_lock(n),
        reentrant: true,
        wake: Wake::Spin {
            cap: Duration::from_millis(128)
        }
    }
);
conformance!(
    non_reentrant,
    Spec {
        make: |c, n| c.non_reentrant_lock(n),
        reentrant: false,
        wake: Wake::Message
    }
);
conformance!(
    read,
    Spec {
        make: |c, n| c.read_write_lock(n).read_lock(),
        reentrant: true,
        wake: Wake::Message
    },
    readers_share
);
