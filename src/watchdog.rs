//! The shared renewal thread: a registry of the locks this client holds,
//! renewed in batches at a third of the watchdog timeout (PROTOCOL §10).
//!
//! The registry is also where a guard learns that its lock was lost. Each
//! `(lock name, owner field)` pair this client holds has one [`Hold`]; every
//! guard of that pair shares it. A hold is lost, for good, when a renewal finds
//! the owner field gone, when its lease runs out by the local monotonic clock
//! before a renewal got through, or when the lock is force-unlocked here.
//!
//! The same thread deletes spent unlock latches in batches, off the unlock
//! path (Redisson sends one `DEL` per unlock; the keys also expire on their own).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;

use crate::connection::Connector;
use crate::error::{Error, Result};
use crate::scripts;

/// Locks per renewal script call (Redisson's `lockWatchdogBatchSize`).
pub(crate) const RENEWAL_BATCH_SIZE: usize = 100;

/// Unlock latches are collected for this long before one `UNLINK` deletes them.
const LATCH_FLUSH_DELAY: Duration = Duration::from_millis(100);

/// After a failed renewal run, the next one comes a tenth of the lease later,
/// within these bounds (and never later than the next regular tick): a server
/// that answers BUSY or LOADING for less than the lease minus one period must
/// not cost a lock, as it would if the retry waited a whole period.
const RENEWAL_RETRY_DELAY: Duration = Duration::from_secs(1);
const RENEWAL_RETRY_DELAY_MIN: Duration = Duration::from_millis(10);

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn nanos_since_epoch(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(*EPOCH).as_nanos()).unwrap_or(u64::MAX)
}

/// `sent + lease` in ns since [`EPOCH`], saturating (never "already over").
fn deadline_after(sent: Instant, lease: Duration) -> u64 {
    let lease = u64::try_from(lease.as_nanos()).unwrap_or(u64::MAX);
    nanos_since_epoch(sent).saturating_add(lease)
}

/// One thread's hold on one lock, shared by all its guards.
pub(crate) struct Hold {
    pub name: Arc<str>,
    pub field: Arc<str>,
    /// Local acquisitions not yet released.
    count: AtomicU32,
    /// Of those, how many were taken without an explicit lease: the
    /// watchdog renews the hold while there is at least one (Redisson drops
    /// the renewal with the unlock of the acquisition that registered it).
    renewers: AtomicU32,
    lost: AtomicBool,
    /// When the lease runs out if nothing renews it, in ns since [`EPOCH`].
    /// Computed from the moment the command was *sent*, so it errs early.
    deadline: AtomicU64,
}

impl Hold {
    /// Lost for good, or past its lease by the local clock.
    pub fn is_lost(&self) -> bool {
        if self.lost.load(Ordering::Acquire) {
            return true;
        }
        if nanos_since_epoch(Instant::now()) >= self.deadline.load(Ordering::Acquire) {
            self.lost.store(true, Ordering::Release);
            return true;
        }
        false
    }

    /// Marks the hold lost; `true` if it was not already.
    fn mark_lost(&self) -> bool {
        !self.lost.swap(true, Ordering::AcqRel)
    }

    /// Records that the lease was (re)set at `sent` for `lease`.
    pub fn leased(&self, sent: Instant, lease: Duration) {
        self.deadline
            .store(deadline_after(sent, lease), Ordering::Release);
    }

    fn renewed(&self, sent: Instant, lease: Duration) {
        self.deadline
            .fetch_max(deadline_after(sent, lease), Ordering::AcqRel);
    }

    fn held(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }
}

/// Every hold of one client, by lock name.
#[derive(Default)]
pub(crate) struct Registry {
    holds: Mutex<HashMap<String, Vec<Arc<Hold>>>>,
}

