//! Where a client's lease renewals go: the watchdog
//! (`crate::engine::watchdog`) decides what to renew and reads what the
//! replies mean; this says which connection each round trip goes out on,
//! matched once per flavour here.
//!
//! - One server or a Sentinel master: the watchdog's own connection, opened
//!   when the client is built, so that a server that later refuses new
//!   clients (`maxclients`) does not cost the locks their renewals. If it
//!   drops and cannot be reopened, a round borrows an idle connection from
//!   the command pool. After a Sentinel failover it is reopened to the new
//!   master, and the watchdog is told to renew at once.
//! - Beyond one round trip (2,000 locks), a run has a second line: a second
//!   connection of the watchdog's own, on a scoped thread, the two lines
//!   each taking the next round not yet taken, so that the client readies
//!   one round while the server runs the other's scripts and a tick takes
//!   about the server's own time instead of the server's and the client's
//!   one after the other (BENCHMARKS.md, "Watchdog curve"). The second
//!   connection is opened by that thread (the first line starts at once),
//!   kept, and reopened after a failover as the first is; when it cannot be
//!   opened the first line takes every round, and it is not tried again for
//!   [`SECOND_LINE_RETRY`]. It never borrows from the command pool (the
//!   application's commands would wait behind a run, or share a
//!   multiplexed socket with its pipelines).
//! - A cluster: the holds grouped by the master of their key's slot, each
//!   master's rounds on one of its pooled connections, the masters in
//!   parallel (one scoped thread per master beyond the first), so that a
//!   master that stops answering does not delay the others' renewals.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use redis::ConnectionLike;

use super::Topology;
use super::cluster::Cluster;
use crate::error::{Error, Result};
use crate::net::connection::PooledConnection;
use crate::net::endpoint::Endpoint;
use crate::net::pool::{Checkout, Pool};
use crate::net::resend::once_more;
use crate::protocol::lease::{self, RenewChunk, Renewed};

/// How long a second line that could not be opened is not tried again.
const SECOND_LINE_RETRY: Duration = Duration::from_secs(30);

/// How often the watchdog looks whether the master moved (Sentinel only).
const MOVE_CHECK: Duration = Duration::from_millis(100);

/// What one round trip of renewal chunks got: its error, or one reply per
/// chunk (each a state per lock, or the chunk's own error).
pub(crate) type RenewReplies = Result<Vec<Result<Vec<Renewed>>>>;

/// Run on a round's connection right after its renewals (the replica
/// sync's `WAIT`), with the server the connection goes to.
pub(crate) type After<'a> = &'a (dyn Fn(&Endpoint, &mut dyn ConnectionLike) + Sync);

/// The connections a client's renewals go out on (see the module docs).
pub(crate) struct Renewals {
    topology: Arc<Topology>,
    /// The watchdog's own connections (one server, Sentinel): the first
    /// opened with the client, the second by the first run of more than
    /// one round trip (see the module docs).
    own: [OwnLine; 2],
    /// Until when the second line is not tried (it could not be opened).
    second_retry: Mutex<Option<Instant>>,
}

/// One of the watchdog's own connections. Behind a mutex only so that a
/// run's two lines (and a cluster's per-master threads) can share the
/// renewals; locked once per round, never contended.
struct OwnLine {
    con: Mutex<Option<PooledConnection>>,
    /// The endpoint generation `con` was opened at: after a Sentinel
    /// failover the connection is reopened to the new master.
    generation: AtomicU64,
}

impl OwnLine {
    fn new(con: Option<PooledConnection>, generation: u64) -> OwnLine {
        OwnLine {
            con: Mutex::new(con),
            generation: AtomicU64::new(generation),
        }
    }

    /// The connection, reopened if it was dropped or the master moved
    /// (`None` if it cannot be).
    fn ready<'a>(&'a self, pool: &Pool) -> MutexGuard<'a, Option<PooledConnection>> {
        let now = pool.connector().endpoint().generation();
        let mut con = self.con.lock();
        if self.generation.swap(now, Ordering::AcqRel) != now {
            *con = None;
        }
        if con.is_none() {
            match pool.connector().open_pooled() {
                Ok(opened) => *con = Some(opened),
                Err(e) => log::debug!("redisson-lock: watchdog cannot connect: {e}"),
            }
        }
        con
    }
}

