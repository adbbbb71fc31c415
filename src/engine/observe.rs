//! Tracing spans and metrics, written once for every lock kind and
//! topology: the waiting loop, the guards' release, the holds and the
//! watchdog call the small observers here, and nothing else of the crate
//! names `tracing` or `metrics`.
//!
//! Both are off by default (features `tracing` and `metrics`). With a
//! feature off its half of every observer is compiled out: the types are
//! empty and their methods do nothing, so call sites carry no `cfg`. With
//! a feature on and no subscriber or recorder installed, the cost is the
//! facades' own: `tracing` checks a callsite's interest before it formats
//! a field; `metrics` builds a key (a small label vector) per update and
//! hands it to its no-op recorder.
//!
//! # Spans (target `redisson_lock`, level INFO)
//!
//! - `lock.acquire`: `lock.name`, `lock.kind` (the Redisson class),
//!   `lock.wait_ms` (absent: no limit), `lock.lease_ms`,
//!   `db.system.name = "redis"`; at the end `lock.outcome` (acquired,
//!   reentered, busy, timeout, error), `lock.attempts`, `lock.waited_ms`,
//!   `lock.fencing_token` (fenced locks), `error.type` (on an error).
//! - `lock.release`: `lock.name`, `lock.kind`, `db.system.name`; at the end
//!   `lock.outcome` (released, still_held, lost, not_held, error),
//!   `lock.held_for_ms`, `error.type`.
//! - `lock.renew`: one per watchdog round trip (per node in a cluster):
//!   `lock.batch_size`, `server.address`, `server.port`, `db.system.name`;
//!   at the end `lock.renewed`, `lock.not_held`, `lock.failed`, `error.type`.
//!
//! Events: WARN "lock lost" (`lock.name`, `lock.owner`, `lock.kind`,
//! `lock.lost_reason`, `lock.held_for_ms`, `lock.since_renewal_ms`) once
//! per hold; WARN "renewal failed" (`error.type`, `error.message`) once per
//! hold and run of failures, DEBUG for the further failures of the run.
//!
//! # Metrics
//!
//! See [`describe`] for the names, units and labels.

#[cfg(feature = "metrics")]
use std::sync::Arc;
#[cfg(feature = "tracing")]
use std::sync::atomic::AtomicU64;
#[cfg(any(feature = "tracing", feature = "metrics"))]
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, LostReason};

/// The application's mapping of lock names to a bounded `lock` label.
#[cfg(feature = "metrics")]
pub(crate) type LockLabel = dyn Fn(&str) -> Option<String> + Send + Sync;

/// The client's observability settings; empty without the `metrics`
/// feature. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Settings {
    #[cfg(feature = "metrics")]
    lock_label: Option<Arc<LockLabel>>,
}

impl Settings {
    /// Settings that add a `lock` label wherever `label` maps a lock name
    /// to `Some`.
    #[cfg(feature = "metrics")]
    pub fn with_lock_label(label: Arc<LockLabel>) -> Settings {
        Settings {
            lock_label: Some(label),
        }
    }

    /// The `lock` label of `name`, if the application maps it to one.
    #[cfg(feature = "metrics")]
    fn lock_label(&self, name: &str) -> Option<String> {
        self.lock_label.as_ref().and_then(|label| label(name))
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = f.debug_struct("Settings");
        #[cfg(feature = "metrics")]
        s.field("lock_label", &self.lock_label.is_some());
        s.finish()
    }
}

#[cfg(feature = "metrics")]
mod names {
    pub const ACQUIRE_DURATION: &str = "redisson_lock_acquire_duration_seconds";
    pub const HOLD_DURATION: &str = "redisson_lock_hold_duration_seconds";
    pub const CONTENDED: &str = "redisson_lock_contended_total";
    pub const LOST: &str = "redisson_lock_lost_total";
    pub const RENEWALS: &str = "redisson_lock_renewals_total";
    pub const HELD: &str = "redisson_lock_held";
    pub const WAITERS: &str = "redisson_lock_waiters";
    pub const WAKEUPS: &str = "redisson_lock_wakeups_total";
}

