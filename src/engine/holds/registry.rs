//! Every hold of one client ([`Registry`]), and the `rlock-deadline`
//! thread that signals the watched holds' deadlines.

use super::*;

/// The `rlock-deadline` thread: checks the watched holds at each one's
/// next moment of interest, or when `woken` says the list changed, until
/// the registry is dropped or `stopping` is set (and it is woken).
fn watch_deadlines(
    watched: &Mutex<Vec<Weak<Hold>>>,
    woken: &channel::Receiver<()>,
    stopping: &AtomicBool,
) {
    loop {
        if stopping.load(Ordering::Acquire) {
            return;
        }
        let next = check_watched(watched, now());
        let woke = match next {
            Some(at) => woken.recv_deadline(at).map_err(|e| e.is_disconnected()),
            None => woken.recv().map_err(|_| true),
        };
        if woke == Err(true) {
            return;
        }
    }
}

/// Checks the watched holds at `now` (marking those past their deadline
/// lost, raising "expiring"), forgets those that are over, and says when to
/// look again.
fn check_watched(watched: &Mutex<Vec<Weak<Hold>>>, now: Instant) -> Option<Instant> {
    let holds: Vec<Arc<Hold>> = {
        let mut watched = watched.lock();
        watched.retain(|hold| hold.upgrade().is_some_and(|hold| !hold.is_over()));
        watched.iter().filter_map(Weak::upgrade).collect()
    };
    let mut next: Option<Instant> = None;
    for hold in holds {
        hold.check_expiring(now);
        if hold.is_lost() {
            continue;
        }
        for at in [Some(hold.valid_until()), hold.expiring_at()]
            .into_iter()
            .flatten()
        {
            next = Some(next.map_or(at, |next| next.min(at)));
        }
    }
    next
}

/// Every hold of one client, by lock name.
pub(crate) struct Registry {
    /// Keyed by the locks' own names (no copy per acquisition); a name
    /// almost always has one hold, kept inline.
    holds: Mutex<HashTable<Arc<Hold>>>,
    /// Hashes the holds' names: a name's holds (one nearly always; a read
    /// lock's readers, other owners) share a hash.
    hasher: RandomState,
    /// The client's event handler's queue and the deadline thread's
    /// wake-up, shared with every hold.
    context: Arc<HoldContext>,
    /// The client's metrics settings, for each new hold.
    observe: observe::Settings,
    /// Holds whose deadline someone listens to (a lost signal's channel, or
    /// the event handler), watched by the `rlock-deadline` thread.
    watched: Arc<Mutex<Vec<Weak<Hold>>>>,
    /// Tells that thread to end ([`Registry::stop`]).
    stopping: Arc<AtomicBool>,
    /// That thread, for [`Registry::stop`].
    watcher_thread: Mutex<Option<crate::sync::thread::JoinHandle<()>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new(None, observe::Settings::default())
    }
}

impl Registry {
    /// An empty registry whose holds raise their events on `events` and
    /// are observed with `observe`.
    pub fn new(events: Option<Events>, observe: observe::Settings) -> Self {
        Registry {
            holds: Mutex::default(),
            hasher: RandomState::new(),
            context: Arc::new(HoldContext {
                events,
                watcher: OnceLock::new(),
            }),
            observe,
            watched: Arc::default(),
            stopping: Arc::default(),
            watcher_thread: Mutex::new(None),
        }
    }

    /// How many holds the deadline thread watches (tests).
    #[cfg(test)]
    pub(crate) fn watched_len(&self) -> usize {
        self.watched.lock().len()
    }

    /// Has `hold`'s loss signalled at its deadline (and "expiring" raised
    /// before it) by the `rlock-deadline` thread, whatever the watchdog is
    /// doing: no later than the key can have expired, also when a later
    /// command moves that deadline earlier (the hold wakes the thread). The
    /// thread is started by the first call and ends with the registry.
    pub fn watch(&self, hold: &Arc<Hold>) {
        // Stopped by a shutdown, which marked every hold lost: no thread
        // starts again.
        if self.stopping.load(Ordering::Acquire) || hold.watched.swap(true, Ordering::AcqRel) {
            return;
        }
        self.watched.lock().push(Arc::downgrade(hold));
        let wake = self.context.watcher.get_or_init(|| {
            let (wake, woken) = channel::bounded(1);
            let watched = Arc::clone(&self.watched);
            let stopping = Arc::clone(&self.stopping);
            let started = crate::sync::thread::Builder::new()
                .name("rlock-deadline".into())
                .spawn(move || watch_deadlines(&watched, &woken, &stopping));
            match started {
                Ok(started) => *self.watcher_thread.lock() = Some(started),
                Err(e) => log::warn!("redisson-lock: cannot start the deadline thread: {e}"),
            }
            wake
        });
        // A deadline moved earlier wakes the thread too, once the hold is
        // marked watched (above): this wake-up covers a move before.
        let _ = wake.try_send(());
    }

