//! The parking lot: which threads wait for which lock entry, and the permits
//! and broadcasts that wake them.
//!
//! The bookkeeping is keyed by lock entry, grouped by channel, because that is
//! what Redisson does: it keeps one listener and one semaphore per entry, and
//! every entry on a channel hears each message. Locks `a` and `{a}` share the
//! channel `redisson_lock__channel:{a}` but not their permits, so a release of
//! `a` wakes a waiter of `a` even while a waiter of `{a}` sleeps on the same
//! channel. An entry key is whatever the lock type says identifies its
//! waiters (a plain lock's name; a fair lock would use its per-waiter
//! channel); the server subscription stays one per channel.
//!
//! Nothing here does I/O. Every [`Lot`] method runs under the lot's mutex and
//! takes an entry's own mutex briefly, always in that order; a waiting thread
//! parks on its entry's condition variables with only the entry's mutex.

use std::hash::RandomState;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hashbrown::HashMap;
use hashbrown::hash_map::EntryRef;
use redis::RedisError;

use crate::sync::{Condvar, Mutex};

mod channel;

use channel::ChannelEntries;
#[cfg(test)]
use channel::FEW;

/// A channel's or an entry's name, made once and shared by the lot, the
/// connection's record and the subscriptions: a fair lock's waiter has a
/// channel of its own, and ten thousand of them would otherwise keep each
/// name five times over.
pub(super) type Name = Arc<str>;

/// Every channel with at least one waiting thread, and its entries.
#[derive(Default)]
pub(super) struct Lot {
    channels: HashMap<Name, Channel, RandomState>,
    /// Channels that appeared or disappeared since the connection's record of
    /// what was sent last looked: what a reconcile has to check.
    touched: Vec<Name>,
}

/// The entries of one channel.
#[derive(Default)]
struct Channel {
    /// The server confirmed the subscription on the current connection: a
    /// new entry starts active.
    active: bool,
    entries: ChannelEntries,
}

/// One waiting thread's place in the lot: its channel's and entry's names
/// (shared with the lot) and the entry.
pub(super) struct Joined {
    pub channel: Name,
    pub key: Name,
    pub entry: Arc<LockEntry>,
}

/// One lock entry: its waiting threads and their permits (Redisson's
/// per-entry semaphore).
pub(super) struct LockEntry {
    state: Mutex<EntryState>,
    /// Signalled when the subscription is confirmed or refused.
    activated: Condvar,
    /// Signalled when permits are added, every waiter is woken, or the
    /// subscription is refused or moved.
    released: Condvar,
}

#[derive(Default)]
struct EntryState {
    waiters: usize,
    /// Wake-ups for one waiter each (an unlock message that is not `all`).
    permits: usize,
    /// Wake-ups for every waiter (an `all` message, a lost connection, a
    /// confirmation after messages may have been missed), counted: each
    /// waiter remembers the count it last saw and wakes once per increase.
    /// Permits would not do: one waiter could take two of them before
    /// another woke, and that one would sleep out the holder's TTL.
    broadcasts: u64,
    /// The server confirmed the subscription on the current connection.
    active: bool,
    /// Messages may have been missed (a reconnect, or a waiter that went on
    /// without the confirmation): the confirmation wakes every waiter.
    resync: bool,
    /// The server refused the subscription this entry's waiters relied on.
    /// Set once, when the entry leaves the lot; its waiters all get the error.
    refused: Option<RedisError>,
    /// The channel's subscription is gone from this node for good (a
    /// cluster's slot moved or its master failed): the waiters must
    /// subscribe again where the slot lives now. Set once, when the entry
    /// leaves the lot.
    moved: bool,
}

