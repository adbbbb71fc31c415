//! Introspection against a real redis-server: `Client::inspect` of every
//! kind held by this crate, of an absent lock and of keys that are no lock;
//! `Client::scan_locks` over locks and other keys; the owner-guarded force
//! unlock (`Lock::force_unlock_owned_by`): a stale owner changes nothing, the
//! right one wakes another client's waiter at once. The same in a Redis
//! Cluster (3 masters, started once for this binary, only by the tests that
//! use it). With `--features serde`, the JSON shape.

mod support;

use std::any::Any;
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error, HolderSide, Kind, Lock, LockKind, LostReason, RwMode};
use support::RedisServer;
use support::cluster::Cluster;
use support::eventually;
use support::state::{WRITE_LOCKED, lock_twice};

/// A waiter must be woken by the unlock message, not by a TTL running out.
const WAKE: Duration = Duration::from_secs(1);

/// A hold taken on its own thread, kept until released.
struct Held {
    field: String,
    release: mpsc::Sender<()>,
    join: JoinHandle<()>,
}

impl Held {
    fn release(self) {
        let _ = self.release.send(());
        self.join.join().expect("holder thread");
    }
}

/// Runs `take` on a new thread (it returns the thread's owner field and its
/// guard), and keeps the guard until [`Held::release`].
fn hold(take: impl FnOnce() -> (String, Box<dyn Any>) + Send + 'static) -> Held {
    let (field_tx, field_rx) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let join = thread::spawn(move || {
        let (field, guard) = take();
        field_tx.send(field).expect("send field");
        let _ = release_rx.recv();
        drop(guard);
    });
    let field = field_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("holder got its lock");
    Held {
        field,
        release,
        join,
    }
}

/// Runs `wait` (a blocking acquire and release) on a new thread; the
/// receiver gets the instant it acquired.
fn waiter(wait: impl FnOnce() + Send + 'static) -> (mpsc::Receiver<Instant>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let join = thread::spawn(move || {
        wait();
        let _ = tx.send(Instant::now());
    });
    (rx, join)
}

fn assert_ttl_near(ttl: Option<Duration>, around: Duration) {
    let ttl = ttl.expect("a TTL");
    assert!(
        ttl <= around && ttl + Duration::from_secs(5) >= around,
        "ttl {ttl:?} not near {around:?}"
    );
}

#[test]
fn reentrant_lock_held_twice() {
    let (_server, client) = RedisServer::start_with_client();
    let lock = client.lock("r");
    let (_a, _b) = lock_twice(&lock);
    let info = client.inspect("r").expect("inspect");
    assert!(info.locked);
    assert_eq!(info.kind, LockKind::Reentrant);
    assert_eq!(info.name, "r");
    assert_ttl_near(info.ttl, Duration::from_secs(30));
    assert!(!info.persistent);
    assert_eq!(info.holders.len(), 1);
    let holder = &info.holders[0];
    assert_eq!(holder.client_id, client.id());
    assert_eq!(holder.thread_id, Client::thread_id());
    assert_eq!(holder.count, 2);
    assert_eq!(holder.side, HolderSide::Exclusive);
    assert_eq!(holder.field(), client.owner_field());
    assert!(holder.marker_ttls.is_empty());
    assert!(info.queue.is_empty());
    assert_eq!(info.token, None);
    assert!(info.server_time_ms > 1_600_000_000_000);
}

