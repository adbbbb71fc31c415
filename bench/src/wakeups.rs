//! Scenario 11's count of wake-ups (the `wakeups` feature): a metrics
//! recorder that counts `redisson_lock_wakeups_total` by cause and drops
//! every other metric. A parked waiter that wakes makes exactly one acquire
//! attempt, so wake-ups per release are the attempts a release causes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use metrics::{
    Counter, CounterFn, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

/// Wake-ups so far: by a message, by the holder's TTL elapsing, by a poll.
pub static MESSAGE: AtomicU64 = AtomicU64::new(0);
pub static TTL_ELAPSED: AtomicU64 = AtomicU64::new(0);
pub static POLL: AtomicU64 = AtomicU64::new(0);

struct Cause(&'static AtomicU64);

impl CounterFn for Cause {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::Relaxed);
    }
    fn absolute(&self, value: u64) {
        self.0.fetch_max(value, Ordering::Relaxed);
    }
}

struct Wakeups;

impl Recorder for Wakeups {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        if key.name() != "redisson_lock_wakeups_total" {
            return Counter::noop();
        }
        let cause = key.labels().find(|l| l.key() == "cause").map(|l| l.value());
        match cause {
            Some("message") => Counter::from_arc(Arc::new(Cause(&MESSAGE))),
            Some("ttl_elapsed") => Counter::from_arc(Arc::new(Cause(&TTL_ELAPSED))),
            Some("poll") => Counter::from_arc(Arc::new(Cause(&POLL))),
            _ => Counter::noop(),
        }
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// Installs the recorder (once; later calls do nothing).
pub fn install() {
    let _ = metrics::set_global_recorder(Wakeups);
}

/// Wake-ups so far: (message, TTL elapsed, poll).
pub fn counts() -> (u64, u64, u64) {
    (
        MESSAGE.load(Ordering::Relaxed),
        TTL_ELAPSED.load(Ordering::Relaxed),
        POLL.load(Ordering::Relaxed),
    )
}
