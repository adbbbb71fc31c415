//! Interop of the read/write lock with real Redisson (`getReadWriteLock`),
//! both ways, for every Redisson version of the matrix (4.7.0 and 3.24.3):
//! Java and Rust readers share while a writer of the other language waits and
//! is woken by the last reader; each side's read unlock keeps the hash alive
//! while the other side's reader holds it (the markers); the Rust watchdog
//! keeps a Rust reader alive while Java readers come and go; a write unlock
//! of either side wakes the other side's readers.

mod support;

use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use support::eventually;
use support::java::{Redisson, for_each_redisson_version, start, start_with_client};
use support::state::{exists, pttl};

/// A waiter woken by the unlock message, not by a 30 s TTL running out.
const HANDOFF: Duration = Duration::from_millis(200);

for_each_redisson_version!(
    rust_and_java_readers_share_and_a_java_writer_is_woken_by_the_rust_reader,
    java_and_rust_readers_share_and_a_rust_writer_is_woken_by_the_java_reader,
    java_read_unlock_keeps_the_hash_while_a_rust_reader_holds,
    rust_read_unlock_keeps_the_hash_while_a_java_reader_holds,
    rust_watchdog_keeps_a_rust_reader_alive_while_java_readers_come_and_go,
    java_write_unlock_wakes_rust_readers,
    rust_write_unlock_wakes_java_readers,
);

/// A Rust hold on its own thread, released on request; reports when it was
/// acquired and when its release was sent.
struct Held {
    release: mpsc::Sender<()>,
    acquired: mpsc::Receiver<Instant>,
    thread: JoinHandle<Instant>,
}

impl Held {
    fn spawn<G: 'static>(take: impl FnOnce() -> G + Send + 'static) -> Held {
        let (acquired_tx, acquired) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let thread = thread::spawn(move || {
            let guard = take();
            acquired_tx.send(Instant::now()).expect("report");
            let _ = release_rx.recv();
            let at = Instant::now();
            drop(guard);
            at
        });
        Held {
            release,
            acquired,
            thread,
        }
    }

    fn acquired_within(&self, within: Duration) -> Option<Instant> {
        self.acquired.recv_timeout(within).ok()
    }

    /// Asserts that the hold was taken within [`HANDOFF`] of `since` (the
    /// Java release that should wake it; `what` names it).
    fn woken_within_handoff(&self, since: Instant, what: &str) {
        let at = self
            .acquired_within(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{what}: the Rust side never got the lock"));
        let took = at.saturating_duration_since(since);
        assert!(
            took < HANDOFF,
            "{what}: the Rust side got it {took:?} after"
        );
    }

    /// Releases the hold; the instant just before the unlock was sent.
    fn release(self) -> Instant {
        self.release.send(()).expect("release");
        self.thread.join().expect("holder")
    }
}

fn rust_and_java_readers_share_and_a_java_writer_is_woken_by_the_rust_reader(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let read = client.read_write_lock("rw1").read_lock();
    let rust = Held::spawn(move || read.lock().expect("read"));
    rust.acquired_within(Duration::from_secs(10))
        .expect("Rust reads");
    java.ok("r", "lock read/rw1");
    java.send("w", "lock write/rw1");
    assert!(
        java.try_recv("w", Duration::from_millis(300)).is_none(),
        "Java wrote past readers"
    );
    java.ok("r", "unlock read/rw1");
    assert!(
        exists(&server, "rw1"),
        "the Java unlock dropped the Rust reader's lock"
    );
    assert!(
        java.try_recv("w", Duration::from_millis(200)).is_none(),
        "Java wrote past Rust"
    );
    let released = rust.release();
    let reply = java.recv("w");
    assert!(reply.ok, "{}", reply.line);
    let took = reply.at.saturating_duration_since(released);
    assert!(
        took < HANDOFF,
        "the Java writer answered {took:?} after the Rust unlock"
    );
    let java_field = format!("{}:write", java.owner_field("w"));
    let state: std::collections::HashMap<String, String> = server.cmd(&["HGETALL", "rw1"]);
    assert_eq!(state.get("mode").map(String::as_str), Some("write"));
    assert_eq!(state.get(&java_field).map(String::as_str), Some("1"));
    java.ok("w", "unlock write/rw1");
    assert!(!exists(&server, "rw1"));
}

fn java_and_rust_readers_share_and_a_rust_writer_is_woken_by_the_java_reader(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    java.ok("r", "lock read/rw2");
    let read = client.read_write_lock("rw2").read_lock();
    let rust = Held::spawn(move || read.lock().expect("read"));
    rust.acquired_within(Duration::from_secs(10))
        .expect("Rust reads with Java");
    let write = client.read_write_lock("rw2").write_lock();
    let writer = Held::spawn(move || write.lock().expect("write"));
    assert!(writer.acquired_within(Duration::from_millis(300)).is_none());
    rust.release();
    assert!(
        writer.acquired_within(Duration::from_millis(200)).is_none(),
        "wrote past Java"
    );
    let unlocked = Instant::now();
    java.ok("r", "unlock read/rw2");
    writer.woken_within_handoff(unlocked, "Java's read unlock -> Rust writer");
    java.assert_cannot_take("r", "read/rw2");
    writer.release();
    assert!(!exists(&server, "rw2"));
}

