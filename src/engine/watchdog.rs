//! The shared renewal thread: renews every watchdog-mode hold of the
//! client's [`Registry`] at a third of the watchdog timeout (docs/wire-format.md, "Batched
//! renewal"),
//! in chunks of 100 locks per script call, 20 chunks pipelined per round trip
//! on one connection (not one round trip per chunk). Which connection each
//! round trip goes out on (the watchdog's own, or in a cluster each slot's
//! master's) is the topology's ([`Renewals`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use redis::ConnectionLike;

use super::holds::{Hold, LeaseOutcome, LeaseTicket, Registry};
use super::observe::{RenewOutcome, Renewing};
use super::replicas::ReplicaSync;
use crate::error::{LostReason, Result};
use crate::net::endpoint::Endpoint;
use crate::protocol::lease::{RenewChunk, RenewKind, Renewed};
use crate::spawn::Stoppable;
use crate::topology::Topology;
use crate::topology::renewal::{Renewals, Route};

/// Locks per renewal script call (Redisson's `lockWatchdogBatchSize`), up
/// to [`CALLS_PER_RUN`] calls per run; beyond, the calls grow (see
/// [`batch_size`]).
pub(crate) const RENEWAL_BATCH_SIZE: usize = 100;

/// The most locks one renewal script call renews: two commands each, about
/// a millisecond of the server's time for the whole call.
const MAX_RENEWAL_BATCH: usize = 1_000;

/// Script calls per renewal run that the batches grow to keep to: beyond
/// 100,000 locks due, a call renews more than [`RENEWAL_BATCH_SIZE`], so
/// that a million locks are renewed in 1,000 calls (50 round trips), not
/// 10,000.
const CALLS_PER_RUN: usize = 1_000;

/// Locks per renewal script call for a run of `due` locks:
/// [`RENEWAL_BATCH_SIZE`] up to 100,000, then as many as keep the run to
/// [`CALLS_PER_RUN`] calls, [`MAX_RENEWAL_BATCH`] at most.
fn batch_size(due: usize) -> usize {
    due.div_ceil(CALLS_PER_RUN)
        .clamp(RENEWAL_BATCH_SIZE, MAX_RENEWAL_BATCH)
}

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
    /// cannot be reached fails the client's build (see [`Renewals::open`]).
    pub fn start(
        registry: Arc<Registry>,
        topology: Arc<Topology>,
        lease: Duration,
        sync: Option<Arc<ReplicaSync>>,
    ) -> Result<Self> {
        let renewals = Renewals::open(topology)?;
        let run = move |stop_rx| {
            let worker = Worker {
                registry,
                renewals,
                lease,
                sync,
                stop_rx,
            };
            worker.run();
        };
        let thread = Stoppable::spawn("rlock-watchdog", "the watchdog thread", run)?;
        Ok(Watchdog { thread })
    }

    /// Stops the thread and waits for it: at most the renewal round trips
    /// in flight (one per line or master), each bounded by the response
    /// timeout; a run's later rounds are not sent.
    pub fn stop(&self) {
        self.thread.stop_and_join();
    }
}

