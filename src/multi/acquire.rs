//! How a composite is taken: first every member at once, none waiting (one
//! round trip when the members are free); when that falls short, what it
//! took is released and the members are taken in order, each waiting its
//! share (Redisson's algorithm, which also keeps two contenders from
//! holding each other's members forever), in rounds while the budget lasts.

use std::time::{Duration, Instant};

use super::batch::{Leftovers, Outcome, try_all, wait_released};
use super::{Composite, Taken};
use crate::error::{Error, Result};
use crate::lock::Lock;
use crate::lock::guard::LockGuard;
use crate::protocol::Kind;

/// What the members' outcomes of one attempt add up to.
struct Tally<K: Kind> {
    guards: Vec<LockGuard<K>>,
    leftovers: Leftovers<K>,
    failures: usize,
    fatal: Option<Error>,
}

impl<K: Kind> Tally<K> {
    fn new(n: usize) -> Self {
        Tally {
            guards: Vec::with_capacity(n),
            leftovers: Leftovers::new(),
            failures: 0,
            fatal: None,
        }
    }

    fn add(&mut self, member: &Lock<K>, outcome: Outcome<K>) {
        match outcome {
            Ok(Ok(guard)) => self.guards.push(guard),
            Ok(Err(_)) => self.failures += 1,
            Err(e) => {
                // The reply may have been lost after the member was taken.
                self.leftovers.failed(member, &e);
                if e.is_transient() {
                    log::debug!("redisson-lock: member `{}` failed: {e}", member.name());
                    self.failures += 1;
                } else {
                    self.fatal.get_or_insert(e);
                }
            }
        }
    }
}

