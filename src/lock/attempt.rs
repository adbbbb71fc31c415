//! One acquire attempt of any lock type, split at its command: what it
//! settles before the command is sent ([`Lock::begin_attempt`]) and the
//! bookkeeping of its outcome ([`Lock::finish_attempt`]). The single-lock
//! path runs both around one pooled command; MultiLock and RedLock around
//! one command per member, all written before any reply is read.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::engine::holds::{Hold, HoldKind, LeaseOutcome, LeaseTicket, Registry};
use crate::error::{Error, LostReason, Result};
use crate::lock::Lock;
use crate::lock::guard::LockGuard;
use crate::lock::unlock::Unlock;
use crate::names;
use crate::protocol::{AcquireRequest, Acquired, Kind, Queue};

impl<K: Kind> Lock<K> {
    /// What an acquire attempt settles before its command is sent: the
    /// thread's own count on its field, and for a reentry the lease ticket
    /// and the "replaced" marker. Every [`BegunAttempt`] must be finished by
    /// [`Lock::finish_attempt`].
    pub(crate) fn begin_attempt(&self, field: &str, lease: Duration) -> Result<BegunAttempt> {
        // After a shutdown, nothing is sent (MultiLock's members too).
        self.engine.check_open()?;
        let registry = &self.engine.registry;
        // This thread's own count is the truth about its field: whatever else
        // Redis has there was left by an acquire whose reply was lost.
        let live = registry.live(&self.name, field);
        let known = live.as_ref().map_or(0, |hold| Registry::count(hold));
        if known > 0 && !self.kind.reentrant() {
            return Err(Error::NotReentrant {
                name: self.name.to_string(),
            });
        }
        // A reentry sets the TTL of a hold that a renewal may be setting too.
        let ticket = live.as_ref().map(|hold| hold.begin_lease(lease));
        let marker = live.as_ref().map(|_| {
            let id = self.engine.next_request_id();
            names::replaced_marker(&self.name, id.as_str())
        });
        Ok(BegunAttempt {
            live,
            known,
            ticket,
            marker,
        })
    }

    /// The bookkeeping of an attempt's outcome: the guard, or the holder's
    /// TTL.
    pub(crate) fn finish_attempt(
        &self,
        begun: BegunAttempt,
        field: &str,
        lease: Duration,
        sent: Instant,
        acquired: Result<Acquired>,
    ) -> Result<Result<LockGuard<K>, Option<Duration>>> {
        let registry = &self.engine.registry;
        let BegunAttempt { live, ticket, .. } = begun;
        if let (Some(hold), Some(ticket)) = (&live, ticket) {
            let outcome = match &acquired {
                Ok(Acquired::Yes {
                    replaced: false, ..
                }) => LeaseOutcome::Set,
                Err(e) => LeaseOutcome::of_error(e),
                _ => LeaseOutcome::Untouched,
            };
            hold.end_lease(ticket, outcome);
        }
        let (replaced, token) = match acquired? {
            Acquired::No { ttl } => {
                if let Some(hold) = &live {
                    // Someone else holds what this thread counted as its own.
                    registry.lose(hold, LostReason::KeyGone);
                }
                return Ok(Err(ttl));
            }
            Acquired::Yes { replaced, token } => (replaced, token),
        };
        if replaced && let Some(hold) = &live {
            registry.lose(hold, LostReason::Replaced);
        }
        let renew = self.lease.is_none();
        let reentered = live.as_ref().filter(|_| !replaced);
        let renewal = self.kind.renewal(field);
        let hold = registry.acquired(
            &self.name,
            field,
            Self::HOLD_KIND,
            renewal,
            lease,
            renew,
            sent,
            reentered,
        );
        Ok(Ok(LockGuard::new(self.clone(), hold, renew, token)))
    }
}

impl<K: Kind> Lock<K> {
    /// The holds of this lock type: their class, and their release at a
    /// [`crate::Client::shutdown`] (the guards' own release, whole).
    pub(crate) const HOLD_KIND: &'static HoldKind = &HoldKind {
        class: K::REDISSON,
        release: release_whole::<K>,
    };
}

/// Releases `hold` (a lock of type `K`) whole on `engine`'s client.
fn release_whole<K: Kind>(engine: &Arc<Engine>, hold: &Hold) -> Result<()> {
    let lock = Lock::<K>::new(Arc::clone(engine), hold.name.to_string());
    lock.unlock_raw(&hold.field, Unlock::Release { remaining: 0 })
        .map(|_| ())
}

/// An acquire attempt between [`Lock::begin_attempt`] and
/// [`Lock::finish_attempt`].
pub(crate) struct BegunAttempt {
    live: Option<Arc<Hold>>,
    known: u32,
    ticket: Option<LeaseTicket>,
    marker: Option<String>,
}

impl BegunAttempt {
    /// The acquire is sent once more after a first send whose fate is
    /// unknown: a reentry's lease ticket must not take a refusal of this
    /// send as proof that the first did not run.
    pub(crate) fn resending(&self) {
        if let Some(ticket) = &self.ticket {
            ticket.resending();
        }
    }

    /// The request the attempt sends through `lock`.
    pub(crate) fn request<'a, K: Kind>(
        &'a self,
        lock: &'a Lock<K>,
        lease_ms: u64,
        field: &'a str,
        resend: bool,
        queue: Option<Queue>,
    ) -> AcquireRequest<'a> {
        AcquireRequest {
            name: &lock.name,
            lease_ms,
            field,
            known: self.known,
            marker: self
                .marker
                .as_deref()
                .map(|key| (key, lock.engine.config.latch_ttl_ms())),
            resend,
            queue,
        }
    }
}
