//! Replica sync (WAIT after lock writes, Redisson's `checkLockSyncedSlaves`)
//! on a master with one replica, and the hazard it addresses: a master that
//! fails before its replica got the lock.

mod support;

use std::time::{Duration, Instant};

use redisson_lock::{Client, Error, LostReason};
use support::RedisServer;
use support::replicated::{master_and_replica, synced_client};
use support::state::assert_free;

/// Cuts replication the way a network partition would: the replica is
/// frozen and the master drops its link, so it no longer counts it.
fn cut_replication(master: &RedisServer, replica: &RedisServer) {
    replica.pause();
    let _: i64 = master.cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
    assert!(support::eventually(Duration::from_secs(5), || {
        let info: String = master.cmd(&["INFO", "replication"]);
        info.contains("connected_slaves:0")
    }));
}

/// The master dies; the replica, thawed, is promoted without the writes it
/// never received.
fn fail_over(master: &mut RedisServer, replica: &RedisServer) {
    master.stop();
    replica.resume();
    let _: String = replica.cmd(&["REPLICAOF", "NO", "ONE"]);
}

#[test]
fn every_lock_write_waits_for_the_replica() {
    let (master, replica) = master_and_replica();
    let client = synced_client(&master, true);
    let lock = client.lock("synced");
    let guard = lock.lock().expect("lock");
    // WAIT came back before lock() did: the replica has the hold already.
    let field = client.owner_field();
    let count: Option<i64> = replica.cmd(&["HGET", "synced", &field]);
    assert_eq!(count, Some(1));
    guard.unlock().expect("unlock");
    assert_eq!(replica.cmd::<i64>(&["EXISTS", "synced"]), 0);
    assert!(master.command_calls("wait") >= 2, "a WAIT per lock write");
    // Without replica sync no WAIT is sent.
    let plain = Client::open(master.url()).expect("client");
    let before = master.command_calls("wait");
    drop(plain.lock("plain").lock().expect("lock"));
    assert_eq!(master.command_calls("wait"), before);
}

