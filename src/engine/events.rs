//! The client-wide [`EventHandler`] and the one place every lock event is
//! raised from: acquired, released, renewal failed, expiring, lost, for
//! every kind and topology.
//!
//! Events are handed to one thread per client (`rlock-events`, started only
//! when a handler is set) through a bounded queue of [`QUEUE_BOUND`]
//! events: the thread that raises one (a caller's, the watchdog's) never
//! waits for the handler and never holds a lock the handler could need. A
//! slow handler delays only the events after it; when the queue is full, an
//! event is dropped (and counted in a WARN log line) rather than delay a
//! renewal. A panicking handler is contained: the panic is logged and the
//! next event is delivered as usual.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_channel::{Sender, TrySendError};

use crate::error::{Error, LostReason, Result};
use crate::spawn::Stoppable;

/// Events queued for the handler at most; more are dropped.
pub const QUEUE_BOUND: usize = 4096;

/// Which lock an event is about: its name, the owner field that holds it
/// (`<client id>:<thread>`, or an owned guard's id) and its Redisson type.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockEvent {
    /// The lock's name (its Redis key).
    pub name: Arc<str>,
    /// The hash field this client holds it under.
    pub owner: Arc<str>,
    /// The Redisson class of the lock type, e.g. `RedissonLock`,
    /// `RedissonFairLock`, `RedissonReadLock`.
    pub kind: &'static str,
}

/// Receives a client's lock events (see
/// [`ClientBuilder::event_handler`](crate::ClientBuilder::event_handler)).
/// Every method has a no-op default: implement the ones you need.
///
/// Methods are called on the client's `rlock-events` thread, one event at a
/// time, in the order they were raised, never under a lock of the crate's
/// (a handler may take locks of the same client, or inspect them). A slow
/// handler delays only later events: at most 4096 wait, and further ones
/// are dropped with a WARN log line, so that no lock call and no renewal
/// ever waits for a handler. A panic in a method is caught and logged.
pub trait EventHandler: Send + Sync + 'static {
    /// A thread (or an owned guard) of this client took the lock;
    /// `reentered` when it already held it.
    fn acquired(&self, lock: &LockEvent, reentered: bool) {
        let _ = (lock, reentered);
    }

    /// The last hold of an owner was released, `held_for` after it was
    /// first taken.
    fn released(&self, lock: &LockEvent, held_for: Duration) {
        let _ = (lock, held_for);
    }

    /// A renewal of the lock failed (a timeout, a refused connection):
    /// uncertain, the watchdog keeps renewing while the lease lasts. Called
    /// once per run of failures; a renewal that succeeds ends the run.
    fn renewal_failed(&self, lock: &LockEvent, error: &Error) {
        let _ = (lock, error);
    }

    /// The lock is near its deadline and not renewed yet: at most a third
    /// of its lease (`remaining`) is left before it can have expired. Once
    /// per deadline; a successful renewal re-arms it.
    fn expiring(&self, lock: &LockEvent, remaining: Duration) {
        let _ = (lock, remaining);
    }

    /// The lock is lost, for `reason`; once per hold, as the guards' own
    /// flag turns.
    fn lost(&self, lock: &LockEvent, reason: LostReason) {
        let _ = (lock, reason);
    }
}

/// One event on its way to the handler.
pub(crate) enum Event {
    Acquired(LockEvent, bool),
    Released(LockEvent, Duration),
    RenewalFailed(LockEvent, Error),
    Expiring(LockEvent, Duration),
    Lost(LockEvent, LostReason),
}

/// The sending side of a client's event thread; cheap to clone.
#[derive(Clone)]
pub(crate) struct Events {
    queue: Sender<Event>,
    dropped: Arc<AtomicU64>,
}

impl Events {
    /// Starts the `rlock-events` thread that calls `handler`; it ends when
    /// the last [`Events`] is dropped, or when the returned thread is
    /// stopped (after delivering the events queued by then).
    pub fn start(handler: Arc<dyn EventHandler>) -> Result<(Events, Stoppable)> {
        let (queue, events) = crossbeam_channel::bounded::<Event>(QUEUE_BOUND);
        let deliver_one = move |event: Event| {
            let delivered = catch_unwind(AssertUnwindSafe(|| deliver(&*handler, &event)));
            if delivered.is_err() {
                log::error!("redisson-lock: the event handler panicked; event dropped");
            }
        };
        let thread = Stoppable::spawn("rlock-events", "the event thread", move |stop| {
            loop {
                crossbeam_channel::select! {
                    recv(events) -> event => match event {
                        Ok(event) => deliver_one(event),
                        Err(_) => return,
                    },
                    recv(stop) -> _ => {
                        events.try_iter().for_each(&deliver_one);
                        return;
                    }
                }
            }
        })?;
        let events = Events {
            queue,
            dropped: Arc::new(AtomicU64::new(0)),
        };
        Ok((events, thread))
    }

    /// Queues `event` without waiting; drops it when the queue is full.
    pub fn raise(&self, event: Event) {
        match self.queue.try_send(event) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => {
                let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if dropped.is_power_of_two() {
                    log::warn!(
                        "redisson-lock: the event handler is behind by {QUEUE_BOUND} events: \
                         {dropped} event(s) dropped so far"
                    );
                }
            }
        }
    }
}

fn deliver(handler: &dyn EventHandler, event: &Event) {
    match event {
        Event::Acquired(lock, reentered) => handler.acquired(lock, *reentered),
        Event::Released(lock, held_for) => handler.released(lock, *held_for),
        Event::RenewalFailed(lock, error) => handler.renewal_failed(lock, error),
        Event::Expiring(lock, remaining) => handler.expiring(lock, *remaining),
        Event::Lost(lock, reason) => handler.lost(lock, *reason),
    }
}
