//! Noticing a `fork()` without a system call per operation.
//!
//! A child forked from a process that uses a [`crate::Client`] must not use
//! it ([`crate::Error::ForkedProcess`]). Asking the kernel for the process id
//! on every lock operation costs two system calls per lock + unlock pair,
//! about 1% of an uncontended pair on a VM. Instead, a `pthread_atfork`
//! handler counts forks in the child; a client compares the count it was
//! built at, and only when they differ asks for the process id.
//!
//! What it cannot see: a child made with the raw `clone` system call
//! (bypassing the C library's `fork`) runs no handler. Those that `exec`
//! at once (`posix_spawn`, `vfork`) never use the client anyway. If the
//! handler cannot be registered, every check asks the kernel, as before.
#![allow(unsafe_code)]

#[cfg(unix)]
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Forks this process's memory has gone through (incremented in each child).
static FORKS: AtomicU64 = AtomicU64::new(0);
/// Whether the handler is registered: without it, [`unchanged`] cannot tell.
static WATCHING: AtomicBool = AtomicBool::new(false);
#[cfg(unix)]
static REGISTER: Once = Once::new();

#[cfg(unix)]
extern "C" fn in_child() {
    // Async-signal-safe: one atomic increment, nothing else.
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// The current fork count, registering the handler on first use.
#[cfg(unix)]
pub(crate) fn count() -> u64 {
    REGISTER.call_once(|| {
        // SAFETY: `in_child` is a plain `extern "C"` function with no
        // arguments that only increments an atomic, which is allowed in a
        // child after fork; no prepare or parent handler is installed.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        WATCHING.store(rc == 0, Ordering::Release);
    });
    FORKS.load(Ordering::Acquire)
}

/// Without `pthread_atfork`, every check asks the kernel.
#[cfg(not(unix))]
pub(crate) fn count() -> u64 {
    0
}

/// Whether no fork happened since the count was `at` (`false`: ask the
/// kernel). One atomic load or two.
pub(crate) fn unchanged(at: u64) -> bool {
    WATCHING.load(Ordering::Acquire) && FORKS.load(Ordering::Acquire) == at
}
