//! A guard's release, every lock type's and every guard's: the release
//! script with its latch-free retry, the ledger's ticket for a partial
//! release that sets the lease, the replica check, and a MultiLock's
//! members released together.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::holds::{Hold, LeaseOutcome, LeaseTicket, Registry};
use crate::engine::observe::{ReleaseOutcome, Releasing};
use crate::error::{LostReason, Result, Verdict};
use crate::lock::Lock;
use crate::lock::unlock::{ReleaseNotes, ReplicaCheck, Unlock};
use crate::net::scatter::Prefetched;
use crate::protocol::Kind;
use crate::protocol::UnlockOutcome;

/// A guard taken apart to be released on another thread; see
/// [`LockGuard::detach`].
pub(crate) struct Detached<K: Kind> {
    pub(super) lock: Lock<K>,
    pub(super) hold: Arc<Hold>,
    pub(super) renew: bool,
}

/// One guard's release: every type and every guard goes through here.
pub(crate) fn release<K: Kind>(lock: &Lock<K>, hold: &Arc<Hold>, renew: bool) -> Result<()> {
    let observed = Releasing::start(K::REDISSON, &lock.name);
    let result = match begin_release(lock, hold, renew) {
        Step::Done(result) => result,
        Step::Send(sending) => finish_release(lock, hold, sending, None, ReplicaCheck::Enforce),
    };
    let outcome = match &result {
        Ok(()) if Registry::count(hold) == 0 => ReleaseOutcome::Released,
        Ok(()) => ReleaseOutcome::StillHeld,
        Err(crate::error::Error::Lost { .. }) => ReleaseOutcome::Lost,
        Err(crate::error::Error::NotHeld { .. }) => ReleaseOutcome::NotHeld,
        Err(_) => ReleaseOutcome::Error,
    };
    observed.finish(outcome, hold.since, result.as_ref().err());
    result
}

/// A release up to its command: done already (a lost hold, a forked
/// child), or the command to send.
pub(super) enum Step {
    Done(Result<()>),
    Send(Sending),
}

pub(super) struct Sending {
    remaining: u32,
    last: bool,
    ticket: Option<LeaseTicket>,
    sent: Instant,
}

pub(super) fn begin_release<K: Kind>(lock: &Lock<K>, hold: &Arc<Hold>, renew: bool) -> Step {
    // Before anything else: a forked child must not touch the parent's
    // bookkeeping, whose mutexes may have been held at the fork.
    if let Err(e) = lock.engine.check_process() {
        return Step::Done(Err(e));
    }
    let registry = &lock.engine.registry;
    // Unregister first so that a renewal racing with this unlock does not
    // report a lock we are giving up as lost.
    let remaining = Registry::count(hold).saturating_sub(1);
    let last = registry.released(hold, renew);
    // One clock read: whether the lease is over, and when the release
    // (which may set the TTL) counts as sent.
    let sent = Instant::now();
    if let Some(reason) = hold.lost_reason_at(sent) {
        // The client was shut down: it released the hold and sends nothing.
        if reason == LostReason::Shutdown {
            return Step::Done(Err(lock.lost(reason)));
        }
        // Clean up what may be left (a renewal that landed late) once the
        // last guard of the lost hold goes, unless this thread has taken
        // the lock again since.
        if last && registry.live(&hold.name, &hold.field).is_none() {
            let _ = lock.unlock_raw(&hold.field, Unlock::Release { remaining: 0 });
        }
        return Step::Done(Err(lock.lost(reason)));
    }
    // A partial unlock resets the TTL: a command the hold must count,
    // with the handle's lease, or (a read release) with the TTL its
    // reply reports, unknown until then.
    let ticket = (!last)
        .then(|| {
            if lock.kind.release_sets_lease() {
                lock.lease().ok().map(|(lease, _)| lease)
            } else {
                Some(Duration::MAX)
            }
        })
        .flatten()
        .map(|lease| hold.begin_lease(lease));
    let remaining = if last { 0 } else { remaining.max(1) };
    Step::Send(Sending {
        remaining,
        last,
        ticket,
        sent,
    })
}