/// Where one round trip of renewals goes (see [`Renewals::run`]).
#[derive(Clone, Copy)]
pub(crate) enum Route<'a> {
    /// The one server or Sentinel master, over the watchdog's own
    /// connection: its first, or (1) its second.
    Own(&'a Renewals, &'a Arc<Pool>, usize),
    /// The cluster master at this `host:port`, over its pool.
    Master(&'a Cluster, &'a Arc<str>),
}

impl Renewals {
    /// The renewal connections of `topology`. The watchdog's own connection
    /// is opened here, on the caller's thread: a server that cannot be
    /// reached fails the client's build. A cluster has none: each round
    /// goes to its master over that master's pool.
    pub fn open(topology: Arc<Topology>) -> Result<Renewals> {
        let (own, generation) = match &*topology {
            Topology::Single { pool, .. } | Topology::Sentinel { pool, .. } => {
                let connector = pool.connector();
                let generation = connector.endpoint().generation();
                let con = connector
                    .open_pooled()
                    .map_err(|e| connector.connect_error(e))?;
                (Some(con), generation)
            }
            Topology::Cluster { .. } => (None, 0),
        };
        Ok(Renewals {
            topology,
            own: [
                OwnLine::new(own, generation),
                OwnLine::new(None, generation),
            ],
            second_retry: Mutex::new(None),
        })
    }

    /// The endpoint of the one server or Sentinel master; `None` in a
    /// cluster.
    fn endpoint(&self) -> Option<&Arc<Endpoint>> {
        match &*self.topology {
            Topology::Single { pool, .. } | Topology::Sentinel { pool, .. } => {
                Some(pool.connector().endpoint())
            }
            Topology::Cluster { .. } => None,
        }
    }

    /// When the watchdog should look next, its next run being due at
    /// `tick`: under Sentinel also every [`MOVE_CHECK`] (an atomic load),
    /// so that after a failover the locks are renewed on the new master at
    /// once, before the copies it replicated run out.
    pub fn next_look(&self, tick: Instant) -> Instant {
        match self.endpoint() {
            Some(endpoint) if endpoint.is_watched() => tick.min(Instant::now() + MOVE_CHECK),
            _ => tick,
        }
    }

    /// Whether the master moved since the watchdog's connection was opened
    /// (a Sentinel failover): a run is due now.
    pub fn master_moved(&self) -> bool {
        self.endpoint().is_some_and(|endpoint| {
            endpoint.generation() != self.own[0].generation.load(Ordering::Acquire)
        })
    }

