//! [`LockWatch`]: following one lock's releases on the client's own
//! subscriber (for tools such as the CLI's `watch`).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use redis::Commands;

use crate::cancel::CancelToken;
use crate::engine::Engine;
use crate::engine::observe::Wakeup;
use crate::engine::waiting::Parker;
use crate::error::{Error, Result};
use crate::names;

/// The longest a watch waits without a message before it reads the lock's
/// TTL again (a key without a TTL, or none at all): a hold taken meanwhile
/// is seen by then, and its expiry after that.
const RECHECK: Duration = Duration::from_secs(1);
/// How long after the TTL it read a watch looks whether the key expired.
const EXPIRY_MARGIN: Duration = Duration::from_millis(20);
/// How long a watch whose subscription is still moved after subscribing
/// again waits before it tries once more.
const STALE_RETRY: Duration = Duration::from_millis(100);

/// Numbers the watches, so that each has its own entry on the channel.
static WATCHES: AtomicU64 = AtomicU64::new(0);

/// What a [`LockWatch`] saw happen to its lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchEvent {
    /// An unlock message was published on the lock's channel: a holder
    /// (Rust or Java) released it, or it was force-unlocked. (Locks whose
    /// names share the channel, `a` and `{a}`, share these messages.)
    Released,
    /// The lock's key went away without an unlock message: its lease ran
    /// out (or it was deleted without one, e.g. `DEL`). Seen when the TTL
    /// read last was due, so at most a few ms late; a key taken again
    /// before that look is not reported.
    Expired,
}

/// A watch on one lock's releases ([`crate::Client::watch_lock`]): every
/// release and expiry of the lock, as [`WatchEvent`]s on a channel, until
/// it is dropped.
///
/// It waits on the client's own subscriber (no connection of its own):
/// one `rlock-watch` thread per watch, parked like a waiting thread on
/// the lock's channel `redisson_lock__channel:{name}` (the reentrant,
/// fenced and non-reentrant locks', Java's `RLock` included; not the fair,
/// read/write or spin locks'). Releases are told by their unlock message;
/// expiries by the key being gone when its TTL, read with one `PTTL` round
/// trip after each event and at least every second, was due (a hold
/// taken and expired within one such second is not seen). A subscriber
/// connection lost and restored wakes it as it wakes waiting threads, and
/// in a cluster a subscription whose slot moved to another master is
/// taken again there: a release may have been missed meanwhile, so each
/// counts as [`WatchEvent::Released`]. The channel is unbounded. Dropping it
/// stops the thread and waits for it; a [shutdown](crate::Client::shutdown)
/// of the client ends it too (the channel then disconnects).
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
/// let watch = client.watch_lock("orders")?;
/// for event in watch.events().iter().take(3) {
///     println!("orders: {event:?}");
/// }
/// # Ok(()) }
/// ```
pub struct LockWatch {
    name: String,
    events: Receiver<WatchEvent>,
    stop: CancelToken,
    thread: Option<JoinHandle<()>>,
}

impl LockWatch {
    /// Starts watching `name`'s releases on `channel` through `engine`:
    /// subscribes (one round trip, on the watch's thread) and reads the TTL.
    pub(crate) fn start(engine: Arc<Engine>, name: String, channel: String) -> Result<LockWatch> {
        engine.check_process()?;
        engine.check_open()?;
        if name.is_empty() {
            return Err(Error::invalid("lock name must not be empty"));
        }
        let (tx, events) = crossbeam_channel::unbounded();
        let stop = CancelToken::new();
        let watching = Watching {
            engine,
            name: name.clone(),
            channel,
            stop: stop.clone(),
            tx,
        };
        let thread = std::thread::Builder::new()
            .name("rlock-watch".into())
            .spawn(move || watching.run())
            .map_err(|e| Error::Unavailable {
                reason: format!("cannot start the watch thread: {e}"),
            })?;
        Ok(LockWatch {
            name,
            events,
            stop,
            thread: Some(thread),
        })
    }

    /// The name of the lock watched. No I/O.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The events, in the order seen; disconnected once the watch ended
    /// (its client shut down, or an error it logged). No I/O.
    pub fn events(&self) -> &Receiver<WatchEvent> {
        &self.events
    }
}

impl Drop for LockWatch {
    /// Stops the thread and waits for it (at most its round trip in
    /// flight).
    fn drop(&mut self) {
        self.stop.cancel();
        crate::spawn::join(self.thread.take());
    }
}

impl fmt::Debug for LockWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockWatch")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The watch's thread.
struct Watching {
    engine: Arc<Engine>,
    name: String,
    /// Where its releases are announced.
    channel: String,
    stop: CancelToken,
    tx: Sender<WatchEvent>,
}

impl Watching {
    fn run(self) {
        if let Err(e) = self.follow() {
            match e {
                Error::Cancelled | Error::Closed => {}
                e => log::warn!("redisson-lock: watching `{}` ended: {e}", self.name),
            }
        }
    }

    /// Until stopped: wait for a message or the TTL read last, and tell
    /// what happened.
    fn follow(&self) -> Result<()> {
        let engine = &*self.engine;
        // Counted in: a shutdown waits for the watch to leave.
        let _active = engine.enter()?;
        let stop = engine.stop(Some(&self.stop));
        let channel = &self.channel;
        let seq = WATCHES.fetch_add(1, Ordering::Relaxed);
        let entry = names::concat(&[channel, "#watch", &seq.to_string()]);
        let within = engine.config.subscription_timeout;
        let mut parker = Parker::subscribe(engine, stop, (channel, &entry), within, None)?;
        // It has listened on a live subscription; the subscription moved
        // since it last did.
        let (mut listened, mut moved) = (false, false);
        loop {
            stop.check()?;
            if parker.refresh(within)? {
                moved = true;
                if parker.is_stale() {
                    // Still moved (the slot table is behind): look again
                    // in a moment, not in a busy loop.
                    stop.sleep(STALE_RETRY)?;
                }
                continue;
            }
            // Live again after a move (a cluster's slot migrated or failed
            // over): a release meanwhile was announced where this watch did
            // not listen, so it counts as one, as a restored connection
            // does; once per move, and only if it had listened before.
            if std::mem::take(&mut moved) && listened && self.tx.send(WatchEvent::Released).is_err()
            {
                return Ok(()); // nobody listens
            }
            listened = true;
            let ttl = self.pttl()?;
            let expires = u64::try_from(ttl).ok().map(Duration::from_millis);
            let wait = expires.map_or(RECHECK, |ttl| (ttl + EXPIRY_MARGIN).min(RECHECK));
            let woken = parker.park(wait)? == Wakeup::Message;
            stop.check()?;
            if woken && parker.is_stale() {
                continue; // moved: subscribed again (and told) above
            }
            let event = if woken {
                Some(WatchEvent::Released)
            } else if expires.is_some_and(|ttl| ttl + EXPIRY_MARGIN <= wait) && self.pttl()? == -2 {
                Some(WatchEvent::Expired)
            } else {
                None
            };
            if let Some(event) = event
                && self.tx.send(event).is_err()
            {
                return Ok(()); // nobody listens
            }
        }
    }

    /// `PTTL` of the lock's key: ms left, -1 without a TTL, -2 without the
    /// key. One round trip.
    fn pttl(&self) -> Result<i64> {
        self.engine
            .with_connection(&self.name, "watch", |con, _| Ok(con.pttl(&*self.name)?))
    }
}