impl Lot {
    /// Registers one more waiting thread on entry `key` of `channel`, and
    /// returns its place. A channel new to the lot is marked touched: the
    /// caller must reconcile so that it is subscribed. The names are made
    /// once per channel and entry, not per waiter.
    pub(super) fn join(&mut self, channel: &str, key: &str) -> Joined {
        let (name, record) = match self.channels.entry_ref(channel) {
            EntryRef::Occupied(found) => (Arc::clone(found.key()), found.into_mut()),
            EntryRef::Vacant(vacant) => {
                let made = vacant.insert_entry_with_key(Name::from(channel), Channel::default());
                let name = Arc::clone(made.key());
                self.touched.push(Arc::clone(&name));
                (name, made.into_mut())
            }
        };
        let (key, entry) = match record.entries.get(key) {
            Some((key, entry)) => (Arc::clone(key), Arc::clone(entry)),
            None => {
                let key = if key == channel {
                    Arc::clone(&name)
                } else {
                    Name::from(key)
                };
                let entry = Arc::new(LockEntry::new(record.active));
                record.entries.insert(Arc::clone(&key), Arc::clone(&entry));
                (key, entry)
            }
        };
        entry.state.lock().waiters += 1;
        Joined {
            channel: name,
            key,
            entry,
        }
    }

    /// Unregisters one waiting thread of `entry`. The entry leaves the lot
    /// with its last waiter (its permits with it, as Redisson drops an entry
    /// and its semaphore), and the channel with its last entry; `true` when
    /// the channel left: the caller must reconcile so that it is
    /// unsubscribed. Nothing to do for an entry already refused.
    pub(super) fn leave(&mut self, channel: &str, key: &str, entry: &Arc<LockEntry>) -> bool {
        {
            let mut state = entry.state.lock();
            if state.refused.is_some() || state.moved {
                return false;
            }
            state.waiters = state.waiters.saturating_sub(1);
            if state.waiters > 0 {
                return false;
            }
        }
        let Some(record) = self.channels.get_mut(channel) else {
            return false;
        };
        record.entries.remove(key, entry);
        if !record.entries.is_empty() {
            return false;
        }
        if let Some((name, _)) = self.channels.remove_entry(channel) {
            self.touched.push(name);
        }
        if super::sparse(self.channels.len(), self.channels.capacity()) {
            let keep = super::RECORD_KEEP.max(2 * self.channels.len());
            self.channels.shrink_to(keep);
        }
        true
    }

    /// Whether a thread waits on entry `key` of `channel`.
    pub(super) fn has_waiters(&self, channel: &str, key: &str) -> bool {
        self.channels
            .get(channel)
            .and_then(|record| record.entries.get(key))
            .is_some_and(|(_, entry)| entry.state.lock().waiters > 0)
    }

    /// The number of channels with waiters, and of waiting threads.
    pub(super) fn stats(&self) -> (usize, usize) {
        let waiters = self
            .channels
            .values()
            .flat_map(|record| record.entries.values())
            .map(|entry| entry.state.lock().waiters)
            .sum();
        (self.channels.len(), waiters)
    }

