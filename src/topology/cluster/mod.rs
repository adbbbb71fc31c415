//! Redis Cluster support: the slot function ([`slot`]), the slot table read
//! from `CLUSTER SLOTS` ([`table`]), one connection pool per master, and the
//! routing of every lock command to the master of its key's slot
//! ([`router`]).
//!
//! Lock scripts deliberately do not go through redis-rs's
//! `cluster::ClusterConnection`: it re-sends a command whose reply timed
//! out (up to 16 times), so one acquire can run several times and leave a
//! hold count above one (TOPOLOGIES §3). Here a command is sent again only
//! when the server's reply proves it did not run (`MOVED`, `ASK`,
//! `TRYAGAIN`, `CLUSTERDOWN`, `LOADING`, `READONLY`, `MASTERDOWN`, `BUSY`;
//! `NOSCRIPT` is handled by the script call itself), or as a flagged resend
//! after a dropped connection, which every lock command knows how to treat.

mod refresh;
mod router;
pub mod slot;
pub(crate) mod table;

use std::collections::HashMap;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use parking_lot::{Mutex, RwLock};
use redis::{ConnectionAddr, ConnectionInfo};

use crate::config::{Config, ShardedSubscription};
use crate::error::{Error, Result, Verdict};
use crate::net::connection::Connector;
use crate::net::endpoint::Endpoint;
use crate::net::pool::{Connections, Pool};
use crate::net::tls::EndpointSettings;
use crate::pubsub::Flavour;
use crate::spawn::Stoppable;
use table::Table;

/// How often the slot table is read again with nothing prompting it
/// (Redisson's `scanInterval`).
const SCAN_INTERVAL: Duration = Duration::from_secs(5);
/// The least time between two refreshes that a `MOVED` or a lost
/// connection asks for.
const REFRESH_MIN_GAP: Duration = Duration::from_millis(50);

/// The client's view of a Redis Cluster. Dropping it stops the refresh thread.
pub(crate) struct Cluster {
    state: Arc<State>,
    /// Wakes the refresh thread; dropping it stops the thread.
    wake: Sender<()>,
    /// The refresh thread, for [`Cluster::stop`].
    thread: Stoppable,
}

/// What the cluster handle and its refresh thread share.
struct State {
    seeds: Vec<ConnectionInfo>,
    /// The builder's TLS material, for every node's endpoint.
    tls: EndpointSettings,
    connect_timeout: Duration,
    response_timeout: Duration,
    connections: Connections,
    table: RwLock<Arc<Table>>,
    pools: Mutex<HashMap<Arc<str>, Arc<Pool>>>,
    last_refresh: Mutex<Instant>,
    /// Called with the masters after every table change; dropped once one
    /// returns `false`.
    listeners: Mutex<Vec<Listener>>,
    /// Which nodes answered or failed the last topology reads.
    memory: Mutex<refresh::Memory>,
}

/// A table change listener (see [`Cluster::on_change`]).
type Listener = Box<dyn Fn(&[Arc<str>]) -> bool + Send + Sync>;

impl Cluster {
    /// Reads the slot table from the first seed that answers, and starts
    /// the refresh thread (`rlock-cluster`). Fails with
    /// [`Error::Unavailable`] when no seed answers `CLUSTER SLOTS`.
    pub fn connect(
        seeds: Vec<ConnectionInfo>,
        tls: EndpointSettings,
        connect_timeout: Duration,
        response_timeout: Duration,
        connections: Connections,
    ) -> Result<Cluster> {
        if seeds.is_empty() {
            return Err(Error::invalid("a cluster needs at least one seed"));
        }
        for seed in &seeds {
            if node_addr(seed).is_none() {
                return Err(Error::invalid(format!(
                    "cluster seeds must be TCP addresses, got {}",
                    seed.addr()
                )));
            }
        }
        let state = Arc::new(State {
            seeds,
            tls,
            connect_timeout,
            response_timeout,
            connections,
            table: RwLock::new(Arc::new(Table::empty())),
            pools: Mutex::new(HashMap::new()),
            last_refresh: Mutex::new(Instant::now()),
            listeners: Mutex::new(Vec::new()),
            memory: Mutex::new(refresh::Memory::default()),
        });
        state.refresh()?;
        let (wake, wake_rx) = crossbeam_channel::bounded(1);
        let worker = Arc::clone(&state);
        let refresh = move |stop: Receiver<()>| worker.run(&wake_rx, &stop);
        let thread = Stoppable::spawn("rlock-cluster", "the cluster refresh thread", refresh)?;
        Ok(Cluster {
            state,
            wake,
            thread,
        })
    }

    /// Stops the refresh thread and waits for it (at most its current
    /// refresh, bounded by the timeouts); the slot table stays as it is.
    pub fn stop(&self) {
        self.thread.stop_and_join();
    }

    /// Asks the refresh thread to read the slot table again soon; never blocks.
    pub fn schedule_refresh(&self) {
        match self.wake.try_send(()) {
            Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
        }
    }

    /// The master serving `slot` now, as `host:port`.
    pub fn owner(&self, slot: u16) -> Option<Arc<str>> {
        self.state.table.read().owner(slot).cloned()
    }