    /// One renewal run over `classes` (each class has its own script, so a
    /// chunk holds one class only): chunks of at most `chunk` items,
    /// `pipelined` chunks per round trip, each round renewed by `round` on
    /// its [`Route`]. In a cluster the chunks are of one slot too (a
    /// script's keys must share one; `key` names an item's), and the
    /// masters' rounds go in parallel. `false` if some round failed (a
    /// master's rounds after a failed one are left for the next run, which
    /// comes early after a failure) or some slot has no known master (its
    /// items are left out and the slot table is read again).
    pub fn run<T: Sync>(
        &self,
        classes: Vec<Vec<T>>,
        key: impl Fn(&T) -> &str,
        (chunk, pipelined): (usize, usize),
        round: impl Fn(Route<'_>, &[&[T]]) -> bool + Sync,
    ) -> bool {
        match &*self.topology {
            Topology::Single { pool, .. } | Topology::Sentinel { pool, .. } => {
                let chunks: Vec<&[T]> = classes.iter().flat_map(|c| c.chunks(chunk)).collect();
                let rounds: Vec<&[&[T]]> = chunks.chunks(pipelined).collect();
                let second = rounds.len() > 1
                    && self
                        .second_retry
                        .lock()
                        .is_none_or(|retry| Instant::now() >= retry);
                if !second {
                    return rounds
                        .iter()
                        .all(|chunks| round(Route::Own(self, pool, 0), chunks));
                }
                // Each line takes the next round not yet taken; a line whose
                // round failed leaves the rest to the other.
                let next = AtomicUsize::new(0);
                in_parallel(&[0, 1], |&line| {
                    if line == 1 && !self.open_second(pool) {
                        return true;
                    }
                    let route = Route::Own(self, pool, line);
                    while let Some(chunks) = rounds.get(next.fetch_add(1, Ordering::Relaxed)) {
                        if !round(route, chunks) {
                            return false;
                        }
                    }
                    true
                })
            }
            Topology::Cluster { cluster, .. } => {
                let items = classes
                    .into_iter()
                    .enumerate()
                    .flat_map(|(class, items)| items.into_iter().map(move |item| (item, class)));
                let (by_master, complete) = cluster.group_by_master(items, key, chunk);
                let renew_master = |&(addr, chunks): &(&Arc<str>, &Vec<Vec<T>>)| {
                    let chunks: Vec<&[T]> = chunks.iter().map(Vec::as_slice).collect();
                    let route = Route::Master(cluster, addr);
                    chunks.chunks(pipelined).all(|chunks| round(route, chunks))
                };
                let by_master: Vec<_> = by_master.iter().collect();
                complete & in_parallel(&by_master, renew_master)
            }
        }
    }

    /// Opens the second line if it is not open (see the module docs);
    /// whether it is.
    fn open_second(&self, pool: &Pool) -> bool {
        let open = self.own[1].ready(pool).is_some();
        if !open {
            *self.second_retry.lock() = Some(Instant::now() + SECOND_LINE_RETRY);
        }
        open
    }

    /// The watchdog's connection `which`, reopened if it was dropped or the
    /// master moved; if the first cannot be reopened (the server refuses
    /// new clients), an idle pooled connection.
    fn line<'a>(&'a self, pool: &'a Pool, which: usize) -> Result<Line<'a>> {
        let own = self.own[which].ready(pool);
        if own.is_some() {
            return Ok(Line::Own(own));
        }
        drop(own);
        if which > 0 {
            return Err(Error::Unavailable {
                reason: "the watchdog's second connection cannot be reopened".into(),
            });
        }
        match pool.try_get_idle() {
            Some(pooled) => Ok(Line::Idle(pooled)),
            None => Err(Error::Unavailable {
                reason: "the watchdog cannot connect and no pooled connection is idle".into(),
            }),
        }
    }

    /// Runs `command` on the watchdog's connection ([`Renewals::line`]),
    /// kept unless the command failed in a way that may pass (a former
    /// master, or a lost one, has the connection ask Sentinel to look
    /// again). A connection that dropped gets the command once more,
    /// flagged (`command`'s second argument), by the one resend rule.
    fn with_connection<T>(
        &self,
        pool: &Pool,
        which: usize,
        mut command: impl FnMut(&mut dyn ConnectionLike, bool) -> Result<T>,
    ) -> Result<T> {
        let run = |line: &mut Line<'_>, resend| match line {
            Line::Own(own) => {
                let result = match own.as_mut() {
                    Some(con) => command(con, resend),
                    None => Err(Error::Unavailable {
                        reason: "the watchdog's connection is gone".into(),
                    }),
                };
                if result.as_ref().is_err_and(Error::is_transient) {
                    **own = None;
                }
                result
            }
            Line::Idle(pooled) => command(pooled, resend),
        };
        once_more(
            self.line(pool, which)?,
            false,
            || self.line(pool, which),
            run,
        )
        .result()
    }
}

