//! The read/write lock's own behaviour (the shared cases are in
//! `conformance.rs`): readers share and writers wait for the last one, woken
//! by its message; a write release wakes every reader; write reentry adds the
//! lease; the downgrade; the reader markers and the max-over-markers rule;
//! lost replies; the watchdog renewing only a reader's own markers.

mod support;

use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redisson_lock::{Client, ReadLock};
use support::proxy::{Fault, Proxy};
use support::state::{hgetall, pttl};
use support::{RedisServer, eventually};

/// A waiter woken by a message gets the lock well within this; a poll would
/// sleep out a ~30 s TTL.
const HANDOFF: Duration = Duration::from_millis(200);

fn client(server: &RedisServer) -> Client {
    server.client()
}

/// A reader holding `lock` on its own thread until told to release.
struct Reader {
    release: mpsc::Sender<()>,
    thread: JoinHandle<()>,
}

impl Reader {
    fn hold(lock: ReadLock) -> Reader {
        let (locked_tx, locked_rx) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let thread = thread::spawn(move || {
            let guard = lock.lock().expect("read lock");
            locked_tx.send(()).expect("report");
            let _ = release_rx.recv();
            guard.unlock().expect("read unlock");
        });
        locked_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the reader got its hold");
        Reader { release, thread }
    }

    fn unlock(self) {
        self.release.send(()).expect("release");
        self.thread.join().expect("reader");
    }
}

#[test]
fn readers_of_two_clients_share_and_the_last_one_wakes_a_waiting_writer() {
    let server = RedisServer::start();
    let (a, b, c) = (client(&server), client(&server), client(&server));
    let first = Reader::hold(a.read_write_lock("rw").read_lock());
    let second = Reader::hold(b.read_write_lock("rw").read_lock());
    assert_eq!(hgetall(&server, "rw").len(), 3, "mode and two readers");
    let write = c.read_write_lock("rw").write_lock();
    let writer = thread::spawn(move || {
        let guard = write.lock().expect("write lock");
        let at = Instant::now();
        guard.unlock().expect("write unlock");
        at
    });
    assert!(eventually(Duration::from_secs(5), || c
        .diagnostics()
        .waiters
        == 1));
    first.unlock();
    thread::sleep(Duration::from_millis(300));
    assert!(!writer.is_finished(), "the writer got in past a reader");
    assert!(
        pttl(&server, "rw") > 20_000,
        "the lease is the 30 s watchdog's"
    );
    let released = Instant::now();
    second.unlock();
    let got = writer.join().expect("writer");
    let took = got.saturating_duration_since(released);
    assert!(took < HANDOFF, "woken {took:?} after the last reader left");
    assert_eq!(server.cmd::<i64>(&["EXISTS", "rw"]), 0);
}

#[test]
fn a_write_release_publishes_1_and_wakes_every_waiting_reader() {
    let server = RedisServer::start();
    let (holder, readers) = (client(&server), client(&server));
    let mut published = server.subscriber(&["redisson_rwlock:{rw}"]);
    let guard = holder
        .read_write_lock("rw")
        .write_lock()
        .lock()
        .expect("write");
    let (tx, rx) = mpsc::channel();
    let waiting: Vec<_> = (0..3)
        .map(|_| {
            let (lock, tx) = (readers.read_write_lock("rw").read_lock(), tx.clone());
            thread::spawn(move || {
                let guard = lock.lock().expect("read lock");
                tx.send(Instant::now()).expect("report");
                // Hold until every reader is in: they share.
                thread::sleep(Duration::from_millis(300));
                guard.unlock().expect("read unlock");
            })
        })
        .collect();
    assert!(eventually(Duration::from_secs(5), || readers
        .diagnostics()
        .waiters
        == 3));
    assert!(
        !holder
            .read_write_lock("rw")
            .read_lock()
            .is_locked()
            .expect("is_locked")
    );
    let released = Instant::now();
    guard.unlock().expect("write unlock");
    for _ in 0..3 {
        let at = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("a reader woke");
        let took = at.saturating_duration_since(released);
        assert!(took < HANDOFF, "a reader got in {took:?} after the release");
    }
    for reader in waiting {
        reader.join().expect("reader");
    }
    let message = published
        .next_message(Duration::from_secs(2))
        .expect("published");
    assert_eq!(message.payload, "1", "a write release wakes all");
    let rest = published.messages_within(Duration::from_millis(300));
    assert_eq!(rest.len(), 1, "one `0` from the last reader: {rest:?}");
    assert_eq!(rest[0].payload, "0");
}

