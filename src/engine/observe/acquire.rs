//! The observers of an acquire call and of a guard's release.

#[allow(unused_imports)]
use super::*;

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

    /// The release ended with `outcome`, the hold having begun at `since`
    /// (its duration is read only when a span records it).
    #[inline]
    pub fn finish(self, outcome: ReleaseOutcome, since: Instant, error: Option<&Error>) {
        let _ = (outcome, since, error);
        #[cfg(feature = "tracing")]
        if !self.span.is_disabled() {
            self.span.record("lock.outcome", outcome.as_str());
            self.span
                .record("lock.held_for_ms", millis(since.elapsed()));
            if let Some(error) = error {
                self.span.record("error.type", error_type(error));
            }
        }
    }
}
