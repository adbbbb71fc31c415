//! The synchronizers' (semaphores', latches') waiters, the way their
//! wake-up tests need them: a thread that blocks, reports when it got
//! through, and the check that a release or count-down woke it promptly.

use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redisson_lock::{CountDownLatch, Semaphore};

/// Runs `wait` (a blocking acquire, a latch's `wait()`) on a new thread,
/// which reports on the receiver when `wait` returned, then hands its
/// result to whoever joins it.
pub fn spawn_reporting<R: Send + 'static>(
    wait: impl FnOnce() -> R + Send + 'static,
) -> (mpsc::Receiver<Instant>, JoinHandle<R>) {
    let (tx, rx) = mpsc::channel();
    let join = thread::spawn(move || {
        let result = wait();
        let _ = tx.send(Instant::now());
        result
    });
    (rx, join)
}

/// A thread waiting in `sem.acquire(permits)`; it reports when it got the
/// permits and keeps them (`forget`).
pub fn permit_waiter(sem: &Semaphore, permits: u32) -> mpsc::Receiver<Instant> {
    let sem = sem.clone();
    spawn_reporting(move || {
        sem.acquire(permits).expect("the waiter's acquire").forget();
    })
    .0
}

/// A thread blocked in `latch.wait()`; it reports when it returned.
pub fn latch_waiter(latch: &CountDownLatch) -> mpsc::Receiver<Instant> {
    let latch = latch.clone();
    spawn_reporting(move || latch.wait().expect("wait")).0
}

/// Waits up to 30 s for the waiter reporting on `rx` and asserts it got
/// through less than `bound` after `since` (the release or count-down that
/// should wake it); `what` names it in a failure. Returns the delay.
pub fn woken_within(
    rx: &mpsc::Receiver<Instant>,
    since: Instant,
    bound: Duration,
    what: &str,
) -> Duration {
    let at = rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{what}: the waiter was never woken"));
    let took = at.saturating_duration_since(since);
    assert!(
        took < bound,
        "{what}: woken after {took:?}, not within {bound:?}"
    );
    took
}

/// Asserts that a wait begun at `started` took (until now) `ms`: no fewer
/// milliseconds than its start, fewer than its end; returns how long.
pub fn assert_took_ms(started: Instant, ms: std::ops::Range<u64>) -> Duration {
    let took = started.elapsed();
    let (at_least, under) = (
        Duration::from_millis(ms.start),
        Duration::from_millis(ms.end),
    );
    assert!(
        took >= at_least && took < under,
        "took {took:?}, not within [{at_least:?}, {under:?})"
    );
    took
}
