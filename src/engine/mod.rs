//! The engine behind every lock of a client: its identity, the topology
//! its commands go through, the registry of holds ([`holds`]), the
//! watchdog that renews them ([`watchdog`]), replica-synced writes
//! ([`replicas`]), scatter/gather over several servers ([`scatter`]) and
//! the tracing spans and metrics of every lock ([`observe`], features
//! `tracing` and `metrics`).
//!
//! The engine never names a lock kind: it sees the closed enums a kind
//! hands it (how to wake a waiter, how to renew a hold).

pub(crate) mod events;
pub(crate) mod holds;
pub(crate) mod observe;
pub(crate) mod replicas;
pub(crate) mod scatter;
mod shutdown;
pub(crate) mod waiting;
pub(crate) mod watchdog;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::cancel::{CancelToken, Stop};
use crate::config::{Config, ReplicaWait};
use crate::error::{Error, Result};
use crate::net::pool::{Checkout, Pool, RECONNECT_GRACE};
use crate::owner::RequestId;
use crate::topology::Topology;
use events::{EventHandler, Events};
use holds::Registry;
use replicas::ReplicaSync;
use watchdog::Watchdog;

/// One client's engine; every clone of the client, every lock handle and
/// every guard shares it. Dropping the last one stops the watchdog, the
/// subscribers and the Sentinel thread.
pub(crate) struct Engine {
    /// The client's random v4 UUID, the first half of every owner field.
    pub id: String,
    pub config: Config,
    /// Where commands and subscriptions go (shared with the watchdog's
    /// thread).
    pub topology: Arc<Topology>,
    /// The process that built the client (see [`Error::ForkedProcess`]).
    pid: u32,
    /// [`crate::fork::count`] when the client was built.
    forks: u64,
    pub registry: Arc<Registry>,
    /// The client's metrics settings (the lock-label mapping).
    pub observe: observe::Settings,
    /// Held for its `Drop`, which stops the renewal thread.
    watchdog: Watchdog,
    /// The event handler's thread, if there is a handler (stopped by its
    /// `Drop` or by [`Engine::shutdown`]).
    events: Option<crate::spawn::Stoppable>,
    /// Replica sync of lock writes, when on.
    pub sync: Option<Arc<ReplicaSync>>,
    /// `publish`, or `spublish` with sharded pub/sub (docs/wire-format.md, "Pub/sub"): the
    /// topology's pub/sub flavour.
    pub publish: &'static str,
    /// Random per client: with a counter, unique unlock request ids without
    /// asking the OS for randomness on every unlock.
    request_prefix: u64,
    request_seq: AtomicU64,
    /// Cancelled by [`crate::Client::shutdown`]: every wait of the client
    /// watches it ([`Engine::stop`]).
    pub closed: CancelToken,
    /// Blocking acquisitions under way ([`Engine::enter`]): a shutdown
    /// waits for them to leave.
    active: std::sync::atomic::AtomicUsize,
    /// Taken by the shutdown, so that a second one waits for the first.
    shutting_down: parking_lot::Mutex<bool>,
}

impl Engine {
    /// The engine of a client connected through `topology`: starts its
    /// watchdog thread (whose connection is opened here, so that a server
    /// that cannot be reached fails the build), and with a `handler`, the
    /// thread that calls it. `observe`: the client's metrics settings.
    pub fn start(
        id: String,
        config: Config,
        topology: Topology,
        handler: Option<Arc<dyn EventHandler>>,
        observe: observe::Settings,
    ) -> Result<Engine> {
        observe::describe();
        let topology = Arc::new(topology);
        let (events, events_thread) = handler.map(Events::start).transpose()?.unzip();
        let registry = Arc::new(Registry::new(events, observe.clone()));
        let check = match config.replica_wait {
            ReplicaWait::Off => None,
            ReplicaWait::Logged => Some(false),
            ReplicaWait::Checked => Some(true),
        };
        let sync =
            check.map(|check| Arc::new(ReplicaSync::new(check, config.replicas_sync_timeout())));
        let watchdog = Watchdog::start(
            Arc::clone(&registry),
            Arc::clone(&topology),
            config.watchdog_timeout,
            sync.clone(),
        )?;
        Ok(Engine {
            id,
            publish: topology.flavour().publish(),
            config,
            topology,
            pid: std::process::id(),
            forks: crate::fork::count(),
            registry,
            observe,
            watchdog,
            events: events_thread,
            sync,
            request_prefix: uuid::Uuid::new_v4().as_u64_pair().0,
            request_seq: AtomicU64::new(0),
            closed: CancelToken::new(),
            active: std::sync::atomic::AtomicUsize::new(0),
            shutting_down: parking_lot::Mutex::new(false),
        })
    }

