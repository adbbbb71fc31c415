//! A lost lock other threads can act on (`valid_until`, `ensure_held`,
//! `LostSignal`), the client-wide event handler, and owned guards, against
//! a real redis-server.

mod support;

use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error, EventHandler, LockEvent, LostReason};
use support::proxy::Proxy;
use support::state::lock_twice;
use support::{RedisServer, eventually};

/// Every event the handler saw, as `(what, lock name, detail)`.
type Seen = Vec<(&'static str, String, String)>;

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Seen>>);

impl Recorder {
    fn push(&self, what: &'static str, lock: &LockEvent, detail: String) {
        let entry = (what, lock.name.to_string(), detail);
        self.0.lock().expect("events").push(entry);
    }

    fn of(&self, what: &str, name: &str) -> Vec<String> {
        let events = self.0.lock().expect("events");
        let matching = events.iter().filter(|(w, n, _)| *w == what && n == name);
        matching.map(|(_, _, detail)| detail.clone()).collect()
    }
}

impl EventHandler for Recorder {
    fn acquired(&self, lock: &LockEvent, reentered: bool) {
        self.push("acquired", lock, reentered.to_string());
    }
    fn released(&self, lock: &LockEvent, _held_for: Duration) {
        self.push("released", lock, String::new());
    }
    fn renewal_failed(&self, lock: &LockEvent, error: &Error) {
        self.push("renewal_failed", lock, error.to_string());
    }
    fn expiring(&self, lock: &LockEvent, _remaining: Duration) {
        self.push("expiring", lock, String::new());
    }
    fn lost(&self, lock: &LockEvent, reason: LostReason) {
        self.push("lost", lock, format!("{reason:?}"));
    }
}

fn recorded_client(url: &str, watchdog: Duration, events: &Recorder) -> Client {
    Client::builder(url)
        .watchdog_timeout(watchdog)
        .response_timeout(Duration::from_millis(200))
        .connect_timeout(Duration::from_millis(300))
        .event_handler(events.clone())
        .build()
        .expect("client")
}

#[test]
fn the_lost_signal_fires_before_a_rival_gets_a_lock_whose_renewals_are_cut_off() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let events = Recorder::default();
    let lease = Duration::from_millis(900);
    let holder = recorded_client(&proxy.url(), lease, &events);
    let rival = Client::open(server.url()).expect("rival");
    let guard = holder.lock("cut").lock().expect("lock");
    let signal = guard.lost_signal();
    let (lost_tx, lost_rx) = mpsc::channel();
    let waiter = signal.clone();
    thread::spawn(move || {
        let reason = waiter.wait();
        let _ = lost_tx.send((reason, Instant::now()));
    });
    thread::sleep(lease); // renewed a few times through the proxy
    assert!(guard.ensure_held().is_ok());

    drop(proxy); // every connection of the holder cut, reconnects refused
    // A lower bound of the key's expiry, by the server's own count.
    let asked = Instant::now();
    let pttl: i64 = server.cmd(&["PTTL", "cut"]);
    let expires_no_earlier = asked + Duration::from_millis(u64::try_from(pttl).expect("ttl"));
    let rival_got = loop {
        if let Some(guard) = rival.lock("cut").try_lock().expect("rival try_lock") {
            let at = Instant::now();
            drop(guard);
            break at;
        }
        assert!(asked.elapsed() < lease * 3, "the rival never got the lock");
        thread::sleep(Duration::from_millis(5));
    };
    let (reason, lost_at) = lost_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the signal fired");
    assert_eq!(reason, Some(LostReason::LeaseExpired));
    assert!(
        lost_at <= rival_got,
        "signalled after the rival got the lock"
    );
    // Redis counts in whole milliseconds: the expiry a renewal sets takes
    // the command's cached millisecond clock, and PTTL truncates what is
    // left; each may put the lower bound up to a millisecond early.
    assert!(
        signal.valid_until() <= expires_no_earlier + Duration::from_millis(3),
        "deadline {:?} after the key's expiry",
        signal
            .valid_until()
            .saturating_duration_since(expires_no_earlier)
    );
    assert!(signal.is_lost() && guard.is_lost());
    assert!(matches!(
        guard.ensure_held(),
        Err(Error::Lost {
            reason: LostReason::LeaseExpired,
            ..
        })
    ));
    let lost_channel = signal.receiver();
    assert_eq!(lost_channel.try_recv(), Ok(LostReason::LeaseExpired));
    // The handler saw the failing renewals, then "expiring", then the loss,
    // each once.
    assert!(eventually(Duration::from_secs(2), || {
        events.of("lost", "cut").len() == 1
    }));
    assert_eq!(events.of("lost", "cut"), vec!["LeaseExpired".to_owned()]);
    assert_eq!(events.of("renewal_failed", "cut").len(), 1);
    assert_eq!(events.of("expiring", "cut").len(), 1);
    assert_eq!(events.of("acquired", "cut"), vec!["false".to_owned()]);
    drop(guard);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(events.of("lost", "cut").len(), 1, "a second loss event");
    assert!(events.of("released", "cut").is_empty());
}

