//! [`Client`] and [`ClientBuilder`]: configuration, identity, connections,
//! and the one watchdog and one subscriber every lock of a client shares.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::IntoConnectionInfo;

use crate::cluster::{Cluster, ShardedSubscription, Subscribers};
use crate::error::{Error, Result};
use crate::holds::Registry;
use crate::lock::Lock;
use crate::locks::FencedLock;
use crate::locks::ReadWriteLock;
use crate::locks::{Fair, FairLock, NonReentrantFair, NonReentrantFairLock};
use crate::locks::{NonReentrantLock, SpinLock};
use crate::names;
use crate::owner;
use crate::pool::{Checkout, Pool};
use crate::replicas::ReplicaSync;
use crate::sentinel::SentinelWatch;
use crate::tls::TlsSettings;
use crate::unlock::RequestId;
use crate::watchdog::Watchdog;

pub use crate::builder::ClientBuilder;
pub(crate) use crate::builder::Config;

/// How long a command keeps trying to connect while the server refuses:
/// long enough for a restarting server to listen again, short enough that a
/// server that is down is an answer.
pub(crate) const RECONNECT_GRACE: Duration = Duration::from_millis(100);

/// Redisson's default `lockWatchdogTimeout`.
pub const DEFAULT_WATCHDOG_TIMEOUT: Duration = Duration::from_secs(30);

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
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub id: String,
    pub config: Config,
    /// The standalone server's pool; in a cluster, the first seed's (for
    /// the watchdog's last resort only: commands go through `cluster`).
    pub pool: Arc<Pool>,
    /// The slot table and per-master pools when connected to a cluster.
    pub cluster: Option<Arc<Cluster>>,
    /// The process that built the client (see [`Error::ForkedProcess`]).
    pub pid: u32,
    /// [`crate::fork::count`] when the client was built.
    pub forks: u64,
    pub registry: Arc<Registry>,
    /// Held for its `Drop`, which stops the renewal thread.
    pub _watchdog: Watchdog,
    /// Under Sentinel: held for its `Drop`, which stops the thread that
    /// follows the master.
    pub _sentinel: Option<SentinelWatch>,
    pub subscriber: Subscribers,
    /// Replica sync of lock writes, when on.
    pub sync: Option<Arc<ReplicaSync>>,
    /// `publish`, or `spublish` with sharded pub/sub (PROTOCOL §1.6).
    pub publish: &'static str,
    /// Random per client: with a counter, unique unlock request ids without
    /// asking the OS for randomness on every unlock.
    pub request_prefix: u64,
    pub request_seq: AtomicU64,
}

impl Client {
    /// Connects to the Redis server at `url` with default settings.
    ///
    /// `url` is anything redis-rs accepts, e.g. `redis://127.0.0.1:6379/`,
    /// `redis://user:secret@host:6380/0` or `redis+unix:///run/redis.sock`.
    /// Fails with [`Error::InvalidArgument`] for an unparsable URL and with
    /// [`Error::Unavailable`] when no connection can be made within the
    /// connect timeout (10 s by default).
    pub fn open(url: impl IntoConnectionInfo) -> Result<Client> {
        Client::builder(url).build()
    }

    /// Starts configuring a client for the server at `url`.
    pub fn builder(url: impl IntoConnectionInfo) -> ClientBuilder {
        ClientBuilder {
            info: url.into_connection_info(),
            config: Config {
                watchdog_timeout: DEFAULT_WATCHDOG_TIMEOUT,
                connect_timeout: Duration::from_secs(10),
                response_timeout: Duration::from_secs(3),
                retry_attempts: 3,
                retry_delay: Duration::from_millis(500),
                subscription_timeout: Duration::from_millis(7500),
                fair_lock_wait_timeout: names::FAIR_LOCK_WAIT_TIMEOUT,
                replica_sync: None,
                replicas_sync_timeout: None,
            },
            pool_size: 32,
            tls: TlsSettings::default(),
            sentinel: None,
            seeds: None,
            sharded: ShardedSubscription::Auto,
        }
    }

