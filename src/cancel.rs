//! [`CancelToken`], which ends blocking waits from another thread, and
//! [`Stop`], what one waiting thread watches: its handle's token, if any,
//! and its client's closing ([`crate::Client::shutdown`]).
//!
//! A waiting thread never polls a token: before it parks it registers a
//! wake-up (unparking itself, or notifying the parking lot's entry it
//! sleeps on) with every token it watches, and checks the tokens under the
//! same mutex its wake-up takes, so a cancel between the check and the
//! park still wakes it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::{Error, Result};

/// A wake-up a waiting thread registered: called once when the token is
/// cancelled, from the cancelling thread.
pub(crate) type Waker = Arc<dyn Fn() + Send + Sync>;

/// A flag that ends the blocking waits watching it: a lock's `lock()` and
/// `try_lock_for`, a semaphore's `acquire`, a latch's `wait`, through a
/// handle made with `with_cancel` (e.g. [`crate::Lock::with_cancel`]).
///
/// Cancelling is one-way and for good: every wait watching the token
/// returns [`Error::Cancelled`] promptly (the waiting thread is woken the
/// way an unlock message wakes it, not by polling), and every later wait
/// through a handle with it returns [`Error::Cancelled`] at once, without
/// a round trip. A wait that gives up this way holds nothing: an
/// acquisition whose reply raced the cancel is released, and a fair lock's
/// waiter leaves the queue. Operations that do not wait (`try_lock`, a
/// release) ignore the token.
///
/// `Clone + Send + Sync`; clones are the same token. Creating, cloning
/// and checking one cost no I/O; [`cancel`](CancelToken::cancel) wakes the
/// threads waiting on it and blocks only for the parking lot's mutexes.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redisson_lock::{CancelToken, Client, Error};
///
/// # fn main() -> redisson_lock::Result<()> {
/// let client = Client::open("redis://127.0.0.1:6379")?;
/// let token = CancelToken::new();
/// let lock = client.lock("orders").with_cancel(&token);
/// let canceller = token.clone();
/// std::thread::spawn(move || {
///     std::thread::sleep(Duration::from_secs(1));
///     canceller.cancel();
/// });
/// match lock.lock() {
///     Ok(_guard) => { /* critical section */ }
///     Err(Error::Cancelled) => { /* gave up, holds nothing */ }
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    next: AtomicU64,
    /// The wake-ups of the threads waiting now, by registration number.
    wakers: Mutex<HashMap<u64, Waker>>,
}

impl CancelToken {
    /// A token not cancelled yet. No I/O.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Cancels the token, for good: wakes every wait watching it (each
    /// returns [`Error::Cancelled`]). Calling it again does nothing. No
    /// I/O; blocks only for the mutexes of the parking lot entries its
    /// waiters sleep on.
    pub fn cancel(&self) {
        if self.inner.cancelled.swap(true, Ordering::AcqRel) {
            return;
        }
        let wakers: Vec<Waker> = self.inner.wakers.lock().drain().map(|(_, w)| w).collect();
        for wake in wakers {
            wake();
        }
    }

    /// Whether [`cancel`](CancelToken::cancel) was called on it or a
    /// clone. One atomic load.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// Registers `wake`, to be called on cancel, until the returned value
    /// is dropped. The caller checks [`is_cancelled`](Self::is_cancelled)
    /// after registering (a cancel before it finds the flag set, one
    /// after it calls `wake`).
    pub(crate) fn register(&self, wake: Waker) -> Registration {
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed);
        self.inner.wakers.lock().insert(id, wake);
        Registration {
            token: self.clone(),
            id,
        }
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// A wake-up registered with a token; dropping it unregisters it.
pub(crate) struct Registration {
    token: CancelToken,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.token.inner.wakers.lock().remove(&self.id);
    }
}

/// What one wait watches: its client's closing (reported as
/// [`Error::Closed`], first) and its handle's token (as
/// [`Error::Cancelled`]).
#[derive(Clone, Copy)]
pub(crate) struct Stop<'a> {
    closed: &'a CancelToken,
    cancel: Option<&'a CancelToken>,
}

