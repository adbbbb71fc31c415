//! Schedule tests of the subscriber's entries (RELIABILITY.md, "Schedule
//! exploration"): waiting threads parked on one lock entry while another
//! thread delivers what wakes them, over many random interleavings of
//! `shuttle`'s scheduler, on the virtual clock of `crate::sync` (feature
//! `shuttle`; `cargo test --features shuttle --lib schedules::`). The clock
//! moves only when every thread is blocked, so a waiter that times out was
//! woken by nothing.

use super::*;
use crate::sync::explore::{self, check, pick};
use crate::sync::{now, thread};

const CHANNEL: &str = "redisson_lock__channel:{a}";
/// The waiters' timeout (a holder's remaining TTL).
const TIMEOUT: Duration = Duration::from_secs(30);
const WAITERS: usize = 3;

/// What wakes the waiters of one entry.
#[derive(Clone, Copy, Debug)]
enum WakeBy {
    /// One unlock message (`0`) per waiter: a permit each.
    Permits,
    /// One `all` message (`1`): every waiter.
    All,
    /// The subscriber's connection lost (every waiter woken to retry), then
    /// subscribed again.
    ConnectionLost,
    /// The subscription moved (a cluster's slot moved).
    Moved,
    /// The server refused the subscription: every waiter gets the error.
    Refused,
}

/// (b) No lost wake-up: three threads wait on one entry (each from the
/// broadcast count it saw when it joined, as `Subscription` does) while
/// another delivers what must wake each of them once: a permit per waiter,
/// an `all` message, a lost connection, a moved slot or a refusal. Each
/// waiter returns woken (or with the refusal), none after its timeout; a
/// waiter that had not parked yet finds its permit or broadcast at once.
/// Also a new entry's waiter parked on `await_active` returns when the
/// subscription is confirmed.
#[test]
fn every_waiter_is_woken_by_what_is_delivered_to_its_entry() {
    check(explore::iterations(2500), 0.0, || {
        let wake = match pick(5) {
            0 => WakeBy::Permits,
            1 => WakeBy::All,
            2 => WakeBy::ConnectionLost,
            3 => WakeBy::Moved,
            _ => WakeBy::Refused,
        };
        let lot = Arc::new(Mutex::new(Lot::default()));
        // A fourth waiter that never parks keeps the entry (and the
        // channel's subscription) while the others come and go.
        let anchor = lot.lock().join(CHANNEL, "a").entry;
        let joined = Arc::new(crate::sync::atomic::AtomicUsize::new(0));
        let start = now();
        let waiters: Vec<_> = (0..WAITERS)
            .map(|_| {
                let (lot, joined) = (Arc::clone(&lot), Arc::clone(&joined));
                thread::spawn(move || {
                    let entry = lot.lock().join(CHANNEL, "a").entry;
                    let seen = AtomicU64::new(entry.broadcasts());
                    joined.fetch_add(1, crate::sync::atomic::Ordering::SeqCst);
                    let active = entry.await_active(start + TIMEOUT);
                    let woken = active.and_then(|()| entry.wait(TIMEOUT, &seen, &|| false));
                    lot.lock().leave(CHANNEL, "a", &entry);
                    (woken, now())
                })
            })
            .collect();
        // The subscription is confirmed, then the wake-ups delivered, at any
        // point of the waiters' joining and parking. Entries joined after
        // the confirmation start active.
        lot.lock().activate(CHANNEL);
        let joined = || joined.load(crate::sync::atomic::Ordering::SeqCst);
        match wake {
            WakeBy::Permits => {
                // One message per waiter, each when that many waiters
                // joined (a message before the entry exists reaches nobody,
                // as on the server, where the waiter would see the lock
                // free).
                for delivered in 0..WAITERS {
                    while joined() <= delivered {
                        thread::yield_now();
                    }
                    lot.lock().deliver(CHANNEL, false);
                }
            }
            _ => {
                while joined() < WAITERS {
                    thread::yield_now();
                }
                let mut lot = lot.lock();
                match wake {
                    WakeBy::All => lot.deliver(CHANNEL, true),
                    WakeBy::ConnectionLost => {
                        lot.connection_lost(true);
                        // The reconnected subscriber's confirmation.
                        lot.activate(CHANNEL);
                    }
                    WakeBy::Moved => {
                        lot.moved(CHANNEL);
                    }
                    _ => {
                        let refused = RedisError::from((redis::ErrorKind::Client, "refused"));
                        lot.refuse(CHANNEL, &refused);
                    }
                }
            }
        }
        for waiter in waiters {
            let (woken, at) = waiter.join().expect("a waiter");
            match wake {
                WakeBy::Refused => assert!(woken.is_err(), "a waiter missed the refusal"),
                _ => assert!(
                    matches!(woken, Ok(true)),
                    "a waiter was not woken by {wake:?}: {woken:?} after {:?}",
                    at - start
                ),
            }
            assert!(at < start + TIMEOUT, "a waiter slept out its timeout");
        }
        lot.lock().leave(CHANNEL, "a", &anchor);
    });
}