/// Describes the crate's metrics to the installed recorder, once per
/// process (the first client built; a recorder installed later gets the
/// values without the descriptions):
///
/// | name | type (unit) | labels |
/// |---|---|---|
/// | `redisson_lock_acquire_duration_seconds` | histogram (s) | `kind`, `outcome`: acquired, reentered, busy, timeout, error |
/// | `redisson_lock_hold_duration_seconds` | histogram (s) | `kind`, `outcome`: released, lost |
/// | `redisson_lock_contended_total` | counter | `kind` |
/// | `redisson_lock_lost_total` | counter | `kind`, `reason` |
/// | `redisson_lock_renewals_total` | counter | `outcome`: ok, not_held, error |
/// | `redisson_lock_held` | gauge | `kind` |
/// | `redisson_lock_waiters` | gauge | `kind` |
/// | `redisson_lock_wakeups_total` | counter | `cause`: message, ttl_elapsed, poll |
///
/// Every metric with a `kind` label also gets a `lock` label when the
/// client's lock-label mapping gives one.
pub(crate) fn describe() {
    #[cfg(feature = "metrics")]
    {
        use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
        static DESCRIBED: std::sync::Once = std::sync::Once::new();
        DESCRIBED.call_once(|| {
            describe_histogram!(
                names::ACQUIRE_DURATION,
                Unit::Seconds,
                "Time a lock call took, first attempt to outcome, by lock type and outcome"
            );
            describe_histogram!(
                names::HOLD_DURATION,
                Unit::Seconds,
                "Time a hold lasted, first acquisition to its release or loss"
            );
            describe_counter!(
                names::CONTENDED,
                Unit::Count,
                "Lock calls whose first attempt found the lock held by another owner"
            );
            describe_counter!(names::LOST, Unit::Count, "Holds lost, by reason");
            describe_counter!(
                names::RENEWALS,
                Unit::Count,
                "Watchdog renewals of one hold, by outcome"
            );
            describe_gauge!(names::HELD, Unit::Count, "Holds of this process right now");
            describe_gauge!(
                names::WAITERS,
                Unit::Count,
                "Threads of this process waiting for a lock right now"
            );
            describe_counter!(
                names::WAKEUPS,
                Unit::Count,
                "Wake-ups of waiting threads: an unlock message, the holder's TTL elapsed, a spin lock's poll"
            );
        });
    }
}

/// The labels `kind`, one more (`outcome`, `reason`) and `lock` if mapped.
#[cfg(feature = "metrics")]
fn labels(
    kind: &'static str,
    extra: Option<(&'static str, &'static str)>,
    lock: Option<&str>,
) -> Vec<metrics::Label> {
    let mut labels = Vec::with_capacity(3);
    labels.push(metrics::Label::from_static_parts("kind", kind));
    if let Some((key, value)) = extra {
        labels.push(metrics::Label::from_static_parts(key, value));
    }
    if let Some(lock) = lock {
        labels.push(metrics::Label::new("lock", lock.to_owned()));
    }
    labels
}

/// The `error.type` of `error`: its variant, in snake case; a Redis error
/// reply's code when it has one.
#[cfg(feature = "tracing")]
fn error_type(error: &Error) -> &'static str {
    match error {
        Error::NotHeld { .. } => "not_held",
        Error::Lost { .. } => "lost",
        Error::Unavailable { .. } => "unavailable",
        Error::TlsCertificate { .. } => "tls_certificate",
        Error::Timeout { .. } => "timeout",
        Error::Redis(e) if e.is_timeout() => "timeout",
        Error::Redis(e) if e.is_connection_dropped() || e.is_io_error() => "io",
        Error::Redis(_) => "redis",
        Error::UnexpectedReply(_) => "unexpected_reply",
        Error::ForkedProcess { .. } => "forked_process",
        Error::NotReentrant { .. } => "not_reentrant",
        Error::NotReplicated { .. } => "not_replicated",
        Error::InvalidArgument(_) => "invalid_argument",
        #[allow(unreachable_patterns)]
        _ => "other",
    }
}

/// A [`LostReason`] as a label value.
#[cfg(any(feature = "tracing", feature = "metrics"))]
fn reason_label(reason: LostReason) -> &'static str {
    match reason {
        LostReason::LeaseExpired => "lease_expired",
        LostReason::KeyGone => "key_gone",
        LostReason::Overwritten => "overwritten",
        LostReason::ForceUnlocked => "force_unlocked",
        LostReason::Replaced => "replaced",
        LostReason::Released => "released",
    }
}

