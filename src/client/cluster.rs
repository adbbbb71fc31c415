//! Building a [`Client`] for a Redis Cluster.

use redis::{ConnectionInfo, IntoConnectionInfo, RedisResult};

use crate::client::{Client, ClientBuilder};
use crate::config::{ReplicaWait, ShardedSubscription};

impl Client {
    /// Starts configuring a client for the Redis Cluster that `seeds`
    /// belong to (Redisson's `useClusterServers().addNodeAddress(..)`).
    ///
    /// Any node of the cluster will do as a seed, and one answering is
    /// enough: [`build`](ClientBuilder::build) reads the slot table
    /// (`CLUSTER SLOTS`) from the first seed that answers and fails with
    /// [`Error::Unavailable`](crate::Error::Unavailable) if none does, or
    /// if some slot has no master. Credentials, database and TLS settings
    /// of the first seed are used for every node.
    ///
    /// Each lock command then goes to the master serving its lock name's
    /// slot (CRC16 of the hash tag, as Redis computes it), over a pool of
    /// connections to that master opened on first use (up to
    /// [`pool_size`](ClientBuilder::pool_size) per master). `MOVED` and
    /// `ASK` are followed, and a command is sent again only when the
    /// server's reply proves it did not run (`TRYAGAIN`, `CLUSTERDOWN`,
    /// `LOADING`, `READONLY`, `MASTERDOWN`, `BUSY`, or a refused
    /// connection: up to 6 times, 100 ms apart and doubling up to 1.5 s, so
    /// about 4.5 s in all, enough to ride out an automatic failover); a
    /// response timeout is reported, never resent.
    /// The table is read again after a `MOVED`, a lost connection, and
    /// every 5 s by one background thread (`rlock-cluster`). The watchdog
    /// renews holds in chunks of one slot each, every chunk sent to its
    /// slot's master.
    ///
    /// Replica sync is on, as in Redisson: every lock write is followed by a
    /// `WAIT` for the master's connected replicas (see
    /// [`check_lock_synced_replicas`](ClientBuilder::check_lock_synced_replicas)).
    ///
    /// Lock names whose derived keys fall in different slots (a name with
    /// a `{` but no complete hash tag, such as `a{b`) fail with a
    /// `CROSSSLOT` error, as they do in Redisson.
    pub fn cluster_builder(
        seeds: impl IntoIterator<Item = impl IntoConnectionInfo>,
    ) -> ClientBuilder {
        let seeds: RedisResult<Vec<ConnectionInfo>> = seeds
            .into_iter()
            .map(IntoConnectionInfo::into_connection_info)
            .collect();
        let (info, seeds) = match seeds {
            Ok(seeds) => match seeds.first() {
                Some(first) => (Ok(first.clone()), Some(seeds)),
                None => (
                    Err(redis::RedisError::from((
                        redis::ErrorKind::InvalidClientConfig,
                        "no cluster seed given",
                    ))),
                    None,
                ),
            },
            Err(e) => (Err(e), None),
        };
        // Any URL stands in for the settings' defaults; `info` and `seeds`
        // are replaced below.
        let mut builder = Client::builder("redis://127.0.0.1");
        builder.info = info;
        builder.seeds = seeds;
        // Redisson waits for the replicas outside single-server mode.
        builder.config.replica_wait = ReplicaWait::Checked;
        builder
    }
}

impl ClientBuilder {
    /// Chooses classic or sharded pub/sub in a cluster (default
    /// [`ShardedSubscription::Auto`]); see [`ShardedSubscription`]. The
    /// choice is logged at INFO level when the client is built. Set
    /// explicitly, it wins over [`redisson_compat`](Self::redisson_compat)
    /// (which gives [`ShardedSubscription::Both`] for Redisson before 3.22),
    /// whatever the call order.
    pub fn sharded_subscription(mut self, mode: ShardedSubscription) -> Self {
        self.sharded = mode;
        self.explicit.sharded = true;
        self
    }
}
