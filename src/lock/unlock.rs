//! Unlocking outside of a guard (Redisson's unlock with a request id and its
//! latch), and the one unlock-with-retry every type and guard goes through.

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::engine::holds::{LeaseOutcome, LeaseTicket};
use crate::error::{Error, LostReason, Result};
use crate::lock::Lock;
use crate::names;
use crate::net::scatter::{Prefetched, Recorder};
use crate::owner::RequestId;
use crate::protocol::UnlockOutcome;
use crate::protocol::{Kind, ReleaseRequest};

use redis::ConnectionLike;

/// Which unlock [`Lock::unlock_raw`] sends.
#[derive(Clone, Copy)]
pub(crate) enum Unlock<'a> {
    /// Redisson's, with the caller's request id and its latch.
    Latched(&'a RequestId),
    /// The guards' own: `remaining` holds are kept (0: free the lock).
    Release { remaining: u32 },
}

/// What a release that no replica acknowledged does (with replica sync
/// checked; see [`crate::replicas`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplicaCheck {
    /// Sent again, then [`Error::NotReplicated`].
    Enforce,
    /// Logged: the undo of an acquisition no replica acknowledged.
    LogOnly,
}

impl<K: Kind> Lock<K> {
    /// Releases one hold of the calling thread with an explicit request id,
    /// outside of any guard: the low-level unlock. Sending the same `request_id`
    /// again within the latch TTL returns the first outcome without touching the
    /// lock, so a caller that lost a reply can retry safely. The latch is
    /// kept for its whole TTL (the unlock retry budget, 14 s by default), also
    /// after a successful reply.
    ///
    /// Prefer dropping or [`unlock`](crate::LockGuard::unlock)ing a guard. A guard
    /// whose hold was released this way reports [`Error::NotHeld`] or
    /// [`Error::Lost`] when it is dropped later.
    pub fn unlock_with_request_id(&self, request_id: &RequestId) -> Result<UnlockOutcome> {
        self.check()?;
        let field = self.owner_field();
        let registry = &self.engine.registry;
        let hold = registry.live(&self.name, &field);
        // It sets the TTL when holds remain: a command the hold must count.
        let lease = self.lease()?.0;
        let ticket = hold.as_ref().map(|hold| hold.begin_lease(lease));
        // The caller knows this id and may send it again: the latch stays.
        let unlock = Unlock::Latched(request_id);
        let (unreported, check) = (ReleaseNotes::default(), ReplicaCheck::Enforce);
        let result =
            self.unlock_raw_from(&field, unlock, &unreported, ticket.as_ref(), None, check);
        if let (Some(hold), Some(ticket)) = (&hold, ticket) {
            let outcome = match &result {
                Ok(Some(UnlockOutcome::StillHeld)) => LeaseOutcome::Set,
                Err(e) => LeaseOutcome::of_error(e),
                _ => LeaseOutcome::Untouched,
            };
            hold.end_lease(ticket, outcome);
        }
        match result? {
            Some(outcome) => {
                if outcome == UnlockOutcome::Released {
                    // Any guard of this thread on the lock now holds nothing.
                    for hold in registry.holds_on(&self.name) {
                        if *hold.field == *field {
                            registry.lose(&hold, LostReason::Released);
                        }
                    }
                }
                Ok(outcome)
            }
            None => Err(self.not_held()),
        }
    }

    /// Sends an unlock, retrying transport failures (never when no
    /// connection could be had); `Ok(None)` when `field` does not hold the
    /// lock.
    ///
    /// - [`Unlock::Latched`] is Redisson's unlock with the caller's request
    ///   id: a retry within the latch TTL returns the first outcome.
    /// - [`Unlock::Release`] is the guards' own, which sets the count to
    ///   what the thread keeps: a retry sets the same count or finds the
    ///   field gone, so it needs no latch. When an earlier attempt may have
    ///   run, a field found gone means that attempt freed the lock.
    pub(crate) fn unlock_raw(
        &self,
        field: &str,
        unlock: Unlock<'_>,
    ) -> Result<Option<UnlockOutcome>> {
        let unreported = ReleaseNotes::default();
        self.unlock_raw_from(
            field,
            unlock,
            &unreported,
            None,
            None,
            ReplicaCheck::Enforce,
        )
    }

    /// The command a guard's release of `field` keeping `remaining` holds
    /// sends first, for [`Lock::unlock_raw_from`] with a reply read
    /// beforehand (scatter/gather over several servers).
    pub(crate) fn release_command(&self, field: &str, remaining: u32) -> Option<Vec<u8>> {
        let (_, lease_ms) = self.lease().ok()?;
        let request = self.release_request(field, lease_ms, remaining);
        Recorder::record(|con| {
            let _ = self.kind.release(con, &request);
        })
    }

