//! Redisson's synchronizers (the semaphore, the permit-expirable semaphore
//! and the count-down latch) woken in the two replicated topologies, with
//! real Redisson on the Java side:
//!
//! * Redis Sentinel (a master, two replicas, three sentinels, started once
//!   for this binary; the tests using it are serialized by its lock): a Rust
//!   semaphore waiter and a Rust permit-expirable semaphore waiter, each
//!   begun before `SENTINEL FAILOVER`, are woken by a release made on the
//!   new master, and a Rust latch waiter by a count-down to 0 made there; a Rust latch waiter begun before the failover is woken by a
//!   Java `countDown` and a Java `acquire()` by a Rust release, the Redisson
//!   client connected through the same sentinels (`useSentinelServers`).
//! * Redis 7 Cluster (3 masters + 3 replicas, started once for this binary;
//!   its tests serialized by [`CLUSTER_SERIAL`]), sharded pub/sub: Java's
//!   semaphore `acquire()` woken by a Rust release, a Rust semaphore waiter
//!   by a Java release, Java's latch `await()` by a Rust `count_down`, and
//!   Java's permit-expirable `acquire()` by a Rust release of a permit id
//!   another Java thread took; each release `SPUBLISH`es on the slot's
//!   master and `PUBLISH`es nothing.
//!
//! Every Java scenario runs on Redisson's newest release and on 3.24.3.
//! Java's `acquire()` and `await()` have no timer: only the message can
//! wake them. A Rust waiter re-reads at least every 3 s on its own, so a
//! release that should wake one is made just after the master saw one of
//! its re-reads ([`release_after_a_repoll`]): a wake-up within
//! [`WAKE_BOUND`] then came from the message. The bounds are functional
//! limits, not speed targets.

mod support;

use std::sync::{Mutex, MutexGuard, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, PermitId};
use support::cluster::{self, Cluster, Node};
use support::eventually;
use support::java::{JavaDriver, Redisson, for_each_redisson_version};
use support::sentinel::{MASTER_NAME, SentinelSetup, con, role};

/// A wake-up by the message, far under a Rust waiter's 3 s re-read after
/// the one just seen; Java's waiters have no re-read at all.
const WAKE_BOUND: Duration = Duration::from_secs(2);

/// How long a waiter is watched to stay out while it must.
const KEPT_OUT: Duration = Duration::from_millis(700);

for_each_redisson_version!(
    sentinel_java_and_rust_wake_each_other_after_a_failover,
    cluster_rust_release_wakes_a_java_semaphore_acquire,
    cluster_java_release_wakes_a_rust_semaphore_waiter,
    cluster_rust_count_down_wakes_a_java_latch_await,
    cluster_rust_release_of_a_java_permit_wakes_a_java_expirable_acquire,
);

// ---------------------------------------------------------------------------
// Sentinel

fn sentinel_client(setup: &SentinelSetup) -> Client {
    Client::sentinel_builder(MASTER_NAME, setup.sentinel_urls())
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("build a Sentinel client")
}

/// The shared Sentinel setup, flushed, for this test alone while the guard
/// lives, and two clients of it.
fn sentinel_scenario() -> (&'static SentinelSetup, MutexGuard<'static, ()>, [Client; 2]) {
    let (setup, serial) = SentinelSetup::shared();
    setup.flush();
    (
        setup,
        serial,
        [sentinel_client(setup), sentinel_client(setup)],
    )
}

fn sentinel_java(setup: &SentinelSetup, redisson: Redisson) -> JavaDriver {
    let target = format!("sentinel:{MASTER_NAME}:{}", setup.sentinel_urls().join(","));
    let java = JavaDriver::start(redisson, &target, Duration::from_secs(30));
    java.warm_up();
    java
}

