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
        Error::NotALock { .. } => "not_a_lock",
        Error::OutcomeUnknown { .. } => "outcome_unknown",
        Error::InvalidArgument(_) => "invalid_argument",
        Error::Cancelled => "cancelled",
        Error::Closed => "closed",
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
        LostReason::Shutdown => "shutdown",
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

mod acquire;
mod hold;

pub(crate) use acquire::{AcquireOutcome, Acquiring, ReleaseOutcome, Releasing, Wakeup};
pub(crate) use hold::{HoldObserver, RenewOutcome, Renewing};
