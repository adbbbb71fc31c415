//! The protocol layer (L1 in CONTRIBUTING.md's "Architecture"): the lock
//! types of the Redisson family, each one file here: its keys, its
//! scripts and how its replies read, how a waiter is woken, how a hold is
//! renewed. Everything else (the waiting loop, guards, the registry of holds,
//! the watchdog, the subscriber) is written once, in the engine, for every
//! type, and never names one. Beside them: the synchronizers' scripts and
//! replies (`semaphore`, `permit_expirable`, `latch`), the read-only inspection
//! (`inspect`), the unlock replies (`replies`) and the renewal batches
//! (`lease`).
//!
//! A type is a [`Kind`]: a sealed trait, so that the set of types is the
//! crate's to grow; its protocol methods live on a supertrait no one outside
//! the crate can name. [`crate::Lock`] and [`crate::LockGuard`] are generic
//! over it, the way `lock_api`'s `Mutex<R, T>` is over `RawMutex`; each
//! type's public alias lives in `crate::lock::kinds`.

use std::borrow::Cow;
use std::time::Duration;

use redis::ConnectionLike;

use crate::config::Config;
use crate::error::Result;
use crate::lua::Invocation;
use replies::unlock_outcome;

/// A `LazyLock<Lua>` of the script `lua/<file>`.
macro_rules! lua_script {
    ($file:expr) => {
        std::sync::LazyLock::new(|| {
            $crate::lua::Lua::new(include_str!(concat!("../../lua/", $file)))
        })
    };
}
pub(crate) use lua_script;

/// The [`UnlockScripts`] `lua/<kind>_release.lua`, `lua/<kind>_unlock.lua`,
/// `lua/<force>_force_unlock.lua` and `lua/<force>_force_unlock_owned.lua`
/// (`<force>`: `<kind>` unless given).
macro_rules! unlock_scripts {
    ($kind:literal) => {
        $crate::protocol::unlock_scripts!($kind, $kind)
    };
    ($kind:literal, $force:literal) => {
        $crate::protocol::UnlockScripts {
            release: $crate::protocol::lua_script!(concat!($kind, "_release.lua")),
            unlock: $crate::protocol::lua_script!(concat!($kind, "_unlock.lua")),
            force: $crate::protocol::lua_script!(concat!($force, "_force_unlock.lua")),
            force_owned: $crate::protocol::lua_script!(concat!($force, "_force_unlock_owned.lua")),
        }
    };
}
pub(crate) use unlock_scripts;

/// The wake and unlocks of a type that keeps RLock's layout in a field
/// `$rlock` (a [`Reentrant`]): its own is only its acquire.
macro_rules! rlock_layout {
    ($rlock:tt) => {
        fn wake<'a>(&'a self, name: &'a str, field: &'a str) -> $crate::protocol::Wake<'a> {
            self.$rlock.wake(name, field)
        }

        fn unlocking<'a>(&'a self, name: &'a str) -> $crate::protocol::Unlocking<'a> {
            self.$rlock.unlocking(name)
        }
    };
}

mod fair;
mod fenced;
pub(crate) mod inspect;
pub(crate) mod latch;
pub(crate) mod lease;
mod non_reentrant;
mod non_reentrant_fair;
pub(crate) mod permit_expirable;
mod read;
mod reentrant;
pub(crate) mod replies;
pub(crate) mod semaphore;
mod spin;
mod unlocking;
mod write;

pub use fair::Fair;
pub use fenced::Fenced;
pub(crate) use lease::Renewal;
pub use non_reentrant::NonReentrant;
pub use non_reentrant_fair::NonReentrantFair;
pub use read::Read;
pub use reentrant::Reentrant;
pub use replies::UnlockOutcome;
pub use spin::Spin;
pub(crate) use spin::Spinning;
pub use unlocking::{UnlockScripts, Unlocking};
pub use write::Write;

/// A lock type of the Redisson family (sealed: implemented by this crate's
/// types only). The type parameter of [`crate::Lock`] and
/// [`crate::LockGuard`].
pub trait Kind: sealed::Protocol {}

impl<P: sealed::Protocol> Kind for P {}

pub(crate) mod sealed {
    use super::*;

    /// What a lock type tells the engine. Not nameable outside the crate.
    pub trait Protocol: Send + Sync + Sized + 'static {
        /// The Redisson class this type speaks for, e.g. `RedissonLock`.
        const REDISSON: &'static str;

        /// The type's view of the lock named `name`: its derived keys, and
        /// what it needs of the client's settings (`config`).
        fn new(name: &str, config: &Config) -> Self;

        /// The hash field of a thread whose base field is
        /// `<client id>:<thread>` (a write lock adds `:write`).
        fn owner_field(&self, base: String) -> String {
            base
        }

