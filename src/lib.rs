//! Redisson-compatible distributed locks for blocking Rust programs.
//!
//! `redisson-lock` gives thread-based Rust services the locks and
//! synchronizers that Java services take with [Redisson] (`RLock` and its
//! fair, read/write, fenced, spin and non-reentrant siblings, MultiLock and
//! RedLock, the count-down latch and both semaphores), on the same Redis or
//! Valkey, at the same time. The Redis state is Redisson's, byte for byte:
//! for `RLock`, a hash named after the lock whose one field
//! `<client UUID>:<thread>` holds the reentrancy count, with the lease as
//! its TTL; the same acquire, reentry and unlock semantics, the same unlock
//! channel and message. A Java thread and a Rust thread contending for
//! `"orders"` exclude each other and wake each other up. (One deliberate
//! difference: a guard's release sets the count its thread keeps instead of
//! decrementing, so a retried release is harmless and needs no unlock latch;
//! [`Lock::unlock_with_request_id`] writes Redisson's latch for callers who
//! replay an id themselves.)
//!
//! - [`Client`] connects to one Redis server ([`Client::builder`]), the master
//!   that Redis Sentinels name ([`Client::sentinel_builder`], followed across
//!   failovers) or one Redis Cluster ([`Client::cluster_builder`]), over TCP,
//!   a Unix socket, or TLS (`rediss://`, with the `tls-rustls` feature:
//!   `ClientBuilder::tls_root_ca_pem`). On one server its threads share 4
//!   multiplexed sockets ([`ClientBuilder::multiplexed`]); with Sentinel and
//!   in a cluster each command checks a connection out of a pool per master
//!   ([`ClientBuilder::pool_size`]). It runs one watchdog thread that renews
//!   every lock it holds (30 s lease, renewed every 10 s, batched), and one
//!   subscriber connection (one per master in a cluster) that wakes waiting
//!   threads when a lock is released.
//! - [`Lock`] is a handle on one named lock; [`LockGuard`] is one hold on it,
//!   released on drop, and `!Send` because a lock belongs to the thread that
//!   took it: a hold that must move to another thread or task is taken with
//!   [`Lock::lock_owned`] ([`OwnedLockGuard`], `Send + 'static`). Both are
//!   generic over the lock type ([`Kind`]): the reentrant lock by default,
//!   and [`FairLock`], [`ReadLock`]/[`WriteLock`] (of a [`ReadWriteLock`]),
//!   [`FencedLock`], [`SpinLock`], [`NonReentrantLock`] and
//!   [`NonReentrantFairLock`], each byte-for-byte its Redisson type, with the
//!   same methods.
//! - [`Error`] says what went wrong in terms a caller can act on.
//! - [`CancelToken`] ends blocking waits from another thread (`with_cancel`
//!   on a lock or synchronizer handle), and [`Client::shutdown`] ends a
//!   client: its waits, its holds and its threads.
//!
//! No async runtime is involved: every call blocks the calling thread. In an
//! async service, call it from the runtime's blocking pool (tokio's
//! `spawn_blocking`) with an owned guard, which may be held across `.await`
//! and released from any thread; the README has the recipe.
//!
//! The guides ship with the package, in its `docs/` directory: the user
//! guide (`docs/guide.md`: choosing a lock, the Redisson mapping, failures
//! and errors), topologies, operating (inspecting, force-unlocking, lost
//! locks, tracing and metrics), synchronizers, security, the command-line
//! tool and the wire format.
//!
//! # Feature flags
//!
//! None is on by default; the default build depends on redis-rs (scripts
//! only, no TLS), and a handful of small crates.
//!
//! | Feature | What it adds | What it costs |
//! |---|---|---|
//! | `tls-rustls` | `rediss://` URLs for every connection (commands, watchdog, subscriber, Sentinel nodes), with `ClientBuilder::tls_root_ca_pem` and `ClientBuilder::tls_client_cert_pem` (mutual TLS) and [`Error::TlsCertificate`] for a refused certificate | rustls with the `ring` provider (installed as the process default only when the application has none) and the system's trust store (`rustls-native-certs`) |
//! | `serde` | `serde::Serialize` for [`LockInfo`], [`LockSummary`], [`Holder`], [`Waiter`] and [`PermitInfo`]: the versioned JSON shape ([`LOCK_INFO_JSON_VERSION`]) of "Lock info JSON" in docs/operating.md | `serde` with `derive` |
//! | `tracing` | spans `lock.acquire`, `lock.release`, `lock.renew` and the WARN events "lock lost" and "renewal failed" | the `tracing` facade only; the application installs the subscriber |
//! | `metrics` | the `redisson_lock_*` counters, gauges and histograms, and `ClientBuilder::metrics_lock_label` | the `metrics` facade only; the application installs the recorder |
//!
//! With `cargo doc --all-features` (and on docs.rs, once the crate is
//! published) every feature is on, and the items that need one say which.
//!
//! # Examples
//!
//! ```no_run
//! use std::time::Duration;
//! use redisson_lock::Client;
//!
//! fn main() -> redisson_lock::Result<()> {
//!     let client = Client::open("redis://127.0.0.1:6379")?;
//!     let lock = client.lock("orders");
//!
//!     // Waits as long as it takes; the watchdog keeps the lock alive while held.
//!     let guard = lock.lock()?;
//!     // ... critical section ...
//!     guard.unlock()?; // or just drop it
//!
//!     // Waits at most 2 s, and holds for at most 10 s without renewal.
//!     if let Some(_guard) = lock.with_lease(Duration::from_secs(10)).try_lock_for(Duration::from_secs(2))? {
//!         // ... critical section ...
//!     }
//!     Ok(())
//! }
//! ```
//!
//! # How it maps to Redisson
//!
//! | Redisson (`RLock`)                         | redisson-lock                            |
//! |--------------------------------------------|------------------------------------------|
//! | `Redisson.create(config)`                  | [`Client::open`], [`Client::builder`]    |
//! | `config.setLockWatchdogTimeout(ms)`        | [`ClientBuilder::watchdog_timeout`]      |
//! | `redisson.getLock(name)`                   | [`Client::lock`]                         |
//! | `redisson.getSpinLock(name)`               | [`Client::spin_lock`] ([`SpinLock`])     |
//! | `redisson.getNonReentrantLock(name)`       | [`Client::non_reentrant_lock`] ([`NonReentrantLock`]) |
//! | `lock()` / `lock(lease, unit)`             | [`Lock::lock`], `lock.with_lease(d).lock()` |
//! | `tryLock()` / `tryLock(wait, unit)`        | [`Lock::try_lock`], [`Lock::try_lock_for`] |
//! | `unlock()`                                 | dropping the guard, [`LockGuard::unlock`] |
//! | `forceUnlock()`                            | [`Lock::force_unlock`]                   |
//! | `isLocked()`, `isHeldByCurrentThread()`    | [`Lock::is_locked`], [`Lock::is_held_by_current_thread`] |
//! | `getHoldCount()`, `remainTimeToLive()`     | [`Lock::hold_count`], [`Lock::remaining_ttl`] |
//! | `IllegalMonitorStateException`             | [`Error::NotHeld`]                       |
//! | `redisson.getCountDownLatch(name)`         | [`Client::count_down_latch`] ([`CountDownLatch`]) |
//! | `redisson.getSemaphore(name)` (`RSemaphore`) | [`Client::semaphore`] ([`Semaphore`], [`SemaphorePermits`]) |
//! | `redisson.getPermitExpirableSemaphore(name)` | [`Client::permit_expirable_semaphore`] ([`PermitExpirableSemaphore`], [`ExpirablePermits`]) |
//! | `lock(leaseTime, unit, threadId)`          | [`Lock::lock_owned`] ([`OwnedLockGuard`]) |
//!
//! What Redisson leaves silent this crate reports: a lock whose renewal finds
//! it gone, or whose lease ran out while Redis was unreachable, marks its
//! guards [lost](LockGuard::is_lost), and a [`LostSignal`] tells any thread
//! ([`LockGuard::lost_signal`]); [`ClientBuilder::event_handler`] hears every
//! lock event of a client; [`Client::inspect`] and [`Client::scan_locks`]
//! show who holds what, Java's holders included.
//!
//! [Redisson]: https://redisson.org

