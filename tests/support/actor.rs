//! [`RustThread`]: a Rust thread that keeps its guards (which cannot leave
//! it) between the steps of a test, the counterpart of a Java driver actor.
//! Guards of any lock type are kept, type-erased, until the test clears them.

use std::any::Any;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Kind, Lock, LockGuard};

/// The guards a [`RustThread`] holds, of any lock type.
pub type Held = Vec<Box<dyn Any>>;

type Job = Box<dyn FnOnce(&mut Held) + Send>;

/// A thread running the jobs a test sends it, in order.
pub struct RustThread {
    jobs: mpsc::Sender<Job>,
}

impl RustThread {
    pub fn spawn(name: &str) -> RustThread {
        let (jobs, queue) = mpsc::channel::<Job>();
        thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let mut held = Held::new();
                for job in queue {
                    job(&mut held);
                }
            })
            .expect("spawn");
        RustThread { jobs }
    }

    /// Runs `f` on the thread; its result arrives on the returned channel.
    pub fn start<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Held) -> R + Send + 'static,
    ) -> mpsc::Receiver<R> {
        let (tx, rx) = mpsc::channel();
        self.jobs
            .send(Box::new(move |held| {
                let _ = tx.send(f(held));
            }))
            .expect("the Rust thread is gone");
        rx
    }

    /// Runs `f` on the thread and waits for its result.
    pub fn run<R: Send + 'static>(&self, f: impl FnOnce(&mut Held) -> R + Send + 'static) -> R {
        self.start(f)
            .recv_timeout(Duration::from_secs(60))
            .expect("the Rust thread panicked or hung")
    }
}

impl RustThread {
    /// Takes a lock on the thread in the background (`acquire` returns the
    /// guard, which the thread keeps); the channel reports when it got it.
    pub fn acquire<G: 'static>(
        &self,
        acquire: impl FnOnce() -> G + Send + 'static,
    ) -> mpsc::Receiver<Instant> {
        self.start(move |held| {
            held.push(Box::new(acquire()));
            Instant::now()
        })
    }

    /// Takes a lock on the thread and keeps the guard `acquire` returns.
    pub fn hold<G: 'static>(&self, acquire: impl FnOnce() -> G + Send + 'static) {
        self.run(move |held| held.push(Box::new(acquire())));
    }

    /// Starts `lock.lock()` on the thread (the guard is kept); the channel
    /// reports when it got the lock.
    pub fn start_lock<K: Kind>(&self, lock: &Lock<K>) -> mpsc::Receiver<Instant> {
        let lock = lock.clone();
        self.acquire(move || lock.lock().expect("lock"))
    }

    /// Runs `lock.lock()` on the thread and keeps the guard.
    pub fn lock<K: Kind>(&self, lock: &Lock<K>) {
        let lock = lock.clone();
        self.hold(move || lock.lock().expect("lock"));
    }

    /// `client.owner_field()` as seen from the thread: the hash field of
    /// the thread's holds.
    pub fn owner_field(&self, client: &Client) -> String {
        let client = client.clone();
        self.run(move |_| client.owner_field())
    }

    /// Unlocks the thread's last guard, a `LockGuard<K>`: the outcome.
    pub fn unlock_last<K: Kind>(&self) -> redisson_lock::Result<()> {
        self.run(|held| take::<LockGuard<K>>(held).unlock())
    }
}

/// The last guard a thread keeps, taken out of `held`; panics unless it is
/// a `G`.
pub fn take<G: 'static>(held: &mut Held) -> G {
    let guard = held.pop().expect("the thread holds a guard");
    *guard.downcast::<G>().expect("a guard of the expected type")
}

/// The last guard a thread keeps, left in `held`; panics unless it is a `G`.
pub fn last<G: 'static>(held: &Held) -> &G {
    let guard = held.last().expect("the thread holds a guard");
    guard
        .downcast_ref::<G>()
        .expect("a guard of the expected type")
}

/// Waits `window` and asserts that the acquisition reported on `acquired`
/// has not happened: the waiter is kept out while the other side holds.
pub fn assert_kept_out(acquired: &mpsc::Receiver<Instant>, window: Duration) {
    thread::sleep(window);
    assert!(
        acquired.try_recv().is_err(),
        "the Rust thread acquired while the other side held the lock"
    );
}
