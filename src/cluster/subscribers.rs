//! Which subscriber a waiting thread subscribes through: the one of a
//! standalone client, or in a cluster the one of the master serving the
//! channel's slot, for sharded and classic pub/sub alike (as Redisson's
//! `PublishSubscribeService.getEntry` picks it).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::Cluster;
use super::slot::key_slot;
use crate::error::{Error, Result};
use crate::pubsub::{Flavour, Subscriber, Subscription};

/// How often a waiter subscribes again when its subscription keeps moving
/// away at once (the slot table lags a failover), before it settles for
/// polling at the holder's TTL.
const RESUBSCRIBE_ATTEMPTS: u32 = 3;
/// The pause before such a second attempt: the table refresh it asked for
/// takes about a round trip.
const RESUBSCRIBE_PAUSE: Duration = Duration::from_millis(50);

/// The client's subscribers.
pub(crate) enum Subscribers {
    /// A standalone server: one subscriber.
    One(Subscriber),
    /// A cluster: one subscriber per master with waited-on channels, made
    /// on first use.
    PerMaster(PerMaster),
}

/// A cluster's subscribers, by master address.
pub(crate) struct PerMaster {
    cluster: Arc<Cluster>,
    flavour: Flavour,
    connect_timeout: Duration,
    response_timeout: Duration,
    by_node: Mutex<HashMap<Arc<str>, Arc<Subscriber>>>,
}

impl Subscribers {
    /// One subscriber per master of `cluster`, with `SSUBSCRIBE` when
    /// `sharded`. Connects nothing until a thread waits.
    pub fn per_master(
        cluster: Arc<Cluster>,
        sharded: bool,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Subscribers {
        Subscribers::PerMaster(PerMaster {
            cluster,
            flavour: if sharded {
                Flavour::Sharded
            } else {
                Flavour::ClusterClassic
            },
            connect_timeout,
            response_timeout,
            by_node: Mutex::new(HashMap::new()),
        })
    }

    /// Registers the calling thread as a waiter on `entry` of `channel`
    /// (see [`Subscriber::subscribe`]). In a cluster, on the subscriber of
    /// the master serving `channel`'s slot; a subscription that turns out to
    /// have moved away at once (a `MOVED` refusal) is made again after a
    /// table refresh, up to 3 times.
    pub fn subscribe(&self, channel: &str, entry: &str, limit: Instant) -> Result<Subscription> {
        match self {
            Subscribers::One(subscriber) => subscriber.subscribe(channel, entry, limit),
            Subscribers::PerMaster(per_master) => per_master.subscribe(channel, entry, limit),
        }
    }

    /// Whether some thread of this client waits on `entry` of `channel`.
    /// Never waits for I/O.
    pub fn has_waiters(&self, channel: &str, entry: &str) -> bool {
        match self {
            Subscribers::One(subscriber) => subscriber.has_waiters(channel, entry),
            Subscribers::PerMaster(per_master) => per_master
                .current(channel)
                .is_some_and(|subscriber| subscriber.has_waiters(channel, entry)),
        }
    }

    /// Whether the waiter of `subscription` to `channel` must subscribe
    /// again: its subscription moved away (see [`Subscription::is_moved`]),
    /// or in a cluster, the slot table now names another master for the
    /// channel (a failover whose old master is unreachable never tells its
    /// subscribers). Never waits for I/O.
    pub fn is_stale(&self, subscription: &Subscription, channel: &str) -> bool {
        if subscription.is_moved() {
            return true;
        }
        match self {
            Subscribers::One(_) => false,
            Subscribers::PerMaster(per_master) => !per_master
                .current(channel)
                .is_some_and(|subscriber| subscriber.serves(subscription)),
        }
    }

    /// Channels subscribed (or being subscribed) and waiting threads, over
    /// every subscriber.
    pub fn stats(&self) -> (usize, usize) {
        match self {
            Subscribers::One(subscriber) => subscriber.stats(),
            Subscribers::PerMaster(per_master) => {
                let subscribers: Vec<Arc<Subscriber>> =
                    per_master.by_node.lock().values().cloned().collect();
                subscribers.iter().fold((0, 0), |(channels, waiters), s| {
                    let (c, w) = s.stats();
                    (channels + c, waiters + w)
                })
            }
        }
    }
}

impl PerMaster {
    fn subscribe(&self, channel: &str, entry: &str, limit: Instant) -> Result<Subscription> {
        let mut attempt = 0;
        loop {
            let subscriber = self.for_channel(channel)?;
            let subscription = subscriber.subscribe(channel, entry, limit)?;
            attempt += 1;
            if !subscription.is_moved()
                || attempt >= RESUBSCRIBE_ATTEMPTS
                || Instant::now() + RESUBSCRIBE_PAUSE >= limit
            {
                return Ok(subscription);
            }
            drop(subscription);
            self.cluster.schedule_refresh();
            std::thread::sleep(RESUBSCRIBE_PAUSE);
        }
    }

    /// The subscriber of the master serving `channel`'s slot, made if new.
    fn for_channel(&self, channel: &str) -> Result<Arc<Subscriber>> {
        let slot = key_slot(channel.as_bytes());
        let Some(addr) = self.cluster.owner(slot) else {
            self.cluster.schedule_refresh();
            return Err(Error::Unavailable {
                reason: format!("no cluster master is known for slot {slot}"),
            });
        };
        if let Some(subscriber) = self.by_node.lock().get(&addr) {
            return Ok(Arc::clone(subscriber));
        }
        let endpoint = self.cluster.node_endpoint(&addr)?;
        let masters = self.cluster.masters();
        let mut by_node = self.by_node.lock();
        // A new master: the topology changed. Subscribers of nodes that
        // serve no slot any more and have no waiter left are closed (a dead
        // master's would otherwise try to reconnect forever).
        by_node.retain(|node, subscriber| masters.contains(node) || subscriber.stats() != (0, 0));
        let subscriber = by_node.entry(addr).or_insert_with(|| {
            Arc::new(Subscriber::new(
                endpoint,
                self.connect_timeout,
                self.response_timeout,
                self.flavour,
            ))
        });
        Ok(Arc::clone(subscriber))
    }

    /// The subscriber of the master serving `channel`'s slot, if one exists.
    fn current(&self, channel: &str) -> Option<Arc<Subscriber>> {
        let addr = self.cluster.owner(key_slot(channel.as_bytes()))?;
        self.by_node.lock().get(&addr).cloned()
    }
}
