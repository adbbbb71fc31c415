//! The members' commands at once: one no-wait acquire attempt on every
//! member for about one round trip (each member's command written on its
//! own connection, then the replies read, see `crate::scatter`), and the
//! release of what a failed attempt took, awaited within the caller's
//! budget and finished past it on a thread the next attempt can wait for.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::lock::Lock;
use crate::lock::attempt::BegunAttempt;
use crate::lock::guard::{self, LockGuard};
use crate::lock::unlock::Orphan;
use crate::net::scatter::{InFlight, Recorder};
use crate::protocol::Kind;

/// One member's attempt: its guard, or the holder's TTL; or the error.
pub(super) type Outcome<K> = Result<std::result::Result<LockGuard<K>, Option<Duration>>>;

/// One attempt at each of `locks`, none of them waiting: every command is
/// written before any reply is read. Each reply is read by `read_deadline`
/// at most (`None`: the response timeout); one that is not is a
/// [`Error::Timeout`] whose connection is discarded (the member may have
/// been taken). Each attempt is the single-lock path's `try_lock`, with its
/// bookkeeping (registry, watchdog, lost replies sent again on a dropped
/// connection). A member whose client has no connection free at once
/// (its other members hold them) is sent the single-lock way once the
/// replies before it were read. The outcomes come in the order of `locks`;
/// an error before anything was sent for a member (a fork, a bad lease, a
/// non-reentrant lock held) ends the list there.
pub(super) fn try_all<K: Kind>(
    locks: &[Lock<K>],
    read_deadline: Option<Instant>,
) -> Vec<Outcome<K>> {
    struct Sent<'a, K: Kind> {
        lock: &'a Lock<K>,
        field: String,
        lease: Duration,
        lease_ms: u64,
        begun: BegunAttempt,
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
        })
        .filter(|_| lock.engine.can_scatter());
        let at = Instant::now();
        let in_flight = packed.and_then(|packed| lock.engine.send(&packed));
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
    // The replies, read last sent first: the servers answer about in the
    // order they were written to, so this thread sleeps once, for the last
    // reply, rather than once for each.
    let mut replies: Vec<_> = sent
        .iter_mut()
        .rev()
        .map(|member| {
            let in_flight = member.in_flight.take();
            in_flight.map(|in_flight| in_flight.map(|f| f.receive(deadline)))
        })
        .collect();
    replies.reverse();
    for (member, reply) in sent.into_iter().zip(replies) {
        let Sent {
            lock,
            field,
            lease,
            lease_ms,
            begun,
            sent,
            ..
        } = member;
        let send = |con: &mut dyn redis::ConnectionLike, resend: bool| {
            if resend {
                begun.resending();
            }
            let request = begun.request(lock, lease_ms, &field, resend, None);
            lock.kind.acquire(con, &request)
        };
        let acquired = match reply {
            Some(Ok(Some(first))) => lock.engine.with_prefetched("lock", first, send),
            // No connection could be had: nothing was sent.
            Some(Err(e)) => Err(e),
            // Nothing recorded: the single-lock path, as is.
            Some(Ok(None)) | None => {
                lock.engine
                    .with_connection(&lock.name, "lock", |con, resend| send(con, resend))
            }
        };
        outcomes.push(lock.finish_attempt(begun, &field, lease, sent, acquired));
    }
    if let Some(e) = refused {
        outcomes.push(Err(e));
    }
    outcomes
}

/// What a failed attempt leaves to release: the members it took, and
/// those whose reply was lost (they may have been taken).
pub(super) struct Leftovers<K: Kind> {
    pub guards: Vec<LockGuard<K>>,
    pub orphans: Vec<Orphan<K>>,
}

impl<K: Kind> Leftovers<K> {
    pub fn new() -> Self {
        Leftovers {
            guards: Vec::new(),
            orphans: Vec::new(),
        }
    }

    /// A member whose attempt failed with `e` may have been taken (unless
    /// no connection could be had: then nothing was sent).
    pub fn failed(&mut self, member: &Lock<K>, e: &Error) {
        if !matches!(e, Error::Unavailable { .. } | Error::TlsCertificate { .. })
            && let Some(orphan) = member.orphan()
        {
            self.orphans.push(orphan);
        }
    }

