//! The shared subscriber: one connection and one thread per client, whatever
//! the number of waiting threads and lock names (docs/wire-format.md, "Pub/sub").
//!
//! A waiting thread takes a [`Subscription`] to its lock's entry before its
//! second acquire attempt and parks on it for at most the holder's TTL. The
//! permits and waiters are kept per lock entry ([`entries`], a parking lot
//! keyed by lock, not by channel), while the server subscription is one per
//! channel: the subscriber thread turns each unlock message on a channel into
//! permits for every entry on it, Redisson's semaphore semantics: `0` wakes
//! one waiter of each entry, `1` wakes all of them, and a permit nobody is
//! waiting for makes the next wait return at once.
//!
//! Subscribe and unsubscribe commands are written from the waiting thread
//! ([`conn`]), so subscribing costs one round trip, not a poll interval; the
//! server's confirmations and refusals are matched to them in order. A
//! refused subscription (an ACL without the channel) fails every thread
//! waiting on it with the server's error, and the next waiter asks again. No
//! socket write ever happens under the lot's mutex, which a final unlock
//! ([`Subscriber::has_waiters`]) and the diagnostics take.
//!
//! When the connection drops, the thread wakes every waiter at once (the
//! server may be gone: they find out within their own timeouts instead of
//! sleeping out the holder's TTL), reconnects, subscribes to every channel that
//! still has waiters, and wakes all of them again, since a message may have
//! been missed meanwhile. While threads wait, a connection silent for a
//! response timeout is checked with a `PING`, and one that does not answer
//! within another (or accepts no write for that long) counts as dropped: a
//! frozen server is noticed too. Waiters never depend on a message alone:
//! each wait is capped by the holder's TTL.
//!
//! In a cluster there is one subscriber per master waited on. Its thread
//! never connects while no thread waits, and it closes its connection and
//! ends after 10 s without a waiter (the next waiter starts it again); a
//! subscriber whose node no longer serves slots is retired at the next slot
//! table change ([`Subscriber::retire`]), its waiters sent back to the
//! table.

mod conn;
mod entries;
mod replies;
mod shard;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::Result;
use crate::net::endpoint::Endpoint;
use conn::Conn;
use entries::{Joined, LockEntry, Lot, Name};

/// What a subscriber's connection is to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavour {
    /// The one server of a standalone client: `SUBSCRIBE`.
    Standalone,
    /// One master of a cluster, classic pub/sub: `SUBSCRIBE`.
    ClusterClassic,
    /// One master of a cluster, sharded pub/sub: `SSUBSCRIBE`.
    Sharded,
    /// One master of a cluster, both flavours: `SUBSCRIBE` and `SSUBSCRIBE`
    /// of each channel on the one connection, and scripts publish with
    /// `PUBLISH` and `SPUBLISH`.
    Both,
}

impl Flavour {
    /// The commands the unlock scripts publish with, the script argument:
    /// `publish`, or `spublish` for sharded pub/sub (docs/wire-format.md, "Pub/sub"), or
    /// `publish spublish` for both (every script publishes once with each
    /// word of it).
    pub fn publish(self) -> &'static str {
        match self {
            Flavour::Standalone | Flavour::ClusterClassic => "publish",
            Flavour::Sharded => "spublish",
            Flavour::Both => "publish spublish",
        }
    }

    /// The subscribe and unsubscribe commands, one pair per flavour spoken
    /// (two for [`Flavour::Both`]: each channel is subscribed with both).
    pub fn commands(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Flavour::Standalone | Flavour::ClusterClassic => &[("SUBSCRIBE", "UNSUBSCRIBE")],
            Flavour::Sharded => &[("SSUBSCRIBE", "SUNSUBSCRIBE")],
            Flavour::Both => &[("SUBSCRIBE", "UNSUBSCRIBE"), ("SSUBSCRIBE", "SUNSUBSCRIBE")],
        }
    }

    /// Whether the connection is to one master of a cluster: a lost
    /// connection or a lost shard subscription sends the waiters back to
    /// the slot table.
    pub fn in_cluster(self) -> bool {
        match self {
            Flavour::Standalone => false,
            Flavour::ClusterClassic | Flavour::Sharded | Flavour::Both => true,
        }
    }
}

/// What a record of channels or commands keeps once a burst drained.
const RECORD_KEEP: usize = 256;

/// Whether a record of `len` entries in room for `capacity` has grown far
/// beyond its use (a burst drained: ten thousand fair waiters, a channel
/// each, left): then it is given back down to twice its use. The margins
/// keep a size that comes and goes from reallocating each time, and a
/// record at its floor from asking again.
fn sparse(len: usize, capacity: usize) -> bool {
    capacity > 4 * RECORD_KEEP && len < capacity / 4
}

/// The client's subscriber. Dropping it closes the connection and ends the thread.
pub(crate) struct Subscriber {
    shared: Arc<SubscriberState>,
}