#[test]
fn fair_lock_with_three_queued_waiters_in_order() {
    let (server, client) = RedisServer::start_with_client();
    let holder = client.fair_lock("f").lock().expect("lock");
    let queue_key = "redisson_lock_queue:{f}";
    let mut fields = Vec::new();
    let mut waiters = Vec::new();
    for i in 0..3 {
        let other = Client::open(server.url()).expect("client");
        let (field_tx, field_rx) = mpsc::channel();
        waiters.push(waiter(move || {
            field_tx.send(other.owner_field()).expect("field");
            drop(other.fair_lock("f").lock().expect("waiter lock"));
        }));
        fields.push(field_rx.recv().expect("field"));
        assert!(
            eventually(Duration::from_secs(5), || server
                .cmd::<i64>(&["LLEN", queue_key])
                == i + 1),
            "waiter {i} queued"
        );
    }
    let info = client.inspect("f").expect("inspect");
    assert!(info.locked);
    assert_eq!(info.kind, LockKind::Fair);
    assert_eq!(info.holders.len(), 1);
    assert_eq!(info.holders[0].field(), client.owner_field());
    assert_eq!(info.holders[0].count, 1);
    let queued: Vec<String> = info.queue.iter().map(|w| w.field()).collect();
    assert_eq!(queued, fields);
    let mut last = 0;
    for (i, w) in info.queue.iter().enumerate() {
        let deadline = w.deadline_ms.expect("a deadline");
        assert!(deadline > last, "deadlines increase along the queue");
        last = deadline;
        let remaining = w.remaining_ms.expect("remaining");
        // Each waiter queues 300 s (the wait timeout) after the one before
        // it, the first after the holder's lease (30 s); client and server
        // clocks are the same machine's.
        let waits = 300_000 * (i as i64 + 1);
        assert!(
            remaining > waits - 5_000 && remaining <= waits + 30_000,
            "waiter {i}: remaining {remaining}"
        );
        let score: f64 = server
            .cmd::<String>(&["ZSCORE", "redisson_lock_timeout:{f}", &w.field()])
            .parse()
            .expect("score");
        assert_eq!(deadline, score as i64);
    }
    holder.unlock().expect("unlock");
    for (rx, join) in waiters {
        rx.recv_timeout(Duration::from_secs(10)).expect("served");
        join.join().expect("waiter");
    }
    let info = client.inspect("f").expect("inspect");
    assert!(!info.locked);
    assert!(info.queue.is_empty());
}

#[test]
fn read_lock_with_two_readers_and_a_waiting_writer() {
    let (server, client) = RedisServer::start_with_client();
    let readers: Vec<Held> = (0..2)
        .map(|_| {
            let client = client.clone();
            hold(move || {
                let guard = client
                    .read_write_lock("rw")
                    .read_lock()
                    .lock()
                    .expect("read");
                (client.owner_field(), Box::new(guard) as Box<dyn Any>)
            })
        })
        .collect();
    let other = Client::open(server.url()).expect("client");
    let (written, writer) = waiter(move || {
        drop(
            other
                .read_write_lock("rw")
                .write_lock()
                .lock()
                .expect("write"),
        );
    });
    assert!(written.recv_timeout(Duration::from_millis(300)).is_err());
    let info = client.inspect("rw").expect("inspect");
    assert!(info.locked);
    assert_eq!(info.kind, LockKind::ReadWrite { mode: RwMode::Read });
    assert_eq!(info.holders.len(), 2);
    for reader in &readers {
        let holder = info
            .holders
            .iter()
            .find(|h| h.field() == reader.field)
            .expect("reader listed");
        assert_eq!(holder.side, HolderSide::Read);
        assert_eq!(holder.count, 1);
        assert_eq!(holder.marker_ttls.len(), 1);
        assert_ttl_near(holder.marker_ttls[0], Duration::from_secs(30));
    }
    assert_ttl_near(info.ttl, Duration::from_secs(30));
    let mut readers = readers.into_iter();
    readers.next().expect("first").release();
    assert_eq!(client.inspect("rw").expect("inspect").holders.len(), 1);
    readers.next().expect("second").release();
    written
        .recv_timeout(Duration::from_secs(5))
        .expect("writer woken");
    writer.join().expect("writer");
}

#[test]
fn write_lock_with_a_read_hold_of_the_writer() {
    let (_server, client) = RedisServer::start_with_client();
    let rw = client.read_write_lock("w");
    let _write = rw.write_lock().lock().expect("write");
    let info = client.inspect("w").expect("inspect");
    assert_eq!(info.kind, WRITE_LOCKED);
    assert_eq!(info.holders.len(), 1);
    assert_eq!(info.holders[0].side, HolderSide::Write);
    assert_eq!(
        info.holders[0].field(),
        format!("{}:write", client.owner_field())
    );
    let _read = rw.read_lock().lock().expect("the writer reads too");
    let info = client.inspect("w").expect("inspect");
    assert_eq!(info.kind, WRITE_LOCKED);
    let sides: Vec<HolderSide> = info.holders.iter().map(|h| h.side).collect();
    assert!(sides.contains(&HolderSide::Write) && sides.contains(&HolderSide::Read));
    let reader = info
        .holders
        .iter()
        .find(|h| h.side == HolderSide::Read)
        .expect("read hold");
    assert_eq!(reader.marker_ttls.len(), 1);
}

