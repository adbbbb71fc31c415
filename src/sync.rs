//! The primitives of the concurrent core, in one place: the mutexes and
//! condition variables, atomics, threads, the wake-up channel and the clock
//! of the multiplexed sockets (`crate::net::mux`), the holds ledger and its
//! deadline thread (`crate::engine::holds`) and the subscriber's entries
//! (`crate::pubsub::entries`).
//!
//! In every build users get, this is a re-export: `parking_lot`'s `Mutex`
//! and `Condvar`, `std`'s atomics and threads, `crossbeam_channel`, and
//! `Instant::now` for [`now`] — no wrapper, no cost. With the feature
//! `shuttle` (the crate's own schedule tests only, RELIABILITY.md's
//! "Schedule exploration"), the same names are `shuttle`'s primitives
//! behind parking_lot-shaped wrappers, and the clock is virtual: it moves
//! only when a timed wait times out, at a moment the test's scheduler
//! picks (see `model`). Code that uses this module instead of
//! `parking_lot`/`std` directly can then be run over many random schedules.

#[cfg(not(feature = "shuttle"))]
pub(crate) use parking_lot::{Condvar, Mutex, MutexGuard};
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::sync::atomic;
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::thread;

/// The wake-up channel of the deadline thread (`bounded`, `Sender`,
/// `Receiver` with `recv` and `recv_deadline`).
#[cfg(not(feature = "shuttle"))]
pub(crate) mod channel {
    pub(crate) use crossbeam_channel::{Receiver, Sender, bounded};
}

/// The monotonic clock: `Instant::now()`.
#[cfg(not(feature = "shuttle"))]
#[inline(always)]
pub(crate) fn now() -> std::time::Instant {
    std::time::Instant::now()
}

/// The origin of timestamps kept as nanoseconds (the holds' deadlines):
/// the clock when first asked.
#[cfg(not(feature = "shuttle"))]
pub(crate) fn epoch() -> std::time::Instant {
    std::time::Instant::now()
}

#[cfg(feature = "shuttle")]
mod model;
#[cfg(feature = "shuttle")]
pub(crate) use model::{Condvar, Mutex, MutexGuard, atomic, channel, epoch, now, thread};
#[cfg(all(test, feature = "shuttle"))]
pub(crate) use model::{explore, pipe};

/// Waits for `thread` to end, unless it is the calling thread; a panic in
/// it is logged.
pub(crate) fn join(thread: Option<thread::JoinHandle<()>>) {
    if let Some(thread) = thread
        && thread.thread().id() != thread::current().id()
        && thread.join().is_err()
    {
        log::warn!("redisson-lock: a background thread panicked");
    }
}