/// What the subscriber's handle, its subscriptions and its thread share.
struct SubscriberState {
    /// The server to (re)connect to: it moves on a Sentinel failover.
    endpoint: Arc<Endpoint>,
    /// What the connection is to, and the commands it speaks.
    flavour: Flavour,
    connect_timeout: Duration,
    /// The bound on every write once connected, and the health check's
    /// silence while threads wait.
    response_timeout: Duration,
    closed: AtomicBool,
    thread_started: AtomicBool,
    /// The lot changed, or a write was left unfinished, since the connection
    /// mutex's last holder looked: whoever holds it next must sync.
    dirty: AtomicBool,
    /// The connection: its writer and the record of what was sent. Held
    /// during socket writes; taken before `lot`, never after.
    conn: Mutex<Conn>,
    /// The parking lot. Never held during I/O.
    lot: Mutex<Lot>,
    /// The thread last started, for [`Subscriber::close`].
    thread: Mutex<Option<thread::JoinHandle<()>>>,
}

/// One waiting thread's interest in a lock entry. Dropping it unregisters
/// the thread; with the channel's last waiter gone, it unsubscribes.
pub(crate) struct Subscription {
    shared: Arc<SubscriberState>,
    channel: Name,
    key: Name,
    entry: Arc<LockEntry>,
    /// The entry's broadcasts this waiter has seen ([`LockEntry::wait`]).
    seen: AtomicU64,
}

impl Subscriber {
    /// A subscriber for the server `endpoint` points to. Nothing connects
    /// until the first [`subscribe`](Self::subscribe).
    pub fn new(
        endpoint: Arc<Endpoint>,
        connect_timeout: Duration,
        response_timeout: Duration,
        flavour: Flavour,
    ) -> Self {
        Subscriber {
            shared: Arc::new(SubscriberState {
                endpoint,
                flavour,
                connect_timeout,
                response_timeout,
                closed: AtomicBool::new(false),
                thread_started: AtomicBool::new(false),
                dirty: AtomicBool::new(false),
                conn: Mutex::new(Conn::default()),
                lot: Mutex::new(Lot::default()),
                thread: Mutex::new(None),
            }),
        }
    }

    /// Registers the calling thread as a waiter on entry `entry` of
    /// `channel`, and waits until the server confirms the channel's
    /// subscription, refuses it, or `limit` passes, whichever is first.
    ///
    /// `entry` is what identifies the lock's waiters (for a plain lock, its
    /// name): entries sharing a channel share one server subscription but
    /// not their permits. A subscription not confirmed by `limit` is still
    /// returned: it wakes on the confirmation or a reconnect, and its waiter
    /// polls at the holder's TTL meanwhile.
    ///
    /// Blocks until `limit` at most (waiting for the connection, writing
    /// `SUBSCRIBE`, waiting for the confirmation); the first call starts the
    /// subscriber thread. Fails with [`Error::Redis`](crate::Error::Redis) carrying the server's
    /// error (e.g. `NOPERM` from an ACL) when the server refuses to subscribe.
    pub fn subscribe(&self, channel: &str, entry: &str, limit: Instant) -> Result<Subscription> {
        let (joined, new_channel) = {
            let mut lot = self.shared.lot.lock();
            let had = lot.wants(channel);
            let joined = lot.join(channel, entry);
            if self.shared.closed.load(Ordering::Acquire) {
                // Retired (its cluster node serves no slot any more): the
                // waiter goes back to the slot table at once.
                lot.moved(channel);
            }
            (joined, !had)
        };
        // Made now, so that an early return unregisters the thread.
        let Joined {
            channel,
            key,
            entry,
        } = joined;
        let subscription = Subscription {
            shared: Arc::clone(&self.shared),
            channel,
            key,
            seen: AtomicU64::new(entry.broadcasts()),
            entry,
        };
        if subscription.is_moved() {
            return Ok(subscription);
        }
        // After joining: a cluster subscriber's thread ends once no thread
        // waits (see `conn`), and this one must see the waiter or be
        // started again.
        self.start_thread();
        if new_channel {
            self.shared.dirty.store(true, Ordering::Release);
            // A waiter's own write errors close the connection (the thread
            // reconnects); they are not the waiter's to report.
            let _ = self.shared.sync(Some(limit));
        }
        subscription.entry.await_active(limit)?;
        Ok(subscription)
    }

    /// Whether some thread of this client waits on entry `entry` of
    /// `channel`. Takes the lot's mutex briefly; never waits for I/O.
    pub fn has_waiters(&self, channel: &str, entry: &str) -> bool {
        self.shared.lot.lock().has_waiters(channel, entry)
    }

    /// Whether `subscription` was made through this subscriber.
    pub fn serves(&self, subscription: &Subscription) -> bool {
        Arc::ptr_eq(&self.shared, &subscription.shared)
    }

    /// Channels subscribed to (or being subscribed to), and waiting threads.
    /// Takes the lot's mutex briefly; never waits for I/O.
    pub fn stats(&self) -> (usize, usize) {
        self.shared.lot.lock().stats()
    }

