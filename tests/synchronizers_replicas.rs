//! Replica sync for the semaphores (SYNCHRONIZERS §2.4), on a master with
//! one replica: every write waits for the replica in the same round trip;
//! an acquire no replica acknowledged is given back (a release, which
//! publishes) and tried again, at most the client's retry attempts, then
//! fails with `NotReplicated`; a release is never compensated nor sent
//! again; the latch sends no `WAIT` at all (Redisson's latch scripts are
//! plain `EVAL`s).
//!
//! The replica is made to not acknowledge by freezing it (SIGSTOP): it
//! stays connected, so the master counts it and `WAIT 1 200` answers 0.

mod support;

use std::time::{Duration, Instant};

use redisson_lock::Error;
use support::RedisServer;
use support::replicated::{master_and_replica, synced_client};

/// The attempts a [`synced_client`] makes (2 retries).
const ATTEMPTS: u64 = 3;

/// The size of the timeout ZSET of the permit-expirable semaphore `name`.
fn acquired_on(server: &RedisServer, name: &str) -> i64 {
    server.cmd(&["ZCARD", &format!("{{{name}}}:timeout")])
}

/// Loads every semaphore script on `master` (a first call is `NOSCRIPT`,
/// then the script, each followed by its own `WAIT`) and waits until the
/// replica acknowledges writes, so that the tests count one `WAIT` per
/// write.
fn warm_up(master: &RedisServer) {
    let client = synced_client(master, true);
    let ok = support::eventually(Duration::from_secs(10), || {
        let sem = client.semaphore("warm-sem");
        let pes = client.permit_expirable_semaphore("warm-pes");
        let warmed = (|| -> Result<(), Error> {
            sem.try_set_permits(1)?;
            sem.acquire(1)?.forget();
            sem.release(1)?;
            sem.release_if_exists(1)?;
            sem.add_permits(1)?;
            sem.drain_permits()?;
            pes.try_set_permits(2)?;
            pes.set_permits(2)?;
            pes.add_permits(1)?;
            let one = pes.acquire(None)?.forget();
            pes.update_lease_time(one[0], None)?;
            pes.release(one[0])?;
            let two = pes.acquire_n(2, None)?.forget();
            pes.release_all(&two)?;
            Ok(())
        })();
        warmed.is_ok()
    });
    assert!(ok, "the replica never acknowledged the warm-up");
}

fn not_replicated<T: std::fmt::Debug>(result: Result<T, Error>, operation: &str) {
    match result {
        Err(
            ref e @ Error::NotReplicated {
                operation: op,
                replicas: 1,
                ..
            },
        ) if op == operation => assert!(e.is_transient()),
        other => panic!("expected NotReplicated for `{operation}`, got {other:?}"),
    }
}

#[test]
fn semaphore_writes_wait_for_the_replica() {
    let (master, replica) = master_and_replica();
    warm_up(&master);
    let client = synced_client(&master, true);
    let sem = client.semaphore("sem-synced");
    let waits = master.command_calls("wait");
    assert!(sem.try_set_permits(3).expect("set"));
    // WAIT came back before the call did: the replica has each write.
    assert_eq!(replica.cmd::<String>(&["GET", "sem-synced"]), "3");
    let permits = sem.acquire(2).expect("acquire");
    assert_eq!(replica.cmd::<String>(&["GET", "sem-synced"]), "1");
    assert!(sem.try_acquire(2).expect("try_acquire").is_none());
    permits.release().expect("release");
    assert_eq!(replica.cmd::<String>(&["GET", "sem-synced"]), "3");
    sem.add_permits(2).expect("add");
    assert_eq!(replica.cmd::<String>(&["GET", "sem-synced"]), "5");
    assert_eq!(sem.drain_permits().expect("drain"), 5);
    assert_eq!(replica.cmd::<String>(&["GET", "sem-synced"]), "0");
    // One WAIT per write: set, acquire, the failed try (a script that
    // wrote nothing is waited for all the same), release, add, drain.
    assert_eq!(master.command_calls("wait") - waits, 6);
}

#[test]
fn expirable_writes_wait_for_the_replica() {
    let (master, replica) = master_and_replica();
    warm_up(&master);
    let client = synced_client(&master, true);
    let pes = client.permit_expirable_semaphore("pes-synced");
    assert!(pes.try_set_permits(2).expect("set"));
    assert_eq!(replica.cmd::<String>(&["GET", "pes-synced"]), "2");
    let waits = master.command_calls("wait");
    let permit = pes.acquire(None).expect("acquire");
    assert_eq!(replica.cmd::<String>(&["GET", "pes-synced"]), "1");
    assert_eq!(acquired_on(&replica, "pes-synced"), 1);
    let id = permit.ids()[0];
    assert!(
        pes.update_lease_time(id, Some(Duration::from_secs(60)))
            .expect("update")
    );
    permit.release().expect("release");
    assert_eq!(replica.cmd::<String>(&["GET", "pes-synced"]), "2");
    assert_eq!(acquired_on(&replica, "pes-synced"), 0);
    assert_eq!(master.command_calls("wait") - waits, 3);
}