    /// The pool of the node at `addr` (`host:port`), created on first use.
    pub fn pool(&self, addr: &Arc<str>) -> Result<Arc<Pool>> {
        self.state.pool(addr)
    }

    /// The endpoint of the node at `addr`, TLS prepared when the seeds are
    /// `rediss://`.
    pub fn node_endpoint(&self, addr: &str) -> Result<Arc<Endpoint>> {
        self.state.node_endpoint(addr)
    }

    /// Every master serving slots, per the current table.
    pub fn masters(&self) -> Vec<Arc<str>> {
        self.state.table.read().masters().cloned().collect()
    }

    /// Pooled connections over all nodes, and of those how many are idle.
    pub fn pool_state(&self) -> (u32, u32) {
        let pools = self.state.pools.lock();
        pools.values().fold((0, 0), |(open, idle), pool| {
            let (o, i) = pool.state();
            (open.saturating_add(o), idle.saturating_add(i))
        })
    }

    /// Records a `MOVED` for `slot` to `addr` at once, and schedules a full
    /// refresh.
    pub fn moved(&self, slot: u16, addr: &str) {
        let changed = {
            let mut table = self.state.table.write();
            if table.owner(slot).is_none_or(|owner| &**owner != addr) {
                *table = Arc::new(table.with_move(slot, addr));
                Some(table.masters().cloned().collect::<Vec<_>>())
            } else {
                None
            }
        };
        if let Some(masters) = changed {
            self.state.notify(&masters);
        }
        self.schedule_refresh();
    }

    /// Calls `listener` with the masters serving slots after every change
    /// of the slot table (every refresh, every `MOVED` noted), on the
    /// thread that made it, until it returns `false`. It must not block
    /// for long: it delays the refresh.
    pub fn on_change(&self, listener: impl Fn(&[Arc<str>]) -> bool + Send + Sync + 'static) {
        self.state.listeners.lock().push(Box::new(listener));
    }
}

impl State {
    fn run(&self, wake: &Receiver<()>, stop: &Receiver<()>) {
        loop {
            let woken = crossbeam_channel::select! {
                recv(stop) -> _ => return,
                recv(wake) -> woken => woken.map_err(|_| RecvTimeoutError::Disconnected),
                default(SCAN_INTERVAL) => Err(RecvTimeoutError::Timeout),
            };
            match woken {
                Ok(()) => {
                    let since = self.last_refresh.lock().elapsed();
                    if since < REFRESH_MIN_GAP {
                        thread::sleep(REFRESH_MIN_GAP - since);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            if let Err(e) = self.refresh() {
                log::warn!("redisson-lock: cannot refresh the cluster's slot table: {e}");
            }
        }
    }

    /// Tells the listeners the masters of a new table.
    fn notify(&self, masters: &[Arc<str>]) {
        self.listeners.lock().retain(|listener| listener(masters));
    }

    fn pool(&self, addr: &Arc<str>) -> Result<Arc<Pool>> {
        if let Some(pool) = self.pools.lock().get(addr) {
            return Ok(Arc::clone(pool));
        }
        let connector = Connector::new(
            self.node_endpoint(addr)?,
            self.connect_timeout,
            self.response_timeout,
        )?;
        let mut pools = self.pools.lock();
        let pool = pools
            .entry(Arc::clone(addr))
            .or_insert_with(|| Arc::new(self.connections.pool(connector)));
        Ok(Arc::clone(pool))
    }

    fn node_endpoint(&self, addr: &str) -> Result<Arc<Endpoint>> {
        Ok(Arc::new(self.tls.endpoint(self.node_info(addr)?)?))
    }

    fn node_info(&self, addr: &str) -> Result<ConnectionInfo> {
        let (host, port) = addr
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host, port.parse::<u16>().ok()?)))
            .ok_or_else(|| Error::UnexpectedReply(format!("bad cluster node address {addr}")))?;
        let template = self
            .seeds
            .first()
            .ok_or_else(|| Error::invalid("a cluster needs at least one seed"))?;
        let mut node = template.addr().clone();
        match &mut node {
            ConnectionAddr::Tcp(h, p)
            | ConnectionAddr::TcpTls {
                host: h, port: p, ..
            } => {
                host.clone_into(h);
                *p = port;
            }
            _ => {
                return Err(Error::invalid("cluster seeds must be TCP addresses"));
            }
        }
        Ok(template.clone().set_addr(node))
    }
}

/// The host and port of a TCP seed.
fn node_addr(info: &ConnectionInfo) -> Option<(&str, u16)> {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            Some((host, *port))
        }
        _ => None,
    }
}