    /// Whether no thread waits at all.
    pub(super) fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }

    /// Whether `channel` has waiters, so should be subscribed.
    pub(super) fn wants(&self, channel: &str) -> bool {
        self.channels.contains_key(channel)
    }

    /// The channels touched since the last call, emptied.
    pub(super) fn take_touched(&mut self) -> Vec<Name> {
        std::mem::take(&mut self.touched)
    }

    /// Every channel with waiters (for a fresh connection, which subscribes
    /// them all); forgets what was touched, since all of it is covered.
    pub(super) fn take_all(&mut self) -> Vec<Name> {
        self.touched.clear();
        self.channels.keys().cloned().collect()
    }

    /// The server confirmed the subscription to `channel` (and no other
    /// command for it is in flight): its waiters stop waiting for the
    /// confirmation, and entries that may have missed a message are woken.
    pub(super) fn activate(&mut self, channel: &str) {
        if let Some(record) = self.channels.get_mut(channel) {
            record.active = true;
            for entry in record.entries.values() {
                entry.activate();
            }
        }
    }

    /// An unlock message on `channel`: `all` (`1`) wakes every waiter of
    /// every entry, otherwise (`0`) one permit goes to each entry.
    pub(super) fn deliver(&self, channel: &str, all: bool) {
        if let Some(record) = self.channels.get(channel) {
            for entry in record.entries.values() {
                entry.release(all);
            }
        }
    }

    /// The server refused to subscribe to `channel`: every entry on it leaves
    /// the lot, and each of their waiters gets `error`, whether it waits for
    /// the confirmation or already for a permit. Returns how many threads
    /// that fails. A waiter that comes later starts a new entry and a new
    /// subscription.
    pub(super) fn refuse(&mut self, channel: &str, error: &RedisError) -> usize {
        let Some(record) = self.channels.remove(channel) else {
            return 0;
        };
        record
            .entries
            .values()
            .map(|entry| entry.refuse(error))
            .sum()
    }

    /// The connection dropped: nothing is subscribed any more, entries that
    /// were active must be woken once subscribed again (a message may be
    /// missed meanwhile), and with `wake` every waiter is woken now (the
    /// server may be gone: they find out within their own timeouts).
    /// The channel's subscription is gone from this node for good (an
    /// unsolicited `sunsubscribe`, a `MOVED` refusal, or in a cluster the
    /// connection lost): forgets the channel and wakes every waiter of its
    /// entries, which see [`LockEntry::is_moved`] and subscribe again through
    /// the slot table. Returns the number of waiters woken.
    pub(super) fn moved(&mut self, channel: &str) -> usize {
        let Some(record) = self.channels.remove(channel) else {
            return 0;
        };
        record.entries.values().map(|entry| entry.moved()).sum()
    }

    /// [`Lot::moved`] for every channel.
    pub(super) fn all_moved(&mut self) {
        let channels: Vec<Name> = self.channels.keys().cloned().collect();
        for channel in channels {
            self.moved(&channel);
        }
    }

    pub(super) fn connection_lost(&mut self, wake: bool) {
        for record in self.channels.values_mut() {
            record.active = false;
            for entry in record.entries.values() {
                entry.lost(wake);
            }
        }
    }
}

impl LockEntry {
    fn new(active: bool) -> LockEntry {
        LockEntry {
            state: Mutex::new(EntryState {
                active,
                ..EntryState::default()
            }),
            activated: Condvar::new(),
            released: Condvar::new(),
        }
    }

    /// Parks until the subscription is confirmed, refused, or `limit` passes.
    /// Without the confirmation by `limit` the waiter goes on (polling at the
    /// holder's TTL): a release before the server subscribes would be
    /// missed, so the confirmation, when it comes, wakes it. Blocks at most
    /// until `limit`; the error is the server's refusal.
    pub(super) fn await_active(&self, limit: Instant) -> Result<(), RedisError> {
        let mut state = self.state.lock();
        loop {
            if let Some(error) = &state.refused {
                return Err(error.clone());
            }
            if state.active || state.moved {
                return Ok(());
            }
            if self.activated.wait_until(&mut state, limit).timed_out() {
                if let Some(error) = &state.refused {
                    return Err(error.clone());
                }
                state.resync |= !state.active;
                return Ok(());
            }
        }
    }

    /// The broadcasts so far: a new waiter's starting point for
    /// [`wait`](Self::wait).
    pub(super) fn broadcasts(&self) -> u64 {
        self.state.lock().broadcasts
    }

    /// Parks until a permit is available (and takes it), a broadcast newer
    /// than `seen` (which it records), the subscription moved, or `timeout`
    /// passes; `Ok(true)` if woken. A permit left by an earlier message
    /// nobody waited for, or a broadcast made while this waiter was not
    /// parked, wakes it at once. `seen` is the waiter's own. Returns
    /// `Ok(false)` at once when `stop()` is true: it is checked under the
    /// entry's mutex before each park, so a `stop` made true before an
    /// [`interrupt`](Self::interrupt) is seen. Blocks at most `timeout`;
    /// the error is the server's refusal of the subscription.
    pub(super) fn wait(
        &self,
        timeout: Duration,
        seen: &AtomicU64,
        stop: &dyn Fn() -> bool,
    ) -> Result<bool, RedisError> {
        let deadline = crate::sync::now().checked_add(timeout);
        let mut state = self.state.lock();
        loop {
            if let Some(error) = &state.refused {
                return Err(error.clone());
            }
            if stop() {
                return Ok(false);
            }
            if state.moved {
                return Ok(true);
            }
            if state.broadcasts != seen.load(Ordering::Relaxed) {
                seen.store(state.broadcasts, Ordering::Relaxed);
                return Ok(true);
            }
            if state.permits > 0 {
                state.permits -= 1;
                return Ok(true);
            }
            let timed_out = match deadline {
                Some(deadline) => self.released.wait_until(&mut state, deadline).timed_out(),
                None => {
                    self.released.wait(&mut state);
                    false
                }
            };
            if timed_out {
                return match &state.refused {
                    Some(error) => Err(error.clone()),
                    None => Ok(false),
                };
            }
        }
    }

