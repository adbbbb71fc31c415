//! [`LockGuard`], one hold on a lock of any type: released on drop, with
//! the latch-free release retry every type shares.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::holds::{Hold, LeaseOutcome, Registry};
use crate::error::{LostReason, Result};
use crate::lock::Lock;
use crate::lock::signal::LostSignal;
use crate::lock::unlock::ReplicaCheck;
use crate::protocol::{Kind, Reentrant};

mod keep;
mod release;

pub(crate) use release::{Detached, release, release_all};
use release::{Step, begin_release, finish_release};

/// One hold on a [`Lock`] by the thread that took it; dropping it releases
/// that hold.
///
/// A guard is `!Send`: a lock belongs to the thread that took it (Redisson
/// enforces the same at run time with `IllegalMonitorStateException`). Dropping
/// the guard logs an unlock error instead of panicking; call
/// [`unlock`](LockGuard::unlock) to see the error.
///
/// # A hold that moves to another thread: `lock_owned`
///
/// Moving a guard to another thread (`std::thread::spawn`, tokio's
/// `spawn_blocking`, holding it across an `.await` of a multi-threaded
/// runtime) does not compile, and the compiler's message names the way out:
/// "`MutexGuard<'static, UseLockOwned>` cannot be sent between threads
/// safely ... required because it appears within the type
/// `NotSendUseLockOwned`". Take the lock with [`Lock::lock_owned`] (or
/// `try_lock_owned`, `try_lock_owned_for`) instead. Its
/// [`OwnedLockGuard`](crate::OwnedLockGuard) is `Send + 'static`, belongs to
/// no thread, and is released by whichever thread drops it.
///
/// ```compile_fail,E0277
/// # fn f(lock: redisson_lock::Lock) -> redisson_lock::Result<()> {
/// let guard = lock.lock()?;
/// std::thread::spawn(move || drop(guard)); // error: use `lock.lock_owned()`
/// # Ok(()) }
/// ```
///
/// ```no_run
/// # fn f(lock: redisson_lock::Lock) -> redisson_lock::Result<()> {
/// let guard = lock.lock_owned()?;
/// std::thread::spawn(move || guard.unlock()); // an owned guard moves
/// # Ok(()) }
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
#[clippy::has_significant_drop]
pub struct LockGuard<K: Kind = Reentrant> {
    lock: Lock<K>,
    hold: Arc<Hold>,
    /// A fenced lock's token.
    token: Option<u64>,
    /// Taken without an explicit lease: one of the hold's watchdog renewers.
    renew: bool,
    released: bool,
    /// `!Send` and `Sync`, which is exactly what a guard is; named so that
    /// the compiler's "cannot be sent between threads" leads to
    /// `lock_owned`.
    _not_send: NotSendUseLockOwned,
}