/// Subscribers of `channel` on the data node at `port`.
fn subscribers(port: u16, channel: &str) -> i64 {
    let reply: (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(&mut con(port))
        .expect("PUBSUB NUMSUB");
    reply.1
}

/// `WAIT 2`: what the master has is on both replicas.
fn replicated(master: u16) {
    let acked: i64 = redis::cmd("WAIT")
        .arg(2)
        .arg(5000)
        .query(&mut con(master))
        .expect("WAIT");
    assert_eq!(acked, 2, "the state is on both replicas");
}

/// `SENTINEL FAILOVER`, then waits until the former master is demoted and
/// the subscriptions on `channels` (`wanted` subscribers each) moved to the
/// new master, and until the clients' next master look-up (every second).
/// Returns the new master's port.
fn failover_with_subscribers(setup: &SentinelSetup, channels: &[(&str, i64)]) -> u16 {
    let (old, new) = setup.failover();
    eprintln!("failover {old} -> {new}");
    assert!(
        eventually(Duration::from_secs(30), || role(old).as_deref()
            == Some("slave")),
        "the sentinels demote the former master"
    );
    for &(channel, wanted) in channels {
        assert!(
            eventually(Duration::from_secs(15), || subscribers(new, channel)
                >= wanted),
            "{channel}: the subscription did not move to the new master"
        );
    }
    thread::sleep(Duration::from_millis(1500));
    new
}

/// With the state of the waiter's object written on the master: `wait`
/// runs in a thread (see [`spawn_waiter`]) and subscribes to `channel`
/// there; the master fails over, the subscription follows it, and the
/// waiter must still be waiting. The waiter's receiver and the new
/// master's port.
fn waiting_across_a_failover(
    setup: &SentinelSetup,
    channel: &str,
    wait: impl FnOnce() + Send + 'static,
) -> (mpsc::Receiver<Instant>, u16) {
    let old = setup.master_port();
    replicated(old);
    let woken = spawn_waiter(wait);
    assert!(
        eventually(Duration::from_secs(5), || subscribers(old, channel) == 1),
        "the waiter subscribed on the master"
    );
    let new = failover_with_subscribers(setup, &[(channel, 1)]);
    assert!(
        woken.try_recv().is_err(),
        "the waiter got through before the failover"
    );
    (woken, new)
}

/// A Rust semaphore waiter (`acquire(1)`, no timeout) begun on the old
/// master is kept out across the failover (the zero count replicated) and
/// woken by a release on the new master from another client.
#[test]
fn sentinel_rust_semaphore_waiter_is_woken_by_a_release_on_the_new_master() {
    let (setup, _serial, [waiting, releasing]) = sentinel_scenario();
    let name = "st-sem";
    let channel = "redisson_sc:{st-sem}";
    let sem = waiting.semaphore(name);
    assert!(sem.try_set_permits(1).expect("try_set"));
    sem.acquire(1).expect("the only permit").forget();
    let (woken, new) = waiting_across_a_failover(setup, channel, {
        let sem = sem.clone();
        move || {
            sem.acquire(1)
                .expect("acquire across the failover")
                .forget();
        }
    });
    let count: Option<String> = redis::cmd("GET")
        .arg(name)
        .query(&mut con(new))
        .expect("GET");
    assert_eq!(count.as_deref(), Some("0"), "the count on the new master");

    let mut scripts = Calls::new(con(new), &["evalsha", "eval"]);
    let released = release_after_a_repoll(&mut scripts, || {
        releasing.semaphore(name).release(1).expect("release")
    });
    woken_within(&woken, released, "release on the new master -> Rust sem");
    assert_eq!(sem.available_permits().expect("available"), 0);
}

/// The same for a permit-expirable semaphore: the waiter (`acquire(None)`)
/// is woken by the release, on the new master, of the permanent permit
/// whose id the old master handed out.
#[test]
fn sentinel_rust_expirable_waiter_is_woken_by_a_release_on_the_new_master() {
    let (setup, _serial, [waiting, releasing]) = sentinel_scenario();
    let name = "st-pes";
    let channel = "redisson_sc:{st-pes}";
    let sem = waiting.permit_expirable_semaphore(name);
    assert!(sem.try_set_permits(1).expect("set"));
    let held: PermitId = sem.acquire(None).expect("the only permit").forget()[0];
    let (ids_tx, ids) = mpsc::channel();
    let (woken, new) = waiting_across_a_failover(setup, channel, {
        let sem = sem.clone();
        move || {
            let got = sem.acquire(None).expect("acquire across the failover");
            ids_tx.send(got.forget()).expect("send the ids");
        }
    });
    let acquired: i64 = redis::cmd("ZCARD")
        .arg("{st-pes}:timeout")
        .query(&mut con(new))
        .expect("ZCARD");
    assert_eq!(acquired, 1, "the held permit is on the new master");

    let mut scripts = Calls::new(con(new), &["evalsha", "eval"]);
    let released = release_after_a_repoll(&mut scripts, || {
        releasing
            .permit_expirable_semaphore(name)
            .release(held)
            .expect("release the old master's id")
    });
    woken_within(&woken, released, "release on the new master -> Rust PES");
    let got = ids.recv_timeout(Duration::from_secs(5)).expect("the ids");
    assert_eq!(got.len(), 1);
    assert_ne!(got[0], held);
    assert_eq!(sem.lease_time(got[0]).expect("lease"), None, "permanent");
    sem.release(got[0]).expect("release the waiter's permit");
    assert_eq!(sem.available_permits().expect("available"), 1);
}

/// A Rust latch waiter (`wait()`) begun on the old master is woken, through
/// its subscription moved to the new master, by a count-down to 0 made
/// there by another client: by the message, well before its 3 s re-read.
#[test]
fn sentinel_rust_latch_waiter_is_woken_by_a_count_down_on_the_new_master() {
    let (setup, _serial, [waiting, counting]) = sentinel_scenario();
    let name = "st-latch";
    let latch = waiting.count_down_latch(name);
    assert!(latch.try_set_count(1).expect("set"));
    let channel = "redisson_countdownlatch__channel__{st-latch}";
    let (woken, new) = waiting_across_a_failover(setup, channel, {
        let latch = latch.clone();
        move || latch.wait().expect("wait across the failover")
    });
    let sent = Instant::now();
    counting
        .count_down_latch(name)
        .count_down()
        .expect("count down on the new master");
    // By the message on the new master, not the 3 s re-poll.
    let what = "count-down on the new master -> Rust latch";
    woken_within_bound(&woken, sent, Duration::from_millis(500), what);
    let exists: bool = redis::cmd("EXISTS")
        .arg(name)
        .query(&mut con(new))
        .expect("EXISTS");
    assert!(!exists, "counted down to 0 on the new master");
}

/// A Rust latch waiter and a Java `sem.acquire` (no timeout), both begun
/// on the old master, stay waiting across the failover; on the new master
/// a Rust release wakes the Java acquire and a Java `countDown` wakes the
/// Rust waiter.
fn sentinel_java_and_rust_wake_each_other_after_a_failover(redisson: Redisson) {
    let (setup, _serial, [waiting, releasing]) = sentinel_scenario();
    let java = sentinel_java(setup, redisson);
    let latch_name = format!("sj-latch-{}", redisson.version());
    let latch_channel = format!("redisson_countdownlatch__channel__{{{latch_name}}}");
    let sem_name = format!("sj-sem-{}", redisson.version());
    let sem_channel = format!("redisson_sc:{{{sem_name}}}");

    let latch = waiting.count_down_latch(latch_name.as_str());
    assert!(latch.try_set_count(1).expect("set"));
    let old = setup.master_port();
    replicated(old);
    let woken = spawn_waiter({
        let latch = latch.clone();
        move || latch.wait().expect("wait across the failover")
    });
    java.send("j", &format!("sem.acquire {sem_name} 1"));
    assert!(
        eventually(Duration::from_secs(10), || subscribers(old, &latch_channel)
            == 1
            && subscribers(old, &sem_channel) >= 1),
        "the Rust and the Java waiter subscribed on the master"
    );

    let new = failover_with_subscribers(setup, &[(&latch_channel, 1), (&sem_channel, 1)]);
    assert!(woken.try_recv().is_err(), "the latch opened at count 1");
    assert!(
        java.try_recv("j", Duration::ZERO).is_none(),
        "Java acquired from 0 permits"
    );

    // Java has no re-read: only the release's message, on the new master,
    // can wake it.
    let released = Instant::now();
    releasing
        .semaphore(sem_name.as_str())
        .release(1)
        .expect("release on the new master");
    let reply = java
        .try_recv("j", Duration::from_secs(20))
        .expect("Java's acquire() was never woken after the failover");
    assert!(reply.ok, "{}", reply.line);
    let took = reply.at.saturating_duration_since(released);
    eprintln!("{}: Rust release -> Java acquire {took:?}", java.version);
    assert!(took < WAKE_BOUND, "Java woken {took:?} after the release");
    assert_eq!(
        releasing
            .semaphore(sem_name.as_str())
            .available_permits()
            .expect("available"),
        0
    );

    // The Rust waiter re-reads the count with GET; nothing else GETs here.
    let mut reads = Calls::new(con(new), &["get"]);
    let counted = release_after_a_repoll(&mut reads, || {
        java.ok("j", &format!("latch.countDown {latch_name}"));
    });
    let what = format!("{}: Java countDown -> Rust latch", java.version);
    woken_within(&woken, counted, &what);
    let exists: bool = redis::cmd("EXISTS")
        .arg(&latch_name)
        .query(&mut con(new))
        .expect("EXISTS");
    assert!(!exists, "counted down to 0 on the new master");
}

// ---------------------------------------------------------------------------
// Cluster

/// The cluster scenarios run one at a time: their `INFO commandstats`
/// counts (re-reads, `SPUBLISH`, `PUBLISH`) are not disturbed by another.
static CLUSTER_SERIAL: Mutex<()> = Mutex::new(());

struct ClusterScenario {
    cluster: &'static Cluster,
    java: JavaDriver,
    client: Client,
    name: String,
    _serial: MutexGuard<'static, ()>,
}

impl ClusterScenario {
    /// The cluster, a Redisson cluster client (`useClusterServers`, sharded
    /// pub/sub chosen by Redisson) warmed up, a Rust cluster client and a
    /// name of this scenario and version.
    fn start(redisson: Redisson, scenario: &str) -> ClusterScenario {
        let serial = CLUSTER_SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let cluster = Cluster::shared();
        let seeds = format!("cluster:{}", cluster.urls().join(","));
        let java = JavaDriver::start(redisson, &seeds, Duration::from_secs(30));
        java.warm_up();
        let client = Client::cluster_builder(cluster.urls())
            .build()
            .expect("cluster client");
        ClusterScenario {
            cluster,
            java,
            client,
            name: format!("{scenario}-{}", redisson.version()),
            _serial: serial,
        }
    }

    fn owner(&self) -> &'static Node {
        self.cluster.owner(&self.name)
    }

    /// Waits until `channel` has `wanted` shard subscribers on the slot's
    /// master.
    fn ssubscribed(&self, channel: &str, wanted: i64) {
        let owner = self.owner();
        assert!(
            eventually(Duration::from_secs(10), || {
                let reply: (String, i64) = owner.cmd(&["PUBSUB", "SHARDNUMSUB", channel]);
                reply.1 >= wanted
            }),
            "{channel}: no SSUBSCRIBE on the slot's master ({})",
            owner.port
        );
    }

    /// Runs `release` and asserts it `SPUBLISH`ed on the slot's master and
    /// `PUBLISH`ed nothing.
    fn sharded(&self, release: impl FnOnce()) {
        let owner = self.owner();
        let (spublish, publish) = (
            cluster::calls(owner, "spublish"),
            cluster::calls(owner, "publish"),
        );
        release();
        assert!(
            cluster::calls(owner, "spublish") > spublish,
            "{}: no SPUBLISH",
            self.name
        );
        assert_eq!(
            cluster::calls(owner, "publish"),
            publish,
            "{}: a PUBLISH",
            self.name
        );
    }

    /// Asserts `actor` has not answered for [`KEPT_OUT`].
    fn java_kept_out(&self, actor: &str) {
        thread::sleep(KEPT_OUT);
        assert!(
            self.java.try_recv(actor, Duration::ZERO).is_none(),
            "{}: Java actor {actor} was not kept waiting",
            self.name
        );
    }

    /// Waits for `actor`'s reply to the wait it is in and asserts it is
    /// `OK` and came within [`WAKE_BOUND`] of `since`.
    fn java_woken(&self, actor: &str, since: Instant, what: &str) -> support::java::Reply {
        let reply = self
            .java
            .try_recv(actor, Duration::from_secs(20))
            .unwrap_or_else(|| panic!("{}: {what}: Java was never woken", self.name));
        assert!(reply.ok, "{what}: {}", reply.line);
        let took = reply.at.saturating_duration_since(since);
        eprintln!("{} {}: {what} {took:?}", self.java.version, self.name);
        assert!(took < WAKE_BOUND, "{what}: Java woken {took:?} after");
        reply
    }
}

