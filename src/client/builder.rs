//! [`ClientBuilder`]: a client's settings, checked and put to work by
//! [`ClientBuilder::build`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::{ConnectionInfo, RedisResult};

use crate::client::Client;
use crate::config::compat::{Compat, Explicit};
use crate::config::{Config, ReplicaWait, ShardedSubscription};
use crate::engine::Engine;
use crate::engine::events::EventHandler;
use crate::engine::observe;
use crate::error::{Error, Result};
use crate::names;
use crate::net::pool::Connections;
use crate::net::tls::{EndpointSettings, connection_name};
use crate::topology::sentinel::SentinelSettings;
use crate::topology::{Target, Topology};

/// What a Redis URL may look like, for the message of one that does not
/// parse (redis-rs says only that it did not).
const URL_FORMS: &str = "expected redis://[[user]:password@]host[:port][/db] (a password's \
     `@ : / ? #` percent-encoded), rediss://... (feature `tls-rustls`) or unix:///path/to/socket";

/// Builds a [`Client`]; see [`Client::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct ClientBuilder {
    /// The server's URL; under Sentinel, the master's scheme and settings;
    /// in a cluster, the first seed.
    pub(crate) info: RedisResult<ConnectionInfo>,
    pub(crate) config: Config,
    /// The pool's size, when the pool was asked for.
    pub(crate) pool_size: Option<u32>,
    /// Shared sockets per server instead of the pool, when asked for.
    pub(crate) multiplexed: Option<u32>,
    pub(crate) tls: EndpointSettings,
    /// The application's name in the connections' names.
    application: Option<String>,
    pub(crate) sentinel: Option<SentinelSettings>,
    /// Cluster seeds (`info` is the first one); `None` for one server.
    pub(crate) seeds: Option<Vec<ConnectionInfo>>,
    /// Sharded pub/sub in a cluster (ignored on one server).
    pub(crate) sharded: ShardedSubscription,
    /// The client-wide event handler, if any.
    handler: Option<Arc<dyn EventHandler>>,
    /// Metrics settings (the lock-label mapping; see `observe.rs`).
    pub(crate) observe: observe::Settings,
    /// The settings of [`redisson_compat`](Self::redisson_compat), or why
    /// its version was refused (reported by `build`).
    pub(crate) compat: Option<std::result::Result<Compat, String>>,
    /// The knobs set explicitly, which `redisson_compat` does not override.
    pub(crate) explicit: Explicit,
}

impl ClientBuilder {
    /// Redisson's defaults for the server (or first seed) `info`.
    pub(crate) fn new(info: RedisResult<ConnectionInfo>) -> Self {
        ClientBuilder {
            info,
            config: Config::default(),
            pool_size: None,
            multiplexed: None,
            tls: EndpointSettings::default(),
            application: None,
            sentinel: None,
            seeds: None,
            sharded: ShardedSubscription::Auto,
            handler: None,
            observe: observe::Settings::default(),
            compat: None,
            explicit: Explicit::default(),
        }
    }

