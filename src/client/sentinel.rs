//! Building a [`Client`] for the master that Redis Sentinels name: the
//! constructor and the Sentinel knobs of [`ClientBuilder`] (the mechanism
//! is `crate::topology::sentinel`).

use std::time::Duration;

use redis::IntoConnectionInfo;

use crate::client::{Client, ClientBuilder};
use crate::config::ReplicaWait;
use crate::topology::sentinel::SentinelSettings;

impl Client {
    /// Starts configuring a client for the master that the Redis Sentinels
    /// at `sentinels` monitor under `master_name` (Redisson's
    /// `useSentinelServers().setMasterName(..).addSentinelAddress(..)`).
    ///
    /// [`build`](ClientBuilder::build) asks the sentinels in turn for the
    /// master's address (`SENTINEL GET-MASTER-ADDR-BY-NAME`, one round trip
    /// each, with the connect and response timeouts) and confirms it with
    /// `ROLE`; it fails with [`Error::Unavailable`](crate::Error::Unavailable) when no sentinel names a
    /// master that confirms ([`Error::TlsCertificate`](crate::Error::TlsCertificate) when every one was
    /// refused over a TLS certificate). The client then follows the master: a thread
    /// (`rlock-sentinel`, stopped with the client's last clone) asks again
    /// every second (see [`ClientBuilder::sentinel_scan_interval`]), and at
    /// once after a `READONLY` reply or a lost
    /// connection. After a failover, new commands go to the new master
    /// (pooled connections to the former one are discarded), the watchdog
    /// renews the held locks there (a lock the new master has, because it
    /// had replicated, stays held; one it lacks is reported
    /// [lost](crate::LockGuard::is_lost) with reason
    /// [`KeyGone`](crate::LostReason::KeyGone)), and waiting threads are woken to try
    /// again while the subscriber moves. A command answered `READONLY` by
    /// the former master waits up to the connect timeout for the move and is
    /// sent once more (it provably did not run).
    ///
    /// The master is reached with the scheme (`rediss://` for TLS),
    /// credentials and database of the first sentinel URL, unless
    /// [`ClientBuilder::sentinel_master_url`] gives others. Each sentinel
    /// is asked with its own URL's credentials (without them if it has no
    /// password, as a sentinel answers when its URL carries the master's
    /// password), never with a database. Between a
    /// failover and the next lookup (at most a second), locks can still be
    /// taken on the former master while it accepts writes; so can Redisson's.
    ///
    /// ```no_run
    /// let client = redisson_lock::Client::sentinel_builder(
    ///     "mymaster",
    ///     ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379", "redis://10.0.0.3:26379"],
    /// )
    /// .build()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn sentinel_builder(
        master_name: &str,
        sentinels: impl IntoIterator<Item = impl IntoConnectionInfo>,
    ) -> ClientBuilder {
        let sentinels: Vec<_> = sentinels
            .into_iter()
            .map(IntoConnectionInfo::into_connection_info)
            .collect();
        let template = match sentinels.first() {
            Some(Ok(info)) => Ok(info.clone()),
            Some(Err(e)) => Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "invalid sentinel URL",
                e.to_string(),
            ))),
            None => Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "no sentinel address given",
            ))),
        };
        // The placeholder address is replaced by `template` at once.
        let mut builder = Client::builder(("127.0.0.1", 0u16));
        builder.info = template;
        // Redisson waits for the replicas outside single-server mode.
        builder.config.replica_wait = ReplicaWait::Checked;
        builder.sentinel = Some(SentinelSettings::new(master_name, sentinels));
        builder
    }
}

impl ClientBuilder {
    /// For a [Sentinel](Client::sentinel_builder) client: the scheme,
    /// credentials and database to reach the master with, as a URL whose
    /// host and port are ignored (e.g. `redis://:secret@master/2`).
    /// Without it the first sentinel URL's are used.
    /// [`build`](Self::build) fails with [`Error::InvalidArgument`](crate::Error::InvalidArgument) when
    /// the builder is not a Sentinel one.
    pub fn sentinel_master_url(mut self, url: impl IntoConnectionInfo) -> Self {
        self.info = match self.sentinel {
            Some(_) => url.into_connection_info(),
            None => Err(not_sentinel("sentinel_master_url")),
        };
        self
    }

    /// For a [Sentinel](Client::sentinel_builder) client: how often the
    /// sentinels are asked for the master (Redisson's `scanInterval`,
    /// default 1 s). A `READONLY` reply or a lost connection still makes
    /// the client ask at once. Each look-up costs a connection and one round
    /// trip to a sentinel. [`build`](Self::build) fails with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) outside 10 ms..=24 h, or when the builder
    /// is not a Sentinel one.
    pub fn sentinel_scan_interval(mut self, interval: Duration) -> Self {
        match self.sentinel.as_mut() {
            Some(settings) => settings.set_scan_interval(interval),
            None => self.info = Err(not_sentinel("sentinel_scan_interval")),
        }
        self
    }
}

fn not_sentinel(method: &str) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::InvalidClientConfig,
        "a Sentinel setting on a builder that is not a Sentinel one",
        format!("`{method}` needs `Client::sentinel_builder`"),
    ))
}