impl Cluster {
    /// Renewal grouping: `items` by the master serving their key's slot,
    /// each master's share in chunks of at most `chunk` items of one slot
    /// and one class (a script's keys must share a slot; each class has its
    /// own script). `false` with the groups when some slot has no known
    /// master: its items are left out and the table is read again.
    pub fn group_by_master<T>(
        &self,
        items: impl IntoIterator<Item = (T, usize)>,
        key: impl Fn(&T) -> &str,
        chunk: usize,
    ) -> (HashMap<Arc<str>, Vec<Vec<T>>>, bool) {
        let mut by_slot: HashMap<(u16, usize), Vec<T>> = HashMap::new();
        for (item, class) in items {
            let slot = slot::key_slot(key(&item).as_bytes());
            by_slot.entry((slot, class)).or_default().push(item);
        }
        let mut by_node: HashMap<Arc<str>, Vec<Vec<T>>> = HashMap::new();
        let mut complete = true;
        for ((slot, _), mut items) in by_slot {
            let Some(owner) = self.owner(slot) else {
                log::warn!("redisson-lock: no master known for slot {slot}, will retry");
                self.schedule_refresh();
                complete = false;
                continue;
            };
            let chunks = by_node.entry(owner).or_default();
            while items.len() > chunk.max(1) {
                let rest = items.split_off(chunk.max(1));
                chunks.push(items);
                items = rest;
            }
            chunks.push(items);
        }
        (by_node, complete)
    }

    /// Records what a `MOVED` error from the node at `replied` says, if `e`
    /// is one; schedules a refresh for any other error that hints at a
    /// topology change.
    pub fn note_redirect(&self, e: &redis::RedisError, replied: &str) {
        match (Verdict::of_redis(e), redirect(e, replied)) {
            (Verdict::Moved, Some((addr, slot))) => self.moved(slot, &addr),
            (verdict, _) if verdict.topology_changed() => self.schedule_refresh(),
            _ => {}
        }
    }
}

/// Where a `MOVED` or `ASK` error from the node at `replied` (`host:port`)
/// sends a command: the target's `host:port` and the slot. An empty (or
/// `?`) host, as in `MOVED 3999 :6381` from a node that announces no
/// endpoint, is `replied`'s host. `None` for any other error.
pub(crate) fn redirect(e: &redis::RedisError, replied: &str) -> Option<(Arc<str>, u16)> {
    let (addr, slot) = e.redirect_node()?;
    let (host, port) = addr.rsplit_once(':')?;
    let host = if host.is_empty() || host == "?" {
        replied.rsplit_once(':').map_or(replied, |(host, _)| host)
    } else {
        host
    };
    Some((Arc::from(format!("{host}:{port}")), slot))
}

impl Cluster {
    /// The pub/sub flavour per `mode`: for [`ShardedSubscription::Auto`],
    /// sharded when the first seed that answers accepts `PUBSUB
    /// SHARDNUMSUB 0` (one connect and one round trip), and for
    /// [`ShardedSubscription::Both`] both flavours then (classic alone
    /// otherwise). Logs the choice.
    pub fn flavour(&self, mode: ShardedSubscription) -> Flavour {
        let flavour = match mode {
            ShardedSubscription::On => Flavour::Sharded,
            ShardedSubscription::Off => Flavour::ClusterClassic,
            ShardedSubscription::Auto if self.state.probe_sharding() => Flavour::Sharded,
            ShardedSubscription::Both if self.state.probe_sharding() => Flavour::Both,
            _ => Flavour::ClusterClassic,
        };
        log::info!(
            "redisson-lock: Redis Cluster with {} pub/sub (sharded_subscription {mode:?}): \
             unlock scripts {}",
            match flavour {
                Flavour::Sharded => "sharded",
                Flavour::Both => "classic and sharded",
                _ => "classic",
            },
            flavour.publish().to_uppercase()
        );
        flavour
    }
}

impl State {
    /// Redisson 4.7.0's probe: `PUBSUB SHARDNUMSUB 0` on the first seed
    /// that answers; any error means no sharded pub/sub.
    fn probe_sharding(&self) -> bool {
        for seed in &self.seeds {
            let Ok(endpoint) = self.tls.endpoint(seed.clone()) else {
                continue;
            };
            let Ok(connector) = Connector::new(
                Arc::new(endpoint),
                self.connect_timeout,
                self.response_timeout,
            ) else {
                continue;
            };
            let Ok(mut con) = connector.open_pooled() else {
                continue;
            };
            return redis::cmd("PUBSUB")
                .arg("SHARDNUMSUB")
                .arg("0")
                .query::<redis::Value>(&mut con)
                .is_ok();
        }
        false
    }
}

impl Cluster {
    /// A client's cluster: the slot table read from the seeds and its
    /// refresh thread, checked by opening one connection to a master (the
    /// build fails now if the cluster cannot be reached).
    pub(crate) fn for_client(
        seeds: Vec<ConnectionInfo>,
        config: &Config,
        connections: Connections,
        tls: &EndpointSettings,
    ) -> Result<Arc<Cluster>> {
        let cluster = Cluster::connect(
            seeds,
            tls.clone(),
            config.connect_timeout,
            config.response_timeout,
            connections,
        )?;
        let first = cluster
            .masters()
            .into_iter()
            .next()
            .ok_or_else(|| Error::Unavailable {
                reason: "the cluster reports no master".into(),
            })?;
        drop(cluster.pool(&first)?.get()?);
        Ok(Arc::new(cluster))
    }
}