    /// Wakes every thread parked on this entry to re-check its `stop`
    /// ([`wait`](Self::wait)); the others go back to sleep. Takes the
    /// entry's mutex briefly.
    pub(super) fn interrupt(&self) {
        let _state = self.state.lock();
        self.activated.notify_all();
        self.released.notify_all();
    }

    /// Wakes every waiter once. Under the entry's mutex.
    fn broadcast(&self, state: &mut EntryState) {
        state.broadcasts += 1;
        self.released.notify_all();
    }

    fn activate(&self) {
        let mut state = self.state.lock();
        if !state.active {
            state.active = true;
            self.activated.notify_all();
        }
        if std::mem::take(&mut state.resync) {
            self.broadcast(&mut state);
        }
    }

    fn release(&self, all: bool) {
        let mut state = self.state.lock();
        if all {
            self.broadcast(&mut state);
        } else {
            state.permits += 1;
            self.released.notify_one();
        }
    }

    /// Whether the subscription moved away (see [`Lot::moved`]).
    pub(super) fn is_moved(&self) -> bool {
        self.state.lock().moved
    }

    fn moved(&self) -> usize {
        let mut state = self.state.lock();
        state.moved = true;
        self.activated.notify_all();
        self.released.notify_all();
        state.waiters
    }

    fn refuse(&self, error: &RedisError) -> usize {
        let mut state = self.state.lock();
        state.refused = Some(error.clone());
        self.activated.notify_all();
        self.released.notify_all();
        state.waiters
    }

    fn lost(&self, wake: bool) {
        let mut state = self.state.lock();
        state.resync |= state.active;
        state.active = false;
        if wake && state.waiters > 0 {
            self.broadcast(&mut state);
        }
    }
}

#[cfg(all(test, feature = "shuttle"))]
mod schedules;

#[cfg(test)]
mod tests {
    use super::*;

    const CHANNEL: &str = "redisson_lock__channel:{a}";

    /// One waiting thread's view of `entry`, from now on.
    fn seat(entry: &LockEntry) -> AtomicU64 {
        AtomicU64::new(entry.broadcasts())
    }

    /// Whether the waiter with `seen` is woken at once.
    fn woken(entry: &LockEntry, seen: &AtomicU64) -> Option<bool> {
        entry.wait(Duration::ZERO, seen, &|| false).ok()
    }

    /// Two waiting threads of one entry, the channel's subscription
    /// confirmed: the lot, the entry and the threads' views of it.
    fn two_waiters_subscribed() -> (Lot, Arc<LockEntry>, [AtomicU64; 2]) {
        let mut lot = Lot::default();
        let entry = lot.join(CHANNEL, "a").entry;
        lot.join(CHANNEL, "a");
        let seats = [seat(&entry), seat(&entry)];
        lot.activate(CHANNEL);
        (lot, entry, seats)
    }

    /// Each waiter `(entry, seen)` in turn: whether it is woken at once.
    fn woken_in_turn(waiters: &[(&LockEntry, &AtomicU64)]) -> Vec<Option<bool>> {
        waiters
            .iter()
            .map(|(entry, seen)| woken(entry, seen))
            .collect()
    }

