//! Every lock kind and synchronizer against each Redisson version of the
//! interop matrix (PROTOCOL §11.1: 3.12.4, 3.16.8, 3.21.3, 3.24.3, 3.52.0,
//! 4.7.0), on one single redis-server and ONE JVM per version, both ways:
//!
//! * exclusion: a Java hold keeps the Rust side out and a Rust hold keeps
//!   Java out;
//! * state parity: each side reads the other's hold count (the hash
//!   field), TTL and lock state as its own;
//! * wake-ups: a waiter on one side gets through promptly after the other
//!   side's release (locks: under [`WAKE`] with 30 s leases, so a missed
//!   message would cost the lease; synchronizers: under
//!   [`every_synchronizer::WAKE_BOUND`] after one of the Rust waiter's 3 s
//!   re-reads, so only the message can be that quick).
//!
//! A kind the version lacks (the driver answers `NA`: fenced before 3.19.0,
//! spin before 3.15.0, non-reentrant before 4.4.0) is reported as not
//! applicable, printed and counted, never as passed. Each version's test
//! runs all its scenarios (a failure does not hide the next ones) and fails
//! at the end if any failed; the versions run one after the other (one JVM
//! at a time on a small machine).
//!
//! Where the wire differs, the Rust client takes the compat knob
//! (`ClientBuilder::redisson_compat`): the permit-expirable semaphore
//! against 3.16.8 and 3.12.4 (hex permit ids), the fair lock against 3.12.4
//! (5 s fair wait), whose queue arithmetic is checked too (a Rust waiter's
//! deadline is queued 5 000 ms behind the tail like a Java 3.12.4 waiter's,
//! and a dead Rust waiter blocks a Java waiter behind it for ~5 s, not 300).
//! Controls show why the knob: without it Java up to 3.16.8 cannot release
//! a Rust permit, and a Rust fair waiter queues 300 s behind a Java 3.12.4
//! one.
//! Last, the 3.44–3.52 read-lock renewal defect with Java 3.52.0 (its own
//! JVM: a 3 s watchdog so that renewals run): a Rust reader with the knob
//! does not let a writer in under a Java reader, one without it does, and
//! so does Java's own read unlock (asserted and printed as the known
//! defect).

mod support;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Kind, Lock, PermitId};
use support::RedisServer;
use support::every_synchronizer::{self, release_after_a_reread};
use support::java::{JavaDriver, Redisson};
use support::proxy::Proxy;
use support::sync::{latch_waiter, spawn_reporting, woken_within};
use support::waiter::Waiter;
use support::{builder, eventually};

/// How soon a lock waiter must get the lock after the other side's
/// release: generous for a loaded 2-core machine, a tenth of the 30 s lease
/// a missed unlock message would cost.
const WAKE: Duration = Duration::from_secs(3);

/// The synchronizers' bound (after a Rust re-read, see the module docs).
const SYNC_WAKE: Duration = every_synchronizer::WAKE_BOUND;

/// Leases and watchdogs of both sides in the per-version passes.
const LEASE: Duration = Duration::from_secs(30);

/// One JVM at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// `Err(why)`: the scenario does not apply to this version.
type Outcome = Result<(), String>;

/// What a scenario gets: the version's server, JVM and a default Rust client.
struct Pass<'a> {
    version: &'static str,
    server: &'a RedisServer,
    java: &'a JavaDriver,
    client: &'a Client,
}

impl Pass<'_> {
    /// A lock or synchronizer name of its own for `what` in this pass.
    fn name(&self, what: &str) -> String {
        format!("v{}-{what}", self.version)
    }

    /// A Rust client of the server with `redisson_compat(self.version)`.
    fn compat_client(&self) -> Client {
        builder(self.server.url())
            .redisson_compat(self.version)
            .build()
            .expect("a client with redisson_compat")
    }

    /// Whether the version is below `major.minor.patch`.
    fn below(&self, version: &str) -> bool {
        parse(self.version) < parse(version)
    }
}

fn parse(version: &str) -> Vec<u32> {
    version
        .split('.')
        .map(|n| n.parse().expect("a numeric version"))
        .collect()
}

