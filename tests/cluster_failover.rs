//! Failovers in a Redis Cluster (3 masters + 3 replicas of its own, one
//! test at a time): locks held across `CLUSTER FAILOVER` and across a
//! master's `kill -9` are renewed on the promoted replica, and the threads
//! waiting for them get them once released. Replica sync (on by default, as
//! in Redisson) waits for each slot master's own replica.

mod support;

use std::sync::{Mutex, MutexGuard, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error};
use support::cluster::{Cluster, Node};
use support::{cluster::calls, eventually};

/// One test at a time: each one fails a master over.
fn cluster() -> (MutexGuard<'static, ()>, &'static Cluster) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let guard = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    (guard, Cluster::shared())
}

fn client(cluster: &Cluster, watchdog: Duration) -> Client {
    Client::cluster_builder(cluster.urls())
        .watchdog_timeout(watchdog)
        .build()
        .expect("cluster client")
}

/// A name served by a master that has a replica, and that replica.
fn name_with_replica<'a>(cluster: &'a Cluster, prefix: &str) -> (String, &'a Node, &'a Node) {
    for i in 0..1000 {
        let name = format!("{prefix}{i}");
        let slot = cluster.slot(&name);
        let ranges = cluster.any_node().slots().expect("CLUSTER SLOTS");
        let range = ranges
            .iter()
            .find(|r| r.start <= slot && slot <= r.end)
            .expect("served");
        if let Some(&replica) = range.replicas.first() {
            return (name, cluster.node(range.master), cluster.node(replica));
        }
    }
    panic!("no master with a replica");
}

/// Whether `replica` has `key` (read with `READONLY`).
fn replica_has(replica: &Node, key: &str) -> bool {
    let Ok(mut con) = replica.con() else {
        return false;
    };
    let _: redis::RedisResult<()> = redis::cmd("READONLY").query(&mut con);
    redis::cmd("EXISTS")
        .arg(key)
        .query::<bool>(&mut con)
        .unwrap_or(false)
}

/// `count` threads of `client` waiting for `name`; each reports when it got
/// the lock (it releases it at once). A transient error (the cluster
/// failing over under the waiter) makes it wait again.
fn waiters(client: &Client, name: &str, count: usize) -> mpsc::Receiver<(Instant, u32)> {
    let (tx, rx) = mpsc::channel();
    for _ in 0..count {
        let (client, name, tx) = (client.clone(), name.to_owned(), tx.clone());
        thread::spawn(move || {
            let mut errors = 0;
            loop {
                match client.lock(&name).lock() {
                    Ok(guard) => {
                        let _ = tx.send((Instant::now(), errors));
                        guard.unlock().expect("waiter's unlock");
                        return;
                    }
                    Err(e) if e.is_transient() => {
                        errors += 1;
                        eprintln!(
                            "waiter: transient error at {:?}: {e}",
                            std::time::SystemTime::now()
                        );
                        assert!(errors < 20, "waiter keeps failing: {e}");
                        thread::sleep(Duration::from_millis(200));
                    }
                    Err(e) => panic!("waiter's lock: {e}"),
                }
            }
        });
    }
    rx
}

/// Whether, within `within`, the table of every running node names `to` as
/// `name`'s slot's master.
fn owned_by(cluster: &Cluster, name: &str, to: &Node, within: Duration) -> bool {
    let slot = cluster.slot(name);
    eventually(within, || {
        cluster.nodes.iter().filter(|n| n.is_running()).all(|n| {
            n.slots().is_some_and(|ranges| {
                ranges
                    .iter()
                    .any(|r| r.start <= slot && slot <= r.end && r.master == to.port)
            })
        })
    })
}