    #[test]
    fn many_entries_on_one_channel_each_keep_their_permits_past_the_list_s_size() {
        // A synchronizer's waiting calls: an entry each, on one channel.
        let mut lot = Lot::default();
        let keys: Vec<String> = (0..3 * FEW).map(|i| format!("latch#{i}")).collect();
        let joined: Vec<Joined> = keys.iter().map(|key| lot.join(CHANNEL, key)).collect();
        assert!(matches!(
            lot.channels.get(CHANNEL).map(|record| &record.entries),
            Some(ChannelEntries::Many(_))
        ));
        // Joined again, each finds its own entry.
        for (key, first) in keys.iter().zip(&joined) {
            let again = lot.join(CHANNEL, key);
            assert!(Arc::ptr_eq(&again.entry, &first.entry));
            assert!(!lot.leave(CHANNEL, key, &again.entry));
        }
        lot.activate(CHANNEL);
        lot.deliver(CHANNEL, false);
        for place in &joined {
            let seen = seat(&place.entry);
            assert_eq!(woken(&place.entry, &seen), Some(true), "{}", place.key);
        }
        assert_eq!(lot.stats(), (1, keys.len()));
        // The channel leaves with its last entry, not before.
        for (i, (key, place)) in keys.iter().zip(&joined).enumerate() {
            assert_eq!(lot.leave(CHANNEL, key, &place.entry), i + 1 == keys.len());
            assert!(!lot.has_waiters(CHANNEL, key));
        }
        assert!(lot.is_empty());
    }

    #[test]
    fn the_lot_gives_back_what_ten_thousand_channels_grew() {
        let mut lot = Lot::default();
        let channels: Vec<String> = (0..10_000).map(|i| format!("c:{i}")).collect();
        let joined: Vec<Joined> = channels.iter().map(|c| lot.join(c, c)).collect();
        for (channel, place) in channels.iter().zip(&joined) {
            assert!(lot.leave(channel, channel, &place.entry));
        }
        assert!(lot.is_empty());
        let kept = lot.channels.capacity();
        assert!(kept <= 4 * super::super::RECORD_KEEP, "{kept}");
    }

    #[test]
    fn a_channel_s_and_its_entries_names_are_made_once_and_shared() {
        let mut lot = Lot::default();
        // A fair lock's waiter: its own channel is its entry.
        let own = "redisson_lock__channel:{f}:uuid:7";
        let first = lot.join(own, own);
        assert!(Arc::ptr_eq(&first.channel, &first.key));
        let plain = lot.join(CHANNEL, "a");
        let again = lot.join(CHANNEL, "a");
        assert!(Arc::ptr_eq(&plain.channel, &again.channel));
        assert!(Arc::ptr_eq(&plain.key, &again.key));
        assert!(Arc::ptr_eq(&plain.entry, &again.entry));
        // The touched list and the lot hold the same names too.
        let touched = lot.take_touched();
        assert!(touched.iter().any(|name| Arc::ptr_eq(name, &first.channel)));
        assert!(touched.iter().any(|name| Arc::ptr_eq(name, &plain.channel)));
        drop(touched);
        // Four references: the lot's map, its entry, and this thread's two.
        assert_eq!(Arc::strong_count(&first.channel), 4);
    }

    #[test]
    fn an_unlock_message_gives_one_permit_to_each_entry_on_the_channel() {
        let mut lot = Lot::default();
        let plain = lot.join(CHANNEL, "a").entry;
        let plain_again = lot.join(CHANNEL, "a").entry;
        let braced = lot.join(CHANNEL, "{a}").entry;
        assert!(Arc::ptr_eq(&plain, &plain_again));
        assert_eq!(lot.stats(), (1, 3));
        assert_eq!(lot.take_touched(), vec![super::Name::from(CHANNEL)]);
        let (first, second, third) = (seat(&plain), seat(&plain), seat(&braced));

        lot.deliver(CHANNEL, false);
        assert_eq!(woken(&plain, &first), Some(true));
        // One permit for `a`, however many of its threads wait.
        assert_eq!(woken(&plain, &second), Some(false));
        assert_eq!(woken(&braced, &third), Some(true));

        // `all`: every waiter of every entry, once each.
        lot.deliver(CHANNEL, true);
        let (plain_first, plain_second) = ((&*plain, &first), (&*plain, &second));
        let braced_third = (&*braced, &third);
        assert_eq!(
            woken_in_turn(&[
                plain_first,
                plain_first,
                plain_second,
                braced_third,
                braced_third
            ]),
            [true, false, true, true, false].map(Some)
        );
    }