#[test]
fn a_semaphore_acquire_no_replica_acknowledges_is_given_back_and_fails() {
    let (master, replica) = master_and_replica();
    warm_up(&master);
    let client = synced_client(&master, true);
    let sem = client.semaphore("sem-unsynced");
    assert!(sem.try_set_permits(3).expect("set"));
    let mut channel = master.subscriber(&["redisson_sc:{sem-unsynced}"]);
    replica.pause();
    let waits = master.command_calls("wait");
    let started = Instant::now();
    // A wait long enough for every attempt (an acquire not given back
    // would make the next attempt wait for permits, not fail).
    let result = sem.try_acquire_for(2, Duration::from_secs(10));
    let took = started.elapsed();
    let after = master.command_calls("wait");
    let available = sem.available_permits();
    replica.resume();
    not_replicated(result, "acquire");
    // Each attempt waited once; the releases that gave the permits back
    // were not waited for (the replica never saw them taken).
    assert_eq!(after - waits, ATTEMPTS);
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(available.expect("available"), 3, "every attempt given back");
    // Each give-back published the new total, as Redisson's compensation
    // does: what wakes a Java waiter.
    assert_eq!(
        channel.payloads_within(Duration::from_millis(300)),
        vec!["3"; ATTEMPTS as usize]
    );
    // Acknowledged again, the acquire holds.
    let permits = sem.acquire(2).expect("acquire");
    assert_eq!(replica.cmd::<String>(&["GET", "sem-unsynced"]), "1");
    drop(permits);
}

#[test]
fn a_semaphore_try_acquire_no_replica_acknowledges_keeps_to_its_wait() {
    let (master, replica) = master_and_replica();
    warm_up(&master);
    let client = synced_client(&master, true);
    let sem = client.semaphore("sem-budget");
    assert!(sem.try_set_permits(1).expect("set"));
    replica.pause();
    let before = master.command_calls("wait");
    let once = sem.try_acquire(1);
    let timed = sem.try_acquire_for(1, Duration::from_millis(100));
    let after = master.command_calls("wait");
    let available = sem.available_permits();
    replica.resume();
    not_replicated(once, "acquire");
    not_replicated(timed, "acquire");
    // No attempt past the caller's wait: one each.
    assert_eq!(after - before, 2);
    assert_eq!(available.expect("available"), 1);
}

#[test]
fn an_expirable_acquire_no_replica_acknowledges_is_given_back_and_fails() {
    let (master, replica) = master_and_replica();
    warm_up(&master);
    let client = synced_client(&master, true);
    let pes = client.permit_expirable_semaphore("pes-unsynced");
    assert!(pes.try_set_permits(2).expect("set"));
    let mut channel = master.subscriber(&["redisson_sc:{pes-unsynced}"]);
    replica.pause();
    let waits = master.command_calls("wait");
    let started = Instant::now();
    let lease = Some(Duration::from_secs(60));
    let result = pes.try_acquire_n_for(2, Duration::from_secs(10), lease);
    let took = started.elapsed();
    let after = master.command_calls("wait");
    let available = pes.available_permits();
    let acquired = acquired_on(&master, "pes-unsynced");
    let published = channel.payloads_within(Duration::from_millis(300));
    let timed = pes.try_acquire_for(Duration::from_millis(100), None);
    let once = pes.try_acquire(None);
    let tries = master.command_calls("wait") - after;
    replica.resume();
    not_replicated(result, "acquire");
    assert_eq!(after - waits, ATTEMPTS, "one WAIT per attempt");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(available.expect("available"), 2, "every attempt given back");
    assert_eq!(acquired, 0, "no permit id left behind");
    // Each give-back (Redisson's `release(ids)`) published the permits it
    // returned.
    assert_eq!(published, vec!["2"; ATTEMPTS as usize]);
    not_replicated(timed, "acquire");
    not_replicated(once, "acquire");
    assert_eq!(tries, 2, "no attempt past the caller's wait");
    assert_eq!(pes.available_permits().expect("available"), 2);
    let permit = pes.acquire(None).expect("acknowledged again");
    assert_eq!(acquired_on(&replica, "pes-unsynced"), 1);
    permit.release().expect("release");
}

