//! Leader election on Redisson's fenced lock: [`LeaderElection`] and the
//! [`Leadership`] a campaign wins.

use std::fmt;
use std::time::{Duration, Instant};

use super::kinds::FencedLock;
use super::owned::OwnedLockGuard;
use super::signal::LostSignal;
use crate::error::Result;
use crate::protocol::Fenced;

/// An election among processes, Java and Rust, for one name: the leader is
/// whoever holds the fenced lock of that name (Redisson's `getFencedLock`),
/// and its *term* is the fencing token its acquisition got, strictly greater
/// than every earlier leader's. A Java service takes part with
/// `redisson.getFencedLock(name).lockAndGetToken()` (its term is the
/// returned token) and steps down with `unlock()`.
///
/// From [`Client::leader_election`](crate::Client::leader_election). The
/// leadership is renewed by the client's watchdog like any hold and is lost
/// (its [`lost_signal`](Leadership::lost_signal) fires) no later than the key
/// can have expired when renewals fail. A leader paused past its lease can
/// still act after a successor was elected: stamp every write with the term
/// and let the resource refuse a term lower than one it has seen.
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
/// let election = client.leader_election("scheduler");
/// let leadership = election.campaign()?; // blocks until elected
/// let term = leadership.term();
/// // ... lead: send `term` along with every write ...
/// leadership.resign()?;
/// # let _ = term; Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaderElection {
    lock: FencedLock,
}

impl LeaderElection {
    pub(crate) fn new(lock: FencedLock) -> Self {
        LeaderElection { lock }
    }

    /// The election's name (the fenced lock's).
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// Blocks until this process is elected, as [`Lock::lock_owned`](crate::Lock::lock_owned)
    /// on the fenced lock: one round trip when nobody leads, else it waits
    /// on the lock's channel for the leader to resign or lapse.
    pub fn campaign(&self) -> Result<Leadership> {
        self.lock.lock_owned().map(Leadership::new)
    }

    /// One campaign of at most `wait`: `Ok(None)` when another leader kept
    /// the seat that long.
    pub fn try_campaign_for(&self, wait: Duration) -> Result<Option<Leadership>> {
        Ok(self.lock.try_lock_owned_for(wait)?.map(Leadership::new))
    }

    /// Who leads now, as `(owner field, term)`: the fenced lock's holder
    /// (`<client id>:<thread or owner id>`, Java or Rust) and the last token
    /// handed out (the leader's term, unless a Java leader re-entered its
    /// lock since, which draws a higher one). `None` when nobody leads. One
    /// round trip (`HGETALL` and `GET`, pipelined).
    pub fn leader(&self) -> Result<Option<(String, u64)>> {
        let name = self.lock.name();
        let (holders, token): (Vec<(String, String)>, Option<u64>) =
            self.lock.engine.with_connection(name, "leader", |con, _| {
                Ok(redis::pipe()
                    .cmd("HGETALL")
                    .arg(name)
                    .cmd("GET")
                    .arg(self.lock.kind.token_key())
                    .query(con)?)
            })?;
        Ok(match (holders.into_iter().next(), token) {
            (Some((field, _)), Some(term)) => Some((field, term)),
            (Some((field, _)), None) => Some((field, 0)),
            (None, _) => None,
        })
    }
}

impl fmt::Debug for LeaderElection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderElection")
            .field("name", &self.lock.name())
            .finish()
    }
}

/// This process leads: a hold on the election's fenced lock that belongs to
/// no thread (`Send + 'static`), renewed by the client's watchdog, resigned
/// on drop or by [`resign`](Self::resign).
#[derive(Debug)]
#[must_use = "the leadership is resigned as soon as it is dropped"]
#[clippy::has_significant_drop]
pub struct Leadership {
    guard: OwnedLockGuard<Fenced>,
}

impl Leadership {
    fn new(guard: OwnedLockGuard<Fenced>) -> Self {
        Leadership { guard }
    }

    /// The term: the fenced lock's token this leadership got, greater than
    /// every earlier leader's. No round trip.
    pub fn term(&self) -> u64 {
        self.guard.token()
    }

    /// The owner field the leadership is held under (what
    /// [`LeaderElection::leader`] reports). No round trip.
    pub fn owner_field(&self) -> &str {
        self.guard.owner_field()
    }

    /// Whether the leadership is known lost (see
    /// [`LockGuard::is_lost`](crate::LockGuard::is_lost)). No round trip.
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// `Ok` while the leadership is not known lost, else [`Error::Lost`](crate::Error::Lost):
    /// check it before each side effect. No round trip.
    pub fn ensure_held(&self) -> Result<()> {
        self.guard.ensure_held()
    }

    /// The local moment before which the leadership cannot have lapsed. No
    /// round trip.
    pub fn valid_until(&self) -> Instant {
        self.guard.valid_until()
    }

    /// A signal that fires when the leadership is lost (see [`LostSignal`]),
    /// for a thread that must stop leading then.
    pub fn lost_signal(&self) -> LostSignal {
        self.guard.lost_signal()
    }

    /// Steps down: releases the lock, which wakes the next candidate at once
    /// (Java ones included). One round trip. [`Error::Lost`](crate::Error::Lost) or
    /// [`Error::NotHeld`](crate::Error::NotHeld) when it was already lost.
    pub fn resign(self) -> Result<()> {
        self.guard.unlock()
    }
}