/// Holds `name` through a failover done by `fail_over`, with two waiters
/// of another client, and checks that the hold is renewed on `replica`
/// once promoted and that the waiters get the lock after the unlock.
fn hold_across_failover(
    cluster: &Cluster,
    name: &str,
    replica: &Node,
    watchdog: Duration,
    fail_over: impl Fn(),
) {
    let pubsub_threads = || support::threads_named("rlock-pubsub");
    // Earlier tests' clients (their waiter threads' clones) are gone.
    assert!(
        eventually(Duration::from_secs(10), || pubsub_threads() == 0),
        "subscriber threads of earlier tests: {}",
        pubsub_threads()
    );
    let (holder, other) = (client(cluster, watchdog), client(cluster, watchdog));
    let guard = holder.lock(name).lock().expect("lock");
    // A client that waited on the master before the failover, and no more
    // since: its subscriber there sits idle.
    let idle = client(cluster, watchdog);
    let waited = idle
        .lock(name)
        .try_lock_for(Duration::from_millis(100))
        .expect("try_lock_for");
    assert!(waited.is_none());
    let got = waiters(&other, name, 2);
    assert!(eventually(Duration::from_secs(5), || other
        .diagnostics()
        .waiters
        == 2));
    assert!(
        eventually(Duration::from_secs(5), || replica_has(replica, name)),
        "the hold reached the replica"
    );
    eprintln!("failing over at {:?}", std::time::SystemTime::now());
    fail_over();
    // A manual failover that a loaded machine lets time out (the master
    // pauses its clients for 5 s at most) is given a second chance.
    if !owned_by(cluster, name, replica, Duration::from_secs(12)) {
        eprintln!("failing over again at {:?}", std::time::SystemTime::now());
        fail_over();
    }
    assert!(
        owned_by(cluster, name, replica, Duration::from_secs(20)),
        "{} did not take over {name}'s slot",
        replica.port
    );
    eprintln!("failed over at {:?}", std::time::SystemTime::now());
    // The waiters subscribed again at the new master.
    let channel = format!("redisson_lock__channel:{{{name}}}");
    assert!(
        eventually(Duration::from_secs(10), || {
            let (_, count): (String, i64) = replica.cmd(&["PUBSUB", "SHARDNUMSUB", &channel]);
            count == 1
        }),
        "the waiters subscribed at the new master"
    );
    // The idle client learns the new table (a MOVED, or a refused
    // connection, prompts a refresh): the subscribers of the old master
    // (demoted, or dead) are gone with their threads, well before an idle
    // subscriber would close by itself. One thread is left: the waiters'
    // at the new master.
    let _ = idle.lock(name).is_locked();
    assert!(
        eventually(Duration::from_secs(3), || pubsub_threads() == 1),
        "subscriber threads after the failover: {} (one expected, the new master's)",
        pubsub_threads()
    );
    // Renewed on the promoted replica: its TTL goes back up (a renewal
    // comes every third of the lease).
    let mut last: i64 = replica.cmd(&["PTTL", name]);
    assert!(last > 0, "the hold survived the failover (PTTL {last})");
    let renewed = eventually(watchdog, || {
        let ttl: i64 = replica.cmd(&["PTTL", name]);
        let up = ttl > last;
        last = ttl;
        up
    });
    assert!(renewed, "the watchdog renewed the hold on the new master");
    assert!(!guard.is_lost(), "lost: {:?}", guard.lost_reason());
    assert!(got.try_recv().is_err(), "a waiter got a held lock");
    guard.unlock().expect("unlock on the new master");
    for _ in 0..2 {
        let (_, errors) = got
            .recv_timeout(Duration::from_secs(20))
            .expect("a waiter got the lock");
        eprintln!("waiter got the lock after {errors} transient error(s)");
    }
    // A waiter reports before it unlocks: the last unlock may still be on
    // its way.
    assert!(
        eventually(Duration::from_secs(5), || !replica
            .cmd::<bool>(&["EXISTS", name])),
        "the lock was left behind after both waiters unlocked"
    );
}

#[test]
fn locks_survive_a_coordinated_cluster_failover() {
    let (_one, cluster) = cluster();
    let (name, _master, replica) = name_with_replica(cluster, "failover-");
    hold_across_failover(cluster, &name, replica, Duration::from_secs(3), || {
        let _: () = replica.cmd(&["CLUSTER", "FAILOVER"]);
    });
}

#[test]
fn locks_survive_a_master_killed_with_sigkill() {
    let (_one, cluster) = cluster();
    let (name, master, replica) = name_with_replica(cluster, "killed-");
    let started = Instant::now();
    hold_across_failover(cluster, &name, replica, Duration::from_secs(10), || {
        master.kill();
    });
    eprintln!("kill -9 scenario took {:?}", started.elapsed());
    // The old master comes back as a replica, for the other tests.
    master.restart();
    let rejoined = eventually(Duration::from_secs(20), || {
        cluster
            .any_node()
            .slots()
            .is_some_and(|ranges| ranges.iter().any(|r| r.replicas.contains(&master.port)))
    });
    assert!(rejoined, "the killed master rejoined as a replica");
}

