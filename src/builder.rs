//! [`ClientBuilder`]: a client's settings, checked and put to work by
//! [`ClientBuilder::build`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use redis::{ConnectionInfo, RedisResult};

use crate::client::{Client, Inner};
use crate::cluster::{Cluster, ShardedSubscription, Subscribers};
use crate::connection::Connector;
use crate::error::{Error, Result};
use crate::holds::Registry;
use crate::pool::Pool;
use crate::pubsub::{Flavour, Subscriber};
use crate::replicas::ReplicaSync;
use crate::scripts::lease_millis;
use crate::sentinel::SentinelSettings;
use crate::tls::TlsSettings;
use crate::watchdog::Watchdog;

/// Settings fixed when the client is built.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub watchdog_timeout: Duration,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    pub retry_attempts: u32,
    pub retry_delay: Duration,
    pub subscription_timeout: Duration,
    pub fair_lock_wait_timeout: Duration,
    /// `WAIT` after lock writes: `None` off; `Some(check)` on, `check` making
    /// an unacknowledged write an error (see [`crate::replicas`]).
    pub replica_sync: Option<bool>,
    /// The `WAIT` timeout; `None`: 1 s, or half the response timeout if
    /// that is shorter (see [`Config::replicas_sync_timeout`]).
    pub replicas_sync_timeout: Option<Duration>,
}

impl Config {
    /// How long an unlock latch must outlive the unlock call: every retry
    /// of the call fits inside it.
    pub fn latch_ttl_ms(&self) -> u64 {
        let per_attempt = self.response_timeout.saturating_add(self.retry_delay);
        let total = per_attempt.saturating_mul(self.retry_attempts.saturating_add(1));
        u64::try_from(total.as_millis()).unwrap_or(u64::MAX).max(1)
    }
}

/// Builds a [`Client`]; see [`Client::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct ClientBuilder {
    /// The server's URL; under Sentinel, the master's scheme and settings;
    /// in a cluster, the first seed.
    pub(crate) info: RedisResult<ConnectionInfo>,
    pub(crate) config: Config,
    pub(crate) pool_size: u32,
    pub(crate) tls: TlsSettings,
    pub(crate) sentinel: Option<SentinelSettings>,
    /// Cluster seeds (`info` is the first one); `None` for one server.
    pub(crate) seeds: Option<Vec<ConnectionInfo>>,
    /// Sharded pub/sub in a cluster (ignored on one server).
    pub(crate) sharded: ShardedSubscription,
}