        /// How a thread waiting for the lock is woken.
        fn wake<'a>(&'a self, name: &'a str, field: &'a str) -> Wake<'a>;

        /// One acquire attempt.
        fn acquire(
            &self,
            con: &mut dyn ConnectionLike,
            request: &AcquireRequest<'_>,
        ) -> Result<Acquired>;

        /// The type's unlock scripts and the keys and arguments they take
        /// for the lock named `name`: what the release, latched unlock and
        /// force unlock below send.
        fn unlocking<'a>(&'a self, name: &'a str) -> Unlocking<'a>;

        /// One release by a guard: the thread keeps `request.remaining`
        /// holds (0 frees the lock for it). Must be idempotent: it may be
        /// sent again after a lost reply.
        fn release(
            &self,
            con: &mut dyn ConnectionLike,
            request: &ReleaseRequest<'_>,
        ) -> Result<Option<UnlockOutcome>> {
            let unlocking = self.unlocking(request.name);
            let last = u64::from(request.remaining);
            let reply = unlocking
                .invocation(&unlocking.scripts.release, request, None, last)
                .invoke(con)?;
            // Only a reader's release reports the TTL the hash keeps.
            let kept_ttl = unlocking.reader.map(|_| &request.kept_ttl_ms);
            unlock_outcome(reply, kept_ttl)
        }

        /// Redisson's unlock with an unlock latch (`unlock_with_request_id`).
        fn unlock_latched(
            &self,
            con: &mut dyn ConnectionLike,
            request: &ReleaseRequest<'_>,
            latch: &str,
            latch_ttl_ms: u64,
        ) -> Result<Option<UnlockOutcome>> {
            let unlocking = self.unlocking(request.name);
            let reply = unlocking
                .invocation(
                    &unlocking.scripts.unlock,
                    request,
                    Some(latch),
                    latch_ttl_ms,
                )
                .invoke(con)?;
            unlock_outcome(reply, None)
        }

        /// Deletes the lock whoever holds it; `true` if there was one.
        fn force_unlock(
            &self,
            con: &mut dyn ConnectionLike,
            name: &str,
            publish: &str,
        ) -> Result<bool> {
            let unlocking = self.unlocking(name);
            let deleted: i64 = unlocking
                .force_invocation(&unlocking.scripts.force, name, publish)
                .invoke(con)?;
            Ok(deleted == 1)
        }

        /// Deletes the lock only while the hash field `owner` holds it,
        /// waking waiters as [`Protocol::force_unlock`] does, in one script
        /// (the force unlock's keys and arguments, and `owner` last);
        /// `true` if it was deleted, `false` (nothing changed) otherwise.
        fn force_unlock_owned(
            &self,
            con: &mut dyn ConnectionLike,
            name: &str,
            owner: &str,
            publish: &str,
        ) -> Result<bool> {
            let unlocking = self.unlocking(name);
            let mut invocation =
                unlocking.force_invocation(&unlocking.scripts.force_owned, name, publish);
            let deleted: i64 = invocation.arg(owner).invoke(con)?;
            Ok(deleted == 1)
        }

        /// Redisson's `isLocked` for this type.
        fn is_locked(&self, con: &mut dyn ConnectionLike, name: &str) -> Result<bool> {
            Ok(redis::cmd("EXISTS").arg(name).query(con)?)
        }

        /// Whether [`Protocol::give_up`] does anything: the engine takes a
        /// connection for it only then.
        const GIVES_UP: bool = false;

        /// Called when a timed wait gives up (the fair queue's give-up
        /// script); `wait_ms` is the caller's wait as the thread queued with
        /// it (0: none given, see [`Queue::wait_ms`]).
        fn give_up(
            &self,
            _con: &mut dyn ConnectionLike,
            _field: &str,
            _wait_ms: u64,
        ) -> Result<()> {
            Ok(())
        }

        /// Whether this type's lock is taken by the thread's first acquire
        /// only (a non-reentrant lock refuses a second one).
        fn reentrant(&self) -> bool {
            true
        }

        /// How the watchdog renews `field`'s hold: by default, the field's
        /// existence guards a PEXPIRE of the key.
        fn renewal(&self, _field: &str) -> Renewal {
            Renewal::Field
        }

        /// Whether a guard's partial release sets the key's TTL to the lease
        /// (a read release sets it from the markers instead).
        fn release_sets_lease(&self) -> bool {
            true
        }
    }
}

/// How a waiting thread learns that it may try again.
pub enum Wake<'a> {
    /// A release publishes on `channel`; the subscriber's parking lot keeps
    /// the thread's permits under `entry` (one per lock sharing a channel).
    Channel {
        channel: Cow<'a, str>,
        entry: Cow<'a, str>,
    },
    /// A release publishes on a channel of the thread's own (a fair lock's
    /// waiter), which is also its entry: one string, not two copies of it.
    Own(String),
    /// No message: sleep by this backoff between attempts.
    Backoff(Backoff),
}