#[test]
fn reentrant_write_adds_the_lease_to_the_remaining_ttl() {
    let server = RedisServer::start();
    let client = client(&server);
    let write = client
        .read_write_lock("rw")
        .write_lock()
        .with_lease(Duration::from_secs(10));
    let first = write.lock().expect("write");
    let ttl = pttl(&server, "rw");
    assert!((9_000..=10_000).contains(&ttl), "{ttl}");
    let second = write.lock().expect("reentry");
    let ttl = pttl(&server, "rw");
    assert!((19_000..=20_000).contains(&ttl), "lease added: {ttl}");
    let field = format!("{}:write", client.owner_field());
    assert_eq!(
        hgetall(&server, "rw").get(&field).map(String::as_str),
        Some("2")
    );
    assert_eq!(write.hold_count().expect("count"), 2);
    drop(second);
    drop(first);
    assert_eq!(server.cmd::<i64>(&["EXISTS", "rw"]), 0);
}

#[test]
fn a_write_release_with_read_holds_downgrades_without_a_message() {
    let server = RedisServer::start();
    let client = client(&server);
    let rw = client.read_write_lock("rw");
    let mut published = server.subscriber(&["redisson_rwlock:{rw}"]);
    let write = rw.write_lock().lock().expect("write");
    let read = rw.read_lock().lock().expect("the writer reads");
    assert!(
        rw.read_lock()
            .is_locked()
            .expect("read is_locked: 3 fields")
    );
    write.unlock().expect("write unlock");
    let state = hgetall(&server, "rw");
    assert_eq!(state.get("mode").map(String::as_str), Some("read"));
    assert_eq!(
        state.get(&client.owner_field()).map(String::as_str),
        Some("1")
    );
    assert_eq!(state.len(), 2, "{state:?}");
    assert!(
        published
            .messages_within(Duration::from_millis(300))
            .is_empty()
    );
    assert!(!rw.write_lock().is_locked().expect("write is_locked"));
    assert!(!read.is_lost());
    read.unlock().expect("read unlock");
    assert_eq!(server.cmd::<i64>(&["EXISTS", "rw"]), 0);
    let message = published
        .next_message(Duration::from_secs(2))
        .expect("published");
    assert_eq!(message.payload, "0");
}

#[test]
fn every_read_hold_has_its_own_marker_with_its_own_lease() {
    let server = RedisServer::start();
    let client = client(&server);
    for (name, prefix) in [("rw", "{rw}"), ("{t}rw", "{t}rw")] {
        let read = client.read_write_lock(name).read_lock();
        let field = client.owner_field();
        let marker = |n: u32| format!("{prefix}:{field}:rwlock_timeout:{n}");
        let short = read
            .with_lease(Duration::from_secs(10))
            .lock()
            .expect("read");
        let long = read
            .with_lease(Duration::from_secs(20))
            .lock()
            .expect("reentry");
        let one = pttl(&server, &marker(1));
        let two = pttl(&server, &marker(2));
        assert!((9_000..=10_000).contains(&one), "{name}: marker 1 {one}");
        assert!((19_000..=20_000).contains(&two), "{name}: marker 2 {two}");
        assert!(pttl(&server, name) >= 19_000, "hash: max(PTTL, lease)");
        assert_eq!(server.cmd::<String>(&["GET", &marker(1)]), "1");
        drop(long);
        assert_eq!(pttl(&server, &marker(2)), -2, "the released hold's marker");
        let ttl = pttl(&server, name);
        assert!(
            ttl <= 10_000,
            "{name}: the hash lives as long as marker 1: {ttl}"
        );
        drop(short);
        assert_eq!(pttl(&server, &marker(1)), -2);
        assert_eq!(server.cmd::<i64>(&["EXISTS", name]), 0);
    }
}

#[test]
fn a_read_unlock_keeps_the_hash_while_another_readers_marker_lives() {
    let server = RedisServer::start();
    let (a, b) = (client(&server), client(&server));
    let long = Reader::hold(a.read_write_lock("rw").read_lock());
    let short = b
        .read_write_lock("rw")
        .read_lock()
        .with_lease(Duration::from_secs(5))
        .lock()
        .expect("read");
    long.unlock();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "rw"]), 1, "b still reads");
    let ttl = pttl(&server, "rw");
    assert!(
        (4_000..=5_000).contains(&ttl),
        "the max over b's markers: {ttl}"
    );
    // A reader without any live marker does not keep the hash.
    let _: i64 = server.cmd(&["HSET", "rw", "ghost:1", "1"]);
    short.unlock().expect("read unlock");
    assert_eq!(server.cmd::<i64>(&["EXISTS", "rw"]), 0, "no marker lives");
}

