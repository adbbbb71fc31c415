//! The observers of a hold's life (held, lost, released) and of a
//! watchdog round.

#[allow(unused_imports)]
use super::*;

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
