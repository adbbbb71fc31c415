//! [`LostSignal`]: a guard's loss, observable from any thread.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::engine::holds::Hold;
use crate::error::LostReason;

/// Tells any thread that a lock was lost: a handle on one hold, from
/// [`LockGuard::lost_signal`](crate::LockGuard::lost_signal). It is `Clone`,
/// `Send` and `Sync`, and it outlives the guard, so that a supervisor thread
/// can stop a worker whose lock is gone.
///
/// It fires on every path the guard's own [`is_lost`](crate::LockGuard::is_lost)
/// turns on (a renewal finding the lock gone or overwritten, a force unlock
/// by this client, an unlock finding it released) and, when the lease runs
/// out before a renewal got through (a paused or unreachable server), no
/// later than the local deadline before which the key cannot have expired
/// ([`valid_until`](Self::valid_until)): a `rlock-deadline` thread of the
/// client wakes at it. That bound holds whatever moved the deadline: a
/// reentry on the holding thread with a shorter lease, a MultiLock member
/// given a new lease, a read release that left a shorter TTL, or a command
/// whose reply never came (it may still reach Redis after any later one, so
/// it keeps bounding the deadline). Each wakes the waiters, the channels and
/// the deadline thread at once. A hold released normally never fires: its
/// waiters return `None` and its channel is disconnected.
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// use std::time::Duration;
///
/// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.lock("report").lock()?;
/// let lost = guard.lost_signal();
/// let stop = crossbeam_channel::unbounded::<()>().1; // e.g. a shutdown channel
/// crossbeam_channel::select! {
///     recv(lost.receiver()) -> reason => eprintln!("lock lost: {reason:?}, stopping"),
///     recv(stop) -> _ => {}
///     default(Duration::from_secs(60)) => {} // the work's own time
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LostSignal {
    hold: Arc<Hold>,
}

impl LostSignal {
    pub(crate) fn new(hold: Arc<Hold>) -> Self {
        LostSignal { hold }
    }

    /// Whether the lock is known to be lost. No round trip, no blocking.
    pub fn is_lost(&self) -> bool {
        self.hold.is_lost()
    }

    /// Why it is lost; `None` while it is not (or after a normal release).
    pub fn reason(&self) -> Option<LostReason> {
        self.hold.lost_reason()
    }

    /// The local moment before which the key cannot have expired: the
    /// earliest `sent + lease` over every command that may have set the
    /// key's TTL last (renewals, reentries, partial unlocks, including those
    /// whose outcome is unknown). Once the lock is lost, it never moves
    /// later. No round trip.
    pub fn valid_until(&self) -> Instant {
        self.hold.valid_until()
    }

    /// Blocks until the lock is lost (`Some(reason)`) or released without
    /// being lost (`None`).
    pub fn wait(&self) -> Option<LostReason> {
        self.hold.wait_lost(None)
    }

    /// Like [`wait`](Self::wait), for at most `timeout`; `None` when the time
    /// is up too.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<LostReason> {
        self.hold.wait_lost(Instant::now().checked_add(timeout))
    }

    /// A channel for `crossbeam_channel::select!`: it receives the reason
    /// once the lock is lost (at once if it is), and is disconnected when
    /// the lock is released without being lost. Each call makes a new one.
    pub fn receiver(&self) -> Receiver<LostReason> {
        self.hold.lost_channel()
    }
}

impl fmt::Debug for LostSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LostSignal")
            .field("name", &self.hold.name)
            .field("lost", &self.hold.lost_reason())
            .finish()
    }
}
