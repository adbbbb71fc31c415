//! Where a client's commands and subscriptions go: one [`Topology`] per
//! client, matched here once per operation (as crossbeam-channel matches
//! its flavours), so that nothing above it branches on the topology.
//!
//! - [`Topology::Single`]: one server, one pool, one subscriber.
//! - [`Topology::Sentinel`]: the same, to the master the sentinels name; its
//!   endpoint moves with them ([`sentinel`]).
//! - [`Topology::Cluster`]: a pool and a subscriber per master, each command
//!   to its key's slot master ([`cluster`]), renewals grouped by slot.
//!
//! The pub/sub [`Flavour`] chosen here drives both the scripts' publish
//! command and the subscribers.

pub(crate) mod cluster;
pub(crate) mod renewal;
pub(crate) mod sentinel;
mod subscribers;

use std::sync::Arc;
use std::time::Instant;

use redis::ConnectionInfo;

use crate::config::{Config, ShardedSubscription};
use crate::error::{Error, Result, Verdict};
use crate::net::connection::Connector;
use crate::net::pool::{Checkout, Connections, Pool, RECONNECT_GRACE};
use crate::net::resend::once_more;
use crate::net::scatter::InFlight;
use crate::net::tls::EndpointSettings;
use crate::pubsub::{Flavour, Subscriber, Subscription};
use cluster::Cluster;
use cluster::slot::key_slot;
use sentinel::{SentinelSettings, SentinelWatch};
use subscribers::PerMaster;

/// What the builder says to connect to.
pub(crate) enum Target {
    /// One server.
    Single(ConnectionInfo),
    /// The master the sentinels name, reached with `ConnectionInfo`'s
    /// scheme, credentials and database.
    Sentinel(ConnectionInfo, SentinelSettings),
    /// The cluster these seeds belong to.
    Cluster(Vec<ConnectionInfo>, ShardedSubscription),
}

/// A client's topology: its pools, its subscribers, and for Sentinel the
/// thread that follows the master. Dropping it closes them.
pub(crate) enum Topology {
    /// One server.
    Single {
        pool: Arc<Pool>,
        subscriber: Subscriber,
    },
    /// The master the sentinels name. The pool's endpoint moves with them.
    Sentinel {
        pool: Arc<Pool>,
        subscriber: Subscriber,
        /// Held for its `Drop`, which stops the thread.
        _watch: SentinelWatch,
    },
    /// A Redis Cluster: a pool and a subscriber per master.
    Cluster {
        cluster: Arc<Cluster>,
        subscribers: PerMaster,
    },
}

impl Topology {
    /// Connects to `target`: fails now if it cannot be reached (at once when
    /// it refuses, within the connect timeout when it is silent) or refuses
    /// the credentials; the connection opened to check stays pooled.
    pub fn connect(
        target: Target,
        config: &Config,
        connections: Connections,
        tls: &EndpointSettings,
    ) -> Result<Topology> {
        let timeouts = (config.connect_timeout, config.response_timeout);
        let plain = |endpoint| -> Result<(Arc<Pool>, Subscriber)> {
            let endpoint = Arc::new(endpoint);
            let connector = Connector::new(Arc::clone(&endpoint), timeouts.0, timeouts.1)?;
            let pool = Arc::new(connections.pool(connector));
            drop(pool.get()?);
            let subscriber = Subscriber::new(endpoint, timeouts.0, timeouts.1, Flavour::Standalone);
            Ok((pool, subscriber))
        };
        match target {
            Target::Single(info) => {
                let (pool, subscriber) = plain(tls.endpoint(info)?)?;
                Ok(Topology::Single { pool, subscriber })
            }
            Target::Sentinel(info, settings) => {
                let endpoint = tls.endpoint(info)?;
                // The endpoint moves to the master the sentinels name.
                let sentinels = settings.locate(tls, &endpoint, timeouts)?;
                let (pool, subscriber) = plain(endpoint)?;
                let endpoint = Arc::clone(pool.connector().endpoint());
                let watch = sentinels.watch(endpoint, subscriber.handle(), timeouts)?;
                Ok(Topology::Sentinel {
                    pool,
                    subscriber,
                    _watch: watch,
                })
            }
            Target::Cluster(seeds, mode) => {
                let cluster = Cluster::for_client(seeds, config, connections, tls)?;
                let flavour = cluster.flavour(mode);
                let subscribers = PerMaster::new(
                    Arc::clone(&cluster),
                    flavour,
                    config.connect_timeout,
                    config.response_timeout,
                );
                Ok(Topology::Cluster {
                    cluster,
                    subscribers,
                })
            }
        }
    }