    /// Releases everything, waiting until `until` at most: every release
    /// is sent at once on a releasing thread, and the caller returns as soon
    /// as they are all done (one round trip when the servers answer), so
    /// that a failed attempt has undone what it took when it returns, as
    /// Redisson's does. A member whose server is frozen or gone is left to
    /// that thread past `until`: it must not hold up the caller longer.
    /// Until a member's release is done, this thread does not take that
    /// member again (see [`wait_released`]): the release could remove what
    /// it takes, the owner field being the same.
    pub fn release(self, until: Instant) {
        if self.guards.is_empty() && self.orphans.is_empty() {
            return;
        }
        let guard_keys: Vec<String> = self
            .guards
            .iter()
            .map(|g| member_key(LockGuard::lock_of(g)))
            .collect();
        let orphan_keys: Vec<String> = self.orphans.iter().map(|o| member_key(o.lock())).collect();
        let cleanup = Cleanup::default();
        {
            let mut pending = cleanup.pending.0.lock();
            pending.extend(guard_keys.iter().cloned());
            pending.extend(orphan_keys.iter().cloned());
        }
        let guards: Vec<_> = self.guards.into_iter().map(LockGuard::detach).collect();
        let orphans = self.orphans;
        let done = cleanup.clone();
        let spawned = std::thread::Builder::new()
            .name("rlock-release".into())
            .spawn(move || {
                if let Err(e) = guard::release_all(guards) {
                    log::debug!("redisson-lock: releasing members failed: {e}");
                }
                done.finish(&guard_keys);
                for (orphan, key) in orphans.into_iter().zip(orphan_keys) {
                    orphan.release();
                    done.finish(std::slice::from_ref(&key));
                }
            });
        match spawned {
            Ok(_) => {
                cleanup.wait_done(until);
                RELEASING.with(|releasing| {
                    let mut releasing = releasing.borrow_mut();
                    releasing.retain(|cleanup| !cleanup.is_done());
                    if !cleanup.is_done() {
                        releasing.push(cleanup);
                    }
                });
            }
            Err(e) => log::warn!("redisson-lock: cannot start a thread to release members: {e}"),
        }
    }
}

thread_local! {
    /// The background releases of this thread's failed attempts still
    /// under way.
    static RELEASING: RefCell<Vec<Cleanup>> = const { RefCell::new(Vec::new()) };
}

/// A member as this thread's releases know it: its client and name (the
/// owner field follows from the client and the thread).
fn member_key<K: Kind>(lock: &Lock<K>) -> String {
    format!("{}\n{}", lock.engine.id, lock.name())
}

/// Waits until no background release of this thread's is under way for
/// `member`, until `deadline` at most; `false` when one still is (the
/// member must not be taken now). Free when there is none.
pub(super) fn wait_released<K: Kind>(member: &Lock<K>, deadline: Instant) -> bool {
    let cleanups: Vec<Cleanup> = RELEASING.with(|releasing| {
        let mut releasing = releasing.borrow_mut();
        releasing.retain(|cleanup| !cleanup.is_done());
        releasing.clone()
    });
    if cleanups.is_empty() {
        return true;
    }
    let key = member_key(member);
    cleanups
        .iter()
        .all(|cleanup| cleanup.wait_for(&key, deadline))
}

/// One background release: the members (by [`member_key`]) still being
/// released.
#[derive(Clone, Default)]
struct Cleanup {
    pending: Arc<(Mutex<Vec<String>>, Condvar)>,
}

impl Cleanup {
    fn finish(&self, keys: &[String]) {
        self.pending.0.lock().retain(|key| !keys.contains(key));
        self.pending.1.notify_all();
    }

    fn wait_for(&self, key: &str, deadline: Instant) -> bool {
        let mut pending = self.pending.0.lock();
        while pending.iter().any(|pending| pending == key) {
            if self
                .pending
                .1
                .wait_until(&mut pending, deadline)
                .timed_out()
            {
                return !pending.iter().any(|pending| pending == key);
            }
        }
        true
    }

    /// Waits until every member is released, until `deadline` at most.
    fn wait_done(&self, deadline: Instant) {
        let mut pending = self.pending.0.lock();
        while !pending.is_empty() {
            if self
                .pending
                .1
                .wait_until(&mut pending, deadline)
                .timed_out()
            {
                return;
            }
        }
    }

    fn is_done(&self) -> bool {
        self.pending.0.lock().is_empty()
    }
}