impl Registry {
    /// Records a successful acquire sent at `sent`: a reentry joins the
    /// thread's live hold, anything else starts a new one. `replaced`: Redis
    /// said the holds this thread counted on were gone, so its live hold (if
    /// any) is lost and this acquire starts a new one.
    pub fn acquired(
        &self,
        name: &Arc<str>,
        field: &str,
        lease: Duration,
        renew: bool,
        sent: Instant,
        replaced: bool,
    ) -> Arc<Hold> {
        let mut holds = self.holds.lock();
        let entry = match holds.get_mut(&**name) {
            Some(entry) => entry,
            None => holds.entry(name.to_string()).or_default(),
        };
        entry.retain(|hold| {
            if &*hold.field != field {
                return true;
            }
            if replaced {
                lost(hold, "it was gone when this thread took the lock again");
            }
            !hold.is_lost()
        });
        if let Some(hold) = entry.iter().find(|hold| &*hold.field == field) {
            hold.count.fetch_add(1, Ordering::AcqRel);
            hold.renewers.fetch_add(u32::from(renew), Ordering::AcqRel);
            hold.leased(sent, lease);
            return Arc::clone(hold);
        }
        let hold = Arc::new(Hold {
            name: Arc::clone(name),
            field: field.into(),
            count: AtomicU32::new(1),
            renewers: AtomicU32::new(u32::from(renew)),
            lost: AtomicBool::new(false),
            deadline: AtomicU64::new(0),
        });
        hold.leased(sent, lease);
        entry.push(Arc::clone(&hold));
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

    /// How many acquisitions this owner counts on `name`: those of its hold
    /// that is not lost, or 0.
    pub fn live_count(&self, name: &str, field: &str) -> u32 {
        self.holds.lock().get(name).map_or(0, |entry| {
            entry
                .iter()
                .find(|hold| &*hold.field == field && !hold.is_lost())
                .map_or(0, |hold| hold.count.load(Ordering::Acquire))
        })
    }

    /// The holds on `name` right now.
    pub fn holds_on(&self, name: &str) -> Vec<Arc<Hold>> {
        self.holds.lock().get(name).cloned().unwrap_or_default()
    }

    /// Number of holds (one per thread and lock) currently registered.
    pub fn len(&self) -> usize {
        self.holds.lock().values().map(Vec::len).sum()
    }

    fn remove(&self, hold: &Arc<Hold>) {
        let mut holds = self.holds.lock();
        if let Some(entry) = holds.get_mut(&*hold.name) {
            entry.retain(|other| !Arc::ptr_eq(other, hold));
            if entry.is_empty() {
                holds.remove(&*hold.name);
            }
        }
    }

    fn renewable(&self) -> Vec<Arc<Hold>> {
        self.holds
            .lock()
            .values()
            .flatten()
            .filter(|hold| hold.renewers.load(Ordering::Acquire) > 0)
            .cloned()
            .collect()
    }

    /// Marks `hold` lost and stops renewing it; logs once if a guard still
    /// relies on it.
    pub fn lose(&self, hold: &Arc<Hold>, why: &str) {
        lost(hold, why);
        self.remove(hold);
    }
}

/// Marks `hold` lost, with a warning the first time if a guard still relies on it.
fn lost(hold: &Hold, why: &str) {
    if hold.mark_lost() && hold.held() {
        log::warn!(
            "redisson-lock: lock `{}` held by {} was lost: {why}",
            hold.name,
            hold.field
        );
    }
}

/// The client's renewal thread. Dropping this stops it.
pub(crate) struct Watchdog {
    /// Spent unlock latches waiting for the next batched `UNLINK`.
    latches: Arc<Mutex<Vec<String>>>,
    /// Wakes the thread when a batch starts; dropping it stops the thread.
    wake: Sender<()>,
}

impl Watchdog {
    /// Starts the thread, which renews `registry`'s watchdog-mode holds to
    /// `lease` every `lease / 3`.
    pub fn start(registry: Arc<Registry>, connector: Connector, lease: Duration) -> Result<Self> {
        let (wake, wake_rx) = crossbeam_channel::bounded(1);
        let latches = Arc::new(Mutex::new(Vec::new()));
        let worker = Worker {
            registry,
            connector,
            con: None,
            lease,
            wake_rx,
            latches: Arc::clone(&latches),
        };
        thread::Builder::new()
            .name("rlock-watchdog".into())
            .spawn(move || worker.run())
            .map_err(|e| Error::Unavailable {
                reason: format!("cannot start the watchdog thread: {e}"),
            })?;
        Ok(Watchdog { latches, wake })
    }