type Scenario = fn(&Pass<'_>) -> Outcome;

/// The scenarios of every pass, in order.
const SCENARIOS: &[(&str, Scenario)] = &[
    ("reentrant lock", reentrant),
    ("fair lock", fair),
    ("fenced lock", fenced),
    ("spin lock", spin),
    ("write lock", write),
    ("read/write lock, mixed", read_write_mixed),
    ("non-reentrant lock", non_reentrant),
    ("non-reentrant fair lock", non_reentrant_fair),
    ("semaphore", semaphore),
    ("permit-expirable semaphore", expirable),
    ("count-down latch", latch),
];

/// The scenarios of the passes of versions up to 3.13.2 only (their 5 s
/// fair wait), after [`SCENARIOS`].
const FAIR_5S_SCENARIOS: &[(&str, Scenario)] = &[
    ("fair queue: 5 s deadlines (knob)", fair_queue_deadlines),
    ("fair queue: a dead Rust waiter (knob)", fair_dead_waiter),
];

macro_rules! versions {
    ($($test:ident => $version:literal),* $(,)?) => {
        $(#[test] fn $test() { run_version($version) })*
    };
}

versions!(
    redisson_3_12_4 => "3.12.4",
    redisson_3_16_8 => "3.16.8",
    redisson_3_21_3 => "3.21.3",
    redisson_3_24_3 => "3.24.3",
    redisson_3_52_0 => "3.52.0",
    redisson_4_7_0 => "4.7.0",
);

enum Verdict {
    Passed,
    NotApplicable(String),
    Failed(String),
}

/// Starts the version's server and JVM, runs every scenario, prints the
/// table, and fails if any scenario failed (or none passed).
fn run_version(version: &'static str) {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let started = Instant::now();
    let server = RedisServer::start();
    let java = JavaDriver::start(Redisson::Exact(version), &server.url(), LEASE);
    java.warm_up();
    let client = server.client();
    let pass = Pass {
        version,
        server: &server,
        java: &java,
        client: &client,
    };
    let mut rows = Vec::new();
    let only_5s_fair = if pass.below("3.13.3") {
        FAIR_5S_SCENARIOS
    } else {
        &[]
    };
    for &(scenario, run) in SCENARIOS.iter().chain(only_5s_fair) {
        let at = Instant::now();
        let verdict = match catch_unwind(AssertUnwindSafe(|| run(&pass))) {
            Ok(Ok(())) => Verdict::Passed,
            Ok(Err(why)) => Verdict::NotApplicable(why),
            Err(panic) => Verdict::Failed(
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panicked".into()),
            ),
        };
        eprintln!(
            "[{version}] {scenario}: {} ({:?})",
            match &verdict {
                Verdict::Passed => "passed".to_owned(),
                Verdict::NotApplicable(why) => format!("n/a ({why})"),
                Verdict::Failed(why) => format!("FAILED: {why}"),
            },
            at.elapsed()
        );
        rows.push((scenario, verdict));
    }
    let count = |f: fn(&Verdict) -> bool| rows.iter().filter(|(_, v)| f(v)).count();
    let passed = count(|v| matches!(v, Verdict::Passed));
    let na = count(|v| matches!(v, Verdict::NotApplicable(_)));
    let failed: Vec<String> = rows
        .iter()
        .filter_map(|(s, v)| match v {
            Verdict::Failed(why) => Some(format!("{s}: {why}")),
            _ => None,
        })
        .collect();
    eprintln!(
        "Redisson {version}: {passed} passed, {na} n/a, {} failed, in {:?}",
        failed.len(),
        started.elapsed()
    );
    assert!(
        failed.is_empty(),
        "Redisson {version}: {} scenario(s) failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
    assert!(passed > 0, "Redisson {version}: nothing passed");
}

// ---------------------------------------------------------------------------
// Locks

/// One lock kind as both sides name it.
struct LockKind<K: Kind> {
    /// The suffix of the lock's name in this pass.
    kind: &'static str,
    /// The driver's type prefix (`fair/`, `read/`...; empty for `getLock`).
    java_type: &'static str,
    rust: fn(&Client, &str) -> Lock<K>,
    /// Whether a second acquisition by the holder counts up.
    reentrant: bool,
    /// Appended to the owner field in the hash (`:write` for the write lock).
    field_suffix: &'static str,
    /// A Rust waiter polls (the spin lock) instead of parking on its
    /// subscriber.
    polls: bool,
}

impl<K: Kind> LockKind<K> {
    fn new(
        kind: &'static str,
        java_type: &'static str,
        rust: fn(&Client, &str) -> Lock<K>,
    ) -> Self {
        LockKind {
            kind,
            java_type,
            rust,
            reentrant: true,
            field_suffix: "",
            polls: false,
        }
    }
}

fn reentrant(p: &Pass<'_>) -> Outcome {
    both_ways(
        p,
        p.client,
        &LockKind::new("reentrant", "", |c, n| c.lock(n)),
    )
}

fn fair(p: &Pass<'_>) -> Outcome {
    // Java up to 3.13.2 waits 5 s in the fair queue by default: the knob.
    let client = if p.below("3.13.3") {
        p.compat_client()
    } else {
        p.client.clone()
    };
    both_ways(
        p,
        &client,
        &LockKind::new("fair", "fair/", |c, n| c.fair_lock(n)),
    )
}

fn fenced(p: &Pass<'_>) -> Outcome {
    let kind = LockKind::new("fenced", "fenced/", |c, n| c.fenced_lock(n));
    both_ways(p, p.client, &kind)?;
    // Tokens: one counter for both sides, each acquisition above the last.
    let name = p.name("fenced");
    let java_token: u64 = p
        .java
        .ok("ft", &format!("lockToken fenced/{name}"))
        .value(0);
    p.java.ok("ft", &format!("unlock fenced/{name}"));
    let lock = p.client.fenced_lock(&name);
    assert_eq!(lock.token().expect("token"), Some(java_token));
    let guard = lock.lock().expect("lock");
    assert!(
        guard.token() > java_token,
        "{} <= {java_token}",
        guard.token()
    );
    let java_sees: u64 = p.java.ok("ft", &format!("token fenced/{name}")).value(0);
    assert_eq!(
        java_sees,
        guard.token(),
        "Java's getToken reads the Rust token"
    );
    guard.unlock().expect("unlock");
    Ok(())
}

fn spin(p: &Pass<'_>) -> Outcome {
    let kind = LockKind {
        polls: true,
        ..LockKind::new("spin", "spin/", |c, n| c.spin_lock(n))
    };
    both_ways(p, p.client, &kind)
}

fn write(p: &Pass<'_>) -> Outcome {
    let kind = LockKind {
        field_suffix: ":write",
        ..LockKind::new("write", "write/", |c, n| c.read_write_lock(n).write_lock())
    };
    both_ways(p, p.client, &kind)
}

fn non_reentrant(p: &Pass<'_>) -> Outcome {
    let kind = LockKind {
        reentrant: false,
        ..LockKind::new("nonreentrant", "nonreentrant/", |c, n| {
            c.non_reentrant_lock(n)
        })
    };
    both_ways(p, p.client, &kind)
}

fn non_reentrant_fair(p: &Pass<'_>) -> Outcome {
    let kind = LockKind {
        reentrant: false,
        ..LockKind::new("nonreentrantfair", "nonreentrantfair/", |c, n| {
            c.non_reentrant_fair_lock(n)
        })
    };
    both_ways(p, p.client, &kind)
}

/// Waits until the Rust waiter waits: parked on the subscriber, or (a
/// polling spin waiter) long enough to back off to its cap.
fn parked(client: &Client, polls: bool) {
    if polls {
        thread::sleep(Duration::from_millis(300));
    } else {
        assert!(
            eventually(Duration::from_secs(5), || client.diagnostics().waiters == 1),
            "the Rust waiter parks on its subscriber: {:?}",
            client.diagnostics()
        );
    }
}

/// The hold count in `name`'s hash for `field` (`None`: no such field).
fn hash_count(server: &RedisServer, name: &str, field: &str) -> Option<u64> {
    let count: Option<String> = server.cmd(&["HGET", name, field]);
    count.map(|c| c.parse().expect("a count"))
}

fn assert_lease(ttl: Duration, what: &str) {
    assert_leases(ttl, 1, what);
}

/// A TTL of `leases` fresh 30 s leases (a write lock's re-entry adds its
/// lease to the TTL, PROTOCOL §12).
fn assert_leases(ttl: Duration, leases: u32, what: &str) {
    let full = LEASE * leases;
    assert!(
        ttl > full - Duration::from_secs(10) && ttl <= full,
        "{what}: TTL {ttl:?}, expected {leases} fresh 30 s lease(s)"
    );
}

/// Both directions for one kind: Java holds (twice when reentrant), the
/// Rust side reads the state and is kept out, and Java's release wakes a
/// Rust waiter; then Rust holds, Java reads it and is kept out, and the
/// Rust release wakes a Java waiter.
fn both_ways<K: Kind + Send + 'static>(
    p: &Pass<'_>,
    client: &Client,
    kind: &LockKind<K>,
) -> Outcome {
    let name = p.name(kind.kind);
    let java_name = format!("{}{name}", kind.java_type);
    let (holder, waiter) = (format!("{}-h", kind.kind), format!("{}-w", kind.kind));
    let java = p.java;

    // Java holds.
    let reply = java.call(&holder, &format!("lock {java_name}"));
    if reply.na {
        return Err(reply.values[1..].join(" "));
    }
    assert!(reply.ok, "`lock {java_name}`: {}", reply.line);
    let java_field = format!("{}{}", java.owner_field(&holder), kind.field_suffix);
    let mut holds = 1;
    if kind.reentrant {
        java.ok(&holder, &format!("lock {java_name}"));
        holds = 2;
        let count: u64 = java.ok(&holder, &format!("holdCount {java_name}")).value(0);
        assert_eq!(count, 2, "Java's hold count");
    }
    assert_eq!(
        hash_count(p.server, &name, &java_field),
        Some(holds),
        "Java's hold in the hash"
    );
    let lock = (kind.rust)(client, &name);
    assert!(
        lock.is_locked().expect("is_locked"),
        "Rust sees Java's hold"
    );
    assert!(!lock.is_held_by_current_thread().expect("held"));
    assert_eq!(lock.hold_count().expect("hold_count"), 0);
    // A write lock's re-entry adds its lease; the others' resets it.
    let leases = if kind.kind == "write" {
        holds as u32
    } else {
        1
    };
    assert_leases(
        lock.remaining_ttl().expect("ttl").expect("a TTL"),
        leases,
        "Java's hold seen by Rust",
    );
    assert!(
        lock.try_lock().expect("try_lock").is_none(),
        "Rust took {java_name} while Java holds it"
    );
    let rust_waiter = Waiter::try_lock_for(lock, Duration::from_secs(25));
    parked(client, kind.polls);
    if kind.reentrant {
        java.ok(&holder, &format!("unlock {java_name}"));
        thread::sleep(Duration::from_millis(200));
        assert!(
            !rust_waiter.has_acquired(),
            "Rust got {java_name} while Java still holds it once"
        );
    }
    let released = Instant::now();
    java.ok(&holder, &format!("unlock {java_name}"));
    let took = rust_waiter.woken_within(released, WAKE, Duration::from_secs(25));
    eprintln!(
        "[{}] {java_name}: Java unlock -> Rust waiter {took:?}",
        p.version
    );

    // Rust holds.
    let lock = (kind.rust)(client, &name);
    let first = lock.lock().expect("Rust lock");
    let second = kind.reentrant.then(|| lock.lock().expect("Rust re-entry"));
    let rust_field = format!("{}{}", client.owner_field(), kind.field_suffix);
    assert_eq!(lock.hold_count().expect("hold_count"), holds);
    assert_eq!(
        hash_count(p.server, &name, &rust_field),
        Some(holds),
        "Rust's hold in the hash"
    );
    assert!(java.flag(&waiter, &format!("isLocked {java_name}")));
    assert!(!java.flag(&waiter, &format!("isHeldByCurrentThread {java_name}")));
    let ttl: u64 = java
        .ok(&waiter, &format!("remainTimeToLive {java_name}"))
        .value(0);
    assert_leases(
        Duration::from_millis(ttl),
        leases,
        "Rust's hold seen by Java",
    );
    java.assert_cannot_take(&waiter, &java_name);
    java.send(&waiter, &format!("lock {java_name}"));
    java.assert_kept_out(&waiter, Duration::from_millis(300));
    if let Some(second) = second {
        second.unlock().expect("unlock once");
        java.assert_kept_out(&waiter, Duration::from_millis(200));
    }
    let released = Instant::now();
    first.unlock().expect("unlock");
    let what = format!("{java_name}: Rust unlock -> Java waiter");
    java.java_woken(&waiter, released, WAKE, &what);
    assert_eq!(
        hash_count(
            p.server,
            &name,
            &format!("{}{}", java.owner_field(&waiter), kind.field_suffix)
        ),
        Some(1)
    );
    java.ok(&waiter, &format!("unlock {java_name}"));
    assert!(
        !lock.is_locked().expect("is_locked"),
        "{name} free at the end"
    );
    Ok(())
}

/// The read/write lock's mixed holds: a Java writer keeps a Rust reader
/// out and wakes it; a Rust writer keeps a Java reader out and wakes it;
/// Java and Rust readers share; a Java reader keeps a Rust writer out
/// (also after the Rust reader left) and wakes it; a Rust reader keeps a
/// Java writer out and wakes it.
fn read_write_mixed(p: &Pass<'_>) -> Outcome {
    let name = p.name("rw");
    let (java, client) = (p.java, p.client);
    let rw = client.read_write_lock(&name);

    java.ok("rw1", &format!("lock write/{name}"));
    assert!(rw.read_lock().try_lock().expect("try_lock").is_none());
    let reader = Waiter::try_lock_for(rw.read_lock(), Duration::from_secs(25));
    parked(client, false);
    let released = Instant::now();
    java.ok("rw1", &format!("unlock write/{name}"));
    let took = reader.woken_within(released, WAKE, Duration::from_secs(25));
    eprintln!("[{}] Java write unlock -> Rust reader {took:?}", p.version);

    let writing = rw.write_lock().lock().expect("write");
    assert!(!java.flag("rw2", &format!("tryLockNow read/{name}")));
    java.send("rw2", &format!("lock read/{name}"));
    java.assert_kept_out("rw2", Duration::from_millis(300));
    let released = Instant::now();
    writing.unlock().expect("unlock");
    java.java_woken("rw2", released, WAKE, "Rust write unlock -> Java reader");

    // Java reads (rw2); Rust reads beside it.
    let reading = rw
        .read_lock()
        .try_lock()
        .expect("try_lock")
        .expect("readers share");
    let mode: Option<String> = p.server.cmd(&["HGET", &name, "mode"]);
    assert_eq!(mode.as_deref(), Some("read"));
    assert_eq!(
        hash_count(p.server, &name, &java.owner_field("rw2")),
        Some(1)
    );
    assert_eq!(hash_count(p.server, &name, &client.owner_field()), Some(1));
    assert!(!java.flag("rw3", &format!("tryLockNow write/{name}")));
    reading.unlock().expect("read unlock");
    assert!(
        rw.write_lock().try_lock().expect("try_lock").is_none(),
        "a Rust writer got in under the Java reader"
    );
    let writer = Waiter::try_lock_for(rw.write_lock(), Duration::from_secs(25));
    parked(client, false);
    let released = Instant::now();
    java.ok("rw2", &format!("unlock read/{name}"));
    let took = writer.woken_within(released, WAKE, Duration::from_secs(25));
    eprintln!("[{}] Java read unlock -> Rust writer {took:?}", p.version);

    let reading = rw.read_lock().lock().expect("read");
    java.send("rw3", &format!("lock write/{name}"));
    java.assert_kept_out("rw3", Duration::from_millis(300));
    let released = Instant::now();
    reading.unlock().expect("unlock");
    java.java_woken("rw3", released, WAKE, "Rust read unlock -> Java writer");
    java.ok("rw3", &format!("unlock write/{name}"));
    assert!(!rw.write_lock().is_locked().expect("is_locked"));
    Ok(())
}

// ---------------------------------------------------------------------------
// Synchronizers

/// A semaphore of one permit: Java's acquire keeps Rust out and Java's
/// release wakes a Rust waiter; then the Rust release wakes a Java waiter.
fn semaphore(p: &Pass<'_>) -> Outcome {
    let name = p.name("sem");
    let java = p.java;
    assert!(java.flag("s1", &format!("sem.trySetPermits {name} 1")));
    let sem = p.client.semaphore(&name);
    assert_eq!(sem.available_permits().expect("available"), 1);
    java.ok("s1", &format!("sem.acquire {name} 1"));
    assert_eq!(sem.available_permits().expect("available"), 0);
    assert!(sem.try_acquire(1).expect("try_acquire").is_none());
    let theirs = sem.clone();
    let (woken, join) = spawn_reporting(move || theirs.acquire(1).expect("acquire").forget());
    let released = release_after_a_reread(&mut p.server.con(), &name, || {
        java.ok("s1", &format!("sem.release {name} 1"));
    });
    let took = woken_within(&woken, released, SYNC_WAKE, "Java release -> Rust acquire");
    join.join().expect("the Rust waiter");
    eprintln!("[{}] semaphore: Java release -> Rust {took:?}", p.version);

    let reply = java.ok("s2", &format!("sem.tryAcquire {name} 1 0"));
    assert!(!reply.value::<bool>(0), "Java got a permit Rust holds");
    java.send("s2", &format!("sem.acquire {name} 1"));
    java.assert_kept_out("s2", Duration::from_millis(300));
    let released = Instant::now();
    sem.release(1).expect("release");
    java.java_woken("s2", released, SYNC_WAKE, "Rust release -> Java acquire");
    java.ok("s2", &format!("sem.release {name} 1"));
    let java_sees: i64 = java
        .ok("s2", &format!("sem.availablePermits {name}"))
        .value(0);
    assert_eq!(
        (java_sees, sem.available_permits().expect("available")),
        (1, 1)
    );
    Ok(())
}

/// A permit-expirable semaphore of one permit, both ways, each side
/// reading and releasing the other's permit by its id (with the knob up to
/// 3.16.8: hex text ids).
fn expirable(p: &Pass<'_>) -> Outcome {
    let client = if p.below("3.17.0") {
        p.compat_client()
    } else {
        p.client.clone()
    };
    let name = p.name("pes");
    let java = p.java;
    assert!(java.flag("e1", &format!("pes.trySetPermits {name} 1")));
    let pes = client.permit_expirable_semaphore(&name);
    assert_eq!(pes.available_permits().expect("available"), 1);
    let java_id: String = java.ok("e1", &format!("pes.acquire {name} 30000")).value(0);
    let id: PermitId = java_id.parse().expect("Java's id parses");
    assert_eq!(pes.available_permits().expect("available"), 0);
    assert_lease(
        pes.lease_time(id).expect("lease_time").expect("a lease"),
        "Java's permit seen by Rust",
    );
    assert!(pes.try_acquire(None).expect("try_acquire").is_none());
    let theirs = pes.clone();
    let (woken, join) =
        spawn_reporting(move || theirs.acquire(Some(LEASE)).expect("acquire").forget());
    let released = release_after_a_reread(&mut p.server.con(), &name, || {
        java.ok("e1", &format!("pes.release {name} {java_id}"));
    });
    let took = woken_within(&woken, released, SYNC_WAKE, "Java release -> Rust acquire");
    let rust_id = join.join().expect("the Rust waiter")[0];
    eprintln!("[{}] expirable: Java release -> Rust {took:?}", p.version);

    let reply = java.ok("e2", &format!("pes.tryAcquire {name} 0 30000"));
    assert_eq!(reply.values[0], "null", "Java got a permit Rust holds");
    java.send("e2", &format!("pes.acquire {name} 30000"));
    java.assert_kept_out("e2", Duration::from_millis(300));
    // Java releases the Rust permit by its id: the waiting Java thread gets it.
    let released = Instant::now();
    java.ok("e3", &format!("pes.release {name} {rust_id}"));
    let reply = java.java_woken(
        "e2",
        released,
        SYNC_WAKE,
        "Java release of the Rust permit -> Java acquire",
    );
    let java_id: PermitId = reply.values[0].parse().expect("Java's id");
    // Rust releases Java's permit.
    pes.release(java_id).expect("Rust releases Java's permit");
    if p.below("3.17.0") {
        // Why the knob: a permit of a client without it (raw 16-byte id)
        // is one this Java cannot find, so cannot release.
        let plain = p.client.permit_expirable_semaphore(&name);
        let raw = plain.acquire(Some(LEASE)).expect("acquire").forget()[0];
        let reply = java.ok("e2", &format!("pes.tryRelease {name} {raw}"));
        assert_eq!(
            reply.values[0], "false",
            "Java {} released a raw id",
            p.version
        );
        eprintln!(
            "[{}] WITHOUT redisson_compat Java cannot release a Rust permit (raw id)",
            p.version
        );
        plain.release(raw).expect("release");
    }
    let java_sees: i64 = java
        .ok("e2", &format!("pes.availablePermits {name}"))
        .value(0);
    assert_eq!(
        (java_sees, pes.available_permits().expect("available")),
        (1, 1)
    );
    Ok(())
}

/// Latches of one: Java's count-down wakes a Rust waiter, the Rust
/// count-down wakes a Java waiter.
fn latch(p: &Pass<'_>) -> Outcome {
    let java = p.java;
    let name = p.name("latch-j");
    assert!(java.flag("l1", &format!("latch.trySetCount {name} 1")));
    let latch = p.client.count_down_latch(&name);
    assert_eq!(latch.count().expect("count"), 1);
    let woken = latch_waiter(&latch);
    let released = release_after_a_reread(&mut p.server.con(), &name, || {
        java.ok("l1", &format!("latch.countDown {name}"));
    });
    let took = woken_within(&woken, released, SYNC_WAKE, "Java count-down -> Rust wait");
    eprintln!("[{}] latch: Java count-down -> Rust {took:?}", p.version);

    let name = p.name("latch-r");
    let latch = p.client.count_down_latch(&name);
    assert!(latch.try_set_count(1).expect("try_set_count"));
    let count: u64 = java.ok("l2", &format!("latch.getCount {name}")).value(0);
    assert_eq!(count, 1);
    java.send("l2", &format!("latch.await {name}"));
    java.assert_kept_out("l2", Duration::from_millis(300));
    let released = Instant::now();
    latch.count_down().expect("count_down");
    java.java_woken("l2", released, SYNC_WAKE, "Rust count-down -> Java await");
    Ok(())
}

// ---------------------------------------------------------------------------
// The fair queue of Redisson 3.12.4 (5 s fair wait), with the knob

/// The deadline score of `field` in the fair lock `name`'s timeout zset.
fn score(server: &RedisServer, name: &str, field: &str) -> Option<i64> {
    let key = format!("redisson_lock_timeout:{{{name}}}");
    let score: Option<String> = server.cmd(&["ZSCORE", &key, field]);
    score.map(|s| s.parse::<f64>().expect("a score") as i64)
}

/// Waits until `field` has a deadline in `name`'s queue; returns it.
fn queued_score(server: &RedisServer, name: &str, field: &str) -> i64 {
    let mut found = None;
    assert!(
        eventually(Duration::from_secs(10), || {
            found = score(server, name, field);
            found.is_some()
        }),
        "{field} never queued for {name}"
    );
    found.expect("a score")
}

/// Java holds; a Java waiter (`lock`), a Rust waiter (knob 3.12.4,
/// `try_lock_for(20 s)`) and another Java waiter (`tryLock(20 s)`) queue:
/// each deadline is exactly 5 000 ms behind the one before
/// (the tail's deadline + the 5 s wait), the Rust one like the Java ones.
/// Without the knob, the Rust waiter's deadline is 300 000 ms behind.
fn fair_queue_deadlines(p: &Pass<'_>) -> Outcome {
    let name = p.name("fairq");
    let java = p.java;
    let client = p.compat_client();
    let (q1_field, q2_field) = (java.owner_field("q1"), java.owner_field("q2"));
    java.ok("q0", &format!("lock fair/{name}"));
    java.send("q1", &format!("lock fair/{name}"));
    let q1 = queued_score(p.server, &name, &q1_field);
    // A timed wait of 20 s (3.12.4 queues a timed acquire with its 5 s
    // wait too, not the caller's).
    let (rust_field, served) = support::waiter::fair_waiter(
        &client,
        &name,
        Some(Duration::from_secs(20)),
        Duration::ZERO,
    );
    let rust = queued_score(p.server, &name, &rust_field);
    java.send("q2", &format!("tryLock fair/{name} 20000"));
    let q2 = queued_score(p.server, &name, &q2_field);
    eprintln!(
        "[{}] fair deadlines: Java {q1}, Rust +{} ms, Java +{} ms",
        p.version,
        rust - q1,
        q2 - rust
    );
    assert_eq!(
        rust - q1,
        5_000,
        "the Rust waiter queued behind Java's like Java"
    );
    assert_eq!(
        q2 - rust,
        5_000,
        "Java 3.12.4 queues 5 s behind the Rust waiter"
    );
    // Served in order: q1, the Rust waiter, q2.
    java.ok("q0", &format!("unlock fair/{name}"));
    let reply = java.recv("q1");
    assert!(reply.ok, "{}", reply.line);
    assert!(served.try_recv().is_err(), "Rust served before q1 let go");
    let released = Instant::now();
    java.ok("q1", &format!("unlock fair/{name}"));
    support::waiter::served_within(&served, released, WAKE, Duration::from_secs(20));
    let reply = java.recv("q2");
    assert!(reply.ok && reply.value::<bool>(0), "{}", reply.line);
    java.ok("q2", &format!("unlock fair/{name}"));

    // Why the knob: without it the Rust waiter queues 300 s behind the
    // tail (Redisson 3.13.3+'s wait), so a dead one would block for 5 min.
    let name = p.name("fairq-plain");
    java.ok("q0", &format!("lock fair/{name}"));
    java.send("q1", &format!("lock fair/{name}"));
    let q1 = queued_score(p.server, &name, &q1_field);
    let (rust_field, served) = support::waiter::fair_waiter(p.client, &name, None, Duration::ZERO);
    let rust = queued_score(p.server, &name, &rust_field);
    assert_eq!(rust - q1, 300_000, "the default 300 s fair wait");
    eprintln!(
        "[{}] WITHOUT redisson_compat a Rust fair waiter queues +{} ms behind a Java one",
        p.version,
        rust - q1
    );
    java.ok("q0", &format!("unlock fair/{name}"));
    let reply = java.recv("q1");
    assert!(reply.ok, "{}", reply.line);
    let released = Instant::now();
    java.ok("q1", &format!("unlock fair/{name}"));
    support::waiter::served_within(&served, released, WAKE, Duration::from_secs(20));
    Ok(())
}

/// A Rust waiter (knob 3.12.4) queued behind a Java holder with a 3 s
/// lease dies without giving up (its connections cut by a proxy): the
/// Java waiter behind it gets the lock ~5 s after the lock became free
/// (the dead waiter's 5 s deadline passes), not 300 s later.
fn fair_dead_waiter(p: &Pass<'_>) -> Outcome {
    let name = p.name("fairdead");
    let java = p.java;
    let proxy = Proxy::start(p.server.port());
    let doomed = builder(proxy.url())
        .redisson_compat(p.version)
        .build()
        .expect("a client through the proxy");
    let behind_field = java.owner_field("d1");
    java.ok("d0", &format!("lockLease fair/{name} 3000"));
    let free_at = Instant::now() + Duration::from_millis(3000);
    // The doomed waiter's lock() fails once its connections are cut.
    let rust_field = {
        let (fields, lock) = (std::sync::mpsc::channel(), doomed.fair_lock(&name));
        let doomed = doomed.clone();
        thread::spawn(move || {
            fields.0.send(doomed.owner_field()).expect("field");
            let _ = lock.lock();
        });
        fields.1.recv().expect("the doomed waiter's field")
    };
    let rust = queued_score(p.server, &name, &rust_field);
    java.send("d1", &format!("lock fair/{name}"));
    let behind = queued_score(p.server, &name, &behind_field);
    assert_eq!(behind - rust, 5_000);
    // The Rust process "dies": no give-up reaches the server.
    drop(proxy);
    let reply = java.recv("d1");
    assert!(reply.ok, "{}", reply.line);
    let blocked = reply.at.saturating_duration_since(free_at);
    eprintln!(
        "[{}] a dead Rust fair waiter blocked Java {blocked:?} after the lock was free",
        p.version
    );
    assert!(
        blocked < Duration::from_millis(5_000 + 2_000),
        "blocked {blocked:?}: more than the 5 s fair wait (+ margin)"
    );
    assert!(
        blocked > Duration::from_secs(4),
        "blocked only {blocked:?}: the dead waiter's entry left early (a give-up got through?)"
    );
    java.ok("d1", &format!("unlock fair/{name}"));
    drop(doomed);
    Ok(())
}

// ---------------------------------------------------------------------------
// The 3.44–3.52 read-lock renewal defect, with Java 3.52.0

/// The Java watchdog timeout of the defect test: renewal every second, so
/// that the batched read-lock renewal runs.
const SHORT_WATCHDOG: Duration = Duration::from_secs(3);

/// Java 3.52.0's batched read-lock renewal shadows its loop variable: for
/// a reader holding twice (count 2) the script fails after renewing the
/// hash, so the reader's `rwlock_timeout` markers expire (3 s here) while
/// its hash lives on. In that state, with Java reader `r1` holding twice:
///
/// 1. a Rust reader with `redisson_compat("3.52.0")` unlocks its own hold:
///    the lock stays, no Rust nor Java writer gets in while `r1` reads (a
///    Rust writer waits across Java's renewals), and Java's force unlock
///    then wakes it;
/// 2. the same Rust reader without the knob (4.x's rule) deletes the lock
///    (why the knob exists);
/// 3. a second Java reader's own unlock deletes the lock too: the known
///    defect of Redisson 3.44.0-3.52.0, fixed in 4.0.0 (asserted, so that
///    this test notices a fix, and printed).
#[test]
fn redisson_3_52_0_read_lock_renewal_defect() {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let server = RedisServer::start();
    let java = JavaDriver::start(Redisson::Exact("3.52.0"), &server.url(), SHORT_WATCHDOG);
    java.warm_up();
    let compat = builder(server.url())
        .redisson_compat("3.52.0")
        .build()
        .expect("a client with redisson_compat");
    let plain = server.client();

    // 1. The Rust reader with the knob.
    let name = "defect-rust-compat";
    let r1 = java_reader_past_its_markers(&server, &java, name, || {
        compat
            .read_write_lock(name)
            .read_lock()
            .lock()
            .expect("read")
    });
    let (field, reading) = r1;
    reading.unlock().expect("the Rust read unlock");
    assert_eq!(
        hash_count(&server, name, &field),
        Some(2),
        "the Java reader's holds survive the Rust read unlock"
    );
    let rw = compat.read_write_lock(name);
    assert!(
        rw.write_lock().try_lock().expect("try_lock").is_none(),
        "a Rust writer got in under the Java reader"
    );
    assert!(
        !java.flag("w1", &format!("tryLockNow write/{name}")),
        "a Java writer got in under the Java reader"
    );
    // A Rust writer waits, and stays out across Java's renewals, while the
    // Java reader holds; Java's force unlock then lets it in. (A plain Java
    // unlock of one of r1's two holds would delete the lock here: Redisson's
    // own defect, case 3.)
    let writer = Waiter::try_lock_for(rw.write_lock(), Duration::from_secs(25));
    parked(&compat, false);
    thread::sleep(Duration::from_millis(1500));
    assert!(
        !writer.has_acquired(),
        "a Rust writer got in under the Java reader"
    );
    let released = Instant::now();
    assert!(java.flag("w1", &format!("forceUnlock read/{name}")));
    let took = writer.woken_within(released, WAKE, Duration::from_secs(25));
    eprintln!(
        "3.52.0: with redisson_compat the Java reader kept its lock; Java's force unlock -> Rust writer {took:?}"
    );

    // 2. The same without the knob.
    let name = "defect-rust-plain";
    let (_, reading) = java_reader_past_its_markers(&server, &java, name, || {
        plain
            .read_write_lock(name)
            .read_lock()
            .lock()
            .expect("read")
    });
    reading.unlock().expect("the Rust read unlock");
    let exists: bool = server.cmd(&["EXISTS", name]);
    assert!(
        !exists,
        "without the knob the Rust read unlock deletes the lock"
    );
    eprintln!(
        "3.52.0: WITHOUT redisson_compat a Rust read unlock deleted `{name}` under the Java reader"
    );
    let reply = java.call("r1", &format!("unlock read/{name}"));
    assert_eq!(
        reply.exception(),
        Some("IllegalMonitorStateException"),
        "the Java reader lost its lock: {}",
        reply.line
    );

    // 3. A second Java reader instead: Redisson's own defect.
    let name = "defect-java-readers";
    java_reader_past_its_markers(&server, &java, name, || {
        java.ok("r2", &format!("lock read/{name}"));
    });
    java.ok("r2", &format!("unlock read/{name}"));
    let exists: bool = server.cmd(&["EXISTS", name]);
    assert!(
        !exists,
        "Redisson 3.52.0's read unlock no longer deletes the lock under another reader: \
         the known defect (PROTOCOL §11.1) seems fixed, update this test and docs/versions.md"
    );
    let got_in = plain
        .read_write_lock(name)
        .write_lock()
        .try_lock()
        .expect("try_lock");
    assert!(got_in.is_some(), "a writer gets in under the Java reader");
    eprintln!(
        "KNOWN DEFECT (Redisson 3.44.0-3.52.0, fixed in 4.0.0): Java 3.52.0's own read unlock \
         deleted `{name}` while its other reader still held it; a writer got in"
    );
    got_in.expect("held").unlock().expect("unlock");
}

/// Java's `r1` takes the read lock `name` twice, `other` adds a second
/// reader, and both hold through several Java renewals, until `r1`'s
/// markers have expired while the hash lives on (checked). Returns `r1`'s
/// owner field and what `other` returned.
fn java_reader_past_its_markers<T>(
    server: &RedisServer,
    java: &JavaDriver,
    name: &str,
    other: impl FnOnce() -> T,
) -> (String, T) {
    let field = java.owner_field("r1");
    java.ok("r1", &format!("lock read/{name}"));
    java.ok("r1", &format!("lock read/{name}"));
    let held = other();
    thread::sleep(SHORT_WATCHDOG + Duration::from_millis(1500));
    let ttl: i64 = server.cmd(&["PTTL", name]);
    assert!(ttl > 1_000, "Java's watchdog renews the hash (PTTL {ttl})");
    for n in 1..=2 {
        let marker = format!("{{{name}}}:{field}:rwlock_timeout:{n}");
        let exists: bool = server.cmd(&["EXISTS", &marker]);
        assert!(!exists, "{marker} was renewed: not the defect's state");
    }
    assert_eq!(hash_count(server, name, &field), Some(2));
    (field, held)
}
