//! The `tracing` spans and events and the `metrics` of the features of the
//! same names, against a real redis-server: a capturing subscriber and
//! metrics-util's debugging recorder, both installed globally once for this
//! binary (the watchdog's and the subscriber's threads must see them too).
//! Tests run in parallel: each uses its own lock kinds and names, and the
//! histogram values (drained by every snapshot) are kept in one store.

#![cfg(all(feature = "tracing", feature = "metrics"))]

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};
use redisson_lock::Client;
use support::{RedisServer, eventually};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

// ---- a capturing tracing subscriber ----

type Fields = HashMap<String, String>;

#[derive(Default)]
struct Captured {
    /// Every span: its name and fields (as recorded so far).
    spans: HashMap<u64, (&'static str, Fields)>,
    /// Every event: level, message and fields.
    events: Vec<(tracing::Level, Fields)>,
}

struct Capture {
    next: AtomicU64,
    seen: Mutex<Captured>,
}

struct Visitor<'a>(&'a mut Fields);

impl Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut fields = Fields::new();
        span.record(&mut Visitor(&mut fields));
        let mut seen = self.seen.lock().expect("capture");
        seen.spans.insert(id, (span.metadata().name(), fields));
        Id::from_u64(id)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut seen = self.seen.lock().expect("capture");
        if let Some((_, fields)) = seen.spans.get_mut(&span.into_u64()) {
            values.record(&mut Visitor(fields));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::new();
        event.record(&mut Visitor(&mut fields));
        let level = *event.metadata().level();
        self.seen
            .lock()
            .expect("capture")
            .events
            .push((level, fields));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let capture: &'static Capture = Box::leak(Box::new(Capture {
            next: AtomicU64::new(1),
            seen: Mutex::default(),
        }));
        struct Forward(&'static Capture);
        impl Subscriber for Forward {
            fn enabled(&self, m: &Metadata<'_>) -> bool {
                self.0.enabled(m)
            }
            fn new_span(&self, span: &Attributes<'_>) -> Id {
                self.0.new_span(span)
            }
            fn record(&self, span: &Id, values: &Record<'_>) {
                self.0.record(span, values)
            }
            fn record_follows_from(&self, a: &Id, b: &Id) {
                self.0.record_follows_from(a, b)
            }
            fn event(&self, event: &Event<'_>) {
                self.0.event(event)
            }
            fn enter(&self, span: &Id) {
                self.0.enter(span)
            }
            fn exit(&self, span: &Id) {
                self.0.exit(span)
            }
        }
        tracing::subscriber::set_global_default(Forward(capture)).expect("one subscriber");
        capture
    })
}

/// The spans named `name` whose `lock.name` is `lock`.
fn spans(name: &str, lock: &str) -> Vec<Fields> {
    let seen = capture().seen.lock().expect("capture");
    seen.spans
        .values()
        .filter(|(n, f)| *n == name && f.get("lock.name").map(String::as_str) == Some(lock))
        .map(|(_, f)| f.clone())
        .collect()
}

fn outcomes(name: &str, lock: &str) -> Vec<String> {
    let spans = spans(name, lock);
    spans
        .iter()
        .filter_map(|f| f.get("lock.outcome").cloned())
        .collect()
}

// ---- the metrics recorder ----

/// Everything recorded so far: the debugging recorder's snapshot resets
/// what it reports (counters and gauges to 0, histograms emptied), so the
/// snapshots are added up here.
#[derive(Default)]
struct Metrics {
    latest: HashMap<CompositeKey, DebugValue>,
    histograms: HashMap<CompositeKey, Vec<f64>>,
    units: HashMap<String, metrics::Unit>,
}

fn recorder() -> &'static (Snapshotter, Mutex<Metrics>) {
    static RECORDER: OnceLock<(Snapshotter, Mutex<Metrics>)> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().expect("one recorder");
        (snapshotter, Mutex::default())
    })
}

/// Takes a snapshot into the store and returns it locked.
fn metrics() -> std::sync::MutexGuard<'static, Metrics> {
    let (snapshotter, store) = recorder();
    let mut store = store.lock().expect("metrics");
    for (key, unit, _, value) in snapshotter.snapshot().into_vec() {
        if let Some(unit) = unit {
            store.units.insert(key.key().name().to_owned(), unit);
        }
        match value {
            DebugValue::Histogram(values) => store
                .histograms
                .entry(key)
                .or_default()
                .extend(values.into_iter().map(|v| v.into_inner())),
            DebugValue::Counter(n) => {
                let total = store.latest.entry(key).or_insert(DebugValue::Counter(0));
                if let DebugValue::Counter(total) = total {
                    *total += n;
                }
            }
            DebugValue::Gauge(v) => {
                let total = store
                    .latest
                    .entry(key)
                    .or_insert(DebugValue::Gauge(0.0.into()));
                if let DebugValue::Gauge(total) = total {
                    *total = (total.into_inner() + v.into_inner()).into();
                }
            }
        }
    }
    store
}

