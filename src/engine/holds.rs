//! This client's own account of the locks its threads hold: one [`Hold`] per
//! `(lock name, owner field)`, shared by every guard of that pair, in a
//! [`Registry`] that the watchdog renews from.
//!
//! A hold is lost, for good and with a [`LostReason`], when a renewal or an
//! unlock finds its owner field gone or its key overwritten, when its lease
//! runs out by the local monotonic clock before a renewal got through, or
//! when the lock is force-unlocked here.
//!
//! # When the lease runs out
//!
//! Several commands set the key's TTL: the acquire and each reentry, a
//! partial unlock, each renewal. They can be in flight at once (a renewal on
//! the watchdog's connection, a reentry with a shorter lease on a pooled
//! one), and Redis runs them in an order the client cannot see. So the hold
//! keeps every command that may have been the last to set the TTL, and its
//! deadline is the earliest `sent + lease` among them: a lower bound of the
//! key's expiry whichever ran last. A command answered stops counting once
//! another one, sent after that reply arrived, has been answered: that one
//! surely ran later. A command whose outcome is unknown (no reply: a
//! timeout, a dropped connection; or an error reply to a resend of it, when
//! the first send may have run) may still reach Redis after any later
//! command, so it never stops counting: each later answered command sent at
//! `s` raises its bound to `s + its lease` (had it run before that command,
//! that command's own TTL applies; after, the key lives at least that long).
//! [`Hold::is_lost`] therefore turns `true` no later than Redis expires the
//! key, whatever the interleaving of renewals, reentries with explicit
//! leases, partial unlocks and commands held back in the network.
//!
//! # Who hears of it
//!
//! Whatever lowers the deadline (a reentry with a shorter lease, a MultiLock
//! member's new lease, a read release reporting a shorter TTL, a command
//! whose outcome turned unknown) wakes the threads blocked in
//! [`Hold::wait_lost`] and the client's `rlock-deadline` thread at once, so
//! a lost signal fires no later than the key can have expired, never at a
//! deadline that was since moved earlier.

use std::cell::RefCell;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, LazyLock, OnceLock, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use hashbrown::HashTable;

use super::events::{Event, Events, LockEvent};
use super::observe::{self, HoldObserver};
use crate::error::{Error, LostReason};
use crate::protocol::Renewal;
use crate::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use crate::sync::{Condvar, Mutex, channel, now};

static EPOCH: LazyLock<Instant> = LazyLock::new(crate::sync::epoch);

fn nanos_since_epoch(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(*EPOCH).as_nanos()).unwrap_or(u64::MAX)
}

fn lease_nanos(lease: Duration) -> u64 {
    u64::try_from(lease.as_nanos()).unwrap_or(u64::MAX)
}

/// `sent + lease` in ns since [`EPOCH`], saturating (never "already over").
fn deadline_after(sent: Instant, lease: Duration) -> u64 {
    nanos_since_epoch(sent).saturating_add(lease_nanos(lease))
}

/// What every hold of one client shares with its [`Registry`]: the event
/// handler's queue and the `rlock-deadline` thread's wake-up (one pointer
/// in each hold, not a copy of each).
#[derive(Default)]
pub(crate) struct HoldContext {
    /// The client's event handler's queue, if it has one.
    events: Option<Events>,
    /// Wakes the `rlock-deadline` thread, once the first
    /// [`Registry::watch`] started it; dropping it ends the thread.
    watcher: OnceLock<channel::Sender<()>>,
}