impl<'a> Wake<'a> {
    /// Woken on `channel`, the thread's permits kept under `entry`.
    pub(crate) fn channel(channel: &'a str, entry: &'a str) -> Self {
        Wake::Channel {
            channel: Cow::Borrowed(channel),
            entry: Cow::Borrowed(entry),
        }
    }

    /// The channel and entry a waiting thread subscribes to; `None` for a
    /// backoff.
    pub(crate) fn on(&self) -> Option<(&str, &str)> {
        match self {
            Wake::Channel { channel, entry } => Some((channel, entry)),
            Wake::Own(channel) => Some((channel, channel)),
            Wake::Backoff(_) => None,
        }
    }

    /// The backoff between attempts of a kind that no message wakes.
    pub(crate) fn backoff(&self) -> Option<Backoff> {
        match self {
            Wake::Backoff(backoff) => Some(*backoff),
            Wake::Channel { .. } | Wake::Own(_) => None,
        }
    }
}

/// Redisson's exponential spin backoff (docs/wire-format.md, "Spin lock").
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

/// The client's wall clock in ms since the Unix epoch: a fair lock's queue
/// scores (docs/wire-format.md, "Fair locks"), which is why fair locks need roughly synchronised
/// clocks across hosts.
pub(crate) fn epoch_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// One acquire attempt, as the engine asks for it.
pub struct AcquireRequest<'a> {
    pub name: &'a str,
    pub lease_ms: u64,
    pub field: &'a str,
    /// Holds the thread counts on this lock (its own account, 0 for none).
    pub known: u32,
    /// With `known > 0`: the attempt's "replaced" marker key and its TTL.
    pub marker: Option<(&'a str, u64)>,
    /// The same attempt is sent again after its reply was lost.
    pub resend: bool,
    /// `Some` when the thread is willing to wait (a fair lock queues it),
    /// with the time it will wait in ms and the client's clock.
    pub queue: Option<Queue>,
}

/// A waiting thread's place in a fair queue (docs/wire-format.md, "Fair locks").
#[derive(Clone, Copy, Debug)]
pub struct Queue {
    /// The caller's wait in whole ms as it gave it (Redisson's `waitTime`,
    /// not recomputed from a deadline); 0 when it gave none or less than
    /// 1 ms: the type then uses its own wait timeout.
    pub wait_ms: u64,
}

/// The outcome of one acquire attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// This owner now holds the lock (first hold or reentry). `replaced`:
    /// the holds it counted on were gone, this is a new hold. `token`: a
    /// fenced lock's token.
    Yes { replaced: bool, token: Option<u64> },
    /// Someone else holds it; `ttl` is their remaining lease, `None` when
    /// the key has no expiry at all. `Some(Duration::ZERO)` only from a
    /// queued fair waiter's attempt (the script's `max(0, PTTL)`): the lock
    /// is free but it is another waiter's turn (or, rarely, it is held
    /// without a TTL or expires within the millisecond); the waiting loop
    /// then asks again by a backoff. Every other 0 ms TTL is reported as
    /// 1 ms.
    No { ttl: Option<Duration> },
}

/// One release, as the engine asks for it.
pub struct ReleaseRequest<'a> {
    pub name: &'a str,
    pub lease_ms: u64,
    pub field: &'a str,
    pub publish: &'a str,
    /// Holds the thread keeps after this one (guards' releases only).
    pub remaining: u32,
    /// Where a type whose release sets a TTL it alone knows (the read lock:
    /// its longest-lived remaining marker's) reports it, in ms, when holds
    /// remain.
    pub kept_ttl_ms: std::cell::Cell<Option<u64>>,
}

impl AcquireRequest<'_> {
    /// ARGV `resend flag, marker TTL` and the marker key, when the attempt
    /// has a marker (RLock's and the fair lock's acquire scripts).
    pub(crate) fn add_marker(&self, invocation: &mut Invocation<'_>) {
        if let Some((key, ttl_ms)) = self.marker {
            invocation.key(key).arg(self.resend_flag()).arg(ttl_ms);
        }
    }

    /// ARGV `resend flag, marker TTL (0: no marker)` and the marker key if
    /// any (the read/write lock's acquire scripts take both arguments always).
    pub(crate) fn add_marker_args(&self, invocation: &mut Invocation<'_>) {
        invocation.arg(self.resend_flag());
        match self.marker {
            Some((key, ttl_ms)) => invocation.key(key).arg(ttl_ms),
            None => invocation.arg(0),
        };
    }

    fn resend_flag(&self) -> &'static str {
        if self.resend { "1" } else { "0" }
    }
}