#[test]
fn a_waiter_is_woken_by_the_give_back() {
    // One permit, held elsewhere; a plain client's waiter needs it. The
    // holder returns it through a synced client whose acquire of it (and
    // give-back) the waiter must not miss: the waiter takes the permit the
    // failed acquire gave back, woken by its publish, not by a re-poll.
    let (master, replica) = master_and_replica();
    warm_up(&master);
    let synced = synced_client(&master, true);
    let plain = master.client();
    let sem = synced.semaphore("sem-wake");
    assert!(sem.try_set_permits(0).expect("set"));
    let waiter = support::sync::permit_waiter(&plain.semaphore("sem-wake"), 1);
    support::assert_waiting(&plain, 1, Duration::from_secs(5));
    replica.pause();
    // The permit appears without a publish (a plain SET, as a restore
    // would): only the give-back's publish tells the waiter.
    let _: () = master.cmd(&["SET", "sem-wake", "1"]);
    let since = Instant::now();
    let result = sem.try_acquire(1);
    replica.resume();
    match result {
        // The waiter may have taken the permit between SET and the try.
        Ok(None) => {}
        other => not_replicated(other, "acquire"),
    }
    support::sync::woken_within(&waiter, since, Duration::from_secs(2), "waiter");
    assert_eq!(sem.available_permits().expect("available"), 0);
}

#[test]
fn releases_and_counter_writes_are_not_compensated_nor_sent_twice() {
    let (master, replica) = master_and_replica();
    warm_up(&master);
    let client = synced_client(&master, true);
    let sem = client.semaphore("sem-release");
    let pes = client.permit_expirable_semaphore("pes-release");
    assert!(sem.try_set_permits(1).expect("set"));
    assert!(pes.try_set_permits(1).expect("set"));
    let held = pes.acquire(None).expect("acquire").forget();
    replica.pause();
    let mut waits = master.command_calls("wait");
    let mut sent = |expected: u64, what: &str| {
        let now = master.command_calls("wait");
        assert_eq!(now - waits, expected, "WAITs of {what}");
        waits = now;
    };
    // The master has each of these writes; the caller is told the replica
    // may not. Not idempotent: sent once (Redisson retries the whole call
    // on `NoSyncedSlaves`, which would add or release twice).
    not_replicated(sem.release(2), "release");
    sent(1, "release");
    not_replicated(sem.release_if_exists(1), "release");
    sent(1, "release_if_exists");
    not_replicated(sem.add_permits(4), "add_permits");
    sent(1, "add_permits");
    assert_eq!(master.cmd::<String>(&["GET", "sem-release"]), "8");
    not_replicated(sem.drain_permits(), "drain_permits");
    sent(1, "drain_permits");
    assert_eq!(master.cmd::<String>(&["GET", "sem-release"]), "0");
    not_replicated(
        client.semaphore("sem-new").try_set_permits(2),
        "try_set_permits",
    );
    sent(1, "try_set_permits");
    assert_eq!(master.cmd::<String>(&["GET", "sem-new"]), "2");
    not_replicated(pes.try_release(held[0]), "release");
    sent(1, "a permit's release");
    assert_eq!(acquired_on(&master, "pes-release"), 0);
    not_replicated(pes.add_permits(2), "add_permits");
    sent(1, "add_permits");
    assert_eq!(pes.available_permits().expect("available"), 3);
    // Idempotent ones are sent again, as Redisson does, then fail.
    not_replicated(pes.set_permits(5), "set_permits");
    sent(ATTEMPTS, "set_permits");
    assert_eq!(pes.permits().expect("permits"), 5);
    replica.resume();
}

#[test]
fn without_the_check_an_unacknowledged_acquire_holds() {
    let (master, replica) = master_and_replica();
    warm_up(&master);
    let client = synced_client(&master, false);
    let sem = client.semaphore("sem-unchecked");
    let pes = client.permit_expirable_semaphore("pes-unchecked");
    assert!(sem.try_set_permits(1).expect("set"));
    assert!(pes.try_set_permits(1).expect("set"));
    replica.pause();
    let taken = sem.acquire(1);
    let permit = pes.acquire(None);
    let released = sem.release(1);
    replica.resume();
    taken
        .expect("acquire: the missing acknowledgement is only logged")
        .forget();
    drop(permit.expect("acquire"));
    released.expect("release");
    assert_eq!(sem.available_permits().expect("available"), 1);
    assert_eq!(pes.available_permits().expect("available"), 1);
}

#[test]
fn the_latch_sends_no_wait() {
    // Redisson's latch calls are plain EVALs (no `syncedEval`): a frozen
    // replica delays none of them.
    let (master, replica) = master_and_replica();
    warm_up(&master);
    let client = synced_client(&master, true);
    let latch = client.count_down_latch("latch-plain");
    replica.pause();
    let waits = master.command_calls("wait");
    let started = Instant::now();
    assert!(latch.try_set_count(2).expect("set"));
    latch.count_down().expect("count down");
    latch.count_down().expect("count down");
    assert!(latch.wait_for(Duration::ZERO).expect("wait"));
    let took = started.elapsed();
    let after = master.command_calls("wait");
    replica.resume();
    assert_eq!(after, waits);
    assert!(took < Duration::from_millis(200), "took {took:?}");
}