#[cfg(feature = "tracing")]
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The entered INFO span `$span` (target `redisson_lock`) of the lock
/// `$name` of class `$kind`: `lock.name`, `lock.kind`, then `$fields`.
#[cfg(feature = "tracing")]
macro_rules! lock_span {
    ($span:literal, $name:expr, $kind:expr, $($fields:tt)*) => {
        tracing::info_span!(
            target: "redisson_lock",
            $span,
            lock.name = $name,
            lock.kind = $kind,
            $($fields)*
        )
        .entered()
    };
}

/// How an acquire call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcquireOutcome {
    /// A new hold.
    Acquired,
    /// One more acquisition of a hold the owner had.
    Reentered,
    /// `try_lock`: held by another owner, no wait asked.
    Busy,
    /// A timed wait ran out.
    Timeout,
    /// An error ended the call.
    Error,
}

impl AcquireOutcome {
    /// The label value.
    #[cfg(any(feature = "tracing", feature = "metrics"))]
    fn as_str(self) -> &'static str {
        match self {
            AcquireOutcome::Acquired => "acquired",
            AcquireOutcome::Reentered => "reentered",
            AcquireOutcome::Busy => "busy",
            AcquireOutcome::Timeout => "timeout",
            AcquireOutcome::Error => "error",
        }
    }
}

/// Why a waiting thread woke up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wakeup {
    /// An unlock message (or the subscription moved).
    Message,
    /// The holder's TTL slice (or the caller's budget) elapsed.
    TtlElapsed,
    /// A spin lock's backoff sleep.
    Poll,
}

/// One acquire call, from its first attempt to its outcome: the
/// `lock.acquire` span (entered on the calling thread for the call's
/// duration), `redisson_lock_acquire_duration_seconds`,
/// `redisson_lock_contended_total`, `redisson_lock_waiters` and
/// `redisson_lock_wakeups_total`.
pub(crate) struct Acquiring {
    #[cfg(any(feature = "tracing", feature = "metrics"))]
    started: Instant,
    #[cfg(any(feature = "tracing", feature = "metrics"))]
    attempts: u32,
    #[cfg(feature = "metrics")]
    kind: &'static str,
    #[cfg(feature = "metrics")]
    lock: Option<String>,
    #[cfg(feature = "metrics")]
    waiting: bool,
    #[cfg(feature = "tracing")]
    span: tracing::span::EnteredSpan,
}

impl Acquiring {
    /// An acquire call of the lock `name` of Redisson class `kind` starts,
    /// with `wait` (`None`: no limit) and `lease` asked.
    #[inline]
    pub fn start(
        settings: &Settings,
        kind: &'static str,
        name: &str,
        wait: Option<Duration>,
        lease: Duration,
    ) -> Acquiring {
        let _ = (settings, kind, name, wait, lease);
        Acquiring {
            #[cfg(any(feature = "tracing", feature = "metrics"))]
            started: Instant::now(),
            #[cfg(any(feature = "tracing", feature = "metrics"))]
            attempts: 0,
            #[cfg(feature = "metrics")]
            kind,
            #[cfg(feature = "metrics")]
            lock: settings.lock_label(name),
            #[cfg(feature = "metrics")]
            waiting: false,
            #[cfg(feature = "tracing")]
            span: lock_span!(
                "lock.acquire",
                name,
                kind,
                lock.wait_ms = wait.map(millis),
                lock.lease_ms = millis(lease),
                db.system.name = "redis",
                lock.outcome = tracing::field::Empty,
                lock.attempts = tracing::field::Empty,
                lock.waited_ms = tracing::field::Empty,
                lock.fencing_token = tracing::field::Empty,
                error.type = tracing::field::Empty,
            ),
        }
    }

    /// One more acquire attempt was sent.
    #[inline]
    pub fn attempted(&mut self) {
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        {
            self.attempts = self.attempts.saturating_add(1);
        }
    }

    /// The first attempt found the lock held by another owner.
    #[inline]
    pub fn contended(&mut self) {
        #[cfg(feature = "metrics")]
        metrics::counter!(
            names::CONTENDED,
            labels(self.kind, None, self.lock.as_deref())
        )
        .increment(1);
    }

    /// `redisson_lock_waiters` of this call's lock.
    #[cfg(feature = "metrics")]
    fn waiters(&self) -> metrics::Gauge {
        metrics::gauge!(
            names::WAITERS,
            labels(self.kind, None, self.lock.as_deref())
        )
    }