/// One thread's hold on one lock, shared by all its guards.
pub(crate) struct Hold {
    pub name: Arc<str>,
    pub field: Arc<str>,
    pub renewal: Renewal,
    /// Its lock type: the Redisson class for events, and how a shutdown
    /// releases it.
    pub kind: &'static HoldKind,
    /// When it was first taken.
    pub since: Instant,
    /// The lease it was first taken with: a third of it before the deadline
    /// counts as "expiring".
    lease: Duration,
    /// Its last guard released it (not lost): nothing to signal any more.
    ended: AtomicBool,
    /// A run of failed renewals was reported; an "expiring" event was raised
    /// for the current deadline.
    renewal_failing: AtomicBool,
    expiring_raised: AtomicBool,
    /// In the registry's watched list.
    watched: AtomicBool,
    /// Who hears of a loss: the lost signals' channels (dropped, which
    /// disconnects them, when the hold ends without loss), and the waiters
    /// of [`Hold::wait_lost`] on `changed`.
    listeners: Mutex<Vec<Sender<LostReason>>>,
    /// With `changed`: the waiters of [`Hold::wait_lost`] (never held while
    /// the hold's state is read, which may mark it lost).
    waiting: Mutex<()>,
    changed: Condvar,
    /// The client's event queue and deadline thread.
    context: Arc<HoldContext>,
    /// Its metrics and tracing events (nothing without the features).
    observed: HoldObserver,
    /// Local acquisitions not yet released.
    count: AtomicU32,
    /// Of those, how many were taken without an explicit lease: the
    /// watchdog renews the hold while there is at least one (Redisson drops
    /// the renewal with the unlock of the acquisition that registered it).
    renewers: AtomicU32,
    /// 0 while held, else the [`LostReason`]'s code.
    lost: AtomicU8,
    /// What a renewal found while the last guard's release was on its way
    /// (0: nothing; else the [`LostReason`]'s code): the release decides
    /// (see `Registry::lose_held`).
    gone_while_releasing: AtomicU8,
    /// The earliest moment the key may expire, in ns since [`EPOCH`]: the
    /// minimum over `ledger`, cached for a lock-free [`Hold::is_lost`].
    deadline: AtomicU64,
    ledger: Mutex<Ledger>,
}

impl Hold {
    fn new(
        name: &Arc<str>,
        field: &str,
        renewal: Renewal,
        renew: bool,
        sent: Instant,
        lease: Duration,
        context: &Arc<HoldContext>,
    ) -> Hold {
        let expires = deadline_after(sent, lease);
        Hold {
            name: Arc::clone(name),
            field: shared_field(field),
            renewal,
            kind: &HoldKind::NONE,
            since: sent,
            lease,
            ended: AtomicBool::new(false),
            renewal_failing: AtomicBool::new(false),
            expiring_raised: AtomicBool::new(false),
            watched: AtomicBool::new(false),
            listeners: Mutex::new(Vec::new()),
            waiting: Mutex::new(()),
            changed: Condvar::new(),
            context: Arc::clone(context),
            observed: HoldObserver::inert(),
            count: AtomicU32::new(1),
            renewers: AtomicU32::new(u32::from(renew)),
            lost: AtomicU8::new(0),
            gone_while_releasing: AtomicU8::new(0),
            deadline: AtomicU64::new(expires),
            ledger: Mutex::new(Ledger::acquired(
                nanos_since_epoch(sent),
                lease_nanos(lease),
                expires,
            )),
        }
    }