/// Java's `acquire(1)` on an empty semaphore (no timer) is woken by a Rust
/// release, sharded.
fn cluster_rust_release_wakes_a_java_semaphore_acquire(redisson: Redisson) {
    let s = ClusterScenario::start(redisson, "cj-sem-acquire");
    let channel = format!("redisson_sc:{{{}}}", s.name);
    s.java.send("j", &format!("sem.acquire {} 1", s.name));
    s.ssubscribed(&channel, 1);
    s.java_kept_out("j");
    let sem = s.client.semaphore(s.name.as_str());
    let mut released = Instant::now();
    s.sharded(|| {
        released = Instant::now();
        sem.release(1).expect("release");
    });
    s.java_woken("j", released, "Rust release -> Java sem.acquire");
    assert_eq!(sem.available_permits().expect("available"), 0);
}

/// A Rust `acquire(1)` on an empty semaphore is woken by a Java release,
/// sharded.
fn cluster_java_release_wakes_a_rust_semaphore_waiter(redisson: Redisson) {
    let s = ClusterScenario::start(redisson, "cj-sem-waiter");
    let channel = format!("redisson_sc:{{{}}}", s.name);
    let sem = s.client.semaphore(s.name.as_str());
    let woken = spawn_waiter({
        let sem = sem.clone();
        move || {
            sem.acquire(1).expect("acquire").forget();
        }
    });
    s.ssubscribed(&channel, 1);
    thread::sleep(KEPT_OUT);
    assert!(woken.try_recv().is_err(), "acquired from 0 permits");
    let mut scripts = Calls::new(s.owner().con().expect("connect"), &["evalsha", "eval"]);
    let mut released = Instant::now();
    s.sharded(|| {
        released = release_after_a_repoll(&mut scripts, || {
            s.java.ok("j", &format!("sem.release {} 1", s.name));
        });
    });
    let what = format!("{}: Java release -> Rust sem", s.java.version);
    woken_within(&woken, released, &what);
    assert_eq!(sem.available_permits().expect("available"), 0);
}