    /// Schedules deletion of a spent unlock latch.
    pub fn discard_latch(&self, latch: String) {
        let first = {
            let mut latches = self.latches.lock();
            latches.push(latch);
            latches.len() == 1
        };
        // Only the first latch of a batch wakes the thread: one wake-up per
        // flush instead of one per unlock, each a context switch on the
        // unlocking thread's CPU. A full channel means a wake-up is already
        // pending; a disconnected one, that the thread is gone and the key
        // will expire by itself.
        if first {
            let _ = self.wake.try_send(());
        }
    }
}

struct Worker {
    registry: Arc<Registry>,
    connector: Connector,
    con: Option<redis::Connection>,
    lease: Duration,
    wake_rx: Receiver<()>,
    latches: Arc<Mutex<Vec<String>>>,
}

impl Worker {
    fn run(mut self) {
        let period = self.lease / 3;
        let mut next_tick = Instant::now() + period;
        let mut next_flush: Option<Instant> = None;
        loop {
            let wake = next_flush.map_or(next_tick, |flush| flush.min(next_tick));
            match self.wake_rx.recv_deadline(wake) {
                Ok(()) => {
                    next_flush.get_or_insert_with(|| Instant::now() + LATCH_FLUSH_DELAY);
                    continue;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.flush_latches();
                    return;
                }
            }
            let now = Instant::now();
            if next_flush.is_some_and(|flush| flush <= now) {
                self.flush_latches();
                next_flush = None;
            }
            if next_tick <= now {
                let delay = if self.renew_all() {
                    period
                } else {
                    (self.lease / 10)
                        .clamp(RENEWAL_RETRY_DELAY_MIN, RENEWAL_RETRY_DELAY)
                        .min(period)
                };
                next_tick = Instant::now() + delay;
            }
        }
    }

    fn connection(&mut self) -> Result<&mut redis::Connection> {
        if self.con.is_none() {
            self.con = Some(self.connector.connect()?);
        }
        self.con.as_mut().ok_or_else(|| Error::Unavailable {
            reason: "no watchdog connection".into(),
        })
    }

    /// One renewal run; `false` if some locks could not be renewed this time.
    fn renew_all(&mut self) -> bool {
        let mut due = Vec::new();
        for hold in self.registry.renewable() {
            if hold.is_lost() {
                self.registry
                    .lose(&hold, "its lease ran out before it could be renewed");
            } else {
                due.push(hold);
            }
        }
        let lease_ms = u64::try_from(self.lease.as_millis()).unwrap_or(u64::MAX);
        for chunk in due.chunks(RENEWAL_BATCH_SIZE) {
            let mut sent = Instant::now();
            let mut result = self.renew_chunk(chunk, lease_ms);
            if result.as_ref().is_err_and(Error::is_connection_dropped) {
                // The connection died since the last run (a server restart):
                // the renewal never ran, so send it on a new one now rather
                // than a retry delay later.
                self.con = None;
                sent = Instant::now();
                result = self.renew_chunk(chunk, lease_ms);
            }
            match result {
                Ok(renewed) => {
                    for (hold, still_held) in chunk.iter().zip(renewed) {
                        if !still_held {
                            self.registry.lose(hold, "its key or owner field is gone");
                        } else if hold.is_lost() {
                            // Renewed too late to trust: stop renewing; the
                            // guard's unlock deletes what is left.
                            self.registry.remove(hold);
                        } else {
                            hold.renewed(sent, self.lease);
                        }
                    }
                }
                Err(e) => {
                    log::warn!(
                        "redisson-lock: can't renew {} lock(s), will retry: {e}",
                        due.len()
                    );
                    if e.is_transient() {
                        self.con = None;
                    }
                    return false;
                }
            }
        }
        true
    }

    fn renew_chunk(&mut self, chunk: &[Arc<Hold>], lease_ms: u64) -> Result<Vec<bool>> {
        let con = self.connection()?;
        let pairs = chunk.iter().map(|hold| (&*hold.name, &*hold.field));
        scripts::renew_batch(con, pairs, lease_ms)
    }

    fn flush_latches(&mut self) {
        let latches = std::mem::take(&mut *self.latches.lock());
        if latches.is_empty() {
            return;
        }
        let result = self.connection().and_then(|con| {
            for chunk in latches.chunks(1000) {
                redis::cmd("UNLINK").arg(chunk).query::<()>(con)?;
            }
            Ok(())
        });
        if let Err(e) = result {
            // Harmless: latches expire on their own within seconds.
            log::debug!("redisson-lock: can't delete unlock latches: {e}");
            if e.is_transient() {
                self.con = None;
            }
        }
    }
}