    /// The thread starts waiting (`redisson_lock_waiters` + 1).
    #[inline]
    pub fn waiting(&mut self) {
        #[cfg(feature = "metrics")]
        if !std::mem::replace(&mut self.waiting, true) {
            self.waiters().increment(1.0);
        }
    }

    /// The thread stops waiting (`redisson_lock_waiters` - 1, if it was).
    #[inline]
    pub fn left_wait(&mut self) {
        #[cfg(feature = "metrics")]
        if std::mem::replace(&mut self.waiting, false) {
            self.waiters().decrement(1.0);
        }
    }

    /// A wait ended, for `cause`.
    #[inline]
    pub fn woken(&self, cause: Wakeup) {
        let _ = cause;
        #[cfg(feature = "metrics")]
        {
            let cause = match cause {
                Wakeup::Message => "message",
                Wakeup::TtlElapsed => "ttl_elapsed",
                Wakeup::Poll => "poll",
            };
            metrics::counter!(names::WAKEUPS, "cause" => cause).increment(1);
        }
    }

    /// The call ended with `outcome`: a fencing `token` for a fenced lock's
    /// acquisition, the `error` that ended it.
    #[inline]
    pub fn finish(mut self, outcome: AcquireOutcome, token: Option<u64>, error: Option<&Error>) {
        let _ = (outcome, token, error);
        self.left_wait();
        #[cfg(feature = "metrics")]
        metrics::histogram!(
            names::ACQUIRE_DURATION,
            labels(
                self.kind,
                Some(("outcome", outcome.as_str())),
                self.lock.as_deref()
            )
        )
        .record(self.started.elapsed().as_secs_f64());
        #[cfg(feature = "tracing")]
        if !self.span.is_disabled() {
            let span = &self.span;
            span.record("lock.outcome", outcome.as_str());
            span.record("lock.attempts", self.attempts);
            span.record("lock.waited_ms", millis(self.started.elapsed()));
            if let Some(token) = token {
                span.record("lock.fencing_token", token);
            }
            if let Some(error) = error {
                span.record("error.type", error_type(error));
            }
        }
    }
}

impl Drop for Acquiring {
    fn drop(&mut self) {
        self.left_wait();
    }
}

/// How a guard's release ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReleaseOutcome {
    /// The owner's last hold is released.
    Released,
    /// One acquisition released, the owner still holds the lock.
    StillHeld,
    /// The hold was known lost.
    Lost,
    /// Redis said the owner did not hold it.
    NotHeld,
    /// The release failed.
    Error,
}

impl ReleaseOutcome {
    #[cfg(feature = "tracing")]
    fn as_str(self) -> &'static str {
        match self {
            ReleaseOutcome::Released => "released",
            ReleaseOutcome::StillHeld => "still_held",
            ReleaseOutcome::Lost => "lost",
            ReleaseOutcome::NotHeld => "not_held",
            ReleaseOutcome::Error => "error",
        }
    }
}

/// One guard's release: the `lock.release` span. (The hold's duration is
/// recorded when the hold ends, by [`HoldObserver`].)
pub(crate) struct Releasing {
    #[cfg(feature = "tracing")]
    span: tracing::span::EnteredSpan,
}

impl Releasing {
    /// A release of the lock `name` of class `kind` starts.
    #[inline]
    pub fn start(kind: &'static str, name: &str) -> Releasing {
        let _ = (kind, name);
        Releasing {
            #[cfg(feature = "tracing")]
            span: lock_span!(
                "lock.release",
                name,
                kind,
                db.system.name = "redis",
                lock.outcome = tracing::field::Empty,
                lock.held_for_ms = tracing::field::Empty,
                error.type = tracing::field::Empty,
            ),
        }
    }

    /// The release ended with `outcome`, `held_for` after the hold began.
    #[inline]
    pub fn finish(self, outcome: ReleaseOutcome, held_for: Duration, error: Option<&Error>) {
        let _ = (outcome, held_for, error);
        #[cfg(feature = "tracing")]
        if !self.span.is_disabled() {
            self.span.record("lock.outcome", outcome.as_str());
            self.span.record("lock.held_for_ms", millis(held_for));
            if let Some(error) = error {
                self.span.record("error.type", error_type(error));
            }
        }
    }
}