    /// This client's id: a random v4 UUID, lowercase and hyphenated, the first
    /// half of the `<id>:<thread>` hash field of every lock it holds.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The hash field that identifies the calling thread of this client as a
    /// lock holder: `<client id>:<thread number>`.
    pub fn owner_field(&self) -> String {
        owner::owner_field(&self.inner.id, owner::current_thread_id())
    }

    /// The calling thread's number in owner fields: unique in this process,
    /// stable for the thread's life. (Java uses `Thread.getId()` there.)
    pub fn thread_id() -> u64 {
        owner::current_thread_id()
    }

    /// The watchdog timeout: the lease of locks taken without an explicit
    /// lease, renewed every third of it.
    pub fn watchdog_timeout(&self) -> Duration {
        self.inner.config.watchdog_timeout
    }

    /// A handle on the reentrant lock called `name` (Redisson's `getLock`).
    /// This does not talk to Redis; an empty name is reported by the first
    /// operation on the lock.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into())
    }

    /// A handle on the fenced lock called `name` (Redisson's
    /// `getFencedLock`): the reentrant lock plus a token per acquisition.
    /// This does not talk to Redis.
    pub fn fenced_lock(&self, name: impl Into<String>) -> FencedLock {
        Lock::new(self.clone(), name.into())
    }

    /// A handle on the fair lock called `name` (Redisson's `getFairLock`):
    /// waiters are served in arrival order, Java and Rust alike. This does
    /// not talk to Redis.
    pub fn fair_lock(&self, name: impl Into<String>) -> FairLock {
        let name = name.into();
        let kind = Fair::with_wait_timeout(&name, self.inner.config.fair_lock_wait_timeout);
        Lock::with_kind(self.clone(), name, kind)
    }

    /// A handle on the non-reentrant fair lock called `name` (Redisson's
    /// `getNonReentrantFairLock`, 4.4.0+): a fair lock its holder cannot
    /// take again. This does not talk to Redis.
    pub fn non_reentrant_fair_lock(&self, name: impl Into<String>) -> NonReentrantFairLock {
        let name = name.into();
        let kind =
            NonReentrantFair::with_wait_timeout(&name, self.inner.config.fair_lock_wait_timeout);
        Lock::with_kind(self.clone(), name, kind)
    }

    /// A handle on the read/write lock called `name` (Redisson's
    /// `getReadWriteLock`): a read lock and a write lock over one hash.
    /// This does not talk to Redis.
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock::new(self.clone(), name.into())
    }

    /// A handle on the spin lock called `name` (Redisson's `getSpinLock`):
    /// the reentrant lock's layout without pub/sub; its waiters poll with an
    /// exponential backoff (1 ms to 128 ms, see
    /// [`SpinLock::with_backoff`](crate::Lock::with_backoff)). This does
    /// not talk to Redis.
    pub fn spin_lock(&self, name: impl Into<String>) -> SpinLock {
        Lock::new(self.clone(), name.into())
    }

    /// A handle on the non-reentrant lock called `name` (Redisson's
    /// `getNonReentrantLock`, 4.4.0+): the reentrant lock's layout, but a
    /// second acquisition by the holder is refused with
    /// [`Error::NotReentrant`](crate::Error::NotReentrant). This does not
    /// talk to Redis.
    pub fn non_reentrant_lock(&self, name: impl Into<String>) -> NonReentrantLock {
        Lock::new(self.clone(), name.into())
    }

    /// A snapshot of the client's internal bookkeeping, for monitoring and tests.
    pub fn diagnostics(&self) -> Diagnostics {
        let (subscribed_channels, waiters) = self.inner.subscriber.stats();
        let (pooled_connections, idle_connections) = match &self.inner.cluster {
            Some(cluster) => cluster.pool_state(),
            None => self.inner.pool.state(),
        };
        Diagnostics {
            registered_holds: self.inner.registry.len(),
            subscribed_channels,
            waiters,
            pooled_connections,
            idle_connections,
        }
    }

    /// A request id for one unlock call: this client's random prefix and a
    /// counter, 32 hex digits like Redisson's.
    pub(crate) fn next_request_id(&self) -> RequestId {
        let seq = self.inner.request_seq.fetch_add(1, Ordering::Relaxed);
        RequestId::from_parts(self.inner.request_prefix, seq)
    }

    /// Refuses use from a `fork()`ed child: it would share this client's
    /// id and thread numbers with the parent. An atomic load (a `getpid` only
    /// after a fork, see `src/fork.rs`), no round trip.
    pub(crate) fn check_process(&self) -> Result<()> {
        if crate::fork::unchanged(self.inner.forks) {
            return Ok(());
        }
        let here = std::process::id();
        if here == self.inner.pid {
            return Ok(());
        }
        Err(Error::ForkedProcess {
            created_by: self.inner.pid,
            used_by: here,
        })
    }

    /// Runs `command` on a pooled connection to the server that holds `key`
    /// (in a cluster, the master serving its slot, see [`Cluster::run`]);
    /// its second argument says
    /// whether this is a resend. If the connection turns out to be dropped
    /// (it died idle in the pool: the server restarted, a proxy closed it),
    /// `command` runs once more on a connection that is fresh or has just
    /// answered a `PING`, so a restarted server costs callers nothing once it
    /// is back. (A command lost with a connection that dropped after the
    /// server ran it is sent twice: every lock command is safe to repeat when
    /// it knows it is a resend. An acquire sets the thread's own count, a
    /// guard's release sets the count it keeps, an unlock with a request id
    /// replays its latch, a force unlock then reports `false` for a lock it
    /// did delete.) A reply that does not come within the response
    /// timeout is [`Error::Timeout`] for `operation`. Callers have checked
    /// the process ([`Client::check_process`]) before.
    pub(crate) fn with_connection<T>(
        &self,
        key: &str,
        operation: &'static str,
        mut command: impl FnMut(&mut Checkout<'_>, bool) -> Result<T>,
    ) -> Result<T> {
        // Both paths run `command` whole on one connection, a resend
        // included: a `WAIT` for replicas after a lock script belongs inside
        // it (wrap `command`), so that it runs on the script's connection,
        // and in a cluster on the slot's master.
        if let Some(cluster) = &self.inner.cluster {
            let result = cluster.run(key, command, RECONNECT_GRACE);
            return result.map_err(|e| self.timeout_error(operation, e));
        }
        let pool = &self.inner.pool;
        let generation = pool.connector().endpoint().generation();
        let mut con = pool.get_within(RECONNECT_GRACE)?;
        let result = match command(&mut con, false) {
            Err(e) if e.is_connection_dropped() => {
                drop(con); // discarded by the pool
                // No connection for the resend: the caller must still learn
                // that the first one may have run.
                match pool.get_within(RECONNECT_GRACE) {
                    Ok(mut con) => command(&mut con, true),
                    Err(_) => Err(e),
                }
            }
            other => other,
        };
        let result = match result {
            // A former master refused the write, so the command did not
            // run: once the client follows the new master, send it there.
            Err(e) if e.code() == Some("READONLY") && self.await_failover(generation) => {
                match pool.get_within(RECONNECT_GRACE) {
                    Ok(mut con) => command(&mut con, false),
                    Err(_) => Err(e),
                }
            }
            other => other,
        };
        result.map_err(|e| self.timeout_error(operation, e))
    }

    /// A reply that did not come within the response timeout is
    /// [`Error::Timeout`] for `operation`.
    fn timeout_error(&self, operation: &'static str, e: Error) -> Error {
        match e {
            Error::Redis(e) if e.is_timeout() => Error::Timeout {
                operation,
                after: self.inner.config.response_timeout,
            },
            other => other,
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Deliberately not the connection info: it may carry credentials.
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("watchdog_timeout", &self.inner.config.watchdog_timeout)
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
    /// master's pool).
    pub pooled_connections: u32,
    /// Of those, how many are idle.
    pub idle_connections: u32,
}