    /// The pub/sub flavour: the unlock scripts publish with
    /// [`Flavour::publish`], the subscribers subscribe with its commands.
    pub fn flavour(&self) -> Flavour {
        match self {
            Topology::Single { .. } | Topology::Sentinel { .. } => Flavour::Standalone,
            Topology::Cluster { subscribers, .. } => subscribers.flavour(),
        }
    }

    /// The one pool of a single server or Sentinel master; `None` in a
    /// cluster (a pool per master).
    fn pool(&self) -> Option<&Arc<Pool>> {
        match self {
            Topology::Single { pool, .. } | Topology::Sentinel { pool, .. } => Some(pool),
            Topology::Cluster { .. } => None,
        }
    }

    /// The pool of every master: the one pool of a single server or
    /// Sentinel master, or in a cluster the pool of each master serving
    /// slots per the current slot table (pools are opened on first use; no
    /// connection is made here). For commands that must visit every key
    /// space, such as `SCAN`.
    pub fn master_pools(&self) -> Result<Vec<Arc<Pool>>> {
        match self {
            Topology::Single { pool, .. } | Topology::Sentinel { pool, .. } => {
                Ok(vec![Arc::clone(pool)])
            }
            Topology::Cluster { cluster, .. } => cluster
                .masters()
                .iter()
                .map(|addr| cluster.pool(addr))
                .collect(),
        }
    }

    /// Whether commands for several names can be written on this client's
    /// connections before their replies are read (scatter/gather, see
    /// [`Topology::send_ahead`]): on the one pool of a single server or
    /// Sentinel master; not in a cluster, where each name has its master.
    pub fn can_send_ahead(&self) -> bool {
        self.pool().is_some()
    }