    /// Records a successful acquire sent at `sent` with `lease`. `reentered`
    /// is the live hold the acquire was sent for (its lease command already
    /// ended by the caller), joined by this acquisition; without it a new
    /// hold starts, and any earlier hold of this owner is lost: `replaced`
    /// says Redis reported it gone. `renewal` is how the watchdog renews a
    /// new hold.
    #[allow(clippy::too_many_arguments)]
    pub fn acquired(
        &self,
        name: &Arc<str>,
        field: &str,
        kind: &'static HoldKind,
        renewal: Renewal,
        lease: Duration,
        renew: bool,
        sent: Instant,
        reentered: Option<&Arc<Hold>>,
    ) -> Arc<Hold> {
        if let Some(hold) = reentered {
            hold.count.fetch_add(1, Ordering::AcqRel);
            hold.renewers.fetch_add(u32::from(renew), Ordering::AcqRel);
            hold.raise(|lock| Event::Acquired(lock, true));
            return Arc::clone(hold);
        }
        let mut hold = Hold::new(name, field, renewal, renew, sent, lease, &self.context);
        hold.kind = kind;
        hold.observed = HoldObserver::held(&self.observe, kind.class, name);
        let hold = Arc::new(hold);
        hold.raise(|lock| Event::Acquired(lock, false));
        if self.context.events.is_some() {
            self.watch(&hold);
        }
        let hash = self.hash(name);
        let mut holds = self.holds.lock();
        // This owner's earlier hold on the name is replaced: lost.
        while let Ok(old) = holds.find_entry(hash, |old| old.name == *name && *old.field == *field)
        {
            old.remove().0.mark_lost(LostReason::Replaced);
        }
        holds.insert_unique(hash, Arc::clone(&hold), |hold| self.hash(&hold.name));
        hold
    }

    /// Drops one acquisition (`renew`: one taken without an explicit lease);
    /// `true` when it was the hold's last, which removes it from renewal.
    pub fn released(&self, hold: &Arc<Hold>, renew: bool) -> bool {
        if renew {
            hold.renewers.fetch_sub(1, Ordering::AcqRel);
        }
        let last = hold.count.fetch_sub(1, Ordering::AcqRel) == 1;
        if last {
            self.remove(hold);
        }
        last
    }

    /// This owner's live hold on `name`, if it has one that is not lost.
    pub fn live(&self, name: &str, field: &str) -> Option<Arc<Hold>> {
        self.holds
            .lock()
            .iter_hash(self.hash(name))
            .find(|hold| &*hold.name == name && &*hold.field == field && !hold.is_lost())
            .cloned()
    }

    /// How many acquisitions a hold counts.
    pub fn count(hold: &Hold) -> u32 {
        hold.count.load(Ordering::Acquire)
    }

    /// The holds on `name` right now.
    pub fn holds_on(&self, name: &str) -> Vec<Arc<Hold>> {
        self.holds
            .lock()
            .iter_hash(self.hash(name))
            .filter(|hold| &*hold.name == name)
            .cloned()
            .collect()
    }

    /// Number of holds (one per thread and lock) currently registered.
    pub fn len(&self) -> usize {
        self.holds.lock().len()
    }

    /// Stops tracking `hold` (its lease is no longer renewed).
    pub fn remove(&self, hold: &Arc<Hold>) {
        let hash = self.hash(&hold.name);
        if let Ok(entry) = self
            .holds
            .lock()
            .find_entry(hash, |other| Arc::ptr_eq(other, hold))
        {
            entry.remove();
        }
    }

    /// The holds the watchdog renews.
    pub fn renewable(&self) -> Vec<Arc<Hold>> {
        self.holds
            .lock()
            .iter()
            .filter(|hold| hold.renews())
            .cloned()
            .collect()
    }

    /// Every hold registered now.
    pub fn all(&self) -> Vec<Arc<Hold>> {
        self.holds.lock().iter().cloned().collect()
    }

    fn hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name)
    }

    /// Ends the `rlock-deadline` thread, if it runs, and waits for it: the
    /// holds' deadlines are no longer signalled by it.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        if let Some(wake) = self.context.watcher.get() {
            let _ = wake.try_send(());
        }
        crate::sync::join(self.watcher_thread.lock().take());
    }

    /// Marks `hold` lost and stops renewing it.
    pub fn lose(&self, hold: &Arc<Hold>, reason: LostReason) {
        hold.mark_lost(reason);
        self.remove(hold);
    }

    /// A renewal's finding that `hold`'s field is gone (or its key
    /// overwritten): marks it lost, unless its last guard's release has
    /// begun meanwhile (no acquisition left): then the finding is noted
    /// and the release's own answer decides, since a renewal that reached
    /// Redis after the unlock finds the field gone too, while its reply may
    /// come back first (the watchdog has its own connection). A release
    /// that finds the field gone marks the hold lost itself; one that only
    /// inferred it freed the lock (its resend found the field gone) marks
    /// it lost with the noted reason, the safe side of a doubly ambiguous
    /// case; one whose outcome is unknown returns its error and leaves the
    /// hold to its deadline. Stops renewing it either way.
    pub fn lose_held(&self, hold: &Arc<Hold>, reason: LostReason) {
        if Registry::count(hold) > 0 {
            hold.mark_lost(reason);
        } else {
            hold.note_gone_while_releasing(reason);
        }
        self.remove(hold);
    }
}