#[test]
fn fenced_spin_and_non_reentrant_locks() {
    let (_server, client) = RedisServer::start_with_client();
    let fenced = client.fenced_lock("fenced").lock().expect("fenced");
    let info = client.inspect("fenced").expect("inspect");
    assert_eq!(info.kind, LockKind::Fenced);
    assert_eq!(info.token, Some(fenced.token()));
    assert_eq!(info.holders[0].count, 1);
    fenced.unlock().expect("unlock");
    let info = client.inspect("fenced").expect("inspect");
    assert!(!info.locked, "free, the token stays");
    assert_eq!(info.kind, LockKind::Fenced);
    assert_eq!(info.token, Some(1));

    let _spin = client
        .spin_lock("spin")
        .with_lease(Duration::from_secs(20))
        .lock()
        .expect("spin");
    let info = client.inspect("spin").expect("inspect");
    assert_eq!(info.kind, LockKind::Reentrant);
    assert_ttl_near(info.ttl, Duration::from_secs(20));
    assert_eq!(info.holders[0].field(), client.owner_field());

    let _nr = client.non_reentrant_lock("nr").lock().expect("nr");
    let info = client.inspect("nr").expect("inspect");
    assert_eq!(info.kind, LockKind::Reentrant);
    assert_eq!(info.holders[0].count, 1);
}

#[test]
fn absent_lock_and_keys_that_are_no_lock() {
    let (server, client) = RedisServer::start_with_client();
    let info = client.inspect("nothing").expect("inspect");
    assert!(!info.locked);
    assert_eq!(info.kind, LockKind::Unknown);
    assert!(info.holders.is_empty() && info.queue.is_empty());
    assert_eq!((info.ttl, info.token, info.persistent), (None, None, false));

    let _: () = server.cmd(&["SET", "s", "x"]);
    let _: () = server.cmd(&["RPUSH", "l", "x"]);
    let _: () = server.cmd(&["HSET", "h", "name", "x"]);
    let _: () = server.cmd(&[
        "HSET",
        "h2",
        "0b6e5c3a-6f43-4d3e-9a57-8f5cbe7c1d2a:1",
        "two",
    ]);
    let _: () = server.cmd(&["SET", "redisson_lock_token:{t}", "not a number"]);
    for name in ["s", "l", "h", "h2", "t"] {
        match client.inspect(name) {
            Err(Error::NotALock { name: got, found }) => {
                assert_eq!(got, name);
                assert!(!found.is_empty());
            }
            other => panic!("{name}: expected NotALock, got {other:?}"),
        }
    }
    assert!(matches!(client.inspect(""), Err(Error::InvalidArgument(_))));
}

#[test]
fn integer_strings_are_counters_and_with_their_zset_permit_expirable_semaphores() {
    let (server, client) = RedisServer::start_with_client();
    let _: () = server.cmd(&["SET", "count", "-2"]);
    let info = client.inspect("count").expect("a counter");
    assert_eq!(info.kind, LockKind::Counter { value: -2 });
    assert!(!info.locked && info.permits.is_empty());

    let sem = client.permit_expirable_semaphore("pes");
    assert!(sem.try_set_permits(3).expect("set"));
    let leased = sem.acquire(Some(Duration::from_secs(60))).expect("leased");
    let permanent = sem.acquire(None).expect("permanent");
    let info = client.inspect("pes").expect("a semaphore");
    assert_eq!(
        info.kind,
        LockKind::PermitExpirableSemaphore { available: 1 }
    );
    assert!(!info.locked);
    assert_eq!(info.permits.len(), 2);
    assert_eq!(info.permits[0].id, leased.ids()[0]);
    let left = info.permits[0].remaining_ms.expect("finite");
    assert!((55_000..=60_000).contains(&left), "{left}");
    assert_eq!(info.permits[1].id, permanent.ids()[0]);
    assert_eq!(info.permits[1].expiry_ms, None);
    // The counter's TTL is reported as a lock's would be.
    let _: () = server.cmd(&["PEXPIRE", "pes", "100000"]);
    assert!(client.inspect("pes").expect("inspect").ttl.is_some());
}

