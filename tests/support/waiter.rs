//! A thread that waits for a lock, the way most wake-up tests need one: it
//! takes the lock, reports when it got it, and releases it at once.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Kind, Lock, LockGuard};

/// A thread waiting in `lock()` (or `try_lock_for`) for one lock.
pub struct Waiter {
    acquired: mpsc::Receiver<Instant>,
    thread: thread::JoinHandle<()>,
}

impl Waiter {
    /// Starts a thread that waits in `lock.lock()`, reports when it got the
    /// lock, then unlocks it.
    pub fn lock<K: Kind>(lock: Lock<K>) -> Waiter {
        Waiter::spawn(move || lock.lock().expect("the waiter's lock"))
    }

    /// Starts a thread that waits up to `wait` in `lock.try_lock_for` and
    /// must get the lock; it reports when, then unlocks it.
    pub fn try_lock_for<K: Kind>(lock: Lock<K>, wait: Duration) -> Waiter {
        Waiter::spawn(move || {
            lock.try_lock_for(wait)
                .expect("try_lock_for")
                .expect("the waiter gets the lock")
        })
    }

    fn spawn<K: Kind>(acquire: impl FnOnce() -> LockGuard<K> + Send + 'static) -> Waiter {
        let (tx, acquired) = mpsc::channel();
        let thread = thread::spawn(move || {
            let guard = acquire();
            tx.send(Instant::now()).expect("report the acquisition");
            guard.unlock().expect("the waiter's unlock");
        });
        Waiter { acquired, thread }
    }

    /// Whether the waiter has got the lock by now.
    pub fn has_acquired(&self) -> bool {
        self.acquired.try_recv().is_ok()
    }

    /// Waits up to `within` for the acquisition and asserts it came less
    /// than `bound` after `since` (the release that should wake the waiter);
    /// joins the thread and returns the delay.
    pub fn woken_within(self, since: Instant, bound: Duration, within: Duration) -> Duration {
        let at = self
            .acquired
            .recv_timeout(within)
            .expect("the waiter was woken and got the lock");
        self.thread.join().expect("the waiter thread");
        let delay = at.saturating_duration_since(since);
        assert!(
            delay < bound,
            "the waiter got the lock {delay:?} after the release, not within {bound:?}"
        );
        delay
    }
}

/// Waits up to `within` for a waiter that reports on `got` when it was
/// served (`None`: it gave up), and asserts it was served less than `bound`
/// after `since` (the release that should serve it). Returns the delay.
pub fn served_within(
    got: &mpsc::Receiver<Option<Instant>>,
    since: Instant,
    bound: Duration,
    within: Duration,
) -> Duration {
    let at = got
        .recv_timeout(within)
        .expect("the waiter was served")
        .expect("the waiter got the lock");
    let took = at.saturating_duration_since(since);
    assert!(took < bound, "served {took:?} after the release");
    took
}

/// A thread of `client` that waits for the fair lock `name` with `lock()`
/// (or `try_lock_for(wait)`), holds it `hold`, and reports its owner field
/// at once, then when it got the lock (`None`: gave up).
pub fn fair_waiter(
    client: &Client,
    name: &str,
    wait: Option<Duration>,
    hold: Duration,
) -> (String, mpsc::Receiver<Option<Instant>>) {
    let (field_tx, field_rx) = mpsc::channel();
    let (got_tx, got_rx) = mpsc::channel();
    let (client, lock) = (client.clone(), client.fair_lock(name));
    thread::spawn(move || {
        field_tx.send(client.owner_field()).expect("field");
        let guard = match wait {
            Some(wait) => lock.try_lock_for(wait).expect("try_lock_for"),
            None => Some(lock.lock().expect("lock")),
        };
        let _ = got_tx.send(guard.as_ref().map(|_| Instant::now()));
        if let Some(guard) = guard {
            thread::sleep(hold);
            guard.unlock().expect("unlock");
        }
    });
    (field_rx.recv().expect("field"), got_rx)
}