    #[test]
    fn a_lost_connection_wakes_every_waiter_once_however_often_the_first_waits_again() {
        let (mut lot, entry, [quick, slow]) = two_waiters_subscribed();
        lot.connection_lost(true);
        let (quick, slow) = ((&*entry, &quick), (&*entry, &slow));
        // The first to run wakes, fails, and waits again before the other
        // thread even ran: it must not take the other's wake-up.
        let woken = woken_in_turn(&[quick, quick, slow]);
        assert_eq!(woken, [true, false, true].map(Some));
        // A reconnect's confirmation wakes both again (a message may have
        // been missed meanwhile).
        lot.activate(CHANNEL);
        let woken = woken_in_turn(&[slow, quick, quick]);
        assert_eq!(woken, [true, true, false].map(Some));
    }

    #[test]
    fn waiters_are_counted_per_entry_and_the_channel_leaves_with_its_last_entry() {
        let mut lot = Lot::default();
        let plain = lot.join(CHANNEL, "a").entry;
        let braced = lot.join(CHANNEL, "{a}").entry;
        lot.take_touched();
        assert!(lot.has_waiters(CHANNEL, "a"));
        assert!(lot.has_waiters(CHANNEL, "{a}"));
        assert!(!lot.has_waiters(CHANNEL, "b"));

        assert!(!lot.leave(CHANNEL, "a", &plain));
        assert!(!lot.has_waiters(CHANNEL, "a"));
        assert!(lot.has_waiters(CHANNEL, "{a}"));
        assert!(lot.take_touched().is_empty());

        assert!(lot.leave(CHANNEL, "{a}", &braced));
        assert!(lot.is_empty());
        assert_eq!(lot.take_touched(), vec![super::Name::from(CHANNEL)]);
    }

    #[test]
    fn a_refusal_fails_every_waiter_of_the_channel_and_a_later_one_starts_afresh() {
        let mut lot = Lot::default();
        let plain = lot.join(CHANNEL, "a").entry;
        let braced = lot.join(CHANNEL, "{a}").entry;
        let other = lot.join("redisson_lock__channel:{b}", "b").entry;
        let error = RedisError::from((redis::ErrorKind::Client, "refused"));
        assert_eq!(lot.refuse(CHANNEL, &error), 2);
        assert!(plain.await_active(Instant::now()).is_err());
        assert!(
            braced
                .wait(Duration::from_secs(5), &seat(&braced), &|| false)
                .is_err()
        );
        // Already out of the lot: leaving changes nothing.
        assert!(!lot.leave(CHANNEL, "a", &plain));
        assert_eq!(lot.stats(), (1, 1));
        assert_eq!(woken(&other, &seat(&other)), Some(false));

        let again = lot.join(CHANNEL, "a").entry;
        assert!(!Arc::ptr_eq(&again, &plain));
        assert_eq!(woken(&again, &seat(&again)), Some(false));
    }

    #[test]
    fn a_confirmation_after_a_lost_connection_wakes_every_waiter() {
        let (mut lot, entry, [first, second]) = two_waiters_subscribed();
        assert!(entry.await_active(Instant::now()).is_ok());
        lot.connection_lost(false);
        assert_eq!(woken(&entry, &first), Some(false));
        lot.activate(CHANNEL);
        assert_eq!(woken(&entry, &first), Some(true));
        assert_eq!(woken(&entry, &second), Some(true));
        assert_eq!(woken(&entry, &first), Some(false));
        // A new entry on an active channel needs no confirmation.
        let braced = lot.join(CHANNEL, "{a}").entry;
        assert!(braced.await_active(Instant::now()).is_ok());
        assert!(braced.state.lock().active);
    }
}
