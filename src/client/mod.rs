//! [`Client`], the public face of one client's engine and the factory of
//! its locks, and [`ClientBuilder`] with every knob: the common ones in
//! `builder.rs`, each topology's and feature's beside it (`sentinel.rs`,
//! `cluster.rs`, `tls.rs`, `replicas.rs`, `observe.rs`, and the Redisson
//! version knobs in `compat.rs`).

mod builder;
mod cluster;
mod compat;
mod doctor;
mod identify;
mod inspect;
#[cfg(feature = "metrics")]
mod observe;
mod replicas;
mod sentinel;
#[cfg(feature = "tls-rustls")]
mod tls;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::IntoConnectionInfo;

use crate::engine::Engine;
use crate::lock::Lock;
use crate::lock::election::LeaderElection;
use crate::lock::kinds::{
    FairLock, FencedLock, NonReentrantFairLock, NonReentrantLock, ReadWriteLock, SpinLock,
};
use crate::lock::watch::LockWatch;
use crate::owner;
use crate::synchronizers::CountDownLatch;
use crate::synchronizers::PermitExpirableSemaphore;
use crate::synchronizers::Semaphore;

pub use builder::ClientBuilder;
pub use doctor::{DEFAULT_DOCTOR_MAX_KEYS, Doctor, DoctorReport, Finding, Severity, VersionRange};
pub use identify::HolderProcess;
pub use inspect::{
    Holder, HolderSide, LOCK_INFO_JSON_VERSION, LockInfo, LockKind, LockScan, LockSummary,
    PermitInfo, RwMode, Waiter,
};

/// A connection to one Redis server (or one Redis Cluster, see
/// [`Client::cluster_builder`]) and the factory of its locks; the Rust
/// counterpart of a `RedissonClient`.
///
/// A client has a random UUID ([`Client::id`]) that appears in the hash field
/// of every lock its threads hold, a pool of command connections, one watchdog
/// thread that renews every lock it holds, and one subscriber connection and
/// thread (opened on the first wait) that wakes every thread waiting for one of
/// its locks. In a cluster: a pool and a subscriber per master, and a thread
/// (`rlock-cluster`) that keeps the slot table current. Create one per
/// process and share it: it is cheap to clone, and
/// all clones are the same client. The threads and connections close when the
/// last clone, lock and guard are dropped.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redisson_lock::Client::builder("redis://127.0.0.1:6379")
///     .watchdog_timeout(Duration::from_secs(30))
///     .build()?;
/// println!("this client writes fields named {}:<thread>", client.id());
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) engine: Arc<Engine>,
}

impl Client {
    /// Connects to the Redis server at `url` with default settings.
    ///
    /// `url` is anything redis-rs accepts, e.g. `redis://127.0.0.1:6379/`,
    /// `redis://user:secret@host:6380/0` or `redis+unix:///run/redis.sock`.
    /// Fails with [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// for an unparsable URL and with
    /// [`Error::Unavailable`](crate::Error::Unavailable) when no connection
    /// can be made within the connect timeout (10 s by default).
    pub fn open(url: impl IntoConnectionInfo) -> crate::Result<Client> {
        Client::builder(url).build()
    }

    /// Starts configuring a client for the server at `url`. No I/O until
    /// [`ClientBuilder::build`].
    pub fn builder(url: impl IntoConnectionInfo) -> ClientBuilder {
        ClientBuilder::new(url.into_connection_info())
    }

    /// This client's id: a random v4 UUID, lowercase and hyphenated, the first
    /// half of the `<id>:<thread>` hash field of every lock it holds.
    pub fn id(&self) -> &str {
        &self.engine.id
    }

    /// The hash field that identifies the calling thread of this client as a
    /// lock holder: `<client id>:<thread number>`.
    pub fn owner_field(&self) -> String {
        owner::owner_field(&self.engine.id, owner::current_thread_id())
    }

    /// The calling thread's number in owner fields: unique in this process,
    /// stable for the thread's life. (Java uses `Thread.getId()` there.)
    pub fn thread_id() -> u64 {
        owner::current_thread_id()
    }

    /// The watchdog timeout: the lease of locks taken without an explicit
    /// lease, renewed every third of it.
    pub fn watchdog_timeout(&self) -> Duration {
        self.engine.config.watchdog_timeout
    }