#[test]
fn a_paused_server_costs_the_holder_its_lock_by_its_deadline() {
    let server = RedisServer::start();
    let events = Recorder::default();
    let lease = Duration::from_millis(900);
    let holder = recorded_client(&server.url(), lease, &events);
    let guard = holder.lock("paused").lock().expect("lock");
    let signal = guard.lost_signal();
    thread::sleep(lease / 2);
    server.pause();
    let paused = Instant::now();
    let reason = signal.wait_timeout(lease * 3);
    let lost_after = paused.elapsed();
    server.resume();
    assert_eq!(reason, Some(LostReason::LeaseExpired));
    assert!(lost_after <= lease, "lost {lost_after:?} into the pause");
    assert!(signal.valid_until() <= Instant::now());
    assert!(eventually(Duration::from_secs(2), || events
        .of("lost", "paused")
        .len()
        == 1));
}

#[test]
fn a_released_lock_is_never_signalled_lost() {
    let server = RedisServer::start();
    let events = Recorder::default();
    let client = recorded_client(&server.url(), Duration::from_millis(600), &events);
    let lock = client.lock("kept");
    let (guard, again) = lock_twice(&lock);
    let signal = guard.lost_signal();
    let channel = signal.receiver();
    let before = Instant::now();
    assert!(guard.valid_until() > before);
    assert!(guard.valid_until() <= before + Duration::from_millis(600));
    assert_eq!(signal.wait_timeout(Duration::from_millis(50)), None);
    drop(again);
    guard.unlock().expect("unlock");
    assert_eq!(signal.wait(), None);
    assert!(channel.recv().is_err(), "disconnected, not lost");
    // Well past the deadline the last renewal set: still not lost.
    thread::sleep(Duration::from_millis(800));
    assert!(!signal.is_lost());
    assert_eq!(signal.reason(), None);
    assert!(eventually(Duration::from_secs(2), || events
        .of("released", "kept")
        .len()
        == 1));
    assert_eq!(events.of("acquired", "kept"), vec!["false", "true"]);
    assert!(events.of("lost", "kept").is_empty());
}

#[test]
fn a_force_unlock_by_this_client_is_signalled_at_once() {
    let server = RedisServer::start();
    let events = Recorder::default();
    let client = recorded_client(&server.url(), Duration::from_secs(30), &events);
    let guard = client.lock("forced").lock().expect("lock");
    let channel = guard.lost_signal().receiver();
    assert!(client.lock("forced").force_unlock().expect("force"));
    assert_eq!(
        channel.recv_timeout(Duration::from_secs(1)),
        Ok(LostReason::ForceUnlocked)
    );
    assert!(matches!(
        guard.ensure_held(),
        Err(Error::Lost {
            reason: LostReason::ForceUnlocked,
            ..
        })
    ));
}

/// A handler that panics on its first event and sleeps on every other.
struct Unruly {
    calls: Arc<Mutex<u32>>,
}

impl EventHandler for Unruly {
    fn acquired(&self, _lock: &LockEvent, _reentered: bool) {
        let first = {
            let mut calls = self.calls.lock().expect("calls");
            *calls += 1;
            *calls == 1
        };
        assert!(!first, "the first event panics");
        thread::sleep(Duration::from_millis(400));
    }
}

#[test]
fn a_slow_or_panicking_handler_delays_no_lock_call_and_no_renewal() {
    let server = RedisServer::start();
    let calls = Arc::new(Mutex::new(0));
    let lease = Duration::from_millis(300);
    let client = Client::builder(server.url())
        .watchdog_timeout(lease)
        .event_handler(Unruly {
            calls: Arc::clone(&calls),
        })
        .build()
        .expect("client");
    let started = Instant::now();
    let guards: Vec<_> = (0..4)
        .map(|i| client.lock(format!("slow-{i}")).lock().expect("lock"))
        .collect();
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "lock calls waited for the handler: {:?}",
        started.elapsed()
    );
    thread::sleep(lease * 4);
    for guard in &guards {
        assert!(!guard.is_lost(), "a slow handler cost a renewal");
    }
    drop(guards);
    // The panic was contained: later events still reach the handler.
    assert!(eventually(Duration::from_secs(3), || {
        *calls.lock().expect("calls") == 4
    }));
}