/// A hold's share of the metrics and events: `redisson_lock_held` (+1 when
/// made, -1 exactly once when it is over: ended, lost, or dropped), the
/// hold duration, `redisson_lock_lost_total` and the "lock lost" and
/// "renewal failed" events.
pub(crate) struct HoldObserver {
    /// The hold is over (or was never counted): nothing more to record.
    #[cfg(any(feature = "tracing", feature = "metrics"))]
    over: AtomicBool,
    #[cfg(any(feature = "tracing", feature = "metrics"))]
    kind: &'static str,
    #[cfg(feature = "metrics")]
    lock: Option<String>,
    /// The last successful renewal, ns after the hold began (0: none).
    #[cfg(feature = "tracing")]
    renewed_at: AtomicU64,
}

impl HoldObserver {
    /// For a hold that is not counted (not yet registered).
    pub fn inert() -> HoldObserver {
        HoldObserver {
            #[cfg(any(feature = "tracing", feature = "metrics"))]
            over: AtomicBool::new(true),
            #[cfg(any(feature = "tracing", feature = "metrics"))]
            kind: "",
            #[cfg(feature = "metrics")]
            lock: None,
            #[cfg(feature = "tracing")]
            renewed_at: AtomicU64::new(0),
        }
    }

    /// A new hold on the lock `name` of class `kind`: `redisson_lock_held`
    /// + 1.
    pub fn held(settings: &Settings, kind: &'static str, name: &str) -> HoldObserver {
        let _ = (settings, kind, name);
        let observer = HoldObserver {
            #[cfg(any(feature = "tracing", feature = "metrics"))]
            over: AtomicBool::new(false),
            #[cfg(any(feature = "tracing", feature = "metrics"))]
            kind,
            #[cfg(feature = "metrics")]
            lock: settings.lock_label(name),
            #[cfg(feature = "tracing")]
            renewed_at: AtomicU64::new(0),
        };
        #[cfg(feature = "metrics")]
        metrics::gauge!(names::HELD, labels(kind, None, observer.lock.as_deref())).increment(1.0);
        observer
    }

    /// Whether this call is the one that ends the hold's count.
    #[cfg(any(feature = "tracing", feature = "metrics"))]
    fn settle(&self) -> bool {
        let first = !self.over.swap(true, Ordering::AcqRel);
        #[cfg(feature = "metrics")]
        if first {
            metrics::gauge!(names::HELD, labels(self.kind, None, self.lock.as_deref()))
                .decrement(1.0);
        }
        first
    }

    /// A renewal of the hold that began at `since` got through.
    #[inline]
    pub fn renewed(&self, since: Instant) {
        let _ = since;
        #[cfg(feature = "tracing")]
        {
            let at = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.renewed_at.store(at.max(1), Ordering::Relaxed);
        }
    }

    /// A renewal of the hold failed with `error`; `first` of its run.
    pub fn renewal_failed(&self, name: &str, owner: &str, error: &Error, first: bool) {
        let _ = (name, owner, error, first);
        #[cfg(feature = "tracing")]
        {
            macro_rules! failed {
                ($level:ident) => {
                    tracing::$level!(
                        target: "redisson_lock",
                        {
                            lock.name = name,
                            lock.owner = owner,
                            lock.kind = self.kind,
                            error.type = error_type(error),
                            error.message = %error
                        },
                        "renewal failed"
                    )
                };
            }
            if first {
                failed!(warn);
            } else {
                failed!(debug);
            }
        }
    }

    /// The hold that began at `since` ended by its release.
    pub fn released(&self, since: Instant) {
        let _ = since;
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        if self.settle() {
            #[cfg(feature = "metrics")]
            metrics::histogram!(
                names::HOLD_DURATION,
                labels(
                    self.kind,
                    Some(("outcome", "released")),
                    self.lock.as_deref()
                )
            )
            .record(since.elapsed().as_secs_f64());
        }
    }