// One `unsafe` block in the crate: registering a fork handler (src/fork.rs).
#![deny(unsafe_code)]
// docs.rs (`[package.metadata.docs.rs]`): "Available on crate feature ...
// only" on the feature-gated items.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

// Six layers, imports only downward (see CONTRIBUTING.md's "Architecture" and
// tests/layering.rs, which checks it):
// L0 base
mod cancel;
mod config;
mod error;
mod failpoint;
mod fork;
mod lua;
mod names;
mod owner;
mod spawn;
mod sync;
// L1 protocol
mod protocol;
// L2 transport
mod net;
mod pubsub;
// L3 topology
mod topology;
// L4 engine
mod engine;
// L5 api
mod client;
mod lock;
mod multi;
mod synchronizers;
// Only for the fuzz crate (fuzz/): internals behind thin wrappers, no API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
#[path = "fuzzing.rs"]
pub mod __fuzzing;

pub use cancel::CancelToken;
pub use client::{Client, ClientBuilder, Diagnostics, HolderProcess};
pub use client::{DEFAULT_DOCTOR_MAX_KEYS, Doctor, DoctorReport, Finding, Severity, VersionRange};
pub use client::{
    Holder, HolderSide, LOCK_INFO_JSON_VERSION, LockInfo, LockKind, LockScan, LockSummary,
    PermitInfo, RwMode, Waiter,
};
pub use config::{PermitIdEncoding, ShardedSubscription};
pub use engine::events::{EventHandler, LockEvent};
pub use error::{Error, LostReason, Result};
pub use lock::Lock;
pub use lock::election::{LeaderElection, Leadership};
pub use lock::guard::LockGuard;
pub use lock::handoff::HoldToken;
pub use lock::kinds::{FairLock, FencedLock, NonReentrantFairLock, NonReentrantLock};
pub use lock::kinds::{FairLockGuard, FencedLockGuard, NonReentrantFairLockGuard};
pub use lock::kinds::{NonReentrantLockGuard, ReadLockGuard, SpinLockGuard, WriteLockGuard};
pub use lock::kinds::{ReadLock, ReadWriteLock, SpinLock, WriteLock};
pub use lock::owned::OwnedLockGuard;
pub use lock::signal::LostSignal;
pub use lock::watch::{LockWatch, WatchEvent};
pub use multi::{MultiLock, MultiLockGuard, RedLock, RedLockGuard};
pub use names::DEFAULT_WATCHDOG_TIMEOUT;
pub use owner::RequestId;
pub use protocol::UnlockOutcome;
pub use protocol::{
    Fair, Fenced, Kind, NonReentrant, NonReentrantFair, Read, Reentrant, Spin, Write,
};
/// The redis-rs this crate is built on, so that users name the same
/// version (a `ConnectionInfo` for [`Client::builder`], a `RedisError`
/// inside [`Error::Redis`]).
pub use redis;
pub use synchronizers::CountDownLatch;
pub use synchronizers::{ExpirablePermits, PermitExpirableSemaphore, PermitId};
pub use synchronizers::{Semaphore, SemaphorePermits};
pub use topology::cluster::slot::key_slot;

/// The README's Rust snippets, compiled as doc tests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The guides' snippets (docs/, linked from the README), likewise.
#[cfg(doctest)]
#[doc = include_str!("../docs/guide.md")]
struct GuideDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/topologies.md")]
struct TopologiesDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/operating.md")]
struct OperatingDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/synchronizers.md")]
struct SynchronizersDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/compat.md")]
struct CompatDoctests;