#[test]
fn an_owned_guard_is_taken_on_one_thread_and_released_on_another() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(600);
    let client = server.watchdog_client(lease);
    let other = Client::open(server.url()).expect("other client");
    let lock = client.lock("job");
    let guard = lock.lock_owned().expect("lock_owned");
    let field = guard.owner_field().to_owned();
    assert!(field.starts_with(&format!("{}:", client.id())));
    assert_ne!(field, client.owner_field(), "not this thread's field");
    let count: Option<i64> = server.cmd(&["HGET", "job", &field]);
    assert_eq!(count, Some(1));
    // Another owner waits: an owned hold never reenters, nor does this thread.
    assert!(lock.try_lock_owned().expect("second owned").is_none());
    assert!(lock.try_lock().expect("this thread").is_none());
    assert!(other.lock("job").try_lock().expect("other").is_none());
    // Renewed past the watchdog timeout by the client's watchdog.
    thread::sleep(lease * 2);
    assert!(!guard.is_lost());
    assert!(server.cmd::<i64>(&["PTTL", "job"]) > 0);
    let (waiting_tx, waiting_rx) = mpsc::channel();
    let waiter = {
        let lock = lock.clone();
        thread::spawn(move || {
            waiting_tx.send(()).expect("started");
            let got = lock.try_lock_owned_for(Duration::from_secs(5));
            got.expect("try_lock_owned_for")
                .map(|g| g.owner_field().to_owned())
        })
    };
    waiting_rx.recv().expect("waiter started");
    thread::spawn(move || guard.unlock())
        .join()
        .expect("releasing thread")
        .expect("unlock from another thread");
    let second = waiter.join().expect("waiter").expect("the waiter got it");
    assert_ne!(second, field);
    assert!(eventually(Duration::from_secs(2), || {
        !lock.is_locked().expect("is_locked")
    }));
}

#[test]
fn owned_guards_of_every_kind_exclude_and_release() {
    let (_server, client) = RedisServer::start_with_client();
    let fair = client.fair_lock("owned-fair").lock_owned().expect("fair");
    assert!(
        client
            .fair_lock("owned-fair")
            .try_lock()
            .expect("fair try")
            .is_none()
    );
    drop(fair);
    let rw = client.read_write_lock("owned-rw");
    let write = rw.write_lock().lock_owned().expect("write");
    assert!(write.owner_field().ends_with(":write"));
    assert!(rw.read_lock().try_lock_owned().expect("read try").is_none());
    drop(write);
    let read = rw.read_lock().lock_owned().expect("read");
    let read2 = rw.read_lock().lock_owned().expect("second reader");
    assert!(rw.write_lock().try_lock().expect("write try").is_none());
    drop((read, read2));
    let fenced = client.fenced_lock("owned-fenced");
    let first = fenced.lock_owned().expect("fenced").token();
    let second = fenced.lock_owned();
    // The same lock again, by a new owner: waits for the first to go.
    assert!(fenced.try_lock_owned().expect("fenced try").is_none());
    drop(second);
    assert!(fenced.lock_owned().expect("fenced again").token() > first);
    assert!(eventually(Duration::from_secs(2), || {
        !client.lock("owned-fenced").is_locked().expect("is_locked")
    }));
}