    /// Calls `handler` for every lock event of the client: acquired,
    /// released, renewal failed (uncertain: the watchdog keeps renewing),
    /// expiring (a third of the lease left, not renewed yet) and lost (with
    /// its [`LostReason`](crate::LostReason)), for every lock type and
    /// topology. See [`EventHandler`] for the thread it runs on and its
    /// bounds: a slow or panicking handler never delays a lock call or a
    /// renewal. Costs a thread per client (`rlock-events`), and one that
    /// watches deadlines (`rlock-deadline`) once a lock is held.
    ///
    /// ```no_run
    /// use redisson_lock::{Client, EventHandler, LockEvent, LostReason};
    ///
    /// struct Alarm;
    /// impl EventHandler for Alarm {
    ///     fn lost(&self, lock: &LockEvent, reason: LostReason) {
    ///         eprintln!("lost {}: {reason}", lock.name);
    ///     }
    /// }
    ///
    /// let client = Client::builder("redis://127.0.0.1:6379").event_handler(Alarm).build()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn event_handler(mut self, handler: impl EventHandler) -> Self {
        self.handler = Some(Arc::new(handler));
        self
    }

    /// Names the application in the name every connection of the client
    /// gives itself (`CLIENT SETNAME redisson-lock/<client id>/<pid>/<name>`),
    /// so that `Client::identify_holders` and `redisson-lock inspect` can
    /// say which application and process holds a lock, with its address.
    /// Letters, digits, `.`, `_` and `-` only, at most 64 of them
    /// ([`Error::InvalidArgument`] from [`build`](Self::build) otherwise).
    /// Without it the name still carries the client id and the process id.
    /// Costs nothing per lock: the name is sent once per connection.
    pub fn application_name(mut self, name: &str) -> Self {
        self.application = Some(name.to_owned());
        self
    }

    /// The lease of locks taken without an explicit one, and the `PEXPIRE`
    /// the watchdog renews them to every third of it. Redisson's
    /// `lockWatchdogTimeout`; default 30 s. Java and Rust clients sharing
    /// locks should agree on it.
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.config.watchdog_timeout = timeout;
        self
    }

    /// Pooled command connections, at most `size` per server (1 to
    /// 10,000): a thread checks one out for the duration of a command, so
    /// a slow command delays nobody else. The default under replica sync
    /// (Sentinel and cluster clients, or
    /// [`check_lock_synced_replicas`](Self::check_lock_synced_replicas)),
    /// with 32; replaces [`multiplexed`](Self::multiplexed) (the last call
    /// wins).
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = Some(size);
        self.multiplexed = None;
        self
    }

    /// Commands of every thread share `connections` sockets per server
    /// (per master in a cluster) instead of taking a pooled connection each
    /// (1 to 64; 2 to 4 is plenty). Each command is written as it comes and
    /// the replies are read back in order, so that many round trips overlap
    /// on one socket and one `read` serves many callers: with many threads,
    /// fewer connections, system calls and wake-ups per command. The caller
    /// whose reply is next reads the socket and hands later replies to
    /// their callers: a lone thread reads its own reply, with no hand-off
    /// and no extra thread.
    ///
    /// Guarantees, as with pooled connections: no command is ever sent
    /// twice after a timeout; a command's commands that must be adjacent
    /// (`ASKING` and its command, a script and its `WAIT`) are written
    /// together. What it costs: a reply that does not come within the
    /// response timeout (give or take an eighth of it) closes the socket,
    /// and every command in flight on it then fails with
    /// [`Error::Timeout`] (its outcome unknown, handled by each lock kind
    /// as a timeout on its own connection is: an acquire checks its own
    /// count, a release keeps its count, a synchronizer reports it); a
    /// socket that breaks fails them as a dropped connection (sent once
    /// more, flagged as a resend, as on a pooled connection). A slow script
    /// delays the commands behind it on its socket, up to the response
    /// timeout; so does a replica-synced write's `WAIT` (Sentinel and
    /// cluster clients, [`check_lock_synced_replicas`](Self::check_lock_synced_replicas)),
    /// until the replicas acknowledge or its timeout passes, and several
    /// `WAIT`s queued on one socket add up, so that lagging replicas can
    /// take the socket past the response timeout and fail every command on
    /// it: under replica sync the pool (the default there) isolates callers. The watchdog's renewals (outside a cluster)
    /// and the subscriber keep connections of their own.
    ///
    /// The default is `multiplexed(4)` for a client without replica sync
    /// (one server), and a pool of 32 connections under replica sync
    /// (Sentinel and cluster clients), where a write's `WAIT` would hold a
    /// shared socket (docs/performance.md summarises the measurements).
    /// Replaces [`pool_size`](Self::pool_size) (the last call wins).
    pub fn multiplexed(mut self, connections: u32) -> Self {
        self.multiplexed = Some(connections);
        self.pool_size = None;
        self
    }

    /// Limit on opening a connection, and on waiting for a free pooled one
    /// (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// Limit on waiting for any one reply (default 3 s): the whole reply,
    /// however the server sends it (give or take an eighth of it), not each
    /// read of the socket. A pipeline's replies (a script and its `WAIT`)
    /// share one limit. A signal that interrupts a read is not a failure:
    /// the read goes on, within the same limit.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.config.response_timeout = timeout;
        self
    }

    /// How often an unlock whose reply was lost (a response timeout, a
    /// dropped connection) is sent again, and how long to pause before each
    /// retry (default 3 times, 500 ms). A guard's release sets the count the
    /// thread keeps and an unlock with a request id replays its latch, so
    /// these retries never release twice. No retry is made when no
    /// connection can be had at all: the server refusing is an answer.
    pub fn unlock_retries(mut self, attempts: u32, delay: Duration) -> Self {
        self.config.retry_attempts = attempts;
        self.config.retry_delay = delay;
        self
    }

    /// Limit on waiting for the server to confirm a subscription before the
    /// second acquire attempt (default 7.5 s, Redisson's
    /// `subscriptionTimeout`). A waiter never waits longer than the holder's
    /// TTL for it either.
    pub fn subscription_timeout(mut self, timeout: Duration) -> Self {
        self.config.subscription_timeout = timeout;
        self
    }

    /// The wait a fair lock queues a thread with when the thread has no wait
    /// budget of its own ([`Lock::lock`](crate::Lock::lock)): a queued waiter that has not
    /// taken the lock this long after it joined is dropped from the queue
    /// (and joins again at the tail on its next attempt). Redisson's
    /// `fairLockWaitTimeout`; default 300 s. Every client of a fair lock, Java
    /// or Rust, should use the same value: queue deadlines are shifted by each
    /// acquirer's own. Checked by [`build`](Self::build): 1 ms to 100 years.
    /// Set explicitly, it wins over [`redisson_compat`](Self::redisson_compat)
    /// (which gives 5 s for Redisson up to 3.13.2), whatever the call order.
    pub fn fair_lock_wait_timeout(mut self, timeout: Duration) -> Self {
        self.config.fair_lock_wait_timeout = timeout;
        self.explicit.fair_lock_wait_timeout = true;
        self
    }

    /// Checks the settings, connects (failing fast on a refused connection
    /// or wrong credentials, within the connect timeout on a silent server),
    /// and starts the watchdog thread.
    pub fn build(self) -> Result<Client> {
        let info = self
            .info
            .map_err(|e| Error::invalid(format!("invalid Redis URL ({e}); {URL_FORMS}")))?;
        if let Some(name) = &self.application {
            let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
            if name.is_empty() || name.len() > 64 || !name.chars().all(allowed) {
                return Err(Error::invalid(format!(
                    "application name {name:?}: 1 to 64 letters, digits, `.`, `_` or `-`"
                )));
            }
        }
        let mut config = self.config;
        let mut sharded = self.sharded;
        if let Some(compat) = self.compat {
            let compat = compat.map_err(Error::invalid)?;
            compat.apply(&mut config, &mut sharded, self.explicit);
        }
        config.check()?;
        let connections = match (self.multiplexed, self.pool_size) {
            (Some(n), _) if !(1..=64).contains(&n) => {
                return Err(Error::invalid(format!(
                    "multiplexed connections must be between 1 and 64, got {n}"
                )));
            }
            (_, Some(n)) if n == 0 || n > 10_000 => {
                return Err(Error::invalid(format!(
                    "pool size must be between 1 and 10000, got {n}"
                )));
            }
            (Some(n), _) => Connections::Multiplexed(n),
            (None, Some(n)) => Connections::Pooled(n),
            // A replica-synced write's WAIT would hold a shared socket.
            (None, None) if config.replica_wait != ReplicaWait::Off => {
                Connections::Pooled(names::DEFAULT_POOL_SIZE)
            }
            (None, None) => Connections::Multiplexed(names::DEFAULT_MULTIPLEXED),
        };
        config.multiplexed = match connections {
            Connections::Multiplexed(n) => Some(n),
            Connections::Pooled(_) => None,
        };
        let target = match (self.seeds, self.sentinel) {
            (None, None) => Target::Single(info),
            (None, Some(sentinel)) => Target::Sentinel(info, sentinel),
            (Some(seeds), None) => Target::Cluster(seeds, sharded),
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "a client is either for Sentinel or for a cluster, not both",
                ));
            }
        };
        // The id first: every connection carries it in its name.
        let id = uuid::Uuid::new_v4().to_string();
        let mut settings = self.tls;
        settings.name = Some(connection_name(&id, self.application.as_deref()).into());
        let topology = Topology::connect(target, &config, connections, &settings)?;
        Ok(Client {
            engine: Arc::new(Engine::start(
                id,
                config,
                topology,
                self.handler,
                self.observe,
            )?),
        })
    }
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("config", &self.config)
            .field("pool_size", &self.pool_size)
            .field("multiplexed", &self.multiplexed)
            .finish_non_exhaustive()
    }
}