pub(super) fn finish_release<K: Kind>(
    lock: &Lock<K>,
    hold: &Arc<Hold>,
    sending: Sending,
    first: Option<Prefetched<'_>>,
    check: ReplicaCheck,
) -> Result<()> {
    let Sending {
        remaining,
        last,
        ticket,
        sent,
    } = sending;
    let registry = &lock.engine.registry;
    let notes = ReleaseNotes::default();
    let result = lock.unlock_raw_from(
        &hold.field,
        Unlock::Release { remaining },
        &notes,
        ticket.as_ref(),
        first,
        check,
    );
    // tests/failpoints.rs: the unlock ran and its reply is in, not yet
    // read; a renewal sent before it may answer meanwhile.
    crate::failpoint::failpoint!("release-after-reply");
    if let Some(ticket) = ticket {
        match (&result, notes.kept_ttl_ms.get()) {
            (Ok(Some(UnlockOutcome::StillHeld)), Some(ttl)) => {
                hold.end_lease_with_ttl(ticket, sent, Duration::from_millis(ttl));
            }
            (Ok(Some(UnlockOutcome::StillHeld)), None) if lock.kind.release_sets_lease() => {
                hold.end_lease(ticket, LeaseOutcome::Set);
            }
            (Err(e), _) => hold.end_lease(ticket, LeaseOutcome::of_error(e)),
            _ => hold.end_lease(ticket, LeaseOutcome::Untouched),
        }
    }
    match result {
        Ok(Some(UnlockOutcome::StillHeld)) => {
            if last {
                // Redis counted more holds than this thread: what is left
                // is no guard's any more, and nothing to signal.
                hold.end();
            }
            Ok(())
        }
        Ok(Some(UnlockOutcome::Released)) => {
            match (last, hold.gone_while_releasing()) {
                // A renewal found the field gone while this release was on
                // its way, and the release only inferred that it freed the
                // lock (its resend found the field gone): it may have been
                // lost before. Signalled, the safe side.
                (true, Some(reason)) if notes.inferred.get() => registry.lose(hold, reason),
                (true, _) => hold.end(),
                // Redis had fewer holds than this thread counts: the
                // other guards of this hold hold nothing any more.
                (false, _) => registry.lose(hold, LostReason::Released),
            }
            // A thread of this client is waiting for this lock and is being
            // woken by the unlock message, one hop (the subscriber thread)
            // behind our reply. Give it the CPU before this thread can
            // come back for the lock, or on a busy CPU it nearly always
            // finds the lock taken again and waits for the next release.
            // With a free core this returns at once.
            if let Some((channel, entry)) = lock.kind.wake(&lock.name, &hold.field).on()
                && lock.engine.topology.has_waiters(channel, entry)
            {
                std::thread::yield_now();
            }
            Ok(())
        }
        Ok(None) => {
            registry.lose(hold, LostReason::KeyGone);
            Err(lock.not_held())
        }
        Err(e) if Verdict::of(&e) == Verdict::WrongType => {
            registry.lose(hold, LostReason::Overwritten);
            Err(lock.lost(LostReason::Overwritten))
        }
        Err(e) => Err(e),
    }
}

/// Releases several holds, each on its own server, at the cost of about one
/// round trip: every release command is written first, then the replies
/// are read (each with the single release's retries and bookkeeping).
/// Reports the first error; every hold is released either way.
pub(crate) fn release_all<K: Kind>(holds: Vec<Detached<K>>) -> Result<()> {
    let mut first_error = None;
    let mut sending = Vec::with_capacity(holds.len());
    for detached in &holds {
        let Detached { lock, hold, renew } = detached;
        match begin_release(lock, hold, *renew) {
            Step::Done(result) => {
                if let Err(e) = result {
                    first_error.get_or_insert(e);
                }
            }
            Step::Send(step) => {
                let in_flight = if holds.len() > 1 && lock.engine.can_scatter() {
                    lock.release_command(&hold.field, step.remaining)
                        .and_then(|packed| lock.engine.send(&packed))
                } else {
                    None
                };
                sending.push((detached, step, in_flight));
            }
        }
    }
    // The replies, read last sent first (one sleep, for the last reply);
    // then each release is finished in order. No connection to be had at
    // once (a refused connect): the single release's way, with its grace
    // for a server that is restarting.
    let mut replies: Vec<_> = sending
        .iter_mut()
        .rev()
        .map(|(_, _, in_flight)| {
            in_flight
                .take()
                .and_then(|in_flight| in_flight.ok())
                .and_then(|in_flight| in_flight.receive(far_deadline()))
        })
        .collect();
    replies.reverse();
    for ((detached, step, _), first) in sending.into_iter().zip(replies) {
        if let Err(e) = finish_release(
            &detached.lock,
            &detached.hold,
            step,
            first,
            ReplicaCheck::Enforce,
        ) {
            log::debug!(
                "redisson-lock: releasing member `{}` failed: {e}",
                detached.lock.name()
            );
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// A read deadline that leaves the response timeout in charge.
fn far_deadline() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}