/// What makes a [`LockGuard`] `!Send` (and keeps it `Sync`): a hold belongs
/// to the thread that took it. The compiler names this type when a guard is
/// moved to another thread; a hold that must move is taken with
/// [`Lock::lock_owned`], whose [`OwnedLockGuard`](crate::OwnedLockGuard) is
/// `Send`.
struct NotSendUseLockOwned(PhantomData<std::sync::MutexGuard<'static, UseLockOwned>>);

/// Named in the compiler's first line, "`MutexGuard<'static, UseLockOwned>`
/// cannot be sent between threads safely", when a [`LockGuard`] is moved to
/// another thread: [`Lock::lock_owned`] gives a guard that moves.
struct UseLockOwned;

impl<K: Kind> LockGuard<K> {
    pub(crate) fn new(lock: Lock<K>, hold: Arc<Hold>, renew: bool, token: Option<u64>) -> Self {
        LockGuard {
            lock,
            hold,
            token,
            renew,
            released: false,
            _not_send: NotSendUseLockOwned(PhantomData),
        }
    }

    /// The token the acquisition got, for the lock types that hand out one.
    pub(crate) fn fencing_token(&self) -> Option<u64> {
        self.token
    }

    /// The owner field the hold is written under.
    pub(crate) fn hold_field(&self) -> &str {
        &self.hold.field
    }

    /// Whether this acquisition joined a hold the owner had (a new hold
    /// counts one acquisition, and only its owner adds more).
    pub(crate) fn is_reentry(&self) -> bool {
        Registry::count(&self.hold) > 1
    }

    /// Releases an acquisition that no replica acknowledged: like
    /// [`unlock`](Self::unlock), but a missing acknowledgement of the
    /// release itself is only logged (see [`Lock::attempt`]).
    pub(crate) fn undo(mut self) -> Result<()> {
        self.released = true;
        match begin_release(&self.lock, &self.hold, self.renew) {
            Step::Done(result) => result,
            Step::Send(sending) => {
                finish_release(&self.lock, &self.hold, sending, None, ReplicaCheck::LogOnly)
            }
        }
    }

    /// The guard as a value that may cross threads, to be released there:
    /// the hold belongs to the owner field it was taken with, whichever
    /// thread sends the release (MultiLock and RedLock hand a member whose
    /// server is slow to a background thread).
    pub(crate) fn detach(mut self) -> Detached<K> {
        self.released = true;
        Detached {
            lock: self.lock.clone(),
            hold: Arc::clone(&self.hold),
            renew: self.renew,
        }
    }

    /// Sets the key's TTL to `lease` if this owner still holds it (Redisson's
    /// `multilock-expire`); `false` when it does not. One round trip.
    pub(crate) fn set_lease(&self, lease: Duration) -> Result<bool> {
        self.expire_if_held("set lease", lease)
            .map(|(held, _)| held)
    }

    /// One `PEXPIRE`-if-held of `lease` for `operation`, counted in the
    /// hold's ledger: whether this owner still held the lock, and the
    /// ledger's clock when the command was begun.
    fn expire_if_held(&self, operation: &'static str, lease: Duration) -> Result<(bool, u64)> {
        let lease_ms = crate::config::millis("lease", lease)?;
        let ticket = self.hold.begin_lease(lease);
        let started = ticket.started();
        let name = &self.lock.name;
        let result = self
            .lock
            .engine
            .with_logged_sync(operation, name, |con, resend| {
                if resend {
                    ticket.resending();
                }
                crate::protocol::replies::expire_if_held(con, name, &self.hold.field, lease_ms)
            });
        let outcome = match &result {
            Ok(true) => LeaseOutcome::Set,
            Err(e) => LeaseOutcome::of_error(e),
            Ok(false) => LeaseOutcome::Untouched,
        };
        self.hold.end_lease(ticket, outcome);
        result.map(|held| (held, started))
    }
}

/// The methods, `Drop` and `Debug` that [`LockGuard`] and
/// [`OwnedLockGuard`](crate::OwnedLockGuard) share: one hold on a lock, over
/// the fields `lock`, `hold`, `token`, `renew` and `released`. `$acquire` is the
/// `Lock` method that returns the guard, for the doc examples.
macro_rules! guard_common {
    ($guard:ident, $acquire:literal) => {
        impl<K: Kind> $guard<K> {
            /// Releases this hold and reports how that went.
            ///
            /// `Ok` when the hold was released (the lock is free if it was the last
            /// one). [`Error::Lost`](crate::Error::Lost) when the lock was already known to be lost (see
            /// [`is_lost`](Self::is_lost)); [`Error::NotHeld`](crate::Error::NotHeld) when Redis says this
            /// thread does not hold it, which also means it was lost. Either way, the
            /// hold is gone from the watchdog and nothing else's lock is touched.
            pub fn unlock(mut self) -> Result<()> {
                self.release()
            }

            /// `true` when the lock is known to be no longer ours: a renewal found
            /// our field gone, the lease ran out by the local monotonic clock before a
            /// renewal succeeded, or this client force-unlocked it. Once `true`, it
            /// stays `true`. For a lock taken with an explicit lease, this turns `true`
            /// when that lease has run out. No round trip.
            pub fn is_lost(&self) -> bool {
                self.hold.is_lost()
            }

            /// Why the lock is known to be lost; `None` while [`is_lost`](Self::is_lost)
            /// is `false`. No round trip.
            pub fn lost_reason(&self) -> Option<LostReason> {
                self.hold.lost_reason()
            }

            /// The local moment before which the lock cannot have expired: the
            /// send time of the last renewal (or acquisition) that succeeded plus
            /// its lease. Past it, [`is_lost`](Self::is_lost) is `true`; once that
            /// is `true`, it never moves later (a renewal answered after a lease
            /// ran out leaves it past). No round trip.
            pub fn valid_until(&self) -> Instant {
                self.hold.valid_until()
            }

            /// `Ok` while the lock is not known to be lost; else
            /// [`Error::Lost`](crate::Error::Lost) with the reason. A cheap check
            /// before a side effect (an atomic load and a clock read, no round
            /// trip); it cannot see a loss Redis has not reported yet, only one that
            /// a renewal, an unlock or the local deadline revealed.
            pub fn ensure_held(&self) -> Result<()> {
                match self.hold.lost_reason() {
                    Some(reason) => Err(self.lock.lost(reason)),
                    None => Ok(()),
                }
            }

            /// A [`LostSignal`] for this hold: other threads can wait for its loss
            /// or `select!` on it, and it outlives the guard. The first one makes the
            /// client watch this hold's deadline (a `rlock-deadline` thread, started
            /// once per client). No round trip.
            pub fn lost_signal(&self) -> LostSignal {
                self.lock.engine.registry.watch(&self.hold);
                LostSignal::new(Arc::clone(&self.hold))
            }

            /// The lock this guard holds. No I/O.
            ///
            /// An associated function, as `lock_api`'s `MutexGuard::mutex`, so
            /// that it does not read as taking the lock: call it as
            #[doc = concat!("`", stringify!($guard), "::lock_of(&guard)`.")]
            ///
            /// ```no_run
            #[doc = concat!("use redisson_lock::", stringify!($guard), ";")]
            /// # fn f(client: redisson_lock::Client) -> redisson_lock::Result<()> {
            #[doc = concat!("let guard = client.lock(\"orders\").", $acquire, "()?;")]
            #[doc = concat!("assert_eq!(", stringify!($guard), "::lock_of(&guard).name(), \"orders\");")]
            /// # Ok(()) }
            /// ```
            ///
            /// It is not a method:
            ///
            /// ```compile_fail,E0599
            /// # fn f(client: redisson_lock::Client) -> redisson_lock::Result<()> {
            #[doc = concat!("let guard = client.lock(\"orders\").", $acquire, "()?;")]
            /// let _ = guard.lock_of();
            /// # Ok(()) }
            /// ```
            pub fn lock_of(guard: &Self) -> &Lock<K> {
                &guard.lock
            }

            /// The lock this guard holds: use the associated function
            #[doc = concat!("[`", stringify!($guard), "::lock_of`]`(&guard)`")]
            /// instead, which does not read as taking the lock.
            #[deprecated(
                note = "`guard.lock()` reads as taking the lock: use the associated function `lock_of(&guard)`"
            )]
            pub fn lock(&self) -> &Lock<K> {
                &self.lock
            }

            /// The guard's parts, its release now the caller's: the lock, the
            /// hold, the token and whether it is one of the hold's watchdog
            /// renewers.
            pub(crate) fn into_parts(mut self) -> (Lock<K>, Arc<Hold>, Option<u64>, bool) {
                self.released = true;
                (
                    self.lock.clone(),
                    Arc::clone(&self.hold),
                    self.token,
                    self.renew,
                )
            }

            fn release(&mut self) -> Result<()> {
                if std::mem::replace(&mut self.released, true) {
                    return Ok(());
                }
                $crate::lock::guard::release(&self.lock, &self.hold, self.renew)
            }
        }

        impl<K: Kind> Drop for $guard<K> {
            fn drop(&mut self) {
                match self.release() {
                    Ok(()) => {}
                    // Released by the client's shutdown: nothing to report.
                    Err($crate::error::Error::Lost {
                        reason: LostReason::Shutdown,
                        ..
                    }) => {}
                    Err(e) => {
                        log::warn!("redisson-lock: releasing `{}` failed: {e}", self.lock.name);
                    }
                }
            }
        }

        impl<K: Kind> std::fmt::Debug for $guard<K> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($guard))
                    .field("lock", &self.lock.name)
                    .field("owner", &self.hold.field)
                    .field("lost", &self.hold.is_lost())
                    .finish()
            }
        }
    };
}
pub(crate) use guard_common;

guard_common!(LockGuard, "lock");