#[test]
fn scan_locks_reports_locks_and_skips_other_keys() {
    let (server, client) = RedisServer::start_with_client();
    let _a = client.lock("job:a").lock().expect("a");
    let _f = client.fair_lock("job:f").lock().expect("f");
    let _r = client
        .read_write_lock("job:rw")
        .read_lock()
        .lock()
        .expect("rw");
    let _t = client.fenced_lock("job:t").lock().expect("t");
    let _outside = client.lock("other").lock().expect("other");
    let _: () = server.cmd(&["SET", "job:string", "x"]);
    let _: () = server.cmd(&["HSET", "job:hash", "k", "v"]);
    // Derived keys match the pattern too: markers, token, queue.
    let waiting = client.clone();
    let (_served, join) = waiter(move || {
        let _ = waiting
            .fair_lock("job:f")
            .try_lock_for(Duration::from_millis(1500));
    });
    assert!(eventually(Duration::from_secs(5), || server
        .cmd::<i64>(&["LLEN", "redisson_lock_queue:{job:f}"])
        == 1));
    let mut found: Vec<(String, LockKind, usize)> = client
        .scan_locks("*job*")
        .page_size(2)
        .map(|s| {
            let s = s.expect("scan");
            assert!(s.locked);
            assert_ttl_near(s.ttl, Duration::from_secs(30));
            (s.name, s.kind, s.holders)
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        found,
        vec![
            ("job:a".to_owned(), LockKind::Reentrant, 1),
            ("job:f".to_owned(), LockKind::Fair, 1),
            (
                "job:rw".to_owned(),
                LockKind::ReadWrite { mode: RwMode::Read },
                1
            ),
            ("job:t".to_owned(), LockKind::Fenced, 1),
        ]
    );
    assert_eq!(client.scan_locks("nomatch*").count(), 0);
    join.join().expect("waiter");
}

#[test]
fn scan_locks_with_synchronizers_reports_counters_and_skips_derived_strings() {
    let (server, client) = RedisServer::start_with_client();
    let _r = client
        .read_write_lock("job:rw")
        .read_lock()
        .lock()
        .expect("rw");
    let _t = client.fenced_lock("job:t").lock().expect("t");
    assert!(client.semaphore("job:sem").try_set_permits(3).expect("sem"));
    assert!(
        client
            .count_down_latch("job:latch")
            .try_set_count(2)
            .expect("latch")
    );
    let pes = client.permit_expirable_semaphore("job:pes");
    assert!(pes.try_set_permits(2).expect("pes"));
    let _permit = pes.acquire(Some(Duration::from_secs(30))).expect("permit");
    let _: () = server.cmd(&["SET", "job:string", "x"]);
    let mut found: Vec<(String, LockKind)> = client
        .scan_locks("*job*")
        .with_synchronizers()
        .page_size(2)
        .map(|s| {
            let s = s.expect("scan");
            (s.name, s.kind)
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        found,
        vec![
            ("job:latch".to_owned(), LockKind::Counter { value: 2 }),
            (
                "job:pes".to_owned(),
                LockKind::PermitExpirableSemaphore { available: 1 }
            ),
            (
                "job:rw".to_owned(),
                LockKind::ReadWrite { mode: RwMode::Read }
            ),
            ("job:sem".to_owned(), LockKind::Counter { value: 3 }),
            ("job:t".to_owned(), LockKind::Fenced),
        ],
        "the token and the reader's marker are strings too, and skipped"
    );
    // Without it, only the held locks.
    assert_eq!(client.scan_locks("*job*").count(), 2);
}

#[test]
fn force_unlock_with_a_stale_owner_changes_nothing() {
    let (server, client) = RedisServer::start_with_client();
    let other = Client::open(server.url()).expect("client");
    let stale = "0b6e5c3a-6f43-4d3e-9a57-8f5cbe7c1d2a:1";
    let guard = client.lock("x").lock().expect("lock");
    assert!(!other.lock("x").force_unlock_owned_by(stale).expect("force"));
    let info = other.inspect("x").expect("inspect");
    assert_eq!(info.holders[0].field(), client.owner_field());
    assert!(!guard.is_lost());
    // Free: false, nothing created.
    assert!(
        !other
            .lock("free")
            .force_unlock_owned_by(stale)
            .expect("force")
    );
    assert!(
        !other
            .fair_lock("free")
            .force_unlock_owned_by(stale)
            .expect("force")
    );
    // The other side of a read/write lock, or another reader: nothing.
    let rw = client.read_write_lock("rw");
    let _read = rw.read_lock().lock().expect("read");
    let reader = client.owner_field();
    assert!(
        !other
            .read_write_lock("rw")
            .write_lock()
            .force_unlock_owned_by(&reader)
            .expect("force")
    );
    assert!(
        !other
            .read_write_lock("rw")
            .read_lock()
            .force_unlock_owned_by(stale)
            .expect("force")
    );
    // A reentrant handle never deletes a read/write lock.
    assert!(
        !other
            .lock("rw")
            .force_unlock_owned_by(&reader)
            .expect("force")
    );
    assert!(client.inspect("rw").expect("inspect").locked);
}

/// Holds `name` with `take` on its own thread of `holder`, queues a waiter
/// of `waiter_client` with `wait`, force-unlocks by the holder's field with
/// `force` from a third client: the waiter gets it within [`WAKE`].
fn force_unlock_wakes(
    holder: Held,
    wait: impl FnOnce() + Send + 'static,
    settle: impl Fn() -> bool,
    force: impl FnOnce(&str) -> bool,
) {
    let (got, join) = waiter(wait);
    assert!(eventually(Duration::from_secs(5), settle), "waiter waiting");
    assert!(got.recv_timeout(Duration::from_millis(200)).is_err());
    let at = Instant::now();
    assert!(force(&holder.field), "deleted");
    let when = got.recv_timeout(Duration::from_secs(10)).expect("woken");
    let took = when.saturating_duration_since(at);
    assert!(took < WAKE, "woken {took:?} after the force unlock");
    join.join().expect("waiter");
    holder.release();
}

/// The three clients of [`force_unlock_wakes_a_waiter`]: the holder's, the
/// waiter's and the one that force-unlocks.
struct Clients {
    holder: Client,
    waiter: Client,
    admin: Client,
}

/// A thread of `holder` holds `held(holder)` (its owner field plus
/// `field_suffix` is the hash field), a thread of `waiter` waits for
/// `waited(waiter)`; once `settle` holds, `admin` force-unlocks
/// `held(admin)` by that field and the waiter gets its lock within [`WAKE`].
fn force_unlock_wakes_a_waiter<H: Kind, W: Kind>(
    clients: &Clients,
    (held, field_suffix): (fn(&Client) -> Lock<H>, &'static str),
    waited: fn(&Client) -> Lock<W>,
    settle: impl Fn() -> bool,
) {
    let h = clients.holder.clone();
    let holder = hold(move || {
        let g = held(&h).lock().expect("lock");
        (
            format!("{}{field_suffix}", h.owner_field()),
            Box::new(g) as Box<dyn Any>,
        )
    });
    let w = clients.waiter.clone();
    force_unlock_wakes(
        holder,
        move || drop(waited(&w).lock().expect("waiter")),
        settle,
        |field| {
            held(&clients.admin)
                .force_unlock_owned_by(field)
                .expect("force")
        },
    );
}

#[test]
fn force_unlock_by_the_owner_wakes_a_waiter_of_every_kind() {
    let server = RedisServer::start();
    let clients = Clients {
        holder: server.client(),
        waiter: server.client(),
        admin: server.client(),
    };
    let subscribed = |channel: &str| {
        let n: Vec<redis::Value> = server.cmd(&["PUBSUB", "NUMSUB", channel]);
        matches!(n.get(1), Some(redis::Value::Int(1)))
    };

    // Reentrant.
    force_unlock_wakes_a_waiter(
        &clients,
        (|c| c.lock("k"), ""),
        |c| c.lock("k"),
        || subscribed("redisson_lock__channel:{k}"),
    );

    // Fair: the head is woken on its own channel.
    force_unlock_wakes_a_waiter(
        &clients,
        (|c| c.fair_lock("fk"), ""),
        |c| c.fair_lock("fk"),
        || server.cmd::<i64>(&["LLEN", "redisson_lock_queue:{fk}"]) == 1,
    );

    // Write side: a reader wakes on message 1.
    force_unlock_wakes_a_waiter(
        &clients,
        (|c| c.read_write_lock("wk").write_lock(), ":write"),
        |c| c.read_write_lock("wk").read_lock(),
        || subscribed("redisson_rwlock:{wk}"),
    );

    // Read side: a writer wakes on message 0.
    force_unlock_wakes_a_waiter(
        &clients,
        (|c| c.read_write_lock("rk").read_lock(), ""),
        |c| c.read_write_lock("rk").write_lock(),
        || subscribed("redisson_rwlock:{rk}"),
    );

    // Spin: no message, the waiter polls (at most 128 ms apart).
    force_unlock_wakes_a_waiter(
        &clients,
        (|c| c.spin_lock("sk"), ""),
        |c| c.spin_lock("sk"),
        || true,
    );

    // Fenced: the reentrant channel; the token stays.
    force_unlock_wakes_a_waiter(
        &clients,
        (|c| c.fenced_lock("tk"), ""),
        |c| c.fenced_lock("tk"),
        || subscribed("redisson_lock__channel:{tk}"),
    );
    assert_eq!(clients.admin.inspect("tk").expect("inspect").token, Some(2));
}

#[test]
fn force_unlock_of_own_lock_marks_the_guard_lost() {
    let (_server, client) = RedisServer::start_with_client();
    let lock = client.lock("own");
    let guard = lock.lock().expect("lock");
    assert!(
        lock.force_unlock_owned_by(&client.owner_field())
            .expect("force")
    );
    assert_eq!(guard.lost_reason(), Some(LostReason::ForceUnlocked));
    assert!(!client.inspect("own").expect("inspect").locked);
}

#[test]
fn cluster_inspect_scan_and_guarded_force_unlock() {
    let cluster = Cluster::shared();
    let client = cluster.client();
    let other = Client::cluster_builder(cluster.urls())
        .build()
        .expect("cluster client");
    let names = cluster.names_on_different_masters("insp-", 3);
    let guards: Vec<_> = names
        .iter()
        .map(|name| client.lock(name.as_str()).lock().expect("lock"))
        .collect();
    let _rw = client
        .read_write_lock(format!("{}-rw", names[0]))
        .read_lock()
        .lock()
        .expect("read");
    let _: () = cluster.owner("insp-plain").cmd(&["SET", "insp-plain", "x"]);
    for name in &names {
        let info = other.inspect(name).expect("inspect");
        assert!(info.locked);
        assert_eq!(info.holders[0].field(), client.owner_field());
    }
    let rw = other.inspect(&format!("{}-rw", names[0])).expect("inspect");
    assert_eq!(rw.holders[0].marker_ttls.len(), 1);
    assert!(matches!(
        other.inspect("insp-plain"),
        Err(Error::NotALock { .. })
    ));
    let mut found: Vec<String> = other
        .scan_locks("insp-*")
        .map(|s| s.expect("scan").name)
        .collect();
    found.sort();
    let mut expected = names.clone();
    expected.push(format!("{}-rw", names[0]));
    expected.sort();
    assert_eq!(found, expected, "every master scanned");

    // Guarded force unlock: stale owner first, then the right one wakes a
    // waiter of a third client.
    drop(guards);
    let name = names[1].clone();
    let h = client.clone();
    let n = name.clone();
    let held = hold(move || {
        let g = h.fair_lock(n.as_str()).lock().expect("lock");
        (h.owner_field(), Box::new(g) as Box<dyn Any>)
    });
    let stale = "0b6e5c3a-6f43-4d3e-9a57-8f5cbe7c1d2a:1";
    assert!(
        !other
            .fair_lock(name.as_str())
            .force_unlock_owned_by(stale)
            .expect("force")
    );
    let third = Client::cluster_builder(cluster.urls())
        .build()
        .expect("cluster client");
    let n = name.clone();
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let owner = cluster.owner(&name);
    force_unlock_wakes(
        held,
        move || drop(third.fair_lock(n.as_str()).lock().expect("waiter")),
        || owner.cmd::<i64>(&["LLEN", &queue]) == 1,
        |field| {
            other
                .fair_lock(name.as_str())
                .force_unlock_owned_by(field)
                .expect("force")
        },
    );
}

#[cfg(feature = "serde")]
#[test]
fn lock_info_serialises_to_the_versioned_json_shape() {
    let (_server, client) = RedisServer::start_with_client();
    let _g = client
        .read_write_lock("j")
        .write_lock()
        .lock()
        .expect("lock");
    let info = client.inspect("j").expect("inspect");
    let json = serde_json::to_value(&info).expect("json");
    assert_eq!(json["version"], 1);
    assert_eq!(json["name"], "j");
    assert_eq!(json["locked"], true);
    assert_eq!(json["kind"], "read_write");
    assert_eq!(json["mode"], "write");
    assert!(json["ttl_ms"].as_u64().is_some());
    assert_eq!(json["persistent"], false);
    assert_eq!(json["token"], serde_json::Value::Null);
    let holder = &json["holders"][0];
    assert_eq!(holder["side"], "write");
    assert_eq!(holder["client_id"], client.id());
    assert_eq!(holder["count"], 1);
    assert_eq!(holder["field"], format!("{}:write", client.owner_field()));
    assert_eq!(holder["lacks_live_marker"], false);
    assert!(json["queue"].as_array().expect("queue").is_empty());
    assert!(json["server_time_ms"].as_u64().is_some());

    let summary = client.scan_locks("*").next().expect("one").expect("scan");
    let json = serde_json::to_value(&summary).expect("json");
    assert_eq!(json["version"], 1);
    assert_eq!(json["holders"], 1);
    assert_eq!(json["kind"], "read_write");
    assert_eq!(json["counter"], serde_json::Value::Null);

    let sem = client.permit_expirable_semaphore("pj");
    assert!(sem.try_set_permits(2).expect("set"));
    let permit = sem.acquire(None).expect("permit");
    let json = serde_json::to_value(client.inspect("pj").expect("inspect")).expect("json");
    assert_eq!(json["kind"], "permit_expirable_semaphore");
    assert_eq!(json["counter"], 1);
    assert_eq!(json["permits"][0]["id"], permit.ids()[0].to_string());
    assert_eq!(json["permits"][0]["expiry_ms"], serde_json::Value::Null);
    assert_eq!(json["permits"][0]["stored_as_hex"], false);
}

/// Issue 34: who a holder is, from the names this crate's connections give
/// themselves; an unnamed (here: raw, as a Java client's would be) holder
/// is not guessed at.
#[test]
fn a_rust_holder_is_identified_by_pid_application_and_address() {
    let server = support::RedisServer::start();
    let holder = redisson_lock::Client::builder(server.url())
        .application_name("billing-v2.1")
        .build()
        .expect("client");
    let _guard = holder.lock("who").lock().expect("lock");
    let stranger = "5f0d3c1e-2b7a-4e55-9a3c-0c1d2e3f4a5b:7";
    server.cmd::<i64>(&["HSET", "who", stranger, "1"]);
    let observer = redisson_lock::Client::open(server.url()).expect("observer");
    let info = observer.inspect("who").expect("inspect");
    assert_eq!(info.holders.len(), 2);
    let found = observer.identify_holders(&info).expect("identify");
    assert_eq!(found.len(), 1, "{found:?}");
    let process = &found[holder.id()];
    assert_eq!(process.pid, std::process::id());
    assert_eq!(process.application.as_deref(), Some("billing-v2.1"));
    assert!(!process.addresses.is_empty());
    assert!(
        process
            .addresses
            .iter()
            .all(|a| a.starts_with("127.0.0.1:"))
    );
    let names: String = server.cmd(&["CLIENT", "LIST"]);
    assert!(names.contains(&format!(
        "name=redisson-lock/{}/{}/billing-v2.1",
        holder.id(),
        std::process::id()
    )));
    for bad in ["", "has space", "slash/", &"x".repeat(65)] {
        let e = redisson_lock::Client::builder(server.url())
            .application_name(bad)
            .build()
            .expect_err(bad);
        assert!(
            matches!(e, redisson_lock::Error::InvalidArgument(_)),
            "{bad}: {e:?}"
        );
    }
}