#[test]
fn an_acquire_no_replica_acknowledges_is_undone_and_fails() {
    let (master, replica) = master_and_replica();
    let client = synced_client(&master, true);
    drop(client.lock("unsynced").lock().expect("warm-up"));
    // Frozen but still connected: the master waits for it, in vain.
    replica.pause();
    let waits = master.command_calls("wait");
    let started = Instant::now();
    let result = client.lock("unsynced").lock();
    let took = started.elapsed();
    replica.resume();
    match result {
        Err(e @ Error::NotReplicated { replicas: 1, .. }) => assert!(e.is_transient()),
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    // Three attempts of at most 200 ms each, plus their undos and delays.
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // Each attempt and each undo waited once: an undo is not retried for
    // want of an acknowledgement.
    assert_eq!(master.command_calls("wait") - waits, 6);
    assert_eq!(
        master.cmd::<i64>(&["EXISTS", "unsynced"]),
        0,
        "every attempt was undone"
    );
    assert_eq!(client.diagnostics().registered_holds, 0);
    // Once the replica acknowledges again, so does the lock.
    let guard = client.lock("unsynced").lock().expect("lock");
    guard.unlock().expect("unlock");
}

#[test]
fn a_timed_acquire_no_replica_acknowledges_keeps_to_its_budget() {
    let (master, replica) = master_and_replica();
    let client = synced_client(&master, true);
    drop(client.lock("budget").lock().expect("warm-up"));
    replica.pause();
    let before = master.command_calls("wait");
    let tried = client
        .lock("budget")
        .try_lock_for(Duration::from_millis(100));
    let once = client.lock("budget").try_lock();
    let after = master.command_calls("wait");
    replica.resume();
    assert!(
        matches!(tried, Err(Error::NotReplicated { .. })),
        "{tried:?}"
    );
    assert!(matches!(once, Err(Error::NotReplicated { .. })), "{once:?}");
    // No second attempt past the budget: one acquire and one undo each.
    assert_eq!(after - before, 4);
    assert_eq!(master.cmd::<i64>(&["EXISTS", "budget"]), 0);
}

#[test]
fn without_the_check_an_unacknowledged_acquire_holds() {
    let (master, replica) = master_and_replica();
    let client = synced_client(&master, false);
    replica.pause();
    let result = client.lock("unchecked").lock();
    replica.resume();
    let guard = result.expect("lock: the missing acknowledgement is only logged");
    assert_eq!(master.cmd::<i64>(&["EXISTS", "unchecked"]), 1);
    guard.unlock().expect("unlock");
}

#[test]
fn a_failover_before_replication_loses_the_lock_and_the_holder_is_told() {
    // The hazard as it is: no replica sync. The lock is written on a master
    // whose replica never gets it; the master dies and the replica is
    // promoted; a second client takes the same lock at once.
    let (mut master, replica) = master_and_replica();
    let first = Client::builder(master.url())
        .watchdog_timeout(Duration::from_millis(900))
        .build()
        .expect("client");
    let second = Client::open(replica.url()).expect("client");
    cut_replication(&master, &replica);
    let guard = first.lock("hazard").lock().expect("lock on the old master");
    fail_over(&mut master, &replica);
    let other = second
        .lock("hazard")
        .try_lock()
        .expect("try_lock")
        .expect("the promoted replica never had the lock: a second holder");
    // The first holder is told, by its lease: its renewals cannot reach a
    // master (for a Sentinel client, its next renewal on the new master
    // finds the lock gone). Until then both believe they hold it; that
    // window is what replica sync and fencing tokens are for.
    assert!(
        support::eventually(Duration::from_secs(3), || guard.is_lost()),
        "the first holder was never told"
    );
    assert_eq!(guard.lost_reason(), Some(LostReason::LeaseExpired));
    drop(other);
}

#[test]
fn replica_sync_refuses_a_lock_the_frozen_replica_would_not_have() {
    // The same failover with replica sync: the replica is connected but not
    // acknowledging (frozen), so the acquire fails instead of holding a lock
    // the new master will not know.
    let (mut master, replica) = master_and_replica();
    let first = synced_client(&master, true);
    replica.pause();
    let result = first.lock("guarded").lock();
    assert!(
        matches!(result, Err(Error::NotReplicated { .. })),
        "{result:?}"
    );
    fail_over(&mut master, &replica);
    let second = Client::open(replica.url()).expect("client");
    assert_free(&second.lock("guarded"));
}

#[test]
fn a_replica_already_disconnected_is_not_waited_for() {
    // Redisson's rule, kept for parity: only connected replicas count. A
    // master that has lost its replica grants locks a failover would lose,
    // replica sync or not.
    let (master, replica) = master_and_replica();
    let client = synced_client(&master, true);
    cut_replication(&master, &replica);
    let guard = client.lock("alone").lock().expect("no replica to wait for");
    replica.resume();
    guard.unlock().expect("unlock");
}

#[test]
fn a_release_no_replica_acknowledges_is_sent_again_then_reported() {
    let (master, replica) = master_and_replica();
    let client = synced_client(&master, true);
    let guard = client.lock("unsynced-release").lock().expect("lock");
    // Frozen but still connected: the master waits for it, in vain.
    replica.pause();
    let waits = master.command_calls("wait");
    let result = guard.unlock();
    replica.resume();
    match result {
        Err(e @ Error::NotReplicated { replicas: 1, .. }) => assert!(e.is_transient()),
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    // Sent again like a release whose reply was lost (it is idempotent),
    // each waited for once.
    assert!(master.command_calls("wait") - waits >= 2);
    // The master has it released all the same.
    assert_eq!(master.cmd::<i64>(&["EXISTS", "unsynced-release"]), 0);
    assert_eq!(client.diagnostics().registered_holds, 0);
}