/// The first moment a rival on `server` takes `name`, polled every 5 ms
/// for at most `within`.
fn rival_gets(server: &RedisServer, name: &str, within: Duration) -> Instant {
    let rival = Client::open(server.url()).expect("rival");
    let started = Instant::now();
    loop {
        if let Some(guard) = rival.lock(name).try_lock().expect("rival try_lock") {
            let at = Instant::now();
            drop(guard);
            return at;
        }
        assert!(started.elapsed() < within, "the rival never got `{name}`");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Issue 29, item 1: a reentry with a shorter lease moves the deadline
/// earlier; the signal, its channel, its waiters and the events follow at
/// once (they fired at the first lease's end).
#[test]
fn the_lost_signal_follows_a_reentry_that_shortens_the_lease() {
    let server = RedisServer::start();
    let events = Recorder::default();
    let holder = recorded_client(&server.url(), Duration::from_secs(30), &events);
    let lock = holder.lock("shortened");
    let guard = lock
        .with_lease(Duration::from_secs(15))
        .lock()
        .expect("lock");
    let signal = guard.lost_signal();
    let channel = signal.receiver();
    let (lost_tx, lost_rx) = mpsc::channel();
    let waiter = signal.clone();
    thread::spawn(move || {
        let reason = waiter.wait();
        let _ = lost_tx.send((reason, Instant::now()));
    });
    thread::sleep(Duration::from_millis(50)); // the waiter sleeps till 15 s
    let sent = Instant::now();
    let again = lock
        .with_lease(Duration::from_secs(1))
        .lock()
        .expect("reentry");
    assert!(guard.valid_until() <= Instant::now() + Duration::from_secs(1));
    let rival_got = rival_gets(&server, "shortened", Duration::from_secs(5));
    let (reason, lost_at) = lost_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the waiter woke");
    assert_eq!(reason, Some(LostReason::LeaseExpired));
    // The promise is the deadline's (the waiter's own wake-up is the
    // scheduler's): no later than the key can have expired.
    assert!(
        signal.valid_until() <= rival_got,
        "a deadline after the rival got the lock"
    );
    // Woken at the new deadline, not the old one (15 s).
    assert!(
        lost_at < sent + Duration::from_secs(3),
        "woken {:?} after the reentry",
        lost_at - sent
    );
    assert_eq!(
        channel.recv_timeout(Duration::ZERO),
        Ok(LostReason::LeaseExpired)
    );
    assert!(eventually(Duration::from_secs(1), || {
        events.of("lost", "shortened") == vec!["LeaseExpired".to_owned()]
    }));
    assert_eq!(events.of("expiring", "shortened").len(), 1);
    drop(again);
    drop(guard);
}

/// Issue 29, item 2: a reentry held back past the response timeout, a
/// later reentry with a longer lease answered, then the held-back one
/// runs: the key expires by the short lease, and the hold knows it may.
#[test]
fn a_reentry_of_unknown_outcome_still_bounds_the_deadline_after_a_later_reply() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let holder = proxy.client_with_response_timeout(Duration::from_millis(300));
    let lock = holder.lock("held-back");
    let guard = lock
        .with_lease(Duration::from_secs(15))
        .lock()
        .expect("lock");
    let signal = guard.lost_signal();
    // 2717 ms: a lease whose digits mark the held-back command.
    let short = Duration::from_millis(2717);
    proxy.arm(
        "2717",
        support::proxy::Fault::DelayRequest(Duration::from_millis(1200)),
    );
    let unknown = lock.with_lease(short).lock();
    assert!(unknown.is_err(), "answered: {unknown:?}");
    assert!(!proxy.armed(), "the reentry never went out");
    let later = lock
        .with_lease(Duration::from_secs(20))
        .lock()
        .expect("a later reentry");
    let answered = Instant::now();
    assert!(
        signal.valid_until() <= answered + short,
        "the held-back reentry is forgotten: valid for {:?}",
        signal.valid_until().saturating_duration_since(answered)
    );
    // It reaches Redis now, after the later one: the key expires by it.
    assert!(eventually(Duration::from_secs(3), || {
        let pttl: i64 = server.cmd(&["PTTL", "held-back"]);
        pttl > 0 && pttl <= 2717
    }));
    let rival_got = rival_gets(&server, "held-back", Duration::from_secs(6));
    assert!(signal.is_lost(), "not lost after a rival got the lock");
    assert!(signal.valid_until() <= rival_got);
    assert_eq!(
        signal.wait_timeout(Duration::ZERO),
        Some(LostReason::LeaseExpired)
    );
    drop(later);
    drop(guard);
}

/// A loss that the unlock itself finds (the key deleted behind the
/// holder's back, no renewal in between) is the unlock's error, not an
/// event: no guard relies on the hold any more. Its lost signal still
/// hears of it, and says so in its `Debug`.
#[test]
fn a_loss_the_unlock_finds_is_its_error_and_raises_no_lost_event() {
    let server = RedisServer::start();
    let events = Recorder::default();
    let client = recorded_client(&server.url(), Duration::from_secs(30), &events);
    let guard = client.lock("deleted").lock().expect("lock");
    let signal = guard.lost_signal();
    assert_eq!(
        format!("{signal:?}"),
        r#"LostSignal { name: "deleted", lost: None }"#
    );
    let _: i64 = server.cmd(&["DEL", "deleted"]);
    let unlocked = guard.unlock();
    assert!(
        matches!(unlocked, Err(Error::NotHeld { .. })),
        "{unlocked:?}"
    );
    assert_eq!(signal.reason(), Some(LostReason::KeyGone));
    assert_eq!(
        format!("{signal:?}"),
        r#"LostSignal { name: "deleted", lost: Some(KeyGone) }"#
    );
    // Events come in order on the client's event thread: once a later
    // one is in, a "lost" would be too.
    client
        .lock("later")
        .lock()
        .expect("lock")
        .unlock()
        .expect("unlock");
    assert!(eventually(Duration::from_secs(5), || {
        !events.of("released", "later").is_empty()
    }));
    assert!(
        events.of("lost", "deleted").is_empty(),
        "{:?}",
        events.of("lost", "deleted")
    );
    assert_eq!(events.of("acquired", "deleted").len(), 1);
}