/// What a renewal round goes out on: the watchdog's own connection,
/// locked for the round (never contended: only the watchdog renews on it),
/// or an idle pooled one. One per round, on the stack: a checkout's size
/// (larger with TLS) costs nothing there, a box would cost an allocation.
#[allow(clippy::large_enum_variant)]
enum Line<'a> {
    Own(MutexGuard<'a, Option<PooledConnection>>),
    Idle(Checkout<'a>),
}

/// `renew` of each share (a master's, or a line's), the first on this
/// thread and each other on a scoped thread of its own (or here too, when
/// no thread can be had); whether every one returned `true`.
fn in_parallel<S: Sync>(shares: &[S], renew: impl Fn(&S) -> bool + Sync) -> bool {
    let mut shares = shares.iter();
    let first = shares.next();
    let renew = &renew;
    let mut complete = true;
    thread::scope(|scope| {
        let others: Vec<_> = shares
            .map(|share| {
                thread::Builder::new()
                    .name("rlock-renew".into())
                    .spawn_scoped(scope, move || renew(share))
                    // No thread to be had: renew that share here.
                    .map_err(|_| share)
            })
            .collect();
        if let Some(share) = first {
            complete &= renew(share);
        }
        for other in others {
            complete &= match other {
                Ok(handle) => handle.join().unwrap_or(false),
                Err(share) => renew(share),
            };
        }
    });
    complete
}

impl Route<'_> {
    /// The server this round goes to (`host:port`), for spans.
    pub fn describe(&self) -> String {
        match self {
            Route::Own(_, pool, _) => pool.connector().endpoint().describe(),
            Route::Master(_, addr) => addr.to_string(),
        }
    }

    /// Renews `chunks` to `lease_ms` in one round trip (pipelined, see
    /// [`lease::renew_chunks`]), running `after` on the same connection
    /// right after it. On the watchdog's own connection, a connection that
    /// dropped gets the round once more, `resending` called first (the
    /// first may have run). In a cluster a lost connection costs nothing
    /// but this round (the next run, early after a failure, finds the new
    /// table); a chunk answered `ASK` is sent once more to the node it
    /// names, and a chunk's error that says the
    /// slot moved is recorded ([`Cluster::note_redirect`]).
    pub fn renew(
        &self,
        chunks: &[RenewChunk<'_>],
        lease_ms: u64,
        after: After<'_>,
        resending: &mut dyn FnMut(),
    ) -> RenewReplies {
        let renew =
            |con: &mut dyn ConnectionLike, endpoint: &Endpoint, chunks: &[RenewChunk<'_>]| {
                let replies = lease::renew_chunks(con, chunks, lease_ms)?;
                after(endpoint, con);
                Ok(replies)
            };
        match *self {
            Route::Own(renewals, pool, which) => {
                let endpoint = pool.connector().endpoint();
                renewals.with_connection(pool, which, |con, resend| {
                    if resend {
                        resending();
                    }
                    // A chunk's error from a former master sends Sentinel
                    // looking, as an outer error does (the connection's
                    // rule, which reads a pipeline's replies too).
                    renew(con, endpoint, chunks)
                })
            }
            Route::Master(cluster, addr) => {
                let on_master = |con: &mut Checkout<'_>, chunks: &[RenewChunk<'_>]| {
                    let endpoint = con.endpoint();
                    renew(con, endpoint, chunks)
                };
                let result = cluster
                    .pool(addr)
                    .and_then(|pool| on_master(&mut pool.get()?, chunks));
                if result.as_ref().is_err_and(Error::is_transient) {
                    cluster.schedule_refresh();
                }
                let mut replies = result?;
                for (reply, chunk) in replies.iter_mut().zip(chunks) {
                    ask_again(cluster, addr, reply, chunk, on_master);
                }
                Ok(replies)
            }
        }
    }
}

/// A chunk of a round to the cluster master at `addr` answered `ASK` (its
/// slot is being migrated and its locks already moved) is sent once more,
/// after `ASKING`, to the importing node, by the router's rules
/// ([`Cluster::ask_target`]); an error of a chunk that says the slot moved
/// is recorded ([`Cluster::note_redirect`]).
fn ask_again(
    cluster: &Cluster,
    addr: &Arc<str>,
    reply: &mut Result<Vec<Renewed>>,
    chunk: &RenewChunk<'_>,
    renew: impl Fn(&mut Checkout<'_>, &[RenewChunk<'_>]) -> RenewReplies,
) {
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
    if let Err(Error::Redis(e)) = reply {
        cluster.note_redirect(e, addr);
    }
}