/// Java's `await()` (no timer) is woken by a Rust `count_down` to 0,
/// sharded.
fn cluster_rust_count_down_wakes_a_java_latch_await(redisson: Redisson) {
    let s = ClusterScenario::start(redisson, "cj-latch");
    let channel = format!("redisson_countdownlatch__channel__{{{}}}", s.name);
    let latch = s.client.count_down_latch(s.name.as_str());
    assert!(latch.try_set_count(1).expect("set"));
    s.java.send("j", &format!("latch.await {}", s.name));
    s.ssubscribed(&channel, 1);
    s.java_kept_out("j");
    let mut counted = Instant::now();
    s.sharded(|| {
        counted = Instant::now();
        latch.count_down().expect("count down");
    });
    s.java_woken("j", counted, "Rust count_down -> Java latch.await");
    let exists: bool = s.owner().cmd(&["EXISTS", &s.name]);
    assert!(!exists, "counted down to 0");
}

/// One Java thread takes the only permit (permanent) of a permit-expirable
/// semaphore, another waits in `acquire()` (no timer for a permanent
/// permit); the Rust release of the first thread's id wakes the second,
/// sharded.
fn cluster_rust_release_of_a_java_permit_wakes_a_java_expirable_acquire(redisson: Redisson) {
    let s = ClusterScenario::start(redisson, "cj-pes");
    let channel = format!("redisson_sc:{{{}}}", s.name);
    assert!(
        s.java
            .flag("j1", &format!("pes.trySetPermits {} 1", s.name))
    );
    let java_id: String = s
        .java
        .ok("j1", &format!("pes.acquire {} -1", s.name))
        .value(0);
    let java_id: PermitId = java_id.parse().expect("a Java id");
    s.java.send("j2", &format!("pes.acquire {} -1", s.name));
    s.ssubscribed(&channel, 1);
    s.java_kept_out("j2");
    let sem = s.client.permit_expirable_semaphore(s.name.as_str());
    let mut released = Instant::now();
    s.sharded(|| {
        released = Instant::now();
        sem.release(java_id).expect("Rust releases the Java id");
    });
    let reply = s.java_woken("j2", released, "Rust release -> Java pes.acquire");
    let id: PermitId = reply.value::<String>(0).parse().expect("the waiter's id");
    assert_ne!(id, java_id);
    assert_eq!(sem.lease_time(id).expect("lease"), None, "permanent");
    sem.release(id).expect("Rust releases the waiter's id");
    assert_eq!(sem.available_permits().expect("available"), 1);
}

