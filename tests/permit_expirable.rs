//! The permit-expirable semaphore (Redisson's RPermitExpirableSemaphore,
//! SYNCHRONIZERS §4) against a real redis-server: semantics, the Redis
//! state byte for byte (raw 16-byte ids in `{name}:timeout`, the permanent
//! sentinel), the published payloads, lease expiry reaching a waiter by the
//! nearest-expiry hint, lost replies, bad input, and a Redis Cluster.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error, PermitId};
use support::RedisServer;
use support::cluster::Cluster;
use support::proxy::{Fault, Proxy};
use support::sync::{assert_took_ms, spawn_reporting, woken_within};

const SENTINEL: &str = "922337203685477";

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms")
}

/// The timeout ZSET as (raw member, score text) pairs.
fn zset(server: &RedisServer, key: &str) -> Vec<(Vec<u8>, String)> {
    let mut con = server.con();
    let flat: Vec<Vec<u8>> = redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut con)
        .expect("ZRANGE");
    flat.chunks(2)
        .map(|p| {
            (
                p[0].clone(),
                String::from_utf8(p[1].clone()).expect("score"),
            )
        })
        .collect()
}

#[test]
fn permits_ids_leases_and_counts_are_redissons() {
    let (server, client) = RedisServer::start_with_client();
    let sem = client.permit_expirable_semaphore("pes1");
    assert_eq!(sem.name(), "pes1");
    assert_eq!(sem.available_permits().expect("available"), 0);
    assert!(sem.try_set_permits(3).expect("set"));
    assert!(!sem.try_set_permits(5).expect("set again"));
    assert_eq!(server.cmd::<String>(&["GET", "pes1"]), "3");

    let before = now_ms();
    let leased = sem
        .try_acquire(Some(Duration::from_secs(10)))
        .expect("try_acquire")
        .expect("a permit");
    let permanent = sem.acquire(None).expect("acquire");
    let leased_id = leased.ids()[0];
    let permanent_id = permanent.ids()[0];
    let state = zset(&server, "{pes1}:timeout");
    assert_eq!(state.len(), 2);
    let score_of = |id: PermitId| {
        state
            .iter()
            .find(|(member, _)| member.as_slice() == id.as_bytes())
            .map(|(_, score)| score.clone())
            .unwrap_or_else(|| panic!("{id} is not a raw 16-byte member: {state:?}"))
    };
    let expiry: i64 = score_of(leased_id).parse().expect("ms");
    assert!(
        (before + 10_000..=now_ms() + 10_000).contains(&expiry),
        "{expiry}"
    );
    assert_eq!(score_of(permanent_id), SENTINEL);
    assert_eq!(leased_id.to_string().len(), 32);

    assert_eq!(sem.available_permits().expect("available"), 1);
    assert_eq!(sem.permits().expect("permits"), 3);
    assert_eq!(sem.acquired_permits().expect("acquired"), 2);
    assert_eq!(sem.lease_time(permanent_id).expect("lease"), None);
    let left = sem.lease_time(leased_id).expect("lease").expect("finite");
    assert!(left > Duration::from_secs(9) && left <= Duration::from_secs(10));

    // Two more cannot be had, one can.
    assert!(
        sem.try_acquire_n_for(2, Duration::ZERO, None)
            .expect("n")
            .is_none()
    );
    let third = sem.try_acquire(None).expect("third").expect("one left");
    assert!(sem.try_acquire(None).expect("none left").is_none());

    // Renew: a leased permit becomes permanent and back.
    assert!(sem.update_lease_time(leased_id, None).expect("update"));
    assert_eq!(zset(&server, "{pes1}:timeout").len(), 3);
    assert_eq!(sem.lease_time(leased_id).expect("lease"), None);
    assert!(
        sem.update_lease_time(leased_id, Some(Duration::from_secs(60)))
            .expect("update")
    );
    assert!(sem.lease_time(leased_id).expect("lease").expect("finite") > Duration::from_secs(59));

    // All or nothing: an unknown id among them frees nothing.
    let unknown = PermitId::random();
    let third_id = third.forget()[0];
    assert!(matches!(
        sem.release_all(&[third_id, unknown]),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(sem.acquired_permits().expect("acquired"), 3);
    assert!(matches!(
        sem.release_all(&[third_id, third_id]),
        Err(Error::InvalidArgument(_))
    ));
    sem.release_all(&[third_id]).expect("release_all");
    assert!(!sem.try_release(third_id).expect("second release"));
    assert!(matches!(
        sem.release(third_id),
        Err(Error::InvalidArgument(_))
    ));
    assert!(
        !sem.update_lease_time(unknown, None)
            .expect("update unknown")
    );
    assert!(matches!(
        sem.lease_time(unknown),
        Err(Error::InvalidArgument(_))
    ));

    // The guards release on drop; forget keeps them.
    drop(leased);
    let kept = permanent.forget();
    assert_eq!(sem.available_permits().expect("available"), 2);
    sem.release(kept[0]).expect("release a forgotten permit");
    assert_eq!(sem.available_permits().expect("available"), 3);

    sem.add_permits(2).expect("add");
    assert_eq!(sem.permits().expect("permits"), 5);
    sem.add_permits(-1).expect("remove");
    assert_eq!(sem.available_permits().expect("available"), 4);
    let held = sem.acquire(None).expect("acquire");
    sem.set_permits(2).expect("set_permits");
    assert_eq!(sem.available_permits().expect("available"), 1);
    assert_eq!(sem.permits().expect("permits"), 2);
    held.release().expect("release");
    assert!(sem.delete().expect("delete"));
    assert!(!server.cmd::<bool>(&["EXISTS", "pes1"]));
    assert!(!server.cmd::<bool>(&["EXISTS", "{pes1}:timeout"]));
    assert!(!sem.delete().expect("delete again"));
}

#[test]
fn payloads_are_redissons() {
    let (server, client) = RedisServer::start_with_client();
    let sem = client.permit_expirable_semaphore("pay");
    let mut sub = server.subscriber(&["redisson_sc:{pay}"]);
    let next = |sub: &mut support::RawSubscriber| {
        sub.next_message(Duration::from_secs(2))
            .expect("a message")
            .payload
    };
    assert!(sem.try_set_permits(2).expect("set"));
    assert_eq!(next(&mut sub), "2");
    let a = sem.acquire(None).expect("a");
    let b = sem.acquire(None).expect("b");
    assert!(sub.messages_within(Duration::from_millis(200)).is_empty());
    sem.release(a.forget()[0]).expect("release one");
    assert_eq!(next(&mut sub), "1", "release publishes the new total");
    sem.add_permits(3).expect("add");
    assert_eq!(next(&mut sub), "3", "add_permits publishes the delta");
    sem.add_permits(-1).expect("remove");
    b.release().expect("release many");
    assert_eq!(
        next(&mut sub),
        "1",
        "release_all publishes the count released"
    );
    sem.set_permits(7).expect("set_permits");
    assert_eq!(next(&mut sub), "7", "set_permits publishes the target");
}

#[test]
fn a_release_and_an_expiry_wake_waiters() {
    let (_server, client) = RedisServer::start_with_client();
    let sem = client.permit_expirable_semaphore("wake");
    assert!(sem.try_set_permits(1).expect("set"));

    // Released: the message wakes the waiter at once.
    let held = sem.acquire(None).expect("held");
    let (rx, waiter) = {
        let sem = sem.clone();
        spawn_reporting(move || sem.acquire(None).expect("waiter"))
    };
    thread::sleep(Duration::from_millis(300));
    assert!(rx.try_recv().is_err(), "acquired while held");
    let released = Instant::now();
    held.release().expect("release");
    woken_within(&rx, released, Duration::from_millis(500), "release");
    let permits = waiter.join().expect("waiter");
    permits.release().expect("release");

    // Expired: nothing is published; the nearest-expiry hint wakes it well
    // before the 3 s safety re-poll.
    let leased = sem
        .acquire(Some(Duration::from_millis(400)))
        .expect("leased")
        .forget();
    let started = Instant::now();
    let got = sem
        .try_acquire_for(Duration::from_secs(10), None)
        .expect("wait")
        .expect("the expired permit");
    assert_took_ms(started, 300..1500);
    assert!(!sem.try_release(leased[0]).expect("expired id"));
    drop(got);

    // A multi-permit waiter re-checks after every message.
    let a = sem.acquire(None).expect("a");
    sem.add_permits(1).expect("add");
    let b = sem.acquire(None).expect("b");
    let waiter = {
        let sem = sem.clone();
        thread::spawn(move || sem.try_acquire_n_for(2, Duration::from_secs(10), None))
    };
    thread::sleep(Duration::from_millis(200));
    drop(a);
    thread::sleep(Duration::from_millis(200));
    drop(b);
    let two = waiter.join().expect("join").expect("wait").expect("two");
    assert_eq!(two.ids().len(), 2);

    // Time out.
    let started = Instant::now();
    assert!(
        sem.try_acquire_for(Duration::from_millis(300), None)
            .expect("wait")
            .is_none()
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[test]
fn a_lost_reply_is_an_unknown_outcome_never_a_resend() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let client = Client::open(proxy.url()).expect("client");
    // Load the scripts through a sibling semaphore first.
    let warm = client.permit_expirable_semaphore("warm");
    assert!(warm.try_set_permits(1).expect("set"));
    warm.acquire(None)
        .expect("warm")
        .release()
        .expect("warm release");
    let id = warm.acquire(None).expect("warm").forget()[0];
    warm.release(id).expect("warm release of one");

    let sem = client.permit_expirable_semaphore("lostsem");
    assert!(sem.try_set_permits(2).expect("set"));
    proxy.arm("lostsem", Fault::DropReplyAndClose);
    match sem.acquire(None) {
        Err(Error::OutcomeUnknown {
            operation, name, ..
        }) => {
            assert_eq!((operation, name.as_str()), ("acquire", "lostsem"));
        }
        other => panic!("expected OutcomeUnknown, got {other:?}"),
    }
    assert_eq!(proxy.injected(), 1);
    // It ran once (the permit is out), and was not sent twice.
    assert_eq!(zset(&server, "{lostsem}:timeout").len(), 1);
    assert_eq!(server.cmd::<String>(&["GET", "lostsem"]), "1");

    let held = sem.acquire(None).expect("acquire").forget();
    proxy.arm("lostsem", Fault::DropReplyAndClose);
    assert!(matches!(
        sem.release(held[0]),
        Err(Error::OutcomeUnknown {
            operation: "release",
            ..
        })
    ));
    assert_eq!(server.cmd::<String>(&["GET", "lostsem"]), "1");
    assert!(!sem.try_release(held[0]).expect("already released"));
}

#[test]
fn bad_input_is_refused() {
    let (_server, client) = RedisServer::start_with_client();
    let sem = client.permit_expirable_semaphore("bad");
    for bad in [
        "",
        "abc",
        "0123456789abcdef0123456789abcde",
        "0123456789abcdef0123456789abcdef0",
        "0123456789abcdef0123456789abcdeg",
        "0x23456789abcdef0123456789abcdef",
    ] {
        assert!(
            matches!(bad.parse::<PermitId>(), Err(Error::InvalidArgument(_))),
            "{bad:?}"
        );
    }
    let upper: PermitId = "0123456789ABCDEF0123456789ABCDEF".parse().expect("upper");
    assert_eq!(upper.to_string(), "0123456789abcdef0123456789abcdef");
    assert!(sem.try_set_permits(1).expect("set"));
    assert!(matches!(
        sem.acquire_n(0, None),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        sem.try_acquire(Some(Duration::ZERO)),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        sem.try_set_permits(u32::MAX),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        client.permit_expirable_semaphore("").available_permits(),
        Err(Error::InvalidArgument(_))
    ));
    sem.release_all(&[]).expect("nothing to release");
    // The counter is untouched by the refusals.
    assert_eq!(sem.available_permits().expect("available"), 1);
}

#[test]
fn cluster_waiters_wake_on_every_master() {
    let cluster = Cluster::shared();
    let client = cluster.client();
    for name in cluster.names_on_different_masters("pes-", 3) {
        let sem = client.permit_expirable_semaphore(name.as_str());
        assert!(sem.try_set_permits(1).expect("set"));
        let held = sem.acquire(None).expect("held");
        let owner = cluster.owner(&name);
        assert_eq!(
            owner.cmd::<i64>(&["ZCARD", &format!("{{{name}}}:timeout")]),
            1
        );
        let waiter = {
            let sem = sem.clone();
            thread::spawn(move || {
                let started = Instant::now();
                let permits = sem.acquire(None).expect("waiter");
                (started.elapsed(), permits.forget())
            })
        };
        thread::sleep(Duration::from_millis(300));
        held.release().expect("release");
        let (took, ids) = waiter.join().expect("join");
        assert!(took < Duration::from_secs(2), "{name}: {took:?}");
        sem.release(ids[0]).expect("release");
        assert_eq!(sem.available_permits().expect("available"), 1);
    }
}
