//! The shared renewal thread: renews every watchdog-mode hold of the
//! client's [`Registry`] at a third of the watchdog timeout (docs/wire-format.md, "Batched
//! renewal"),
//! in chunks of 100 locks per script call, 20 chunks pipelined per round trip
//! on one connection (not one round trip per chunk).
//!
//! The connection is opened when the client is built, so a server that
//! later refuses new clients (`maxclients`) does not cost the locks their
//! renewals. If it drops and cannot be reopened, a run borrows an idle
//! connection from the command pool.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use parking_lot::Mutex;
use redis::ConnectionLike;

use super::holds::{Hold, LeaseOutcome, LeaseTicket, Registry};
use super::observe::{RenewOutcome, Renewing};
use super::replicas::ReplicaSync;
use crate::error::{Error, LostReason, Result};
use crate::net::connection::PooledConnection;
use crate::net::endpoint::Endpoint;
use crate::net::pool::Pool;
use crate::protocol::lease::{self, RenewChunk, RenewKind, Renewed};
use crate::spawn::Stoppable;
use crate::topology::Topology;
use crate::topology::cluster::Cluster;

/// Locks per renewal script call (Redisson's `lockWatchdogBatchSize`).
pub(crate) const RENEWAL_BATCH_SIZE: usize = 100;

/// Renewal script calls written at once, before their replies are read: one
/// round trip renews this many chunks. Bounded so that the commands and
/// replies of a run over 100,000 locks are not all in memory at once.
const PIPELINED_CHUNKS: usize = 20;

/// After a failed renewal run, the next one comes a tenth of the lease later,
/// within these bounds (and never later than the next regular tick): a server
/// that answers BUSY or LOADING for less than the lease minus one period must
/// not cost a lock, as it would if the retry waited a whole period.
const RENEWAL_RETRY_DELAY: Duration = Duration::from_secs(1);
const RENEWAL_RETRY_DELAY_MIN: Duration = Duration::from_millis(10);

/// How often the thread checks whether the master moved (Sentinel only).
const MOVE_CHECK: Duration = Duration::from_millis(100);

/// The client's renewal thread. Dropping this stops it;
/// [`Watchdog::stop`] also waits for it.
pub(crate) struct Watchdog {
    thread: Stoppable,
}

impl Watchdog {
    /// Starts the thread, which renews `registry`'s watchdog-mode holds to
    /// `lease` every `lease / 3`.
    ///
    /// Its connection is opened here, on the caller's thread: a server that
    /// cannot be reached fails the client's build. In a cluster it has none:
    /// each chunk goes to its slot's master over that master's pool.
    pub fn start(
        registry: Arc<Registry>,
        topology: Arc<Topology>,
        lease: Duration,
        sync: Option<Arc<ReplicaSync>>,
    ) -> Result<Self> {
        let pool = topology.pool();
        let generation = pool.map_or(0, |pool| pool.connector().endpoint().generation());
        let con = match pool {
            None => None,
            Some(pool) => Some(
                pool.connector()
                    .open_pooled()
                    .map_err(|e| pool.connector().connect_error(e))?,
            ),
        };
        let run = move |stop_rx| {
            let worker = Worker {
                registry,
                topology,
                con: Mutex::new(con),
                generation: AtomicU64::new(generation),
                lease,
                sync,
                stop_rx,
            };
            worker.run();
        };
        let thread = Stoppable::spawn("rlock-watchdog", "the watchdog thread", run)?;
        Ok(Watchdog { thread })
    }

    /// Stops the thread and waits for it (at most its current renewal
    /// round, bounded by the response timeout).
    pub fn stop(&self) {
        self.thread.stop_and_join();
    }
}

struct Worker {
    registry: Arc<Registry>,
    /// Where renewals go: the one pool's endpoint over the worker's own
    /// connection, or in a cluster each slot's master.
    topology: Arc<Topology>,
    /// The watchdog's own connection (standalone only). Behind a mutex only
    /// so that a cluster run can share the worker with its per-master
    /// threads; taken once per round, never contended.
    con: Mutex<Option<PooledConnection>>,
    /// The endpoint generation `con` was opened at: after a Sentinel
    /// failover the connection is reopened to the new master.
    generation: AtomicU64,
    lease: Duration,
    /// Replica sync: a `WAIT` after each round trip of renewals.
    sync: Option<Arc<ReplicaSync>>,
    stop_rx: Receiver<()>,
}