    /// The hold on `name` by `owner` that began at `since` is lost, for
    /// `reason`: counted and reported the first time only.
    pub fn lost(&self, name: &str, owner: &str, reason: LostReason, since: Instant) {
        let _ = (name, owner, reason, since);
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        if self.settle() {
            let held_for = since.elapsed();
            #[cfg(feature = "metrics")]
            {
                let lock = self.lock.as_deref();
                metrics::histogram!(
                    names::HOLD_DURATION,
                    labels(self.kind, Some(("outcome", "lost")), lock)
                )
                .record(held_for.as_secs_f64());
                metrics::counter!(
                    names::LOST,
                    labels(self.kind, Some(("reason", reason_label(reason))), lock)
                )
                .increment(1);
            }
            #[cfg(feature = "tracing")]
            {
                let renewed = Duration::from_nanos(self.renewed_at.load(Ordering::Relaxed));
                tracing::warn!(
                    target: "redisson_lock",
                    {
                        lock.name = name,
                        lock.owner = owner,
                        lock.kind = self.kind,
                        lock.lost_reason = reason_label(reason),
                        lock.held_for_ms = millis(held_for),
                        lock.since_renewal_ms = millis(held_for.saturating_sub(renewed))
                    },
                    "lock lost"
                );
            }
        }
    }
}

impl Drop for HoldObserver {
    fn drop(&mut self) {
        // A hold dropped without ending or being lost (its release failed):
        // it is not held any more either way.
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        let _ = self.settle();
    }
}

/// How one hold fared in a renewal round trip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RenewOutcome {
    /// Renewed.
    Ok,
    /// Gone or overwritten: lost.
    NotHeld,
    /// Not renewed this time (an error); retried.
    Error,
}

/// One watchdog round trip: the `lock.renew` span and
/// `redisson_lock_renewals_total`.
pub(crate) struct Renewing {
    #[cfg(any(feature = "tracing", feature = "metrics"))]
    counts: [u64; 3],
    #[cfg(feature = "tracing")]
    error: Option<&'static str>,
    #[cfg(feature = "tracing")]
    span: tracing::span::EnteredSpan,
}

impl Renewing {
    /// A round trip renewing `batch` holds starts, to the server `address`
    /// (`host:port`; asked only when the span is recorded).
    #[inline]
    pub fn start(batch: usize, address: impl FnOnce() -> Option<String>) -> Renewing {
        let _ = (batch, &address);
        Renewing {
            #[cfg(any(feature = "tracing", feature = "metrics"))]
            counts: [0; 3],
            #[cfg(feature = "tracing")]
            error: None,
            #[cfg(feature = "tracing")]
            span: {
                let span = tracing::info_span!(
                    target: "redisson_lock",
                    "lock.renew",
                    lock.batch_size = batch,
                    db.system.name = "redis",
                    server.address = tracing::field::Empty,
                    server.port = tracing::field::Empty,
                    lock.renewed = tracing::field::Empty,
                    lock.not_held = tracing::field::Empty,
                    lock.failed = tracing::field::Empty,
                    error.type = tracing::field::Empty,
                );
                if !span.is_disabled()
                    && let Some(address) = address()
                {
                    match address.rsplit_once(':') {
                        Some((host, port)) if port.parse::<u16>().is_ok() => {
                            span.record("server.address", host);
                            span.record("server.port", port.parse::<u16>().unwrap_or(0));
                        }
                        _ => {
                            span.record("server.address", address.as_str());
                        }
                    }
                }
                span.entered()
            },
        }
    }

    /// `n` holds fared `outcome`; `error` when it was one.
    #[inline]
    pub fn count(&mut self, outcome: RenewOutcome, n: usize, error: Option<&Error>) {
        let _ = (outcome, n, error);
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        {
            let n = u64::try_from(n).unwrap_or(u64::MAX);
            self.counts[outcome as usize] = self.counts[outcome as usize].saturating_add(n);
        }
        #[cfg(feature = "tracing")]
        if let Some(error) = error {
            self.error.get_or_insert(error_type(error));
        }
    }
}

impl Drop for Renewing {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        for (outcome, n) in ["ok", "not_held", "error"].into_iter().zip(self.counts) {
            if n > 0 {
                metrics::counter!(names::RENEWALS, "outcome" => outcome).increment(n);
            }
        }
        #[cfg(feature = "tracing")]
        if !self.span.is_disabled() {
            let [renewed, not_held, failed] = self.counts;
            self.span.record("lock.renewed", renewed);
            self.span.record("lock.not_held", not_held);
            self.span.record("lock.failed", failed);
            if let Some(error) = self.error {
                self.span.record("error.type", error);
            }
        }
    }
}