struct Worker {
    registry: Arc<Registry>,
    /// Where renewals go.
    renewals: Renewals,
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
            // Under Sentinel, a look now and then for a failover: the
            // locks are renewed on the new master at once.
            match self
                .stop_rx
                .recv_deadline(self.renewals.next_look(next_tick))
            {
                Err(RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
            }
            if Instant::now() < next_tick && !self.renewals.master_moved() {
                continue;
            }
            // A period from this run's start, not its end: a run that takes
            // long (a million locks, seconds) must not stretch the time
            // between two renewals of one lock beyond a third of its lease.
            // A tenth of a period after its end at least: a run longer than
            // a period leaves the server a pause, not a back-to-back load.
            let started = Instant::now();
            next_tick = if self.renew_all() {
                (started + period).max(Instant::now() + period / 10)
            } else {
                Instant::now()
                    + (self.lease / 10)
                        .clamp(RENEWAL_RETRY_DELAY_MIN, RENEWAL_RETRY_DELAY)
                        .min(period)
            };
        }
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
        let complete = self.renewals.run(
            vec![fields, readers, permits],
            renewal_key,
            (batch_size(due), PIPELINED_CHUNKS),
            |route, round| self.renew_round(round, lease_ms, route),
        );
        log::debug!(
            "redisson-lock: renewed {due} lock(s) in {:?}",
            started.elapsed()
        );
        complete
    }

    /// One round trip: up to [`PIPELINED_CHUNKS`] chunks pipelined, each of
    /// one renewal kind; `false` if some locks could not be renewed.
    /// A run asked to stop sends no more rounds (a million locks' run is
    /// seconds long; a shutdown waits for the rounds in flight only).
    fn renew_round(&self, round: &[&[Arc<Hold>]], lease_ms: u64, route: Route<'_>) -> bool {
        if !matches!(self.stop_rx.try_recv(), Err(TryRecvError::Empty)) {
            return false;
        }
        let lease = self.lease;
        // tests/failpoints.rs: a hold taken out of renewal (`keep_for`)
        // after the run collected it, before its round begins.
        crate::failpoint::failpoint!("renewal-before-begin");
        // The holds still renewed now, each with its ledger entry begun: one
        // released or kept since the run collected it is left out.
        let mut tickets = Vec::new();
        let round: Vec<Vec<&Arc<Hold>>> = round
            .iter()
            .map(|chunk| {
                chunk
                    .iter()
                    .filter(|hold| match hold.begin_renewal(lease) {
                        Some(ticket) => {
                            tickets.push(ticket);
                            true
                        }
                        None => false,
                    })
                    .collect::<Vec<_>>()
            })
            .filter(|chunk| !chunk.is_empty())
            .collect();
        if round.is_empty() {
            return true;
        }
        let chunks: Vec<RenewChunk<'_>> = round
            .iter()
            .map(|chunk| RenewChunk {
                items: chunk
                    .iter()
                    .map(|hold| (&*hold.name, &*hold.field, &hold.renewal))
                    .collect(),
            })
            .collect();
        // tests/failpoints.rs: an unlock between the holds' collection and
        // the renewal's send.
        crate::failpoint::failpoint!("renewal-before-send");
        let mut observed = Renewing::start(tickets.len(), || Some(route.describe()));
        let sync = self.sync.as_deref();
        let after = |endpoint: &Endpoint, con: &mut dyn ConnectionLike| {
            if let Some(sync) = sync {
                sync.wait_after_renewal(endpoint, con);
            }
        };
        // Sent again after a dropped connection: the first may have run.
        let mut resending = || tickets.iter().for_each(LeaseTicket::resending);
        let result = route.renew(&chunks, lease_ms, &after, &mut resending);
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
                self.registry.lose_held(hold, LostReason::KeyGone);
            }
            Renewed::WrongType => {
                hold.end_lease(ticket, LeaseOutcome::Untouched);
                self.registry.lose_held(hold, LostReason::Overwritten);
            }
        }
    }
}

/// The key a hold's renewal script names, whose slot it goes to.
fn renewal_key(hold: &Arc<Hold>) -> &str {
    hold.renewal.key(&hold.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_keeps_to_its_calls_beyond_a_hundred_thousand_locks() {
        for (due, size) in [
            (1, 100),
            (10_000, 100),
            (100_000, 100),
            (100_001, 101),
            (250_000, 250),
            (1_000_000, 1_000),
            (5_000_000, 1_000),
        ] {
            assert_eq!(batch_size(due), size, "{due} locks due");
        }
        // A million locks in at most 1,000 calls.
        assert!(1_000_000usize.div_ceil(batch_size(1_000_000)) <= CALLS_PER_RUN);
    }
}