#[test]
fn a_lost_reentry_reply_counts_once_for_readers_and_writers() {
    let (server, proxy, client) = Proxy::with_client();
    let rw = client.read_write_lock("lost-reply");
    let write = rw.write_lock().with_lease(Duration::from_secs(10));
    let first = write.lock().expect("write");
    proxy.arm("lost-reply", Fault::DropReplyAndClose);
    let second = write.lock().expect("reentry");
    assert_eq!(proxy.injected(), 1);
    assert_eq!(write.hold_count().expect("count"), 2);
    let ttl = pttl(&server, "lost-reply");
    assert!(ttl <= 20_000, "the resend added the lease twice: {ttl}");
    let read = rw.read_lock();
    let r1 = read.lock().expect("the writer reads");
    proxy.arm("lost-reply", Fault::DropReplyAndClose);
    let r2 = read.lock().expect("read reentry");
    assert_eq!(proxy.injected(), 2);
    assert_eq!(read.hold_count().expect("count"), 2);
    let field = client.owner_field();
    let marker = |n: u32| format!("{{lost-reply}}:{field}:rwlock_timeout:{n}");
    assert!(pttl(&server, &marker(2)) > 0);
    assert_eq!(pttl(&server, &marker(3)), -2, "no phantom marker");
    drop((second, first, r2, r1));
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "lost-reply"]),
        0,
        "a phantom hold kept it"
    );
}

#[test]
fn the_watchdog_renews_only_its_own_read_markers_while_others_come_and_go() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(600);
    let watched = server.watchdog_client(lease);
    let other = client(&server);
    let read = watched.read_write_lock("rw").read_lock();
    let guard = read.lock().expect("read");
    let mine = format!("{{rw}}:{}:rwlock_timeout:1", watched.owner_field());
    // A foreign reader (Java, say) whose marker must be left to expire.
    let _: i64 = server.cmd(&["HSET", "rw", "foreign:7", "1"]);
    let _: String = server.cmd(&["SET", "{rw}:foreign:7:rwlock_timeout:1", "1", "PX", "700"]);
    let started = Instant::now();
    let others = other.read_write_lock("rw").read_lock();
    while started.elapsed() < lease * 5 {
        let short = others
            .with_lease(Duration::from_millis(300))
            .lock()
            .expect("read");
        thread::sleep(Duration::from_millis(100));
        short.unlock().expect("read unlock");
        thread::sleep(Duration::from_millis(100));
    }
    assert!(!guard.is_lost(), "lost despite the watchdog");
    assert!(pttl(&server, &mine) > 0, "its own marker is renewed");
    assert_eq!(
        pttl(&server, "{rw}:foreign:7:rwlock_timeout:1"),
        -2,
        "a foreign reader's marker was renewed"
    );
    assert!(read.is_locked().expect("is_locked"));
    let _: i64 = server.cmd(&["HDEL", "rw", "foreign:7"]);
    guard.unlock().expect("read unlock");
    assert_eq!(server.cmd::<i64>(&["EXISTS", "rw"]), 0);
}

#[test]
fn a_partial_read_release_brings_the_deadline_down_to_the_remaining_markers() {
    // Hold 1 with a 700 ms lease, hold 2 with 30 s: the hash lives 30 s.
    // Releasing hold 2 deletes its marker and the hash now lives as long as
    // marker 1, 700 ms: the remaining guard must say it is lost no later than
    // a writer of another client gets in.
    let (server, client) = RedisServer::start_with_client();
    let other = Client::open(server.url()).expect("other");
    let rw = client.read_write_lock("shrinking");
    let short = rw
        .read_lock()
        .with_lease(Duration::from_millis(700))
        .lock()
        .expect("read 1");
    let long = rw
        .read_lock()
        .with_lease(Duration::from_secs(30))
        .lock()
        .expect("read 2");
    long.unlock().expect("partial release");
    let ttl = pttl(&server, "shrinking");
    assert!(ttl > 0 && ttl <= 700, "PTTL {ttl}");
    let writer = other.read_write_lock("shrinking").write_lock();
    let deadline = Instant::now() + Duration::from_secs(5);
    let taken = loop {
        if let Some(guard) = writer.try_lock().expect("try_lock") {
            break guard;
        }
        assert!(Instant::now() < deadline, "the writer never got in");
        std::thread::sleep(Duration::from_millis(2));
    };
    assert!(
        short.is_lost(),
        "a writer got in while the remaining reader said it held the lock"
    );
    drop(taken);
}