#[test]
fn a_dropped_cluster_client_leaves_no_thread_behind() {
    let (_one, cluster) = cluster();
    let names = ["rlock-cluster", "rlock-pubsub", "rlock-watchdog"];
    let count = || names.map(support::threads_named);
    // The other tests' clients (their waiter threads' clones) are gone.
    assert!(
        eventually(Duration::from_secs(10), || count() == [0, 0, 0]),
        "threads of earlier tests' clients: {:?}",
        count()
    );
    let before = count();
    {
        let holder = client(cluster, Duration::from_secs(30));
        let waiter = client(cluster, Duration::from_secs(30));
        let guards: Vec<_> = cluster
            .names_on_different_masters("threads-", 3)
            .into_iter()
            .map(|name| {
                let guard = holder.lock(&name).lock().expect("lock");
                let waited = waiter
                    .lock(&name)
                    .try_lock_for(Duration::from_millis(100))
                    .expect("try_lock_for");
                assert!(waited.is_none());
                guard
            })
            .collect();
        let during = count();
        assert_eq!(during[0], before[0] + 2, "one table refresher per client");
        assert_eq!(
            during[1],
            before[1] + 3,
            "one subscriber per master waited on"
        );
        assert_eq!(during[2], before[2] + 2, "one watchdog per client");
        drop(guards);
    }
    assert!(
        eventually(Duration::from_secs(10), || count() == before),
        "threads left: {:?} (before: {before:?})",
        count()
    );
}

#[test]
fn every_lock_write_waits_for_its_masters_replica() {
    let (_one, cluster) = cluster();
    let client = client(cluster, Duration::from_secs(30));
    for prefix in ["synced-a-", "synced-b-", "synced-c-"] {
        let (name, master, replica) = name_with_replica(cluster, prefix);
        let waits = calls(master, "wait");
        let guard = client.lock(&name).lock().expect("lock");
        // The acquire returned after its WAIT: the replica has the lock now.
        assert!(replica_has(replica, &name), "{name} not on its replica");
        guard.unlock().expect("unlock");
        assert!(
            !replica_has(replica, &name),
            "{name}'s unlock not replicated"
        );
        assert!(calls(master, "wait") >= waits + 2, "a WAIT per lock write");
    }
}

#[test]
fn an_acquire_a_frozen_replica_never_acknowledges_fails_typed() {
    let (_one, cluster) = cluster();
    let (name, master, replica) = name_with_replica(cluster, "unsynced-");
    let client = Client::cluster_builder(cluster.urls())
        .replicas_sync_timeout(Duration::from_millis(200))
        .unlock_retries(1, Duration::from_millis(50))
        .build()
        .expect("cluster client");
    // Warm the replica count while the replica still answers.
    drop(client.lock(&name).lock().expect("lock"));
    replica.signal("STOP");
    let result = client.lock(&name).lock();
    let on_master: bool = master.cmd(&["EXISTS", &name]);
    replica.signal("CONT");
    assert!(
        matches!(result, Err(Error::NotReplicated { .. })),
        "{result:?}"
    );
    assert!(result.is_err_and(|e| e.is_transient()));
    assert!(!on_master, "the unacknowledged acquire was undone");
    // Thawed, the replica acknowledges again.
    let guard = client.lock(&name).lock().expect("lock after the thaw");
    guard.unlock().expect("unlock");
}

#[test]
fn without_the_check_an_unacknowledged_acquire_holds() {
    // checkLockSyncedSlaves=false: the WAIT is still sent, and a missing
    // acknowledgement is only logged.
    let (_one, cluster) = cluster();
    let (name, master, replica) = name_with_replica(cluster, "unchecked-");
    let client = Client::cluster_builder(cluster.urls())
        .check_lock_synced_replicas(false)
        .replicas_sync_timeout(Duration::from_millis(200))
        .build()
        .expect("cluster client");
    drop(client.lock(&name).lock().expect("lock"));
    let waits = calls(master, "wait");
    replica.signal("STOP");
    let result = client.lock(&name).lock();
    replica.signal("CONT");
    let guard = result.expect("held without the acknowledgement");
    assert!(master.cmd::<bool>(&["EXISTS", &name]));
    assert!(calls(master, "wait") > waits);
    guard.unlock().expect("unlock");
}

/// Sends `CONT` to a node when dropped, whatever happens to the test.
struct Thaw<'a>(&'a Node);

