//! The members' commands at once: one no-wait acquire attempt on every
//! member for about one round trip (each member's command written on its
//! own connection, then the replies read, see `crate::scatter`), and the
//! release of what a failed attempt took, on a background thread the next
//! attempt can wait for.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::guard::{self, LockGuard};
use crate::lock::{Attempt, Lock};
use crate::locks::Kind;
use crate::scatter::{InFlight, Recorder};
use crate::unlock::Orphan;

/// One member's attempt: its guard, or the holder's TTL; or the error.
pub(super) type Outcome<K> = Result<std::result::Result<LockGuard<K>, Option<Duration>>>;

/// One attempt at each of `locks`, none of them waiting: every command is
/// written before any reply is read. Each reply is read by `read_deadline`
/// at most (`None`: the response timeout); one that is not is a
/// [`Error::Timeout`] whose connection is discarded (the member may have
/// been taken). Each attempt is the single-lock path's `try_lock`, with its
/// bookkeeping (registry, watchdog, lost replies sent again on a dropped
/// connection). The outcomes come in the order of `locks`; an error before
/// anything was sent for a member (a fork, a bad lease, a non-reentrant
/// lock held) ends the list there.
pub(super) fn try_all<K: Kind>(
    locks: &[Lock<K>],
    read_deadline: Option<Instant>,
) -> Vec<Outcome<K>> {
    struct Sent<'a, K: Kind> {
        lock: &'a Lock<K>,
        field: String,
        lease: Duration,
        lease_ms: u64,
        begun: Attempt,
        sent: Instant,
        in_flight: Option<Result<InFlight<'a>>>,
    }
    let mut outcomes = Vec::with_capacity(locks.len());
    let mut sent = Vec::with_capacity(locks.len());
    let mut refused = None;
    for lock in locks {
        let begun = lock.check().and_then(|()| {
            let (lease, lease_ms) = lock.lease()?;
            let field = lock.owner_field();
            let begun = lock.begin_attempt(&field, lease)?;
            Ok((field, lease, lease_ms, begun))
        });
        let (field, lease, lease_ms, begun) = match begun {
            Ok(begun) => begun,
            Err(e) => {
                refused = Some(e);
                break;
            }
        };
        let packed = Recorder::record(|con| {
            let request = begun.request(lock, lease_ms, &field, false, None);
            let _ = lock.kind.acquire(con, &request);
        });
        let at = Instant::now();
        let in_flight = packed.map(|packed| lock.client.send(&packed));
        sent.push(Sent {
            lock,
            field,
            lease,
            lease_ms,
            begun,
            sent: at,
            in_flight,
        });
    }
    let deadline = read_deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
    for member in sent {
        let Sent {
            lock,
            field,
            lease,
            lease_ms,
            begun,
            sent,
            in_flight,
        } = member;
        let send = |con: &mut dyn redis::ConnectionLike, resend: bool| {
            let request = begun.request(lock, lease_ms, &field, resend, None);
            lock.kind.acquire(con, &request)
        };
        let acquired = match in_flight.map(|in_flight| in_flight.map(|f| f.receive(deadline))) {
            Some(Ok(Some(first))) => lock.client.with_prefetched("lock", first, send),
            // No connection could be had: nothing was sent.
            Some(Err(e)) => Err(e),
            // Nothing recorded: the single-lock path, as is.
            Some(Ok(None)) | None => lock
                .client
                .with_connection("lock", |con, resend| send(con, resend)),
        };
        outcomes.push(lock.finish_attempt(begun, &field, lease, sent, acquired));
    }
    if let Some(e) = refused {
        outcomes.push(Err(e));
    }
    outcomes
}

/// What a failed attempt leaves to release: the members it took, and
/// those whose reply was lost (they may have been taken), each with its
/// position among the members.
pub(super) struct Leftovers<K: Kind> {
    pub guards: Vec<(usize, LockGuard<K>)>,
    pub orphans: Vec<(usize, Orphan<K>)>,
}

impl<K: Kind> Leftovers<K> {
    pub fn new() -> Self {
        Leftovers {
            guards: Vec::new(),
            orphans: Vec::new(),
        }
    }

    /// Member `index`, whose attempt failed with `e`, may have been taken
    /// (unless no connection could be had: then nothing was sent).
    pub fn failed(&mut self, index: usize, member: &Lock<K>, e: &Error) {
        if !matches!(e, Error::Unavailable { .. })
            && let Some(orphan) = member.orphan()
        {
            self.orphans.push((index, orphan));
        }
    }

    /// Releases everything on a background thread: a member whose server
    /// is frozen or gone must not hold up the caller. A later attempt waits
    /// for a member's release (see [`Cleanups::wait_for`]) before it takes
    /// that member again on the same thread's owner field, which the
    /// release could otherwise remove.
    pub fn release_in_background(self) -> Option<Cleanup> {
        if self.guards.is_empty() && self.orphans.is_empty() {
            return None;
        }
        let cleanup = Cleanup::default();
        {
            let mut pending = cleanup.pending.0.lock();
            pending.extend(self.guards.iter().map(|(index, _)| *index));
            pending.extend(self.orphans.iter().map(|(index, _)| *index));
        }
        let (indexes, guards): (Vec<usize>, Vec<_>) = self
            .guards
            .into_iter()
            .map(|(index, guard)| (index, guard.detach()))
            .unzip();
        let orphans = self.orphans;
        let done = cleanup.clone();
        let spawned = std::thread::Builder::new()
            .name("rlock-release".into())
            .spawn(move || {
                if let Err(e) = guard::release_all(guards) {
                    log::debug!("redisson-lock: releasing members failed: {e}");
                }
                done.finish(&indexes);
                for (index, orphan) in orphans {
                    orphan.release();
                    done.finish(&[index]);
                }
            });
        match spawned {
            Ok(_) => Some(cleanup),
            Err(e) => {
                log::warn!("redisson-lock: cannot start a thread to release members: {e}");
                None
            }
        }
    }
}

/// The background release of a failed attempt's members: which of them
/// (by position) are still being released.
#[derive(Clone, Default)]
pub(super) struct Cleanup {
    pending: Arc<(Mutex<Vec<usize>>, Condvar)>,
}

impl Cleanup {
    fn finish(&self, indexes: &[usize]) {
        self.pending
            .0
            .lock()
            .retain(|index| !indexes.contains(index));
        self.pending.1.notify_all();
    }

    /// Waits until member `index` is no longer being released, until
    /// `deadline` at most; `false` when it still is.
    fn wait_for(&self, index: usize, deadline: Instant) -> bool {
        let mut pending = self.pending.0.lock();
        while pending.contains(&index) {
            if self
                .pending
                .1
                .wait_until(&mut pending, deadline)
                .timed_out()
            {
                return !pending.contains(&index);
            }
        }
        true
    }

    fn is_done(&self) -> bool {
        self.pending.0.lock().is_empty()
    }
}

/// The releases of earlier attempts still under way.
#[derive(Default)]
pub(super) struct Cleanups(Vec<Cleanup>);

impl Cleanups {
    pub fn push(&mut self, cleanup: Option<Cleanup>) {
        self.0.retain(|cleanup| !cleanup.is_done());
        self.0.extend(cleanup);
    }

    /// Waits until no earlier attempt is releasing member `index`, until
    /// `deadline` at most; `false` when one still is (the member must not
    /// be taken now).
    pub fn wait_for(&self, index: usize, deadline: Instant) -> bool {
        self.0
            .iter()
            .all(|cleanup| cleanup.wait_for(index, deadline))
    }
}