    /// A request id for one unlock call: this client's random prefix and a
    /// counter, 32 hex digits like Redisson's.
    pub fn next_request_id(&self) -> RequestId {
        let seq = self.request_seq.fetch_add(1, Ordering::Relaxed);
        RequestId::from_parts(self.request_prefix, seq)
    }

    /// What a wait through a handle with `cancel` watches: the client's
    /// shutdown and that token. No I/O.
    pub fn stop<'a>(&'a self, cancel: Option<&'a CancelToken>) -> Stop<'a> {
        Stop::new(&self.closed, cancel)
    }

    /// Refuses use from a `fork()`ed child: it would share this client's
    /// id and thread numbers with the parent. An atomic load (a `getpid` only
    /// after a fork, see `src/fork.rs`), no round trip.
    pub fn check_process(&self) -> Result<()> {
        if crate::fork::unchanged(self.forks) {
            return Ok(());
        }
        let here = std::process::id();
        if here == self.pid {
            return Ok(());
        }
        Err(Error::ForkedProcess {
            created_by: self.pid,
            used_by: here,
        })
    }

    /// Runs `command` on a pooled connection to the server that holds `key`
    /// (see [`Topology::run`]); its second argument says whether this is a
    /// resend. (A command lost with a connection that dropped after the
    /// server ran it is sent twice: every lock command is safe to repeat when
    /// it knows it is a resend. An acquire sets the thread's own count, a
    /// guard's release sets the count it keeps, an unlock with a request id
    /// replays its latch, a force unlock then reports `false` for a lock it
    /// did delete.) A reply that does not come within the response timeout
    /// is [`Error::Timeout`] for `operation`. Callers have checked the
    /// process ([`Engine::check_process`]) before.
    ///
    /// `command` runs whole on one connection, a resend included: a `WAIT`
    /// for replicas after a lock script belongs inside it (wrap `command`),
    /// so that it runs on the script's connection, and in a cluster on the
    /// slot's master.
    pub fn with_connection<T>(
        &self,
        key: &str,
        operation: &'static str,
        command: impl FnMut(&mut Checkout<'_>, bool) -> Result<T>,
    ) -> Result<T> {
        self.topology
            .run(key, &self.config, command)
            .map_err(|e| self.timeout_error(operation, e))
    }

    /// One `SCAN <cursor> MATCH <pattern> COUNT <count> [TYPE <key_type>]`
    /// on a connection of `pool` (one master): the next cursor (0: that
    /// master is done) and the keys of the page. One round trip.
    pub fn scan_page(
        &self,
        pool: &Pool,
        cursor: u64,
        pattern: &str,
        count: u32,
        key_type: Option<&str>,
    ) -> Result<(u64, Vec<String>)> {
        let mut con = pool.get_within(RECONNECT_GRACE)?;
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count);
        if let Some(key_type) = key_type {
            cmd.arg("TYPE").arg(key_type);
        }
        cmd.query(&mut con)
            .map_err(|e| self.timeout_error("scan_locks", Error::Redis(e)))
    }

    /// A reply that did not come within the response timeout is
    /// [`Error::Timeout`] for `operation`.
    fn timeout_error(&self, operation: &'static str, e: Error) -> Error {
        match e {
            Error::Redis(e) if e.is_timeout() => Error::Timeout {
                operation,
                after: self.config.response_timeout,
            },
            other => other,
        }
    }
}