impl Drop for Thaw<'_> {
    fn drop(&mut self) {
        self.0.signal("CONT");
    }
}

#[test]
fn a_frozen_master_does_not_stall_the_slot_table_refresh() {
    let (_one, cluster) = cluster();
    // The master of slot 0 comes first in `CLUSTER SLOTS`, so in the
    // client's table; the build leaves an idle pooled connection to it.
    let frozen = cluster.owner_of_slot(0);
    let live: Vec<&Node> = cluster
        .nodes
        .iter()
        .filter(|n| n.port != frozen.port && n.is_running())
        .collect();
    // A silent node costs a whole response timeout per request: make it
    // longer than the test's window.
    let client = Client::cluster_builder(cluster.urls())
        .response_timeout(Duration::from_secs(20))
        .build()
        .expect("cluster client");
    let table_reads = || live.iter().map(|n| calls(n, "cluster|slots")).sum::<u64>();
    let before = table_reads();
    frozen.signal("STOP");
    let thaw = Thaw(frozen);
    // The periodic refresh (every 5 s) asks a live node within 2 s of
    // trying the frozen one, if it tries it at all (first, when it
    // answered the last refresh): within 7 s. Asking it with the response
    // timeout would take 20 s.
    let started = Instant::now();
    let refreshed = eventually(Duration::from_secs(12), || table_reads() > before);
    let took = started.elapsed();
    eprintln!("a live node was asked for the table {took:?} after the freeze");
    drop(thaw);
    drop(client);
    // The cluster may have failed the frozen master over meanwhile: wait
    // until every node sees a healthy cluster again, the thawed node in it.
    let healthy = eventually(Duration::from_secs(30), || {
        cluster.nodes.iter().filter(|n| n.is_running()).all(|n| {
            n.try_cmd::<String>(&["CLUSTER", "INFO"])
                .is_ok_and(|info| info.contains("cluster_state:ok"))
        }) && cluster.any_node().slots().is_some_and(|ranges| {
            ranges
                .iter()
                .any(|r| r.master == frozen.port || r.replicas.contains(&frozen.port))
        })
    });
    assert!(healthy, "the cluster recovered after the thaw");
    assert!(
        refreshed,
        "no slot table read from a live node within {took:?} of freezing the first master"
    );
}

/// An acquire that the master refused while a failover or a long script
/// made it unable to serve (here `BUSY`, as `CLUSTERDOWN` or a refused
/// connection during a failover) is sent again by the router, and the lock
/// is taken by the attempt that ran: the lease counts from that attempt, not
/// from the first refused one. (It used to count from the first: a lock
/// taken after retries longer than the lease was reported lost at once,
/// and the watchdog stopped renewing it.)
#[test]
fn a_lock_taken_by_a_retried_acquire_is_not_born_lost() {
    let (_one, cluster) = cluster();
    let (name, master, _) = name_with_replica(cluster, "busy-");
    let holder = client(cluster, Duration::from_millis(1000));
    // Warm the master's pool: a busy server answers no PING either.
    holder
        .lock(&name)
        .lock()
        .expect("lock")
        .unlock()
        .expect("unlock");
    let _: () = master.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"]);
    let mut con = master.con().expect("connection");
    con.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let busy = thread::spawn(move || {
        redis::cmd("EVAL")
            .arg(support::BUSY_SCRIPT)
            .arg(0)
            .arg(1500)
            .query::<i64>(&mut con)
    });
    // Past the threshold: everyone else gets BUSY now.
    thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let guard = holder.lock(&name).lock().expect("lock after BUSY retries");
    let waited = started.elapsed();
    assert_eq!(busy.join().expect("busy thread"), Ok(1));
    let _: () = master.cmd(&["CONFIG", "SET", "busy-reply-threshold", "5000"]);
    assert!(
        waited >= Duration::from_millis(1000),
        "the retries outlasted the lease ({waited:?})"
    );
    assert!(
        !guard.is_lost(),
        "taken {waited:?} after the first attempt, reported lost: {:?}",
        guard.lost_reason()
    );
    // And the watchdog keeps it: still held after two leases.
    thread::sleep(Duration::from_millis(2000));
    assert!(!guard.is_lost(), "lost: {:?}", guard.lost_reason());
    assert!(master.cmd::<bool>(&["EXISTS", &name]));
    guard.unlock().expect("unlock");
}