impl<'a> Stop<'a> {
    /// A wait of the client whose closing is `closed`, through a handle
    /// with `cancel`.
    pub fn new(closed: &'a CancelToken, cancel: Option<&'a CancelToken>) -> Stop<'a> {
        Stop { closed, cancel }
    }

    /// Whether the wait must end.
    pub fn is_set(&self) -> bool {
        self.closed.is_cancelled() || self.cancel.is_some_and(CancelToken::is_cancelled)
    }

    /// `Err` when the wait must end: [`Error::Closed`] or
    /// [`Error::Cancelled`].
    pub fn check(&self) -> Result<()> {
        if self.closed.is_cancelled() {
            return Err(Error::Closed);
        }
        if self.cancel.is_some_and(CancelToken::is_cancelled) {
            return Err(Error::Cancelled);
        }
        Ok(())
    }

    /// Registers `wake` with every token watched, until the returned
    /// value is dropped.
    pub fn on_stop(&self, wake: Waker) -> Vec<Registration> {
        let mut registered = vec![self.closed.register(Arc::clone(&wake))];
        if let Some(cancel) = self.cancel {
            registered.push(cancel.register(wake));
        }
        registered
    }

    /// Sleeps `wait`, or less if the wait must end ([`Stop::check`]'s
    /// error then). Parks the thread; a cancel unparks it.
    pub fn sleep(&self, wait: Duration) -> Result<()> {
        let thread = std::thread::current();
        let _registered = self.on_stop(Arc::new(move || thread.unpark()));
        let until = Instant::now().checked_add(wait);
        loop {
            self.check()?;
            let left = match until {
                Some(until) => until.saturating_duration_since(Instant::now()),
                None => Duration::MAX,
            };
            if left.is_zero() {
                return Ok(());
            }
            std::thread::park_timeout(left);
        }
    }
}

/// The end of a wait that has no deadline (`lock()`, `acquire(n)`,
/// `wait()`): `wait` is one whole wait without one, which ends with its
/// value (`Some`) or an error, never by running out of time. Its `None`, a
/// timed wait's "the deadline passed", cannot come without a deadline; were
/// it to, the wait goes on, as its caller asked, rather than reporting a
/// timeout nobody set: such a wait's [`Error::Timeout`] is only ever a
/// server's or a connection's.
pub(crate) fn without_deadline<T>(mut wait: impl FnMut() -> Result<Option<T>>) -> Result<T> {
    loop {
        if let Some(value) = wait()? {
            return Ok(value);
        }
        log::warn!("redisson-lock: a wait without a deadline ended without its value; waiting on");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_without_a_deadline_ends_with_its_value_or_its_error_never_a_timeout() {
        let mut calls = 0;
        let got = without_deadline(|| {
            calls += 1;
            Ok((calls == 3).then_some(calls))
        });
        assert_eq!(got.ok(), Some(3));
        let failed = without_deadline::<()>(|| Err(Error::Closed));
        assert!(matches!(failed, Err(Error::Closed)));
    }

    #[test]
    fn a_cancel_wakes_a_sleeping_stop_and_a_later_check_fails_at_once() {
        let closed = CancelToken::new();
        let token = CancelToken::new();
        let canceller = token.clone();
        let started = Instant::now();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            canceller.cancel();
        });
        let stop = Stop::new(&closed, Some(&token));
        assert!(matches!(
            stop.sleep(Duration::from_secs(10)),
            Err(Error::Cancelled)
        ));
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(thread.join().is_ok());
        assert!(token.inner.wakers.lock().is_empty());
        closed.cancel();
        assert!(matches!(stop.check(), Err(Error::Closed)));
    }

    #[test]
    fn an_unregistered_waker_is_not_called() {
        let token = CancelToken::new();
        let calls = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&calls);
        drop(token.register(Arc::new(move || {
            counted.fetch_add(1, Ordering::Relaxed);
        })));
        let counted = Arc::clone(&calls);
        let _kept = token.register(Arc::new(move || {
            counted.fetch_add(10, Ordering::Relaxed);
        }));
        token.cancel();
        token.cancel();
        assert_eq!(calls.load(Ordering::Relaxed), 10);
        assert!(token.is_cancelled());
    }
}