    /// Lost for good, or past its lease by the local clock. No round trip.
    pub fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    /// Why the hold is lost, `None` while it is not known to be (or once it
    /// ended: released, not lost).
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.lost_reason_at(now())
    }

    /// [`Hold::lost_reason`] with the clock read at `now` (by a caller
    /// that needs the time anyway).
    pub fn lost_reason_at(&self, now: Instant) -> Option<LostReason> {
        if let Some(reason) = LostReason::from_code(self.lost.load(Ordering::Acquire)) {
            return Some(reason);
        }
        if self.ended.load(Ordering::Acquire) {
            return None;
        }
        if nanos_since_epoch(now) >= self.deadline.load(Ordering::Acquire) {
            self.mark_lost(LostReason::LeaseExpired);
            return LostReason::from_code(self.lost.load(Ordering::Acquire));
        }
        None
    }

    /// Notes that a renewal found the hold's field gone (or its key
    /// overwritten) while its last guard's release was on its way: the
    /// release decides whether that was a loss (see
    /// `Registry::lose_held`). The first note wins.
    pub fn note_gone_while_releasing(&self, reason: LostReason) {
        let _ = self.gone_while_releasing.compare_exchange(
            0,
            reason.code(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// What [`Hold::note_gone_while_releasing`] noted, if anything.
    pub fn gone_while_releasing(&self) -> Option<LostReason> {
        LostReason::from_code(self.gone_while_releasing.load(Ordering::Acquire))
    }

    /// Marks the hold lost (the first reason wins), with a warning the first
    /// time if a guard still relies on it.
    pub fn mark_lost(&self, reason: LostReason) {
        // Decided under the listeners' lock, as `end` decides: a hold is
        // either released or lost, never both (a renewal already on the
        // wire when the guard was released finds the field gone afterwards:
        // that is no loss; tests/failpoints.rs).
        let first = {
            let _decide = self.listeners.lock();
            !self.ended.load(Ordering::Acquire)
                && self
                    .lost
                    .compare_exchange(0, reason.code(), Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
        };
        if !first {
            return;
        }
        self.observed
            .lost(&self.name, &self.field, reason, self.since);
        if self.held() {
            // A shutdown's release is deliberate: worth a line, not a warning.
            let level = match reason {
                LostReason::Shutdown => log::Level::Info,
                _ => log::Level::Warn,
            };
            log::log!(
                level,
                "redisson-lock: lock `{}` held by {} was lost: {reason}",
                self.name,
                self.field
            );
            self.raise(|lock| Event::Lost(lock, reason));
        }
        let listeners = std::mem::take(&mut *self.listeners.lock());
        for listener in listeners {
            let _ = listener.try_send(reason);
        }
        self.wake_waiters();
    }

    /// Wakes [`Hold::wait_lost`]: through its mutex, so that a waiter
    /// between its check and its wait cannot miss it.
    fn wake_waiters(&self) {
        drop(self.waiting.lock());
        self.changed.notify_all();
    }

    /// Whether the hold is marked lost or ended, without looking at the
    /// clock (which may mark it).
    fn settled(&self) -> bool {
        self.lost.load(Ordering::Acquire) != 0 || self.ended.load(Ordering::Acquire)
    }

    /// The last guard released the hold without its being lost: raises
    /// "released", and disconnects the lost signals' channels.
    pub fn end(&self) {
        {
            let mut listeners = self.listeners.lock();
            if self.lost.load(Ordering::Acquire) != 0 || self.ended.swap(true, Ordering::AcqRel) {
                return;
            }
            listeners.clear();
        }
        self.observed.released(self.since);
        self.raise(|lock| Event::Released(lock, self.since.elapsed()));
        self.wake_waiters();
    }

    /// The hold was handed to another client (detached, not released):
    /// nothing more to signal here, and no event (this client did not
    /// release it). Its waiters return `None`, its channels disconnect.
    pub fn hand_off(&self) {
        {
            let mut listeners = self.listeners.lock();
            if self.lost.load(Ordering::Acquire) != 0 || self.ended.swap(true, Ordering::AcqRel) {
                return;
            }
            listeners.clear();
        }
        self.wake_waiters();
    }

    /// Whether the hold ended (released) or is lost: nothing more to watch.
    pub fn is_over(&self) -> bool {
        self.ended.load(Ordering::Acquire) || self.lost.load(Ordering::Acquire) != 0
    }

    /// The local moment before which the key cannot have expired: the
    /// earliest `sent + lease` of the commands that may have set its TTL
    /// last (see the module docs).
    pub fn valid_until(&self) -> Instant {
        *EPOCH + Duration::from_nanos(self.deadline.load(Ordering::Acquire))
    }

    /// A channel that receives the reason once the hold is lost (at once if
    /// it is), and is disconnected when it ends without loss.
    pub fn lost_channel(&self) -> Receiver<LostReason> {
        let (sender, receiver) = crossbeam_channel::bounded(1);
        // Marks the hold lost if its deadline passed (before the lock: a
        // loss takes it to drain the listeners).
        let _ = self.lost_reason();
        let mut listeners = self.listeners.lock();
        match LostReason::from_code(self.lost.load(Ordering::Acquire)) {
            Some(reason) => {
                let _ = sender.try_send(reason);
            }
            None if self.ended.load(Ordering::Acquire) => {}
            None => listeners.push(sender),
        }
        receiver
    }

    /// Blocks until the hold is lost (`Some(reason)`), ends without loss
    /// (`None`), or `until` passes (`None`). Wakes by itself at the deadline,
    /// which is when a lease that ran out makes the hold lost.
    pub fn wait_lost(&self, until: Option<Instant>) -> Option<LostReason> {
        loop {
            if let Some(reason) = self.lost_reason() {
                return Some(reason);
            }
            if self.ended.load(Ordering::Acquire) {
                return None;
            }
            if until.is_some_and(|until| now() >= until) {
                return None;
            }
            let mut waiting = self.waiting.lock();
            // Read under the lock: a deadline moved earlier after this read
            // wakes this wait (`publish_deadline` notifies through it).
            let deadline = self.valid_until();
            let wake = until.map_or(deadline, |until| until.min(deadline));
            if !self.settled() {
                // A deadline that passes is checked on the next turn.
                let _ = self.changed.wait_until(&mut waiting, wake);
            }
        }
    }

    /// A renewal got through: ends a run of failures and re-arms
    /// "expiring".
    pub fn renewal_succeeded(&self) {
        self.observed.renewed(self.since);
        self.renewal_failing.store(false, Ordering::Release);
        self.expiring_raised.store(false, Ordering::Release);
    }

    /// A renewal failed with `error`: raised once per run of failures.
    pub fn renewal_failed(&self, error: &Error) {
        let first = !self.renewal_failing.swap(true, Ordering::AcqRel);
        self.observed
            .renewal_failed(&self.name, &self.field, error, first);
        if first {
            let error = Error::Unavailable {
                reason: error.to_string(),
            };
            self.raise(|lock| Event::RenewalFailed(lock, error));
        }
    }

    /// When "expiring" is due: a third of the lease before the deadline;
    /// `None` when it was raised already or nobody listens.
    fn expiring_at(&self) -> Option<Instant> {
        (self.context.events.is_some() && !self.expiring_raised.load(Ordering::Acquire))
            .then(|| self.valid_until().checked_sub(self.lease / 3))
            .flatten()
    }

    /// Raises "expiring" if it is due and was not raised for this deadline.
    fn check_expiring(&self, now: Instant) {
        if self.expiring_at().is_some_and(|at| now >= at)
            && !self.expiring_raised.swap(true, Ordering::AcqRel)
        {
            let remaining = self.valid_until().saturating_duration_since(now);
            self.raise(|lock| Event::Expiring(lock, remaining));
        }
    }

    fn raise(&self, event: impl FnOnce(LockEvent) -> Event) {
        if let Some(events) = &self.context.events {
            events.raise(event(LockEvent {
                name: Arc::clone(&self.name),
                owner: Arc::clone(&self.field),
                kind: self.kind.class,
            }));
        }
    }

    /// Records that a command that sets the key's TTL to `lease` is about
    /// to be sent. Until it is ended, the hold's deadline counts with it.
    pub fn begin_lease(&self, lease: Duration) -> LeaseTicket {
        let sent = nanos_since_epoch(now());
        let mut ledger = self.ledger.lock();
        let ticket = ledger.begin(sent, lease_nanos(lease));
        self.publish_deadline(&ledger);
        ticket
    }

    /// [`Hold::begin_lease`] for the watchdog's renewal: `None` when no
    /// guard renews the hold any more (released, or taken out of renewal by
    /// `keep_for`) since the run collected it, seconds ago for a million
    /// locks. Decided under the ledger's lock, under which `keep_for` reads
    /// its clock after taking the hold out of renewal: a renewal is either
    /// in the ledger by then (counted as a race: `keep_for` waits for it or
    /// tries again) or never sent.
    pub fn begin_renewal(&self, lease: Duration) -> Option<LeaseTicket> {
        let sent = nanos_since_epoch(now());
        let mut ledger = self.ledger.lock();
        if !self.renews() {
            return None;
        }
        let ticket = ledger.begin(sent, lease_nanos(lease));
        self.publish_deadline(&ledger);
        Some(ticket)
    }

    /// Records the reply (or the failure) of a command begun with
    /// [`Hold::begin_lease`].
    pub fn end_lease(&self, ticket: LeaseTicket, outcome: LeaseOutcome) {
        self.finish_lease(ticket, outcome, None);
    }

    /// Like [`Hold::end_lease`] with [`LeaseOutcome::Set`], for a command
    /// whose reply says what TTL it left: `ttl` from the moment it was
    /// `sent` (a lower bound, since it ran after that). For a command begun
    /// without knowing its lease (a read release keeps the longest-lived
    /// remaining marker's TTL).
    pub fn end_lease_with_ttl(&self, ticket: LeaseTicket, sent: Instant, ttl: Duration) {
        self.finish_lease(ticket, LeaseOutcome::Set, Some(deadline_after(sent, ttl)));
    }

    fn finish_lease(&self, ticket: LeaseTicket, outcome: LeaseOutcome, expires: Option<u64>) {
        // After a resend, a reply that proves the last send did not run
        // says nothing of the first one.
        let outcome = match outcome {
            LeaseOutcome::Untouched if ticket.resent.load(Ordering::Relaxed) => {
                LeaseOutcome::Unknown
            }
            outcome => outcome,
        };
        let mut ledger = self.ledger.lock();
        ledger.finish(ticket.id, outcome, expires);
        self.publish_deadline(&ledger);
    }

    /// Caches the ledger's earliest expiry; when that moved earlier, wakes
    /// whoever waits for the old one (see "Who hears of it").
    fn publish_deadline(&self, ledger: &Ledger) {
        let Some(earliest) = ledger.earliest() else {
            return;
        };
        // A lost hold's deadline never moves later: a renewal sent before
        // its lease ran out and answered after (a paused server resumed)
        // must not make `valid_until` a moment to come for a lock reported
        // lost. The second look catches a loss marked between the first
        // and the swap, which then stands until the `fetch_min`.
        let before = if self.lost.load(Ordering::Acquire) != 0 {
            self.deadline.fetch_min(earliest, Ordering::AcqRel)
        } else {
            let before = self.deadline.swap(earliest, Ordering::AcqRel);
            if earliest > before && self.lost.load(Ordering::Acquire) != 0 {
                self.deadline.fetch_min(before, Ordering::AcqRel);
            }
            before
        };
        if earliest < before {
            self.wake_waiters();
            // Once watched ([`Registry::watch`] wakes the thread itself
            // after it set the flag).
            if self.watched.load(Ordering::Acquire)
                && let Some(deadline_thread) = self.context.watcher.get()
            {
                let _ = deadline_thread.try_send(());
            }
        }
    }

    fn held(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    pub fn renews(&self) -> bool {
        self.renewers.load(Ordering::Acquire) > 0
    }
}

/// `field` as a shared string: the one this thread's last hold used when it
/// is the same (a thread's holds share their owner field), so that a
/// client holding many locks does not keep a copy per lock.
fn shared_field(field: &str) -> Arc<str> {
    thread_local! {
        static LAST: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
    }
    let shared = LAST.try_with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            Some(known) if **known == *field => Arc::clone(known),
            _ => Arc::clone(last.insert(field.into())),
        }
    });
    // The thread is ending (its thread-locals are gone): a copy.
    shared.unwrap_or_else(|_| field.into())
}

mod ledger;
mod quiet;
mod registry;
mod releaser;
#[cfg(all(test, feature = "shuttle"))]
mod schedules;
use ledger::Ledger;
pub(crate) use ledger::{LeaseOutcome, LeaseTicket};
pub(crate) use registry::Registry;
pub(crate) use releaser::HoldKind;

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(lease: Duration) -> Hold {
        let name: Arc<str> = "l".into();
        Hold::new(
            &name,
            "f",
            Renewal::Field,
            true,
            Instant::now(),
            lease,
            &Arc::default(),
        )
    }

    fn deadline_in(hold: &Hold) -> Duration {
        let now = nanos_since_epoch(Instant::now());
        Duration::from_nanos(hold.deadline.load(Ordering::Acquire).saturating_sub(now))
    }

    /// A command setting `lease` sent and answered with `outcome`, nothing
    /// else in flight meanwhile.
    fn answered(hold: &Hold, lease: Duration, outcome: LeaseOutcome) {
        let ticket = hold.begin_lease(lease);
        hold.end_lease(ticket, outcome);
    }

    const LONG: Duration = Duration::from_secs(3);
    const SHORT: Duration = Duration::from_millis(500);

    #[test]
    fn a_held_lock_costs_no_allocation_beyond_its_hold_while_it_is_renewed() {
        // One thread's holds share its owner field (no copy per lock) ...
        let (a, b) = (hold(LONG), hold(LONG));
        assert!(Arc::ptr_eq(&a.field, &b.field));
        let other = Hold::new(
            &a.name,
            "g",
            Renewal::Field,
            true,
            Instant::now(),
            LONG,
            &Arc::default(),
        );
        assert_eq!(&*other.field, "g");
        // ... and its ledger is inline at rest, also after a reentry beside a
        // renewal in flight took it to the heap for a moment.
        for _ in 0..3 {
            let renewal = a.begin_lease(LONG);
            answered(&a, SHORT, LeaseOutcome::Set);
            a.end_lease(renewal, LeaseOutcome::Set);
            answered(&a, LONG, LeaseOutcome::Set);
        }
        let ledger = a.ledger.lock();
        assert_eq!(ledger.entries.len(), 1);
        assert!(!ledger.entries.spilled());
    }

    #[test]
    fn a_renewal_answered_after_a_shorter_reentry_does_not_extend_the_deadline() {
        let hold = hold(LONG);
        let renewal = hold.begin_lease(LONG);
        answered(&hold, SHORT, LeaseOutcome::Set);
        hold.end_lease(renewal, LeaseOutcome::Set);
        // Either may have run last: the short lease bounds the deadline.
        assert!(deadline_in(&hold) <= SHORT);
    }

    #[test]
    fn a_command_sent_after_a_reply_supersedes_it() {
        let hold = hold(SHORT);
        answered(&hold, LONG, LeaseOutcome::Set);
        assert!(
            deadline_in(&hold) > SHORT,
            "the renewal ran after the acquire"
        );
        let reentry = hold.begin_lease(SHORT);
        assert!(
            deadline_in(&hold) <= SHORT,
            "in flight, it may already have run"
        );
        hold.end_lease(reentry, LeaseOutcome::Set);
        answered(&hold, LONG, LeaseOutcome::Set);
        assert!(deadline_in(&hold) > SHORT);
        assert_eq!(hold.ledger.lock().entries.len(), 1);
    }

    #[test]
    fn a_command_without_a_reply_counts_but_supersedes_nothing() {
        let hold = hold(SHORT);
        answered(&hold, LONG, LeaseOutcome::Unknown);
        assert!(deadline_in(&hold) <= SHORT, "the renewal may not have run");
        answered(&hold, LONG, LeaseOutcome::Set);
        assert!(deadline_in(&hold) > SHORT);
    }

    #[test]
    fn a_release_that_reports_its_ttl_replaces_a_longer_lease() {
        let hold = hold(LONG);
        let sent = Instant::now();
        let release = hold.begin_lease(Duration::MAX);
        assert!(
            deadline_in(&hold) > SHORT,
            "an unknown lease lowers nothing"
        );
        hold.end_lease_with_ttl(release, sent, SHORT);
        assert!(deadline_in(&hold) <= SHORT);
        assert_eq!(hold.ledger.lock().entries.len(), 1);
    }

    #[test]
    fn a_command_that_did_not_run_does_not_count() {
        let hold = hold(LONG);
        answered(&hold, SHORT, LeaseOutcome::Untouched);
        assert!(deadline_in(&hold) > SHORT);
    }

    #[test]
    fn a_command_of_unknown_outcome_is_raised_not_dropped_by_a_later_reply() {
        let hold = hold(LONG);
        // Held back in the network past the response timeout...
        answered(&hold, SHORT, LeaseOutcome::Unknown);
        // ...then a later reentry with a longer lease is answered...
        answered(&hold, LONG * 10, LeaseOutcome::Set);
        // ...and the held-back one may run after it: the key may expire a
        // short lease after the later one was sent.
        assert!(deadline_in(&hold) <= SHORT);
        assert!(deadline_in(&hold) > SHORT - Duration::from_millis(100));
        // So for every later reply: raised, never dropped, and kept once.
        for _ in 0..5 {
            answered(&hold, LONG, LeaseOutcome::Set);
            assert!(deadline_in(&hold) <= SHORT);
        }
        assert_eq!(hold.ledger.lock().entries.len(), 2);
    }

    #[test]
    fn a_refused_resend_leaves_the_first_send_unknown() {
        let hold = hold(LONG);
        let reentry = hold.begin_lease(SHORT);
        // The first send's reply was lost; the flagged resend got `BUSY`.
        reentry.resending();
        hold.end_lease(reentry, LeaseOutcome::Untouched);
        answered(&hold, LONG, LeaseOutcome::Set);
        assert!(deadline_in(&hold) <= SHORT, "the first send may have run");
    }

    /// A lost hold's deadline never moves later: a renewal sent before its
    /// lease ran out and answered after (a paused server resumed:
    /// tests/operable.rs's paused-server test read `valid_until` 2 s ahead
    /// after its loss) leaves `valid_until` past; after any other loss, no
    /// reply raises it either.
    #[test]
    fn a_lost_holds_deadline_never_moves_later() {
        let short = Duration::from_millis(40);
        let hold = hold(short);
        let renewal = hold.begin_renewal(LONG).expect("renewed");
        std::thread::sleep(short + Duration::from_millis(10));
        assert_eq!(hold.lost_reason(), Some(LostReason::LeaseExpired));
        hold.end_lease(renewal, LeaseOutcome::Set);
        let now = Instant::now();
        assert!(
            hold.valid_until() <= now,
            "{:?} ahead",
            hold.valid_until() - now
        );
        assert_eq!(hold.lost_reason(), Some(LostReason::LeaseExpired));

        let hold = self::hold(SHORT);
        let renewal = hold.begin_renewal(LONG).expect("renewed");
        hold.mark_lost(LostReason::Overwritten);
        let lost = hold.valid_until();
        hold.end_lease(renewal, LeaseOutcome::Set);
        answered(&hold, LONG, LeaseOutcome::Set);
        assert_eq!(hold.valid_until(), lost);
    }

    /// Whatever moves the deadline earlier (a shorter reentry, a member's
    /// new lease, a read release's shorter TTL: all end in the ledger)
    /// wakes a thread already waiting for the old deadline.
    #[test]
    fn a_deadline_moved_earlier_wakes_the_waiters() {
        for end in [
            |hold: &Hold, t| hold.end_lease(t, LeaseOutcome::Set),
            |hold: &Hold, t| hold.end_lease(t, LeaseOutcome::Unknown),
            |hold: &Hold, t| hold.end_lease_with_ttl(t, Instant::now(), SHORT),
        ] {
            let hold = Arc::new(hold(LONG * 4));
            let waiter = {
                let hold = Arc::clone(&hold);
                std::thread::spawn(move || {
                    let reason = hold.wait_lost(None);
                    (reason, Instant::now())
                })
            };
            std::thread::sleep(Duration::from_millis(50)); // it waits
            let moved = Instant::now();
            let lease = hold.begin_lease(SHORT);
            end(&hold, lease);
            let (reason, at) = waiter.join().expect("waiter");
            assert_eq!(reason, Some(LostReason::LeaseExpired));
            let after = at - moved;
            assert!(
                after >= SHORT && after < LONG,
                "woke {after:?} after the move"
            );
        }
    }

    #[test]
    fn a_deadline_moved_earlier_wakes_the_deadline_thread() {
        let registry = Registry::default();
        let name: Arc<str> = "l".into();
        let sent = Instant::now();
        let hold = registry.acquired(
            &name,
            "f",
            &HoldKind::NONE,
            Renewal::Field,
            LONG * 4,
            true,
            sent,
            None,
        );
        registry.watch(&hold);
        // Only the deadline thread marks it lost: nobody else looks.
        let lost = hold.lost_channel();
        std::thread::sleep(Duration::from_millis(50)); // it sleeps till LONG * 4
        let moved = Instant::now();
        answered(&hold, SHORT, LeaseOutcome::Set);
        let reason = lost
            .recv_timeout(LONG)
            .expect("signalled at the new deadline");
        assert_eq!(reason, LostReason::LeaseExpired);
        assert!(moved.elapsed() < LONG);
    }

    #[test]
    fn the_lease_running_out_is_a_reason() {
        let hold = hold(Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(hold.lost_reason(), Some(LostReason::LeaseExpired));
        hold.mark_lost(LostReason::KeyGone);
        assert_eq!(hold.lost_reason(), Some(LostReason::LeaseExpired));
    }

    /// Only an answer proves a failed command left the TTL alone: the
    /// server's error reply, or a forked process that sent nothing. A
    /// dropped connection or a timeout may have run it (cargo-mutants: no
    /// test told the two apart).
    #[test]
    fn only_an_answer_proves_a_failed_command_untouched() {
        use crate::error::Error;
        let Ok(redis::Value::ServerError(reply)) = redis::parse_redis_value(b"-ERR no\r\n") else {
            panic!("an error reply");
        };
        let server = redis::RedisError::from(reply);
        assert_eq!(server.code(), Some("ERR"));
        let reset =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        for (error, outcome) in [
            (Error::Redis(server), LeaseOutcome::Untouched),
            (
                Error::ForkedProcess {
                    created_by: 1,
                    used_by: 2,
                },
                LeaseOutcome::Untouched,
            ),
            (Error::Redis(reset), LeaseOutcome::Unknown),
            (
                Error::Timeout {
                    operation: "renew",
                    after: SHORT,
                },
                LeaseOutcome::Unknown,
            ),
        ] {
            assert_eq!(LeaseOutcome::of_error(&error), outcome, "{error:?}");
        }
    }

    #[test]
    fn a_hold_handed_off_ends_its_waiters_and_channels_without_loss() {
        let hold = Arc::new(hold(LONG));
        assert!(!hold.is_over());
        let lost = hold.lost_channel();
        let waiter = {
            let hold = Arc::clone(&hold);
            std::thread::spawn(move || hold.wait_lost(None))
        };
        std::thread::sleep(Duration::from_millis(50));
        hold.hand_off();
        assert_eq!(waiter.join().expect("waiter"), None, "no loss");
        assert_eq!(
            lost.recv_timeout(SHORT),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected)
        );
        assert!(hold.is_over() && !hold.is_lost());
        // A channel asked for afterwards is disconnected at once too.
        assert_eq!(
            hold.lost_channel().recv_timeout(SHORT),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected)
        );
        // A lost hold stays lost: a hand-off after it changes nothing.
        let lost_first = lost_hold();
        lost_first.hand_off();
        assert_eq!(lost_first.lost_reason(), Some(LostReason::KeyGone));
        assert!(lost_first.is_over());
    }

    fn lost_hold() -> Hold {
        let hold = hold(LONG);
        hold.mark_lost(LostReason::KeyGone);
        hold
    }

    #[test]
    fn a_hold_is_over_once_it_ended_or_is_lost_and_not_before() {
        let ended = hold(LONG);
        assert!(!ended.is_over());
        ended.end();
        assert!(ended.is_over());
        assert!(lost_hold().is_over());
    }

    /// CPU time this thread has used, in clock ticks (Linux).
    #[cfg(target_os = "linux")]
    fn thread_cpu_ticks() -> u64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("stat");
        // After the command's closing parenthesis: state is field 3, utime 14, stime 15.
        let rest = &stat[stat.rfind(')').expect("comm") + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_waiting_for_a_loss_sleeps() {
        let hold = hold(LONG);
        let before = thread_cpu_ticks();
        let until = Instant::now() + Duration::from_millis(400);
        assert_eq!(hold.wait_lost(Some(until)), None);
        assert!(Instant::now() >= until);
        // A spinning wait would take ~40 ticks (100 a second) here.
        let used = thread_cpu_ticks() - before;
        assert!(used < 10, "{used} ticks of CPU while waiting");
    }

    #[test]
    fn a_renewal_that_gets_through_ends_the_run_of_failures() {
        let hold = hold(LONG);
        let error = Error::Timeout {
            operation: "renew",
            after: SHORT,
        };
        hold.renewal_failed(&error);
        assert!(hold.renewal_failing.load(Ordering::Acquire));
        hold.expiring_raised.store(true, Ordering::Release);
        hold.renewal_succeeded();
        assert!(!hold.renewal_failing.load(Ordering::Acquire));
        assert!(!hold.expiring_raised.load(Ordering::Acquire), "re-armed");
    }

    #[test]
    fn unknown_outcomes_raised_to_the_same_bound_are_kept_once() {
        let hold = hold(LONG);
        let (a, b) = (hold.begin_lease(LONG), hold.begin_lease(LONG));
        hold.end_lease(a, LeaseOutcome::Unknown);
        hold.end_lease(b, LeaseOutcome::Unknown);
        answered(&hold, LONG, LeaseOutcome::Set);
        // Both raised to the answered command's send + LONG: one kept,
        // beside the answered command.
        assert_eq!(hold.ledger.lock().entries.len(), 2);
    }

    #[test]
    fn the_lease_clock_tells_commands_that_may_run_after_it() {
        let hold = hold(LONG);
        answered(&hold, LONG, LeaseOutcome::Set);
        answered(&hold, LONG, LeaseOutcome::Set);
        let clock = hold.lease_clock();
        assert!(!hold.lease_may_follow(clock, None), "none since");
        let ticket = hold.begin_lease(LONG);
        assert!(hold.lease_may_follow(clock, None));
        assert!(!hold.lease_may_follow(clock, Some(ticket.id)), "mine");
        hold.end_lease(ticket, LeaseOutcome::Set);
        assert!(!hold.lease_may_follow(hold.lease_clock(), None));
        // One begun before the clock was read and answered after it: Redis
        // may have run it after a command sent at the read.
        let before = hold.begin_lease(LONG);
        let clock = hold.lease_clock();
        assert!(hold.lease_may_follow(clock, None), "in flight at the read");
        hold.end_lease(before, LeaseOutcome::Set);
        assert!(hold.lease_may_follow(clock, None), "answered after it");
        assert!(!hold.lease_may_follow(hold.lease_clock(), None));
        // One whose reply proves it set nothing leaves the ledger.
        let untouched = hold.begin_lease(LONG);
        let clock = hold.lease_clock();
        hold.end_lease(untouched, LeaseOutcome::Untouched);
        assert!(!hold.lease_may_follow(clock, None), "set nothing");
    }

    #[test]
    fn holds_of_other_owners_on_one_name_are_kept_and_a_hold_is_watched_once() {
        let registry = Registry::default();
        let name: Arc<str> = "shared".into();
        let take = |field: &str| {
            registry.acquired(
                &name,
                field,
                &HoldKind::NONE,
                Renewal::Field,
                LONG,
                true,
                Instant::now(),
                None,
            )
        };
        let (f, g) = (take("f"), take("g"));
        assert!(
            !f.is_lost() && !g.is_lost(),
            "another owner's hold replaces nothing"
        );
        assert_eq!(registry.holds_on(&name).len(), 2);
        // The same owner's new hold replaces its old one (lost before).
        let f_again = take("f");
        assert_eq!(f.lost_reason(), Some(LostReason::Replaced));
        assert!(!g.is_lost() && !f_again.is_lost());
        assert_eq!(registry.holds_on(&name).len(), 2);

        registry.watch(&g);
        registry.watch(&g);
        assert_eq!(registry.watched_len(), 1, "watched once");
    }
}