    /// Starts the subscriber thread (`rlock-pubsub`) unless it runs; if it
    /// cannot be started, the next subscribe tries again, and waiters poll
    /// at the holder's TTL meanwhile.
    fn start_thread(&self) {
        if self.shared.closed.load(Ordering::Acquire)
            || self.shared.thread_started.load(Ordering::Acquire)
            || self.shared.thread_started.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let shared = Arc::clone(&self.shared);
        match thread::Builder::new()
            .name("rlock-pubsub".into())
            .spawn(move || shared.run())
        {
            Ok(started) => *self.shared.thread.lock() = Some(started),
            Err(e) => {
                log::warn!("redisson-lock: cannot start the subscriber thread: {e}");
                self.shared.thread_started.store(false, Ordering::Release);
            }
        }
    }

    /// Closes this subscriber for good, as dropping it does, and waits for
    /// its thread to end (at most a connect or write timeout, or a
    /// reconnect backoff). Its waiters are the caller's to have woken
    /// first. A later [`subscribe`](Self::subscribe) starts no thread.
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.conn.lock().close();
        crate::spawn::join(self.shared.thread.lock().take());
    }
}

/// Lets a topology watcher move the subscriber without keeping it alive.
pub(crate) struct SubscriberHandle(std::sync::Weak<SubscriberState>);

impl Subscriber {
    /// A handle for [`SubscriberHandle::reconnect`].
    pub fn handle(&self) -> SubscriberHandle {
        SubscriberHandle(Arc::downgrade(&self.shared))
    }
}

impl SubscriberHandle {
    /// Drops the subscriber's connection (if it has one): its thread wakes
    /// every waiter to retry, connects to the endpoint's current server and
    /// subscribes there to every channel that still has waiters. Never
    /// blocks on I/O but the socket's shutdown.
    pub fn reconnect(&self) {
        if let Some(shared) = self.0.upgrade() {
            shared.conn.lock().close();
        }
    }
}

impl Subscriber {
    /// Closes this subscriber for good, as dropping it does, and sends its
    /// waiters back to the slot table at once ([`Subscription::is_moved`]):
    /// for a cluster node that serves no slot any more (demoted, failed
    /// over, gone). A later [`subscribe`](Self::subscribe) on it returns a
    /// moved subscription. Blocks only for the connection mutex, whose
    /// holders write for a response timeout at most.
    pub fn retire(&self) {
        self.shared.closed.store(true, Ordering::Release);
        let woken = {
            let mut lot = self.shared.lot.lock();
            let (_, waiters) = lot.stats();
            lot.all_moved();
            waiters
        };
        if woken > 0 {
            log::debug!(
                "redisson-lock: {woken} waiting thread(s) leave a subscriber whose node \
                 serves no slot any more"
            );
        }
        self.shared.conn.lock().close();
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.conn.lock().close();
    }
}

impl Subscription {
    /// Parks until an unlock message for this entry arrives, `timeout`
    /// passes, or `stop()` is true (checked before each park; whoever
    /// makes it true calls the [`waker`](Self::waker)); `Ok(true)` if woken
    /// by a message (or a permit left by an earlier one). Blocks at most
    /// `timeout`. Fails with [`Error::Redis`](crate::Error::Redis) when the
    /// server refused the subscription meanwhile.
    pub fn wait(&self, timeout: Duration, stop: &dyn Fn() -> bool) -> Result<bool> {
        Ok(self.entry.wait(timeout, &self.seen, stop)?)
    }

    /// A wake-up for the threads parked in [`wait`](Self::wait) on this
    /// entry, callable from any thread: they re-check their `stop`, and
    /// those it does not stop park again. Never blocks on I/O.
    pub fn waker(&self) -> impl Fn() + Send + Sync + 'static {
        let entry = Arc::clone(&self.entry);
        move || entry.interrupt()
    }

    /// The channel subscribed to.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The channel's and the entry's names, shared (no copy is made).
    pub fn names(&self) -> (Arc<str>, Arc<str>) {
        (Arc::clone(&self.channel), Arc::clone(&self.key))
    }

    /// In a cluster: whether this subscription is gone from its node (slot
    /// moved, master failed over or unreachable), so that its waiter must
    /// subscribe again through the slot table. Never true on a standalone
    /// server. Takes the entry's mutex briefly.
    pub fn is_moved(&self) -> bool {
        self.entry.is_moved()
    }
}

impl Drop for Subscription {
    /// Unregisters the thread; the channel's last waiter also unsubscribes,
    /// if it can have the connection at once (otherwise whoever has it does).
    fn drop(&mut self) {
        let left = self
            .shared
            .lot
            .lock()
            .leave(&self.channel, &self.key, &self.entry);
        if left {
            self.shared.dirty.store(true, Ordering::Release);
            let _ = self.shared.sync(Some(Instant::now()));
        }
    }
}