    fn release_request<'a>(
        &'a self,
        field: &'a str,
        lease_ms: u64,
        remaining: u32,
    ) -> ReleaseRequest<'a> {
        ReleaseRequest {
            name: &self.name,
            lease_ms,
            field,
            publish: self.engine.publish,
            remaining,
            kept_ttl_ms: Cell::new(None),
        }
    }

    /// [`Lock::unlock_raw`], and in `notes` the TTL the type reports the
    /// key was left with when holds remain (see
    /// [`ReleaseRequest::kept_ttl_ms`]) and whether a release was only
    /// inferred (see [`ReleaseNotes`]); `ticket`, the hold's lease ticket
    /// for the command, learns of a resend. Its first attempt is answered
    /// by `first`, a reply already read for the command
    /// [`Lock::release_command`] packed (when there is one); `check` says
    /// what a release no replica acknowledged does.
    pub(crate) fn unlock_raw_from(
        &self,
        field: &str,
        unlock: Unlock<'_>,
        notes: &ReleaseNotes,
        ticket: Option<&LeaseTicket>,
        mut first: Option<Prefetched<'_>>,
        check: ReplicaCheck,
    ) -> Result<Option<UnlockOutcome>> {
        let inner = &*self.engine;
        let config = &inner.config;
        let (_, lease_ms) = self.lease()?;
        let latch = match unlock {
            Unlock::Latched(request_id) => names::unlock_latch(&self.name, request_id.as_str()),
            Unlock::Release { .. } => String::new(),
        };
        let latch_ttl_ms = config.latch_ttl_ms();
        let remaining = match unlock {
            Unlock::Release { remaining } => remaining,
            Unlock::Latched(_) => 0,
        };
        let request = self.release_request(field, lease_ms, remaining);
        // A latched retry must reach Redis while the first attempt's latch
        // lives, or it could release a second hold: it is sent only until
        // this (counted from the first send). A release retries regardless.
        let retry_until = match unlock {
            Unlock::Latched(_) => Instant::now().checked_add(
                Duration::from_millis(latch_ttl_ms)
                    .saturating_sub(config.response_timeout.saturating_add(config.retry_delay)),
            ),
            Unlock::Release { .. } => None,
        };
        let mut retries = 0;
        loop {
            let send = |con: &mut dyn ConnectionLike, resend: bool| {
                let outcome = match unlock {
                    Unlock::Latched(_) => {
                        self.kind
                            .unlock_latched(con, &request, &latch, latch_ttl_ms)?
                    }
                    Unlock::Release { .. } => self.kind.release(con, &request)?,
                };
                // A resend of a release that finds the field gone: the
                // first one freed it (its reply was lost).
                let may_have_run = resend || retries > 0;
                if let (true, Some(ticket)) = (may_have_run, ticket) {
                    ticket.resending();
                }
                Ok(match (unlock, outcome) {
                    (Unlock::Release { remaining: 0 }, None) if may_have_run => {
                        notes.inferred.set(true);
                        Some(UnlockOutcome::Released)
                    }
                    (_, outcome) => outcome,
                })
            };
            let result = match first.take() {
                Some(first) => self.engine.with_prefetched("unlock", first, send),
                // A release no replica acknowledged is sent again (it is
                // idempotent) like one whose reply was lost, then reported.
                None => self
                    .engine
                    .with_synced_connection(&self.name, "unlock", |con, resend| send(con, resend))
                    .and_then(
                        |(outcome, synced)| match synced.error("unlock", &self.name) {
                            Some(e)
                                if check == ReplicaCheck::Enforce
                                    && self.engine.checks_replicas() =>
                            {
                                Err(e)
                            }
                            Some(e) => {
                                log::warn!("redisson-lock: {e}");
                                Ok(outcome)
                            }
                            None => Ok(outcome),
                        },
                    ),
            };
            match result {
                // No connection to be had (refused, silent, pool busy) is an
                // answer: the lock expires by its lease, and waiting here for
                // the server would only stall the caller (a thread unwinding
                // through its guards, say).
                Err(e @ Error::Unavailable { .. }) => return Err(e),
                Err(e)
                    if e.is_transient()
                        && retries < config.retry_attempts
                        && retry_until.is_none_or(|until| Instant::now() < until) =>
                {
                    retries += 1;
                    log::debug!(
                        "redisson-lock: unlock of `{}` failed ({e}), retry {retries}",
                        self.name
                    );
                    std::thread::sleep(config.retry_delay);
                }
                other => {
                    notes.kept_ttl_ms.set(request.kept_ttl_ms.get());
                    return other;
                }
            }
        }
    }
}

/// What a release learnt besides its outcome ([`Lock::unlock_raw_from`]).
#[derive(Default)]
pub(crate) struct ReleaseNotes {
    /// The TTL the type reports the key was left with when holds remain
    /// ([`ReleaseRequest::kept_ttl_ms`]).
    pub kept_ttl_ms: Cell<Option<u64>>,
    /// The release was only inferred: an attempt that may have run was
    /// followed by one that found the field gone, read as "the first one
    /// freed it" (it may also have been gone before).
    pub inferred: Cell<bool>,
}

/// A possible hold left by an acquire whose reply never came, as a value
/// that may cross threads: releasing it sets this thread's field back to the
/// holds it counts (0: removes it, if it is there). See [`Lock::orphan`].
pub(crate) struct Orphan<K: Kind> {
    lock: Lock<K>,
    field: String,
    remaining: u32,
}

impl<K: Kind> Lock<K> {
    /// What an acquire of this lock by the calling thread may have left
    /// behind, to be cleaned up on another thread; `None` from a forked
    /// child.
    pub(crate) fn orphan(&self) -> Option<Orphan<K>> {
        self.check().ok()?;
        let field = self.owner_field();
        let remaining = self
            .engine
            .registry
            .live(&self.name, &field)
            .map_or(0, |hold| crate::engine::holds::Registry::count(&hold));
        Some(Orphan {
            lock: self.clone(),
            field,
            remaining,
        })
    }
}

impl<K: Kind> Orphan<K> {
    /// The lock it may have left held.
    pub fn lock(&self) -> &Lock<K> {
        &self.lock
    }

    /// Sends the release; failures are only logged (the lease frees it).
    pub fn release(self) {
        let remaining = self.remaining;
        if let Err(e) = self
            .lock
            .unlock_raw(&self.field, Unlock::Release { remaining })
        {
            log::debug!(
                "redisson-lock: cleaning up `{}` after a lost reply failed: {e}",
                self.lock.name()
            );
        }
    }
}