    /// Writes `packed` on a pooled connection, without waiting for one:
    /// `None` when every connection is busy (or in a cluster, see
    /// [`Topology::can_send_ahead`]); `Err` when no connection could be had
    /// (nothing was sent). A failed write is kept for the reply (the
    /// single-lock path's resend rule then applies).
    pub fn send_ahead(&self, packed: &[u8]) -> Option<Result<InFlight<'_>>> {
        let con = match self.pool()?.get_no_wait()? {
            Ok(con) => con,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok(InFlight::send(con, packed)))
    }

    /// In a cluster, the slots of the keys `a` and `b` when they differ (a
    /// script that takes both as keys would be refused with `CROSSSLOT`);
    /// `None` when they share one, and outside a cluster.
    pub fn slots_apart(&self, a: &str, b: &str) -> Option<(u16, u16)> {
        match self {
            Topology::Single { .. } | Topology::Sentinel { .. } => None,
            Topology::Cluster { .. } => {
                let (a, b) = (key_slot(a.as_bytes()), key_slot(b.as_bytes()));
                (a != b).then_some((a, b))
            }
        }
    }

    /// Runs `command` on a pooled connection to the server that holds
    /// `key` (in a cluster, the master serving its slot, see
    /// [`Cluster::run`]); its second argument says whether this is a
    /// resend. A connection that turns out to be dropped (it died idle in
    /// the pool) gets `command` once more, flagged as a resend, on a fresh
    /// one. Under Sentinel, a `READONLY` reply (a former master: the
    /// command did not run) waits up to the connect timeout for the client
    /// to follow the master, and is sent there.
    pub fn run<T>(
        &self,
        key: &str,
        config: &Config,
        mut command: impl FnMut(&mut Checkout<'_>, bool) -> Result<T>,
    ) -> Result<T> {
        let pool = match self {
            Topology::Cluster { cluster, .. } => return cluster.run(key, command, RECONNECT_GRACE),
            Topology::Single { pool, .. } | Topology::Sentinel { pool, .. } => pool,
        };
        let endpoint = pool.connector().endpoint();
        let generation = endpoint.generation();
        let fresh = || pool.get_within(RECONNECT_GRACE);
        // Whether an attempt that may have run was sent: a dropped first
        // send, answered READONLY on its resend, may have run on the
        // master before it was demoted, so the send to the new master is
        // flagged as a resend too.
        let mut may_have_run = false;
        let result = once_more(fresh()?, false, fresh, |con, resend| {
            may_have_run |= resend;
            command(con, resend)
        })
        .result();
        match result {
            // A former master (only a Sentinel's endpoint is watched).
            Err(e)
                if endpoint.is_former_master(Verdict::of(&e))
                    && endpoint.await_move(generation, config.connect_timeout) =>
            {
                match pool.get_within(RECONNECT_GRACE) {
                    Ok(mut con) => command(&mut con, may_have_run),
                    Err(_) => Err(e),
                }
            }
            other => other,
        }
    }

    /// Registers the calling thread as a waiter on `entry` of `channel`
    /// (see [`Subscriber::subscribe`]); in a cluster, on the subscriber of
    /// the master serving `channel`'s slot.
    pub fn subscribe(&self, channel: &str, entry: &str, limit: Instant) -> Result<Subscription> {
        match self {
            Topology::Single { subscriber, .. } | Topology::Sentinel { subscriber, .. } => {
                subscriber.subscribe(channel, entry, limit)
            }
            Topology::Cluster { subscribers, .. } => subscribers.subscribe(channel, entry, limit),
        }
    }

    /// Whether some thread of this client waits on `entry` of `channel`.
    /// Never waits for I/O.
    pub fn has_waiters(&self, channel: &str, entry: &str) -> bool {
        match self {
            Topology::Single { subscriber, .. } | Topology::Sentinel { subscriber, .. } => {
                subscriber.has_waiters(channel, entry)
            }
            Topology::Cluster { subscribers, .. } => subscribers.has_waiters(channel, entry),
        }
    }

    /// Whether the waiter of `subscription` to `channel` must subscribe
    /// again: its subscription moved away (see [`Subscription::is_moved`]),
    /// or in a cluster, the slot table now names another master for the
    /// channel (a failover whose old master is unreachable never tells its
    /// subscribers). Never waits for I/O.
    pub fn is_stale(&self, subscription: &Subscription, channel: &str) -> bool {
        subscription.is_moved()
            || match self {
                Topology::Single { .. } | Topology::Sentinel { .. } => false,
                Topology::Cluster { subscribers, .. } => {
                    subscribers.is_elsewhere(subscription, channel)
                }
            }
    }

    /// Channels subscribed (or being subscribed) and waiting threads, over
    /// every subscriber.
    pub fn subscriber_stats(&self) -> (usize, usize) {
        match self {
            Topology::Single { subscriber, .. } | Topology::Sentinel { subscriber, .. } => {
                subscriber.stats()
            }
            Topology::Cluster { subscribers, .. } => subscribers.stats(),
        }
    }

    /// Connections open and idle, over every pool.
    pub fn pool_state(&self) -> (u32, u32) {
        match self {
            Topology::Single { pool, .. } | Topology::Sentinel { pool, .. } => pool.state(),
            Topology::Cluster { cluster, .. } => cluster.pool_state(),
        }
    }
}

impl Topology {
    /// Stops the topology's threads and waits for them: the subscribers'
    /// (whose waiters the caller has woken), the Sentinel thread, the
    /// cluster's refresh thread. The pools stay open (they have no thread);
    /// commands sent after this still work but follow no failover.
    pub fn close(&self) {
        match self {
            Topology::Single { subscriber, .. } => subscriber.close(),
            Topology::Sentinel {
                subscriber, _watch, ..
            } => {
                _watch.stop();
                subscriber.close();
            }
            Topology::Cluster {
                cluster,
                subscribers,
            } => {
                cluster.stop();
                subscribers.close();
            }
        }
    }
}

/// What cannot be reached when a cluster names no master.
pub(crate) fn no_master(slot: u16) -> Error {
    Error::Unavailable {
        reason: format!("no cluster master is known for slot {slot}"),
    }
}
