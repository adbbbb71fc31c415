//! A cluster's subscribers: a waiting thread subscribes through the one of
//! the master serving the channel's slot, for sharded and classic pub/sub
//! alike (as Redisson's `PublishSubscribeService.getEntry` picks it).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::cluster::Cluster;
use super::cluster::slot::key_slot;
use crate::error::Result;
use crate::pubsub::{Flavour, Subscriber, Subscription};

/// How often a waiter subscribes again when its subscription keeps moving
/// away at once (the slot table lags a failover), before it settles for
/// polling at the holder's TTL.
const RESUBSCRIBE_ATTEMPTS: u32 = 3;
/// The pause before such a second attempt: the table refresh it asked for
/// takes about a round trip.
const RESUBSCRIBE_PAUSE: Duration = Duration::from_millis(50);
/// How often the slot's master may change while its subscriber is looked
/// up before the lookup gives up.
const TABLE_CHANGES: u32 = 5;

/// A cluster's subscribers, by master address.
pub(crate) struct PerMaster {
    cluster: Arc<Cluster>,
    flavour: Flavour,
    connect_timeout: Duration,
    response_timeout: Duration,
    by_node: Arc<Mutex<BySubscriber>>,
}

/// Subscribers by master address.
type BySubscriber = HashMap<Arc<str>, Arc<Subscriber>>;

impl PerMaster {
    /// One subscriber per master of `cluster`, of `flavour`. Connects
    /// nothing until a thread waits. Every change of the slot table retires
    /// the subscribers of nodes that serve no slot any more (see
    /// [`Subscriber::retire`]): their waiters subscribe again where their
    /// slots live now, and their threads end.
    pub fn new(
        cluster: Arc<Cluster>,
        flavour: Flavour,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> PerMaster {
        let by_node = Arc::new(Mutex::new(HashMap::new()));
        let weak = Arc::downgrade(&by_node);
        cluster.on_change(move |masters| {
            let Some(by_node) = weak.upgrade() else {
                return false;
            };
            retire_all_but(&by_node, masters);
            true
        });
        PerMaster {
            cluster,
            flavour,
            connect_timeout,
            response_timeout,
            by_node,
        }
    }

    /// The flavour every subscriber of this cluster speaks.
    pub fn flavour(&self) -> Flavour {
        self.flavour
    }

    /// Closes every subscriber and waits for their threads (see
    /// [`Subscriber::close`]).
    pub fn close(&self) {
        let subscribers: Vec<Arc<Subscriber>> = self.by_node.lock().values().cloned().collect();
        for subscriber in subscribers {
            subscriber.close();
        }
    }

    /// Whether some thread of this client waits on `entry` of `channel`.
    pub fn has_waiters(&self, channel: &str, entry: &str) -> bool {
        self.current(channel)
            .is_some_and(|subscriber| subscriber.has_waiters(channel, entry))
    }

    /// Whether `subscription` is not on the subscriber of the master that
    /// the slot table names for `channel` now.
    pub fn is_elsewhere(&self, subscription: &Subscription, channel: &str) -> bool {
        !self
            .current(channel)
            .is_some_and(|subscriber| subscriber.serves(subscription))
    }

    /// Channels and waiting threads over every master's subscriber.
    pub fn stats(&self) -> (usize, usize) {
        let subscribers: Vec<Arc<Subscriber>> = self.by_node.lock().values().cloned().collect();
        subscribers.iter().fold((0, 0), |(channels, waiters), s| {
            let (c, w) = s.stats();
            (channels + c, waiters + w)
        })
    }

    /// Registers the calling thread as a waiter on `entry` of `channel` on
    /// the subscriber of the master serving `channel`'s slot; a
    /// subscription that turns out to have moved away at once (a `MOVED`
    /// refusal) is made again after a table refresh, up to 3 times.
    pub fn subscribe(&self, channel: &str, entry: &str, limit: Instant) -> Result<Subscription> {
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
        // A table that keeps changing under us is a storm of slot moves.
        for _ in 0..TABLE_CHANGES {
            let Some(addr) = self.cluster.owner(slot) else {
                break;
            };
            if let Some(subscriber) = self.by_node.lock().get(&addr) {
                return Ok(Arc::clone(subscriber));
            }
            let endpoint = self.cluster.node_endpoint(&addr)?;
            let mut by_node = self.by_node.lock();
            // The table changed meanwhile (its listener, which retires what
            // it no longer names, may have run already): not for a former
            // master. (A change after this check comes to the listener,
            // which waits for the map's mutex.)
            if self.cluster.owner(slot).is_none_or(|owner| owner != addr) {
                continue;
            }
            let subscriber = by_node.entry(addr).or_insert_with(|| {
                Arc::new(Subscriber::new(
                    endpoint,
                    self.connect_timeout,
                    self.response_timeout,
                    self.flavour,
                ))
            });
            return Ok(Arc::clone(subscriber));
        }
        self.cluster.schedule_refresh();
        Err(super::no_master(slot))
    }

    /// The subscriber of the master serving `channel`'s slot, if one exists.
    fn current(&self, channel: &str) -> Option<Arc<Subscriber>> {
        let addr = self.cluster.owner(key_slot(channel.as_bytes()))?;
        self.by_node.lock().get(&addr).cloned()
    }
}

/// Retires (see [`Subscriber::retire`]) and forgets the subscribers of
/// nodes not among `masters`. Takes the map's mutex briefly, then each
/// retired subscriber's connection mutex.
fn retire_all_but(by_node: &Mutex<BySubscriber>, masters: &[Arc<str>]) {
    let retired: Vec<(Arc<str>, Arc<Subscriber>)> = {
        let mut by_node = by_node.lock();
        let gone: Vec<Arc<str>> = by_node
            .keys()
            .filter(|node| !masters.contains(node))
            .cloned()
            .collect();
        gone.into_iter()
            .filter_map(|node| by_node.remove_entry(&node))
            .collect()
    };
    for (node, subscriber) in retired {
        log::debug!("redisson-lock: {node} serves no slot any more: its subscriber is closed");
        subscriber.retire();
    }
}
