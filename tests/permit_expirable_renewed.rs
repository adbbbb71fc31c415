//! Renewed permits of the permit-expirable semaphore (issue 33 item 4)
//! against a real redis-server: held past three leases by the client's one
//! watchdog (the ZSET score keeps moving into the future, the available
//! count is unchanged), in both id encodings; lost within their lease when
//! the holder is cut off, while another client then gets them; released
//! and forgotten without renewal afterwards; a Java-style `tryRelease`
//! (another client's release by id) seen as lost by the holder.

mod support;

use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redisson_lock::{LostReason, PermitIdEncoding};
use support::RedisServer;
use support::proxy::Proxy;

const LEASE: Duration = Duration::from_millis(600);

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as f64
}

/// The score of `member` in `{name}:timeout`, if any.
fn score(server: &RedisServer, name: &str, member: &[u8]) -> Option<f64> {
    let mut con = server.con();
    redis::cmd("ZSCORE")
        .arg(format!("{{{name}}}:timeout"))
        .arg(member)
        .query(&mut con)
        .expect("ZSCORE")
}

#[test]
fn renewed_permits_outlive_three_leases_in_both_encodings() {
    let server = RedisServer::start();
    for (name, encoding) in [
        ("raw", PermitIdEncoding::Raw),
        ("hex", PermitIdEncoding::Hex),
    ] {
        let client = support::builder(server.url())
            .watchdog_timeout(LEASE)
            .expirable_permit_ids(encoding)
            .build()
            .expect("client");
        let sem = client.permit_expirable_semaphore(name);
        assert!(sem.try_set_permits(3).expect("set"));
        let started = Instant::now();
        let permits = sem.acquire_renewed(2).expect("acquire");
        let took = started.elapsed();
        assert!(permits.is_renewed());
        let lost = permits.lost_signal().expect("a renewed permit's signal");
        let member = |id: &redisson_lock::PermitId| match encoding {
            PermitIdEncoding::Hex => id.to_string().into_bytes(),
            _ => id.as_bytes().to_vec(),
        };
        let first = score(&server, name, &member(&permits.ids()[0])).expect("stored");
        let initial = now_ms();
        assert!(first <= initial + LEASE.as_millis() as f64 + 5.0);
        thread::sleep(LEASE * 3 + LEASE / 2);
        for id in permits.ids() {
            let at = score(&server, name, &member(id)).expect("still in the ZSET");
            let now = now_ms();
            assert!(at > now, "{name}: expiry {at} not after now {now}");
            assert!(
                at > initial + LEASE.as_millis() as f64 * 2.0,
                "{name}: renewed"
            );
        }
        // The other form was never written.
        let other = match encoding {
            PermitIdEncoding::Hex => permits.ids()[0].as_bytes().to_vec(),
            _ => permits.ids()[0].to_string().into_bytes(),
        };
        assert_eq!(score(&server, name, &other), None);
        assert_eq!(sem.available_permits().expect("available"), 1);
        assert!(!permits.is_lost());
        assert_eq!(lost.reason(), None);
        permits.release().expect("release");
        assert_eq!(sem.available_permits().expect("available"), 3);
        assert_eq!(lost.wait_timeout(Duration::from_millis(50)), None);
        eprintln!(
            "{name}: acquire took {took:?}, held {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn renewed_permits_are_lost_within_their_lease_when_cut_off() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let holder = support::watchdog_client(&proxy.url(), LEASE);
    let other = server.watchdog_client(LEASE);
    let sem = holder.permit_expirable_semaphore("cut");
    assert!(sem.try_set_permits(1).expect("set"));
    let permits = sem.acquire_renewed(1).expect("acquire");
    let id = permits.ids()[0];
    let signal = permits.lost_signal().expect("signal");
    thread::sleep(LEASE); // renewed at least once
    drop(proxy); // the holder is cut off: no renewal gets through
    let cut = Instant::now();
    thread::sleep(Duration::from_millis(20)); // a renewal in flight lands
    let expiry = score(&server, "cut", id.as_bytes()).expect("held");
    let reason = signal.wait_timeout(LEASE * 3);
    let lost_at_ms = now_ms();
    assert_eq!(reason, Some(LostReason::LeaseExpired));
    // The deadline it fired at, on the wall clock, is no later than the
    // permit's expiry in Redis; the wake-up itself within scheduling slack.
    let late = Instant::now().saturating_duration_since(signal.valid_until());
    let deadline_ms = lost_at_ms - late.as_millis() as f64;
    assert!(
        deadline_ms <= expiry,
        "deadline {deadline_ms} after the expiry {expiry}"
    );
    assert!(
        lost_at_ms <= expiry + 50.0,
        "lost at {lost_at_ms}, after the expiry {expiry}"
    );
    eprintln!(
        "signalled {:.0} ms before the ZSET expiry (woke {late:?} after the deadline)",
        expiry - lost_at_ms
    );
    assert!(permits.is_lost());
    eprintln!("lost {:?} after the cut", cut.elapsed());
    // Another client gets the permit once it expired in Redis.
    let theirs = other.permit_expirable_semaphore("cut");
    let got = theirs
        .try_acquire_for(LEASE * 2, Some(Duration::from_secs(5)))
        .expect("acquire");
    assert!(got.is_some(), "the expired permit came back");
    eprintln!("taken by another client {:?} after the cut", cut.elapsed());
    drop(permits); // its release fails quietly: the permit is someone else's
    assert_eq!(theirs.available_permits().expect("available"), 0);
}

#[test]
fn a_release_by_id_elsewhere_is_a_loss_and_release_stops_renewal() {
    let server = RedisServer::start();
    let holder = server.watchdog_client(LEASE);
    let other = server.client();
    let sem = holder.permit_expirable_semaphore("taken");
    assert!(sem.try_set_permits(2).expect("set"));
    let permits = sem.acquire_renewed(1).expect("acquire");
    let signal = permits.lost_signal().expect("signal");
    // What a Java `tryRelease(id)` does: release by id from another client.
    let theirs = other.permit_expirable_semaphore("taken");
    assert!(theirs.try_release(permits.ids()[0]).expect("release"));
    let reason = signal.wait_timeout(LEASE);
    assert_eq!(reason, Some(LostReason::KeyGone));
    assert_eq!(sem.available_permits().expect("available"), 2);
    drop(permits);
    assert_eq!(sem.available_permits().expect("available"), 2);

    // A forgotten renewed permit is no longer renewed: it expires.
    let permits = sem
        .try_acquire_renewed_for(1, Duration::from_secs(1))
        .expect("acquire")
        .expect("available");
    let ids = permits.forget();
    thread::sleep(LEASE + LEASE / 2);
    let left = score(&server, "taken", ids[0].as_bytes());
    assert!(
        left.is_none_or(|at| at <= now_ms()),
        "not renewed: {left:?}"
    );
    assert_eq!(
        sem.available_permits().expect("available"),
        2,
        "expired, reclaimed"
    );
    // Fixed-lease permits have no signal and are never lost.
    let fixed = sem.acquire(Some(Duration::from_secs(5))).expect("acquire");
    assert!(fixed.lost_signal().is_none());
    assert!(!fixed.is_lost() && !fixed.is_renewed());
    // A timed renewed acquire that cannot be served gives up.
    let _second = sem.acquire(None).expect("acquire");
    let none = sem
        .try_acquire_renewed_for(1, Duration::from_millis(100))
        .expect("try");
    assert!(none.is_none());
}

#[test]
fn permits_are_renewed_in_the_locks_batches() {
    let server = RedisServer::start();
    let client = server.watchdog_client(LEASE);
    let period = LEASE / 3;
    let guards: Vec<_> = (0..150)
        .map(|i| client.lock(format!("batch-{i}")).lock().expect("lock"))
        .collect();
    let sem = client.permit_expirable_semaphore("many");
    assert!(sem.try_set_permits(200).expect("set"));
    let permits: Vec<_> = (0..120)
        .map(|_| sem.acquire_renewed(1).expect("acquire"))
        .collect();
    assert_eq!(client.diagnostics().registered_holds, 270);
    thread::sleep(period * 2); // the scripts are loaded
    let before = server.command_calls("evalsha");
    let started = Instant::now();
    thread::sleep(period * 9);
    let calls = server.command_calls("evalsha") - before;
    let ticks = started.elapsed().as_secs_f64() / period.as_secs_f64();
    // Per tick: 2 lock chunks (100 + 50) and 2 permit chunks (100 + 20),
    // pipelined in one round trip; not one call per hold.
    eprintln!("{calls} renewal calls in {ticks:.1} ticks");
    assert!(
        (4 * 7..=4 * 11).contains(&calls),
        "{calls} calls in {ticks:.1} ticks: 4 per tick expected"
    );
    for p in permits.iter().step_by(17) {
        let at = score(&server, "many", p.ids()[0].as_bytes()).expect("held");
        assert!(at > now_ms());
        assert!(!p.is_lost());
    }
    assert!(guards.iter().all(|g| !g.is_lost()));
    assert_eq!(sem.available_permits().expect("available"), 80);
    drop(permits);
    drop(guards);
    assert_eq!(client.diagnostics().registered_holds, 0);
    assert_eq!(sem.available_permits().expect("available"), 200);
}

#[test]
fn a_shutdown_releases_renewed_permits_and_reports_them_lost() {
    let server = RedisServer::start();
    let client = server.watchdog_client(LEASE);
    let sem = client.permit_expirable_semaphore("shut");
    assert!(sem.try_set_permits(3).expect("set"));
    let permits = sem.acquire_renewed(2).expect("acquire");
    let signal = permits.lost_signal().expect("signal");
    let started = Instant::now();
    client
        .shutdown(Duration::from_millis(100))
        .expect("shutdown");
    eprintln!("shutdown took {:?}", started.elapsed());
    assert_eq!(signal.reason(), Some(LostReason::Shutdown));
    assert!(permits.is_lost());
    let available: i64 = server.cmd(&["GET", "shut"]);
    assert_eq!(available, 3, "the shutdown released them");
    permits.release().expect("nothing left to release");
    let available: i64 = server.cmd(&["GET", "shut"]);
    assert_eq!(available, 3);
}

#[test]
fn renewed_permits_are_renewed_on_every_cluster_master() {
    let cluster = support::cluster::Cluster::shared();
    let client = support::connections(redisson_lock::Client::cluster_builder(cluster.urls()))
        .watchdog_timeout(LEASE)
        .build()
        .expect("cluster client");
    let names = cluster.names_on_different_masters("pes-renewed-", 3);
    let held: Vec<_> = names
        .iter()
        .map(|name| {
            let sem = client.permit_expirable_semaphore(name.as_str());
            assert!(sem.try_set_permits(1).expect("set"));
            (sem.clone(), sem.acquire_renewed(1).expect("acquire"))
        })
        .collect();
    thread::sleep(LEASE * 3 + LEASE / 2);
    for (sem, permits) in &held {
        assert!(!permits.is_lost(), "{}", sem.name());
        let left = sem
            .lease_time(permits.ids()[0])
            .expect("held")
            .expect("finite");
        assert!(left > Duration::ZERO && left <= LEASE, "{left:?}");
        assert_eq!(sem.available_permits().expect("available"), 0);
    }
    for (sem, permits) in held {
        permits.release().expect("release");
        assert_eq!(sem.available_permits().expect("available"), 1);
        assert!(sem.delete().expect("delete"));
    }
}