    /// A handle on the reentrant lock called `name` (Redisson's `getLock`).
    /// This does not talk to Redis; an empty name is reported by the first
    /// operation on the lock.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(Arc::clone(&self.engine), name.into())
    }

    /// A handle on the fenced lock called `name` (Redisson's
    /// `getFencedLock`): the reentrant lock plus a token per acquisition.
    /// This does not talk to Redis.
    pub fn fenced_lock(&self, name: impl Into<String>) -> FencedLock {
        Lock::new(Arc::clone(&self.engine), name.into())
    }

    /// An election for `name` among processes, Java and Rust, on the fenced
    /// lock of that name (see [`LeaderElection`]). This does not talk to
    /// Redis.
    pub fn leader_election(&self, name: impl Into<String>) -> LeaderElection {
        LeaderElection::new(self.fenced_lock(name))
    }

    /// A handle on the fair lock called `name` (Redisson's `getFairLock`):
    /// waiters are served in arrival order, Java and Rust alike. This does
    /// not talk to Redis.
    pub fn fair_lock(&self, name: impl Into<String>) -> FairLock {
        Lock::new(Arc::clone(&self.engine), name.into())
    }

    /// A handle on the non-reentrant fair lock called `name` (Redisson's
    /// `getNonReentrantFairLock`, 4.4.0+): a fair lock its holder cannot
    /// take again. This does not talk to Redis.
    pub fn non_reentrant_fair_lock(&self, name: impl Into<String>) -> NonReentrantFairLock {
        Lock::new(Arc::clone(&self.engine), name.into())
    }

    /// A handle on the read/write lock called `name` (Redisson's
    /// `getReadWriteLock`): a read lock and a write lock over one hash.
    /// This does not talk to Redis.
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock::new(Arc::clone(&self.engine), name.into())
    }

    /// A handle on the count-down latch called `name` (Redisson's
    /// `getCountDownLatch`). This does not talk to Redis.
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        CountDownLatch::new(Arc::clone(&self.engine), name.into())
    }

    /// A handle on the spin lock called `name` (Redisson's `getSpinLock`):
    /// the reentrant lock's layout without pub/sub; its waiters poll with an
    /// exponential backoff (1 ms to 128 ms, see
    /// [`SpinLock::with_backoff`](crate::Lock::with_backoff)). This does
    /// not talk to Redis.
    pub fn spin_lock(&self, name: impl Into<String>) -> SpinLock {
        Lock::new(Arc::clone(&self.engine), name.into())
    }

    /// A handle on the non-reentrant lock called `name` (Redisson's
    /// `getNonReentrantLock`, 4.4.0+): the reentrant lock's layout, but a
    /// second acquisition by the holder is refused with
    /// [`Error::NotReentrant`](crate::Error::NotReentrant). This does not
    /// talk to Redis.
    pub fn non_reentrant_lock(&self, name: impl Into<String>) -> NonReentrantLock {
        Lock::new(Arc::clone(&self.engine), name.into())
    }

    /// A handle on the counting semaphore called `name` (Redisson's
    /// `getSemaphore`): a counter of permits shared with Java's
    /// `RSemaphore`. This does not talk to Redis; an empty name is reported
    /// by the first operation.
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore::new(Arc::clone(&self.engine), name.into())
    }

    /// A handle on the permit-expirable semaphore called `name` (Redisson's
    /// `getPermitExpirableSemaphore`): permits with ids and optional
    /// leases, shared with Java. This does not talk to Redis.
    pub fn permit_expirable_semaphore(&self, name: impl Into<String>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(Arc::clone(&self.engine), name.into())
    }

    /// Shuts the client down, for every clone of it, and returns once
    /// nothing of it is left running:
    ///
    /// 1. Every thread waiting in this client (a lock's `lock()` or
    ///    `try_lock_for`, a semaphore's acquire, a latch's wait, of any
    ///    handle) is woken and returns [`Error::Closed`](crate::Error::Closed),
    ///    holding nothing (as a cancelled wait, see
    ///    [`CancelToken`](crate::CancelToken)); every acquisition from now on
    ///    (`try_lock` too) returns it at once, without touching the server.
    /// 2. Guards still held may be released by their threads until
    ///    `timeout` has passed (as usual: dropped or unlocked).
    /// 3. Then the shutdown releases the rest itself, one round trip each:
    ///    their guards turn [lost](crate::LockGuard::is_lost) with
    ///    [`LostReason::Shutdown`](crate::LostReason::Shutdown), and dropping
    ///    one later sends nothing and logs nothing
    ///    ([`unlock`](crate::LockGuard::unlock) reports
    ///    [`Error::Lost`](crate::Error::Lost)).
    /// 4. The watchdog, the subscriber threads, the deadline and event
    ///    threads, and the Sentinel or cluster refresh thread are stopped
    ///    and joined (each within its current round trip).
    ///
    /// Blocks until the guards are released or `timeout` passes, plus up to
    /// two response timeouts for waits in the middle of a round trip, a
    /// round trip per hold left, and the threads' current round trips.
    /// When it returns no lock hold of this client remains in Redis
    /// (MultiLock members included), unless a release failed: the first
    /// such error is returned, the others are logged, and the lease of a
    /// hold not released runs out as usual. Semaphore permits and holds
    /// given up with [`LockGuard::keep_for`](crate::LockGuard::keep_for)
    /// are not the client's to release: they stay until released or
    /// expired. The command pools stay open until the last clone is
    /// dropped (they have no thread). Calling it again returns `Ok` at
    /// once. It must not be called from the client's
    /// [event handler](crate::ClientBuilder::event_handler), whose thread
    /// it waits for. Dropping the last clone without calling it stops the
    /// threads without waiting, as before.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> redisson_lock::Result<()> {
    /// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
    /// // ... on SIGTERM:
    /// client.shutdown(Duration::from_secs(5))?;
    /// # Ok(()) }
    /// ```
    pub fn shutdown(&self, timeout: Duration) -> crate::Result<()> {
        self.engine.shutdown(timeout)
    }

    /// Follows the releases of the lock called `name` (the reentrant,
    /// fenced or non-reentrant lock, Java's included): a [`LockWatch`]
    /// whose channel gets a [`WatchEvent`](crate::WatchEvent) for each
    /// unlock message and each expiry, until it is dropped. It waits on
    /// this client's subscriber (no connection of its own), on a thread of
    /// its own; see [`LockWatch`] for what it can and cannot tell.
    /// Returns at once; the thread subscribes (one round trip) and reads
    /// the lock's TTL (one round trip per event, and every second at
    /// least).
    /// [`Error::Closed`](crate::Error::Closed) after a shutdown,
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an
    /// empty name, [`Error::Unavailable`](crate::Error::Unavailable) when
    /// no thread can be started.
    pub fn watch_lock(&self, name: impl Into<String>) -> crate::Result<LockWatch> {
        let name = name.into();
        let channel = crate::names::lock_channel(&name);
        LockWatch::start(Arc::clone(&self.engine), name, channel)
    }

    /// [`Client::watch_lock`] for a read/write lock (Redisson's
    /// `RReadWriteLock`): its releases are announced on its own channel
    /// `redisson_rwlock:{name}` (a writer's and the last reader's unlock).
    /// Same costs and limits.
    pub fn watch_read_write_lock(&self, name: impl Into<String>) -> crate::Result<LockWatch> {
        let name = name.into();
        let channel = crate::names::rwlock_channel(&name);
        LockWatch::start(Arc::clone(&self.engine), name, channel)
    }

    /// A snapshot of the client's internal bookkeeping, for monitoring and tests.
    pub fn diagnostics(&self) -> Diagnostics {
        let topology = &self.engine.topology;
        let (subscribed_channels, waiters) = topology.subscriber_stats();
        let (pooled_connections, idle_connections) = topology.pool_state();
        Diagnostics {
            registered_holds: self.engine.registry.len(),
            subscribed_channels,
            waiters,
            pooled_connections,
            idle_connections,
            multiplexed: self.engine.config.multiplexed,
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Deliberately not the connection info: it may carry credentials.
        f.debug_struct("Client")
            .field("id", &self.engine.id)
            .field("watchdog_timeout", &self.engine.config.watchdog_timeout)
            .finish_non_exhaustive()
    }
}

/// What a client is tracking right now; see [`Client::diagnostics`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Diagnostics {
    /// Locks held through this client, one per (lock, thread).
    pub registered_holds: usize,
    /// Channels the subscriber is subscribed to, or subscribing to (in a
    /// cluster, over every master's subscriber).
    pub subscribed_channels: usize,
    /// Threads currently waiting for a lock through the subscriber.
    pub waiters: usize,
    /// Command connections open in the pool (in a cluster, in every
    /// master's pool); multiplexed ([`ClientBuilder::multiplexed`]), the
    /// shared sockets open.
    pub pooled_connections: u32,
    /// Of those, how many are idle.
    pub idle_connections: u32,
    /// `Some(n)`: commands share `n` multiplexed sockets per server
    /// ([`ClientBuilder::multiplexed`], the default without replica sync);
    /// `None`: they check pooled connections out
    /// ([`ClientBuilder::pool_size`]).
    pub multiplexed: Option<u32>,
}