fn java_read_unlock_keeps_the_hash_while_a_rust_reader_holds(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    java.ok("r", "lock read/rw3");
    let read = client.read_write_lock("rw3").read_lock();
    let (tx, rx) = mpsc::channel();
    let rust = Held::spawn(move || {
        let guard = read.lock().expect("read");
        tx.send(read.hold_count().expect("count")).expect("report");
        guard
    });
    assert_eq!(rx.recv().expect("count"), 1);
    java.ok("r", "unlock read/rw3");
    assert!(
        exists(&server, "rw3"),
        "Java's unlock deleted a lock a Rust reader holds"
    );
    let pttl = pttl(&server, "rw3");
    assert!(pttl > 20_000, "the Rust reader's marker keeps it: {pttl}");
    java.assert_cannot_take("w", "write/rw3");
    rust.release();
    assert!(!exists(&server, "rw3"));
    assert!(java.flag("w", "tryLockNow write/rw3"));
    java.ok("w", "unlock write/rw3");
}

fn rust_read_unlock_keeps_the_hash_while_a_java_reader_holds(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    java.ok("r", "lock read/rw4");
    let read = client.read_write_lock("rw4").read_lock();
    read.lock().expect("read").unlock().expect("read unlock");
    assert!(
        exists(&server, "rw4"),
        "a Rust unlock deleted a lock Java reads"
    );
    let pttl = pttl(&server, "rw4");
    assert!(pttl > 20_000, "the Java reader's marker keeps it: {pttl}");
    assert!(java.flag("r", "isHeldByCurrentThread read/rw4"));
    let write = client.read_write_lock("rw4").write_lock();
    assert!(
        write.try_lock().expect("try_lock").is_none(),
        "Rust wrote while Java reads"
    );
    java.ok("r", "unlock read/rw4");
    assert!(!exists(&server, "rw4"));
}

fn rust_watchdog_keeps_a_rust_reader_alive_while_java_readers_come_and_go(redisson: Redisson) {
    let (server, java) = start(redisson);
    let lease = Duration::from_millis(600);
    let client = server.watchdog_client(lease);
    let read = client.read_write_lock("rw5").read_lock();
    let (tx, rx) = mpsc::channel();
    let rust = Held::spawn(move || {
        let guard = read.lock().expect("read");
        tx.send(client.owner_field()).expect("report");
        guard
    });
    let field = rx.recv().expect("field");
    let started = Instant::now();
    let mut round = 0;
    while started.elapsed() < lease * 5 {
        let actor = format!("r{}", round % 2);
        java.ok(&actor, "lockLease read/rw5 300");
        thread::sleep(Duration::from_millis(100));
        java.ok(&actor, "unlock read/rw5");
        thread::sleep(Duration::from_millis(100));
        round += 1;
    }
    let marker = format!("{{rw5}}:{field}:rwlock_timeout:1");
    let pttl = pttl(&server, &marker);
    assert!(pttl > 0, "the Rust reader's marker was not renewed: {pttl}");
    assert!(
        exists(&server, "rw5"),
        "the lock was lost despite the watchdog"
    );
    java.assert_cannot_take("w", "write/rw5");
    rust.release();
    assert!(eventually(Duration::from_secs(2), || !exists(
        &server, "rw5"
    )));
}

fn java_write_unlock_wakes_rust_readers(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    java.ok("w", "lock write/rw6");
    let readers: Vec<Held> = (0..2)
        .map(|_| {
            let read = client.read_write_lock("rw6").read_lock();
            Held::spawn(move || read.lock().expect("read"))
        })
        .collect();
    assert!(eventually(Duration::from_secs(10), || client
        .diagnostics()
        .waiters
        == 2));
    let unlocked = Instant::now();
    java.ok("w", "unlock write/rw6");
    for reader in &readers {
        reader.woken_within_handoff(unlocked, "Java's write unlock -> Rust reader");
    }
    for reader in readers {
        reader.release();
    }
    assert!(!exists(&server, "rw6"));
}

fn rust_write_unlock_wakes_java_readers(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let write = client.read_write_lock("rw7").write_lock();
    let writer = Held::spawn(move || write.lock().expect("write"));
    writer
        .acquired_within(Duration::from_secs(10))
        .expect("Rust writes");
    java.send("r1", "lock read/rw7");
    java.send("r2", "lock read/rw7");
    assert!(eventually(Duration::from_secs(10), || {
        let (_, subscribers): (String, i64) =
            server.cmd(&["PUBSUB", "NUMSUB", "redisson_rwlock:{rw7}"]);
        subscribers >= 1
    }));
    thread::sleep(Duration::from_millis(200));
    let released = writer.release();
    for actor in ["r1", "r2"] {
        let reply = java.recv(actor);
        assert!(reply.ok, "{}", reply.line);
        let took = reply.at.saturating_duration_since(released);
        assert!(
            took < HANDOFF,
            "Java reader {actor} answered {took:?} after the Rust unlock"
        );
    }
    java.ok("r1", "unlock read/rw7");
    java.ok("r2", "unlock read/rw7");
    assert!(!exists(&server, "rw7"));
}