impl ClientBuilder {
    /// The lease of locks taken without an explicit one, and the `PEXPIRE`
    /// the watchdog renews them to every third of it. Redisson's
    /// `lockWatchdogTimeout`; default 30 s. Java and Rust clients sharing
    /// locks should agree on it.
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.config.watchdog_timeout = timeout;
        self
    }

    /// Maximum number of pooled command connections (default 32). A thread
    /// holds one only for the duration of a command.
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = size;
        self
    }

    /// Limit on opening a connection, and on waiting for a free pooled one
    /// (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// Limit on waiting for any one reply (default 3 s).
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
    pub fn fair_lock_wait_timeout(mut self, timeout: Duration) -> Self {
        self.config.fair_lock_wait_timeout = timeout;
        self
    }

    /// Checks the settings, connects, and starts the watchdog thread.
    pub fn build(self) -> Result<Client> {
        let info = self
            .info
            .map_err(|e| Error::invalid(format!("invalid Redis connection info: {e}")))?;
        let config = self.config;
        lease_millis("watchdog timeout", config.watchdog_timeout)?;
        lease_millis("fair lock wait timeout", config.fair_lock_wait_timeout)?;
        if config.watchdog_timeout < Duration::from_millis(30) {
            return Err(Error::invalid(format!(
                "watchdog timeout must be at least 30 ms, got {:?}",
                config.watchdog_timeout
            )));
        }
        for (what, value) in [
            ("connect timeout", config.connect_timeout),
            ("response timeout", config.response_timeout),
            ("subscription timeout", config.subscription_timeout),
        ] {
            if value.is_zero() || value > Duration::from_secs(24 * 3600) {
                return Err(Error::invalid(format!(
                    "{what} must be between 1 ns and 24 h, got {value:?}"
                )));
            }
        }
        if config.retry_delay > Duration::from_secs(3600) || config.retry_attempts > 100 {
            return Err(Error::invalid(
                "unlock retries are limited to 100 attempts of at most 1 h delay",
            ));
        }
        crate::replicas::check_config(&config)?;
        if self.pool_size == 0 || self.pool_size > 10_000 {
            return Err(Error::invalid(format!(
                "pool size must be between 1 and 10000, got {}",
                self.pool_size
            )));
        }

        let timeouts = (config.connect_timeout, config.response_timeout);
        let (pool, cluster, endpoint, sentinels) = match self.seeds {
            None => {
                let endpoint = self.tls.endpoint(info)?;
                // Under Sentinel, the endpoint moves to the master they name.
                let sentinels = (self.sentinel)
                    .map(|settings| settings.locate(&self.tls, &endpoint, timeouts))
                    .transpose()?;
                let endpoint = Arc::new(endpoint);
                let connector = Connector::new(
                    Arc::clone(&endpoint),
                    config.connect_timeout,
                    config.response_timeout,
                )?;
                let pool = Arc::new(Pool::new(connector, self.pool_size));
                // Fail now if the server cannot be reached (at once when it
                // refuses, within the connect timeout when it is silent) or
                // refuses the credentials; the connection stays in the pool
                // for the first command.
                drop(pool.get()?);
                (pool, None, Some(endpoint), sentinels)
            }
            Some(seeds) => {
                if self.sentinel.is_some() {
                    return Err(Error::invalid(
                        "a client is either for Sentinel or for a cluster, not both",
                    ));
                }
                let (pool, cluster) =
                    Cluster::for_client(seeds, &config, self.pool_size, &self.tls)?;
                (pool, Some(cluster), None, None)
            }
        };

        let registry = Arc::new(Registry::default());
        let sync = config
            .replica_sync
            .map(|check| Arc::new(ReplicaSync::new(check, config.replicas_sync_timeout())));
        let watchdog = Watchdog::start(
            Arc::clone(&registry),
            Arc::clone(&pool),
            cluster.clone(),
            config.watchdog_timeout,
            sync.clone(),
        )?;
        let (subscriber, publish, sentinel) = match (&cluster, endpoint) {
            (Some(cluster), _) => {
                let (subscribers, publish) = Cluster::subscribers(cluster, self.sharded, &config);
                (subscribers, publish, None)
            }
            (None, endpoint) => {
                let endpoint = endpoint.unwrap_or_else(|| Arc::clone(pool.connector().endpoint()));
                let subscriber = Subscriber::new(
                    Arc::clone(&endpoint),
                    config.connect_timeout,
                    config.response_timeout,
                    Flavour::Standalone,
                );
                let sentinel = sentinels
                    .map(|sentinels| sentinels.watch(endpoint, subscriber.handle(), timeouts))
                    .transpose()?;
                (Subscribers::One(subscriber), "publish", sentinel)
            }
        };
        let forks = crate::fork::count();
        let id = uuid::Uuid::new_v4();
        Ok(Client {
            inner: Arc::new(Inner {
                request_prefix: uuid::Uuid::new_v4().as_u64_pair().0,
                request_seq: AtomicU64::new(0),
                id: id.to_string(),
                config,
                pool,
                cluster,
                pid: std::process::id(),
                forks,
                registry,
                _watchdog: watchdog,
                _sentinel: sentinel,
                subscriber,
                sync,
                publish,
            }),
        })
    }
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("config", &self.config)
            .field("pool_size", &self.pool_size)
            .finish_non_exhaustive()
    }
}