// ---------------------------------------------------------------------------
// Waiters and re-reads

/// Runs `wait` in a thread; the receiver gets the instant it returned.
fn spawn_waiter(wait: impl FnOnce() + Send + 'static) -> mpsc::Receiver<Instant> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        wait();
        let _ = tx.send(Instant::now());
    });
    rx
}

/// Waits for the Rust waiter reporting on `woken` and asserts it returned
/// within [`WAKE_BOUND`] of `since`.
fn woken_within(woken: &mpsc::Receiver<Instant>, since: Instant, what: &str) {
    woken_within_bound(woken, since, WAKE_BOUND, what);
}

/// [`woken_within`] `bound` of `since`.
fn woken_within_bound(
    woken: &mpsc::Receiver<Instant>,
    since: Instant,
    bound: Duration,
    what: &str,
) {
    let at = woken
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what}: the Rust waiter was never woken"));
    let took = at.saturating_duration_since(since);
    eprintln!("{what} {took:?}");
    assert!(took < bound, "{what}: woken {took:?} after");
}

/// `INFO commandstats` calls of some commands on one node.
struct Calls {
    con: redis::Connection,
    commands: &'static [&'static str],
}

impl Calls {
    fn new(con: redis::Connection, commands: &'static [&'static str]) -> Calls {
        Calls { con, commands }
    }

    fn now(&mut self) -> u64 {
        support::state::command_calls(&mut self.con, self.commands)
    }
}

/// Waits until the node of `calls` sees one more of its commands (the
/// waiting Rust thread's periodic re-read: nothing else sends them there
/// meanwhile), then runs `release` at once and returns when it began. The
/// waiter's next re-read is then about 3 s away, so a wake-up within
/// [`WAKE_BOUND`] came from the release's message.
fn release_after_a_repoll(calls: &mut Calls, release: impl FnOnce()) -> Instant {
    let before = calls.now();
    let commands = calls.commands;
    assert!(
        eventually(Duration::from_secs(10), || calls.now() > before),
        "the waiter never re-read ({commands:?})"
    );
    let at = Instant::now();
    release();
    at
}