impl<K: Kind> Composite<K> {
    /// Attempts until `deadline`: at first every member at once; then, while
    /// that falls short, in order, each member waiting its share.
    pub(super) fn acquire(&self, deadline: Instant) -> Result<Option<Taken<K>>> {
        if self.members.is_empty() {
            return Err(Error::invalid(
                "a MultiLock or RedLock needs at least one lock",
            ));
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        if let Some(taken) = self.all_at_once(wait)? {
            return Ok(Some(taken));
        }
        loop {
            if Instant::now() >= deadline {
                return Ok(None);
            }
            if let Some(taken) = self.in_order(deadline, wait)? {
                return Ok(Some(taken));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            // Let the members' holders move before the next round.
            std::thread::sleep(Duration::from_millis(1).min(deadline - Instant::now()));
        }
    }

    /// What a member may wait of `remaining`: a RedLock's share,
    /// `max(remaining / N, 1 ms)`; a MultiLock's all of it.
    fn member_wait(&self, remaining: Duration) -> Duration {
        if self.red {
            let n = u32::try_from(self.members.len()).unwrap_or(u32::MAX);
            (remaining / n).max(Duration::from_millis(1))
        } else {
            remaining
        }
    }

    /// Every member at once, none waiting; each reply is awaited for the
    /// member's wait at most (the response timeout for a `try_lock`). The
    /// members are taken with the lease itself: none is held while another
    /// is waited for, so Redisson's lease of twice the wait has no use here.
    fn all_at_once(&self, wait: Duration) -> Result<Option<Taken<K>>> {
        let started = Instant::now();
        let locks: Vec<Lock<K>> = match self.lease {
            Some(lease) => self.members.iter().map(|m| m.with_lease(lease)).collect(),
            None => self.members.clone(),
        };
        let member_deadline = started + self.member_wait(wait).min(wait);
        let read_deadline = (!wait.is_zero()).then_some(member_deadline);
        let mut tally = Tally::new(locks.len());
        // A member this thread is still releasing (an earlier attempt's) is
        // not taken again before that release is done: it counts as failed.
        let (ready, busy): (Vec<Lock<K>>, Vec<Lock<K>>) = locks
            .into_iter()
            .partition(|member| wait_released(member, member_deadline));
        tally.failures += busy.len();
        for (member, outcome) in ready.iter().zip(try_all(&ready, read_deadline)) {
            tally.add(member, outcome);
        }
        self.conclude(
            tally,
            started,
            None,
            self.undo_deadline(member_deadline, wait),
        )
    }

    /// One attempt in order: each member waits its share, the attempt ends
    /// as soon as too many failed. With a lease and a wait, members are
    /// taken with twice the wait and set to the lease once enough are held
    /// (Redisson's rule).
    fn in_order(&self, deadline: Instant, wait: Duration) -> Result<Option<Taken<K>>> {
        let started = Instant::now();
        let n = self.members.len();
        let member_lease = self.lease.map(|lease| {
            if wait.is_zero() {
                lease
            } else {
                wait.saturating_mul(2).max(Duration::from_millis(1))
            }
        });
        let mut tally = Tally::new(n);
        for member in &self.members {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let member_wait = self.member_wait(remaining).min(remaining);
            // The same thread's owner field must not take a member again
            // while an earlier attempt's release of it is under way: that
            // release could remove what this attempt takes. It counts as a
            // failure if the release does not end within the member's wait.
            if !wait_released(member, Instant::now() + member_wait) {
                tally.failures += 1;
                if tally.failures > n - self.quorum {
                    break;
                }
                continue;
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            let member_wait = member_wait.min(remaining);
            let member = match member_lease {
                Some(lease) => member.with_lease(lease),
                None => member.clone(),
            };
            // A first try whose reply is awaited for the member's wait at
            // most: a frozen server costs no more than that.
            let read_deadline = (!member_wait.is_zero()).then(|| Instant::now() + member_wait);
            let mut outcome = try_all(std::slice::from_ref(&member), read_deadline)
                .pop()
                .unwrap_or(Ok(Err(None)));
            if matches!(outcome, Ok(Err(_))) && !member_wait.is_zero() {
                let left = deadline.saturating_duration_since(Instant::now());
                outcome = member
                    .try_lock_for(member_wait.min(left))
                    .map(|got| got.ok_or(None));
            }
            tally.add(&member, outcome);
            if tally.fatal.is_some() || tally.failures > n - self.quorum {
                break;
            }
        }
        self.conclude(
            tally,
            started,
            member_lease,
            self.undo_deadline(deadline, wait),
        )
    }

    /// Until when a failed attempt waits for its undo: the caller's
    /// `deadline`, and past it as long as the attempt gave each reply (a
    /// member's share of `wait`, or the response timeout for a `try_lock`,
    /// whichever is shorter). Servers that answer cost one round trip; only
    /// a member that does not answer in time is released in the background.
    fn undo_deadline(&self, deadline: Instant, wait: Duration) -> Instant {
        let response_timeout = self
            .members
            .iter()
            .map(|member| member.engine.config.response_timeout)
            .max()
            .unwrap_or_default();
        let allowance = if wait.is_zero() {
            response_timeout
        } else {
            self.member_wait(wait).min(response_timeout)
        };
        deadline.max(Instant::now() + allowance)
    }

    /// Keeps the members taken when they are enough (with validity left,
    /// for a RedLock), setting them to the lease when they were taken with
    /// `member_lease` instead; otherwise releases them before returning,
    /// waiting until `undo_by` at most (see [`Leftovers::release`]).
    fn conclude(
        &self,
        tally: Tally<K>,
        started: Instant,
        member_lease: Option<Duration>,
        undo_by: Instant,
    ) -> Result<Option<Taken<K>>> {
        let Tally {
            guards,
            mut leftovers,
            fatal,
            ..
        } = tally;
        if let Some(e) = fatal {
            leftovers.guards.extend(guards);
            leftovers.release(undo_by);
            return Err(e);
        }
        let lease = self.lease.unwrap_or_else(|| self.watchdog_timeout());
        let enough = guards.len() >= self.quorum;
        let valid = !self.red || validity(started, lease) > Duration::ZERO;
        if !(enough && valid) {
            leftovers.guards.extend(guards);
            leftovers.release(undo_by);
            return Ok(None);
        }
        // What a lost reply may have taken goes, whatever the outcome; a
        // caller that holds the lock does not wait for it.
        leftovers.release(Instant::now());
        if member_lease.is_some_and(|member_lease| member_lease != lease) {
            for guard in &guards {
                // A member lost meanwhile shows in the guard; nothing to set.
                if let Err(e) = guard.set_lease(lease) {
                    log::debug!("redisson-lock: setting the lease of a member failed: {e}");
                }
            }
        }
        Ok(Some(Taken {
            guards,
            started,
            lease,
        }))
    }

    fn watchdog_timeout(&self) -> Duration {
        self.members
            .first()
            .map_or(crate::names::DEFAULT_WATCHDOG_TIMEOUT, |member| {
                member.engine.config.watchdog_timeout
            })
    }
}

/// The validity left of a RedLock acquisition that started at `started`
/// with `lease`: lease − elapsed − drift (1 % of the lease + 2 ms).
pub(super) fn validity(started: Instant, lease: Duration) -> Duration {
    let drift = lease / 100 + Duration::from_millis(2);
    lease
        .saturating_sub(started.elapsed())
        .saturating_sub(drift)
}