impl Worker {
    fn run(self) {
        let period = self.lease / 3;
        let mut next_tick = Instant::now() + period;
        loop {
            // Under Sentinel, a look every MOVE_CHECK (an atomic load) for
            // a failover: the locks are renewed on the new master at once,
            // before the copies it replicated run out.
            let endpoint = self.endpoint();
            let wake = if endpoint.is_some_and(|endpoint| endpoint.is_watched()) {
                next_tick.min(Instant::now() + MOVE_CHECK)
            } else {
                next_tick
            };
            match self.stop_rx.recv_deadline(wake) {
                Err(RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
            }
            if Instant::now() < next_tick
                && endpoint.is_none_or(|endpoint| {
                    endpoint.generation() == self.generation.load(Ordering::Acquire)
                })
            {
                continue;
            }
            let delay = if self.renew_all() {
                period
            } else {
                (self.lease / 10)
                    .clamp(RENEWAL_RETRY_DELAY_MIN, RENEWAL_RETRY_DELAY)
                    .min(period)
            };
            next_tick = Instant::now() + delay;
        }
    }

    /// The one pool of a single server or Sentinel master; `None` in a
    /// cluster.
    fn pool(&self) -> Result<&Arc<Pool>> {
        self.topology.pool().ok_or_else(|| Error::Unavailable {
            reason: "a cluster's renewals go to each slot's master".into(),
        })
    }

    /// The server the watchdog's own connection goes to; `None` in a
    /// cluster.
    fn endpoint(&self) -> Option<&Arc<Endpoint>> {
        self.topology.pool().map(|pool| pool.connector().endpoint())
    }

    /// Runs `command` on the watchdog's connection, reopened if it was
    /// dropped; if it cannot be reopened (the server refuses new clients),
    /// on an idle pooled connection. A connection that dropped before the
    /// command reached the server gets the command once more.
    fn with_connection<T>(
        &self,
        mut command: impl FnMut(&mut dyn ConnectionLike) -> Result<T>,
    ) -> Result<T> {
        let pool = self.pool()?;
        for attempt in 0..2 {
            let now = pool.connector().endpoint().generation();
            if self.generation.swap(now, Ordering::AcqRel) != now {
                *self.con.lock() = None;
            }
            let con = match self.con.lock().take() {
                Some(con) => Some(con),
                None => match pool.connector().open_pooled() {
                    Ok(con) => Some(con),
                    Err(e) => {
                        log::debug!("redisson-lock: watchdog cannot reconnect: {e}");
                        None
                    }
                },
            };
            let result = match con {
                Some(mut con) => {
                    let result = command(&mut con);
                    if result
                        .as_ref()
                        .is_err_and(|e| e.code() == Some("READONLY") || e.is_connection_dropped())
                    {
                        // A former master, or a lost one: look again.
                        pool.connector().endpoint().suspect();
                    }
                    if !result.as_ref().is_err_and(Error::is_transient) {
                        *self.con.lock() = Some(con);
                    }
                    result
                }
                None => match pool.try_get_idle() {
                    Some(mut pooled) => command(&mut pooled),
                    None => Err(Error::Unavailable {
                        reason: "the watchdog cannot connect and no pooled connection is idle"
                            .into(),
                    }),
                },
            };
            match result {
                Err(e) if attempt == 0 && e.is_connection_dropped() => continue,
                other => return other,
            }
        }
        Err(Error::Unavailable {
            reason: "the watchdog's connection keeps dropping".into(),
        })
    }

    /// One renewal run; `false` if some locks could not be renewed this time.
    fn renew_all(&self) -> bool {
        // Each renewal kind has its own script: a chunk holds one kind only.
        let (mut fields, mut readers, mut permits) = (Vec::new(), Vec::new(), Vec::new());
        for hold in self.registry.renewable() {
            if hold.is_lost() {
                // Marked with its reason (the lease ran out) by `is_lost`.
                self.registry.remove(&hold);
                continue;
            }
            match hold.renewal.kind() {
                RenewKind::Field => fields.push(hold),
                RenewKind::ReadMarkers => readers.push(hold),
                RenewKind::Permits => permits.push(hold),
            }
        }
        let due = fields.len() + readers.len() + permits.len();
        if due == 0 {
            return true;
        }
        let lease_ms = u64::try_from(self.lease.as_millis()).unwrap_or(u64::MAX);
        let started = Instant::now();
        if let Some(cluster) = self.topology.cluster() {
            let complete = self.renew_in_cluster(cluster, [fields, readers, permits], lease_ms);
            log::debug!(
                "redisson-lock: renewed {due} lock(s) in {:?}",
                started.elapsed()
            );
            return complete;
        }
        let chunks: Vec<&[Arc<Hold>]> = fields
            .chunks(RENEWAL_BATCH_SIZE)
            .chain(readers.chunks(RENEWAL_BATCH_SIZE))
            .chain(permits.chunks(RENEWAL_BATCH_SIZE))
            .collect();
        for round in chunks.chunks(PIPELINED_CHUNKS) {
            if !self.renew_round(round, lease_ms, None) {
                return false;
            }
        }
        log::debug!(
            "redisson-lock: renewed {due} lock(s) in {:?}",
            started.elapsed()
        );
        true
    }

    /// One round trip: up to [`PIPELINED_CHUNKS`] chunks pipelined, each of
    /// one renewal kind; `false` if some locks could not be renewed.
    fn renew_round(
        &self,
        round: &[&[Arc<Hold>]],
        lease_ms: u64,
        node: Option<(&Cluster, &Arc<str>)>,
    ) -> bool {
        let lease = self.lease;
        let chunks: Vec<RenewChunk<'_>> = round
            .iter()
            .map(|chunk| RenewChunk {
                items: chunk
                    .iter()
                    .map(|hold| (&*hold.name, &*hold.field, &hold.renewal))
                    .collect(),
            })
            .collect();
        let holds = round.iter().flat_map(|chunk| chunk.iter());
        let tickets: Vec<_> = holds.map(|hold| hold.begin_lease(lease)).collect();
        // tests/failpoints.rs: an unlock between the holds' collection and
        // the renewal's send.
        crate::failpoint::failpoint!("renewal-before-send");
        let mut observed = Renewing::start(tickets.len(), || match node {
            Some((_, addr)) => Some(addr.to_string()),
            None => self.endpoint().map(|endpoint| endpoint.describe()),
        });
        let result = match node {
            None => {
                let sync = self.sync.clone();
                let mut sends = 0;
                self.with_connection(|con| {
                    // Sent again after a dropped connection: the first may
                    // have run.
                    sends += 1;
                    if sends > 1 {
                        tickets.iter().for_each(LeaseTicket::resending);
                    }
                    let replies = lease::renew_chunks(con, &chunks, lease_ms)?;
                    // A chunk's error comes inside the reply: one from a
                    // former master sends Sentinel looking now, as an
                    // outer error does.
                    if replies
                        .iter()
                        .any(|reply| reply.as_ref().is_err_and(|e| e.code() == Some("READONLY")))
                    {
                        self.endpoint().inspect(|endpoint| endpoint.suspect());
                    }
                    if let (Some(sync), Some(endpoint)) = (&sync, self.endpoint()) {
                        sync.wait_after_renewal(endpoint, con);
                    }
                    Ok(replies)
                })
            }
            Some((cluster, addr)) => {
                cluster_renewal(cluster, addr, &chunks, lease_ms, self.sync.as_deref())
            }
        };
        let mut tickets = tickets.into_iter();
        let replies = match result {
            Ok(replies) => replies,
            Err(e) => {
                let holds = round.iter().flat_map(|chunk| chunk.iter());
                log::warn!(
                    "redisson-lock: can't renew {} lock(s), will retry: {e}",
                    tickets.len()
                );
                observed.count(RenewOutcome::Error, tickets.len(), Some(&e));
                let outcome = LeaseOutcome::of_error(&e);
                for (hold, ticket) in holds.zip(tickets) {
                    hold.end_lease(ticket, outcome);
                    hold.renewal_failed(&e);
                }
                return false;
            }
        };
        let mut complete = true;
        for (chunk, reply) in round.iter().zip(replies) {
            let states = match reply {
                Ok(states) => states,
                Err(e) => {
                    log::warn!(
                        "redisson-lock: can't renew {} lock(s), will retry: {e}",
                        chunk.len()
                    );
                    if let (Some((cluster, addr)), Error::Redis(e)) = (node, &e) {
                        cluster.note_redirect(e, addr);
                    }
                    complete = false;
                    observed.count(RenewOutcome::Error, chunk.len(), Some(&e));
                    let outcome = LeaseOutcome::of_error(&e);
                    for (hold, ticket) in chunk.iter().zip(tickets.by_ref()) {
                        hold.end_lease(ticket, outcome);
                        hold.renewal_failed(&e);
                    }
                    continue;
                }
            };
            for ((hold, state), ticket) in chunk.iter().zip(states).zip(tickets.by_ref()) {
                let outcome = match state {
                    Renewed::Held => RenewOutcome::Ok,
                    Renewed::Gone | Renewed::WrongType => RenewOutcome::NotHeld,
                };
                observed.count(outcome, 1, None);
                self.renewed(hold, state, ticket);
            }
        }
        complete
    }

    fn renewed(&self, hold: &Arc<Hold>, state: Renewed, ticket: LeaseTicket) {
        match state {
            Renewed::Held => {
                hold.end_lease(ticket, LeaseOutcome::Set);
                hold.renewal_succeeded();
                if hold.is_lost() {
                    // Renewed too late to trust: stop renewing; the guard's
                    // unlock deletes what is left.
                    self.registry.remove(hold);
                }
            }
            Renewed::Gone => {
                hold.end_lease(ticket, LeaseOutcome::Untouched);
                self.registry.lose(hold, LostReason::KeyGone);
            }
            Renewed::WrongType => {
                hold.end_lease(ticket, LeaseOutcome::Untouched);
                self.registry.lose(hold, LostReason::Overwritten);
            }
        }
    }
}

impl Worker {
    /// One renewal run in a cluster: holds grouped by slot (a script's keys
    /// must share one), chunks of one slot and one renewal kind, each
    /// master's chunks pipelined on one of its pooled connections, the
    /// masters in parallel (one scoped thread per master beyond the first),
    /// so that a master that stops answering does not delay the others'
    /// renewals. `false` if some locks could not be renewed (a `MOVED` chunk
    /// is retried at the next, early, run, on the new owner).
    fn renew_in_cluster(
        &self,
        cluster: &Cluster,
        [fields, readers, permits]: [Vec<Arc<Hold>>; 3],
        lease_ms: u64,
    ) -> bool {
        let holds = fields
            .into_iter()
            .map(|h| (h, false))
            .chain(readers.into_iter().map(|h| (h, true)));
        let (groups, mut complete) =
            cluster.group_by_master(holds, renewal_key, RENEWAL_BATCH_SIZE);
        // Permits in chunks of their own, grouped by their ZSET's slot.
        let permits = permits.into_iter().map(|h| (h, false));
        let (permit_groups, permits_complete) =
            cluster.group_by_master(permits, renewal_key, RENEWAL_BATCH_SIZE);
        complete &= permits_complete;
        let mut by_node: HashMap<Arc<str>, Vec<&[Arc<Hold>]>> = HashMap::new();
        for (addr, chunks) in groups.iter().chain(&permit_groups) {
            let node = by_node.entry(Arc::clone(addr)).or_default();
            node.extend(chunks.iter().map(Vec::as_slice));
        }
        let renew_node = |addr: &Arc<str>, chunks: &[&[Arc<Hold>]]| {
            chunks
                .chunks(PIPELINED_CHUNKS)
                .all(|round| self.renew_round(round, lease_ms, Some((cluster, addr))))
        };
        let mut nodes = by_node.iter();
        let first = nodes.next();
        thread::scope(|scope| {
            let others: Vec<_> = nodes
                .map(|(addr, chunks)| {
                    thread::Builder::new()
                        .name("rlock-renew".into())
                        .spawn_scoped(scope, || renew_node(addr, chunks))
                        // No thread to be had: renew that master here.
                        .map_err(|_| (addr, chunks))
                })
                .collect();
            if let Some((addr, chunks)) = first {
                complete &= renew_node(addr, chunks);
            }
            for other in others {
                complete &= match other {
                    Ok(handle) => handle.join().unwrap_or(false),
                    Err((addr, chunks)) => renew_node(addr, chunks),
                };
            }
        });
        complete
    }
}

/// The key a hold's renewal script names, whose slot it goes to.
fn renewal_key(hold: &Arc<Hold>) -> &str {
    hold.renewal.key(&hold.name)
}

/// One pipelined renewal round on a pooled connection to the master at
/// `addr`. A chunk answered `ASK` (its slot is being migrated and its locks
/// already moved) is sent once more, after `ASKING`, to the importing node,
/// by the router's rules ([`Cluster::ask_target`]). A lost connection costs
/// nothing but this round: the next run (early, after a failure) finds the
/// new table.
fn cluster_renewal(
    cluster: &Cluster,
    addr: &Arc<str>,
    chunks: &[RenewChunk<'_>],
    lease_ms: u64,
    sync: Option<&ReplicaSync>,
) -> Result<Vec<Result<Vec<Renewed>>>> {
    let renew = |con: &mut crate::net::pool::Checkout<'_>, chunks: &[RenewChunk<'_>]| {
        let replies = lease::renew_chunks(con, chunks, lease_ms)?;
        if let Some(sync) = sync {
            sync.wait_after_renewal(con.endpoint(), con);
        }
        Ok(replies)
    };
    let result = cluster
        .pool(addr)
        .and_then(|pool| renew(&mut pool.get()?, chunks));
    if result.as_ref().is_err_and(Error::is_transient) {
        cluster.schedule_refresh();
    }
    let mut replies = result?;
    for (reply, chunk) in replies.iter_mut().zip(chunks) {
        let target = match reply {
            Err(e) => Cluster::ask_target(e, addr),
            Ok(_) => None,
        };
        if let Some(target) = target {
            let one = std::slice::from_ref(chunk);
            *reply = cluster
                .asking(&target, |con| renew(con, one))
                .and_then(|mut replies| {
                    replies
                        .pop()
                        .unwrap_or_else(|| Err(Error::UnexpectedReply("no renewal reply".into())))
                });
        }
    }
    Ok(replies)
}