fn labels_of(key: &CompositeKey) -> HashMap<String, String> {
    key.key()
        .labels()
        .map(|l| (l.key().to_owned(), l.value().to_owned()))
        .collect()
}

fn matches(key: &CompositeKey, kind: MetricKind, name: &str, want: &[(&str, &str)]) -> bool {
    let labels = labels_of(key);
    key.kind() == kind
        && key.key().name() == name
        && want
            .iter()
            .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
}

/// The sum of the counters `name` with labels `want`.
fn counter(name: &str, want: &[(&str, &str)]) -> u64 {
    let store = metrics();
    store
        .latest
        .iter()
        .filter(|(key, _)| matches(key, MetricKind::Counter, name, want))
        .map(|(_, value)| match value {
            DebugValue::Counter(n) => *n,
            _ => 0,
        })
        .sum()
}

fn gauge(name: &str, want: &[(&str, &str)]) -> f64 {
    let store = metrics();
    store
        .latest
        .iter()
        .filter(|(key, _)| matches(key, MetricKind::Gauge, name, want))
        .map(|(_, value)| match value {
            DebugValue::Gauge(v) => v.into_inner(),
            _ => 0.0,
        })
        .sum()
}

/// The values of the histograms `name` with labels `want`.
fn histogram(name: &str, want: &[(&str, &str)]) -> Vec<f64> {
    let store = metrics();
    store
        .histograms
        .iter()
        .filter(|(key, _)| matches(key, MetricKind::Histogram, name, want))
        .flat_map(|(_, values)| values.iter().copied())
        .collect()
}

/// The label sets of every metric named `name` with labels `want`.
fn label_sets(name: &str, want: &[(&str, &str)]) -> Vec<HashMap<String, String>> {
    let store = metrics();
    store
        .latest
        .keys()
        .chain(store.histograms.keys())
        .filter(|key| key.key().name() == name)
        .map(labels_of)
        .filter(|labels| {
            want.iter()
                .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

fn install() {
    let _ = capture();
    let _ = recorder();
}

const ACQUIRE: &str = "redisson_lock_acquire_duration_seconds";
const HOLD: &str = "redisson_lock_hold_duration_seconds";

#[test]
fn acquire_contention_loss_and_release_are_traced_and_measured() {
    install();
    let server = RedisServer::start();
    let lease = Duration::from_millis(900);
    let a = server.watchdog_client(lease);
    let b = Client::open(server.url()).expect("b");
    let name = format!("obs-seq-{}", std::process::id());
    let kind = [("kind", "RedissonLock")];

    // Acquired, then reentered.
    let guard = a.lock(&name).lock().expect("lock");
    let again = a.lock(&name).lock().expect("reentry");
    drop(again);
    // Busy for another client; a timed wait that runs out.
    assert!(b.lock(&name).try_lock().expect("try_lock").is_none());
    assert!(
        b.lock(&name)
            .try_lock_for(Duration::from_millis(200))
            .expect("timed")
            .is_none()
    );
    // A waiter woken by the release message.
    let waiter = {
        let b = b.clone();
        let name = name.clone();
        thread::spawn(move || {
            let guard = b.lock(&name).try_lock_for(Duration::from_secs(10));
            let guard = guard.expect("wait").expect("acquired after the release");
            drop(guard);
        })
    };
    assert!(eventually(Duration::from_secs(5), || {
        gauge("redisson_lock_waiters", &kind) >= 1.0
    }));
    guard.unlock().expect("unlock");
    waiter.join().expect("waiter");

    // Lost: force-unlocked by the other client while the watchdog renews.
    let guard = a.lock(&name).lock().expect("lock again");
    thread::sleep(lease / 2); // a renewal or two
    assert!(b.lock(&name).force_unlock().expect("force unlock"));
    assert!(eventually(Duration::from_secs(5), || guard.is_lost()));
    assert!(guard.unlock().is_err(), "a lost lock's unlock reports it");

    // A fenced lock's acquire records its token.
    let fenced = format!("obs-fenced-{}", std::process::id());
    drop(a.fenced_lock(&fenced).lock().expect("fenced"));

    // Metrics.
    for outcome in ["acquired", "reentered", "busy", "timeout"] {
        let values = histogram(ACQUIRE, &[("kind", "RedissonLock"), ("outcome", outcome)]);
        assert!(!values.is_empty(), "acquire duration, outcome {outcome}");
    }
    assert!(!histogram(HOLD, &[("kind", "RedissonLock"), ("outcome", "released")]).is_empty());
    assert!(!histogram(HOLD, &[("kind", "RedissonLock"), ("outcome", "lost")]).is_empty());
    assert!(counter("redisson_lock_contended_total", &kind) >= 3);
    let lost = [("kind", "RedissonLock"), ("reason", "key_gone")];
    assert_eq!(counter("redisson_lock_lost_total", &lost), 1);
    assert!(counter("redisson_lock_renewals_total", &[("outcome", "ok")]) >= 1);
    assert!(counter("redisson_lock_renewals_total", &[("outcome", "not_held")]) >= 1);
    assert!(counter("redisson_lock_wakeups_total", &[("cause", "message")]) >= 1);
    assert_eq!(
        gauge("redisson_lock_held", &kind),
        0.0,
        "every hold is over"
    );
    assert_eq!(gauge("redisson_lock_waiters", &kind), 0.0);
    assert!(
        label_sets(ACQUIRE, &kind)
            .iter()
            .all(|l| !l.contains_key("lock")),
        "no lock label without a mapping"
    );
    assert_eq!(
        metrics().units.get(ACQUIRE),
        Some(&metrics::Unit::Seconds),
        "described with its unit"
    );

    // Spans: names without the lock's name, fields with it.
    let acquired = outcomes("lock.acquire", &name);
    for outcome in ["acquired", "reentered", "busy", "timeout"] {
        assert!(
            acquired.iter().any(|o| o == outcome),
            "{outcome}: {acquired:?}"
        );
    }
    let acquire = spans("lock.acquire", &name);
    assert!(acquire.iter().all(
        |f| f.get("lock.kind").map(String::as_str) == Some("RedissonLock")
            && f.get("db.system.name").map(String::as_str) == Some("redis")
            && f.contains_key("lock.lease_ms")
            && f.contains_key("lock.attempts")
            && f.contains_key("lock.waited_ms")
    ));
    let released = outcomes("lock.release", &name);
    assert!(released.iter().any(|o| o == "released"), "{released:?}");
    assert!(released.iter().any(|o| o == "still_held"), "{released:?}");
    assert!(released.iter().any(|o| o == "lost"), "{released:?}");
    assert!(
        spans("lock.release", &name)
            .iter()
            .all(|f| f.contains_key("lock.held_for_ms"))
    );
    let fenced_spans = spans("lock.acquire", &fenced);
    assert!(
        fenced_spans
            .iter()
            .any(|f| f.contains_key("lock.fencing_token"))
    );
    {
        let seen = capture().seen.lock().expect("capture");
        let names: std::collections::HashSet<_> = seen.spans.values().map(|(n, _)| *n).collect();
        assert!(
            names
                .iter()
                .all(|n| ["lock.acquire", "lock.release", "lock.renew"].contains(n)),
            "{names:?}"
        );
        let port = server.port().to_string();
        assert!(seen.spans.values().any(|(n, f)| *n == "lock.renew"
            && f.get("server.port") == Some(&port)
            && f.contains_key("server.address")
            && f.get("lock.renewed").is_some_and(|r| r != "0")));
        assert!(seen.spans.values().any(|(n, f)| *n == "lock.renew"
            && f.get("server.port") == Some(&port)
            && f.get("lock.not_held").is_some_and(|r| r != "0")));
        let lost: Vec<_> = seen
            .events
            .iter()
            .filter(|(level, f)| {
                *level == tracing::Level::WARN
                    && f.get("message").map(String::as_str) == Some("lock lost")
                    && f.get("lock.name") == Some(&name)
            })
            .collect();
        assert_eq!(lost.len(), 1, "one WARN per lost hold");
        let fields = &lost[0].1;
        assert_eq!(
            fields.get("lock.lost_reason").map(String::as_str),
            Some("key_gone")
        );
        assert!(fields.contains_key("lock.held_for_ms"));
        assert!(fields.contains_key("lock.since_renewal_ms"));
    }
}

#[test]
fn a_lock_label_appears_only_for_the_names_the_application_maps() {
    install();
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .metrics_lock_label(|name| name.strip_prefix("job:").map(str::to_owned))
        .build()
        .expect("client");
    let job = format!("obs-job-{}", std::process::id());
    let mapped = format!("job:{job}");
    let other = format!("obs-other-{}", std::process::id());
    drop(client.fair_lock(&mapped).lock().expect("mapped"));
    drop(client.fair_lock(&other).lock().expect("other"));

    let kind = [("kind", "RedissonFairLock")];
    let labelled = [("kind", "RedissonFairLock"), ("lock", job.as_str())];
    let acquired = [("outcome", "acquired")];
    assert_eq!(
        histogram(ACQUIRE, &[labelled[0], labelled[1], acquired[0]]).len(),
        1
    );
    assert_eq!(
        histogram(HOLD, &[labelled[0], labelled[1], ("outcome", "released")]).len(),
        1
    );
    // The unmapped name is counted without a `lock` label.
    let sets = label_sets(ACQUIRE, &kind);
    assert!(sets.iter().any(|l| !l.contains_key("lock")), "{sets:?}");
    assert!(
        sets.iter()
            .all(|l| l.get("lock").is_none_or(|lock| *lock == job)),
        "{sets:?}"
    );
    assert_eq!(gauge("redisson_lock_held", &labelled), 0.0);
    assert!(
        label_sets("redisson_lock_held", &labelled).len() == 1,
        "the held gauge carries the label"
    );
}
