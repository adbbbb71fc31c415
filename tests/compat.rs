//! `ClientBuilder::redisson_compat` and its knobs against a real
//! redis-server, with Java's state planted by raw commands: permit ids
//! stored as hex text (Redisson up to 3.16.8) are released, renewed and read
//! by the crate whatever its own encoding, and with hex ids on (knob or
//! version) the crate writes them so; a read lock whose other reader's
//! markers are gone (Redisson 3.44–3.52's renewal defect) survives the
//! crate's read unlock under a 3.x version, and is deleted without one;
//! `inspect` shows both oddities; bad versions fail the build.

mod support;

use std::time::Duration;

use redisson_lock::{Client, ClientBuilder, Error, PermitId, PermitIdEncoding, RequestId};
use support::RedisServer;

fn builder(server: &RedisServer) -> ClientBuilder {
    support::builder(server.url())
}

/// The timeout ZSET's members, raw.
fn members(server: &RedisServer, key: &str) -> Vec<Vec<u8>> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(&mut server.con())
        .expect("ZRANGE")
}

fn score(server: &RedisServer, key: &str, member: &[u8]) -> Option<f64> {
    redis::cmd("ZSCORE")
        .arg(key)
        .arg(member)
        .query(&mut server.con())
        .expect("ZSCORE")
}

#[test]
fn bad_versions_fail_the_build_and_good_ones_build() {
    let server = RedisServer::start();
    for version in ["", "3.x", "3.9.9", "99.0.0", "5.0", "3", "3.16.8-SNAPSHOT"] {
        match builder(&server).redisson_compat(version).build() {
            Err(Error::InvalidArgument(message)) => {
                assert!(message.contains("3.12.0 to 4.x"), "{version:?}: {message}");
            }
            other => panic!("{version:?} built: {:?}", other.map(|_| ())),
        }
    }
    // The last call wins: a good version after a bad one builds.
    let client = builder(&server)
        .redisson_compat("nonsense")
        .redisson_compat(" v3.24.3")
        .build();
    assert!(client.is_ok(), "{:?}", client.err());
    for version in [
        "3.12", "3.12.4", "3.16.8", "3.21.3", "3.52.0", "4.7.0", "4.9.1",
    ] {
        let client = builder(&server).redisson_compat(version).build();
        assert!(client.is_ok(), "{version}: {:?}", client.err());
    }
}

/// Plants, as Java 3.16.8 leaves them, `available` permits and one acquired
/// permit per id (hex-text member, expiring in `lease_ms`) of `name`.
fn plant_hex_permits(server: &RedisServer, name: &str, available: u32, ids: &[PermitId]) {
    let timeout = format!("{{{name}}}:timeout");
    let _: () = server.cmd(&["SET", name, &available.to_string()]);
    let expiry = (support::now_ms() + 60_000).to_string();
    for id in ids {
        let _: i64 = server.cmd(&["ZADD", &timeout, &expiry, &id.to_string()]);
    }
}

#[test]
fn hex_text_permits_of_java_3_16_are_found_by_a_raw_writing_client() {
    let server = RedisServer::start();
    let client = builder(&server).build().expect("client");
    let name = "pes-old";
    let timeout = format!("{{{name}}}:timeout");
    let ids = [PermitId::random(), PermitId::random(), PermitId::random()];
    plant_hex_permits(&server, name, 1, &ids);
    let pes = client.permit_expirable_semaphore(name);

    // getLeaseTime finds the hex member.
    let left = pes.lease_time(ids[0]).expect("lease_time").expect("known");
    assert!(left > Duration::from_secs(50), "{left:?}");
    // updateLeaseTime renews it in place: still hex text.
    let before = score(&server, &timeout, ids[0].to_string().as_bytes()).expect("scored");
    assert!(
        pes.update_lease_time(ids[0], Some(Duration::from_secs(120)))
            .expect("update")
    );
    let after = score(&server, &timeout, ids[0].to_string().as_bytes()).expect("still hex");
    assert!(after > before + 50_000.0, "{before} -> {after}");
    assert!(score(&server, &timeout, ids[0].as_bytes()).is_none());

    // tryRelease of one.
    assert!(pes.try_release(ids[0]).expect("release"));
    assert_eq!(pes.available_permits().expect("available"), 2);

    // A raw permit of the crate's own, released together with a hex one.
    let own = pes.acquire(None).expect("acquire").forget();
    assert_eq!(members(&server, &timeout).len(), 3);
    assert!(members(&server, &timeout).contains(&own[0].as_bytes().to_vec()));
    pes.release_all(&[ids[1], own[0]]).expect("release_all");
    assert_eq!(
        members(&server, &timeout),
        vec![ids[2].to_string().into_bytes()]
    );
    assert_eq!(pes.available_permits().expect("available"), 3);
    // An unknown id is still refused, in either form.
    assert!(!pes.try_release(ids[0]).expect("release"));
    assert!(matches!(
        pes.lease_time(ids[1]),
        Err(Error::InvalidArgument(_))
    ));

    // inspect decodes the hex member and says how it is stored.
    let info = client.inspect(name).expect("inspect");
    assert_eq!(info.permits.len(), 1);
    assert_eq!(info.permits[0].id, ids[2]);
    assert!(info.permits[0].stored_as_hex);
}

#[test]
fn with_hex_ids_the_crate_writes_32_char_hex_members() {
    let server = RedisServer::start();
    for (name, builder) in [
        (
            "pes-knob",
            builder(&server).expirable_permit_ids(PermitIdEncoding::Hex),
        ),
        ("pes-version", builder(&server).redisson_compat("3.16.8")),
        // The explicit knob wins over the version, in either order.
        (
            "pes-raw-wins",
            builder(&server)
                .expirable_permit_ids(PermitIdEncoding::Raw)
                .redisson_compat("3.16.8"),
        ),
    ] {
        let client = builder.build().expect("client");
        let timeout = format!("{{{name}}}:timeout");
        let pes = client.permit_expirable_semaphore(name);
        assert!(pes.try_set_permits(2).expect("try_set_permits"));
        let permits = pes
            .acquire_n(2, Some(Duration::from_secs(30)))
            .expect("acquire");
        let mut expected: Vec<Vec<u8>> = permits
            .ids()
            .iter()
            .map(|id| {
                if name == "pes-raw-wins" {
                    id.as_bytes().to_vec()
                } else {
                    id.to_string().into_bytes()
                }
            })
            .collect();
        expected.sort();
        let mut stored = members(&server, &timeout);
        stored.sort();
        assert_eq!(stored, expected, "{name}");
        if name != "pes-raw-wins" {
            assert!(stored.iter().all(|m| m.len() == 32), "{name}");
            // What Java 3.16.8 would send to release one: its hex text.
            let hex = permits.ids()[0].to_string();
            let removed: i64 = server.cmd(&["ZREM", &timeout, &hex]);
            assert_eq!(removed, 1, "{name}: Java 3.16.8 finds the member");
        }
        let ids = permits.forget();
        assert!(pes.try_release(ids[1]).expect("release"), "{name}");
        assert!(members(&server, &timeout).is_empty() || name == "pes-raw-wins");
    }
}

/// Plants a read lock `name` held by a Java reader whose markers are gone
/// (Redisson 3.44–3.52: the renewal misses them), with a 30 s TTL.
fn plant_unmarked_reader(server: &RedisServer, name: &str) -> &'static str {
    let field = "7f0c2a4e-8d1b-4c39-9e55-2b6f1d3a9c11:42";
    let _: () = server.cmd(&["DEL", name]);
    let _: i64 = server.cmd(&["HSET", name, "mode", "read", field, "1"]);
    let _: i64 = server.cmd(&["PEXPIRE", name, "30000"]);
    field
}

/// The crate reads `name` next to a planted unmarked Java reader and lets
/// go (`latched`: with an explicit request id, the latch script; otherwise
/// the guard's release). `true` when the hash survived, still the Java
/// reader's.
fn survives_read_unlock(client: &Client, server: &RedisServer, name: &str, latched: bool) -> bool {
    let java = plant_unmarked_reader(server, name);
    let read = client.read_write_lock(name).read_lock();
    let guard = read.lock().expect("read lock");
    let info = client.inspect(name).expect("inspect");
    let own_field = client.owner_field();
    for holder in &info.holders {
        let expected = holder.field() == java;
        assert_eq!(
            holder.lacks_live_marker(),
            expected,
            "inspect: {holder:?} (own {own_field})"
        );
    }
    if latched {
        read.unlock_with_request_id(&RequestId::new())
            .expect("unlock");
        // Its hold is gone: the guard's release finds nothing to do.
        drop(guard);
    } else {
        guard.unlock().expect("unlock");
    }
    let exists: i64 = server.cmd(&["EXISTS", name]);
    if exists == 0 {
        return false;
    }
    let pttl: i64 = server.cmd(&["PTTL", name]);
    assert!(pttl > 20_000, "left to its TTL, not shortened: {pttl}");
    let fields: Vec<String> = server.cmd(&["HKEYS", name]);
    let mut fields = fields;
    fields.sort();
    assert_eq!(fields, vec![java.to_owned(), "mode".to_owned()]);
    true
}

#[test]
fn a_3x_read_unlock_leaves_a_lock_whose_other_reader_lost_its_markers() {
    let server = RedisServer::start();
    let compat = builder(&server)
        .redisson_compat("3.52.0")
        .build()
        .expect("client");
    assert!(survives_read_unlock(&compat, &server, "rw-3x", false));
    assert!(survives_read_unlock(
        &compat,
        &server,
        "rw-3x-latched",
        true
    ));
    let knob = builder(&server)
        .read_unlock_keeps_unmarked_readers(true)
        .build()
        .expect("client");
    assert!(survives_read_unlock(&knob, &server, "rw-knob", false));

    // Today's (4.x) rule: without a live marker the hash is deleted.
    let today = builder(&server).build().expect("client");
    assert!(!survives_read_unlock(&today, &server, "rw-4x", false));
    assert!(!survives_read_unlock(
        &today,
        &server,
        "rw-4x-latched",
        true
    ));
    // The explicit knob wins over the version.
    let off = builder(&server)
        .read_unlock_keeps_unmarked_readers(false)
        .redisson_compat("3.52.0")
        .build()
        .expect("client");
    assert!(!survives_read_unlock(&off, &server, "rw-off", false));
}

#[test]
fn a_3x_read_unlock_still_frees_a_lock_whose_readers_are_all_marked_or_gone() {
    let server = RedisServer::start();
    let client = builder(&server)
        .redisson_compat("3.52.0")
        .build()
        .expect("client");
    // Alone: the last reader deletes the lock, as always.
    let read = client.read_write_lock("rw-alone").read_lock();
    read.lock().expect("read").unlock().expect("unlock");
    let exists: i64 = server.cmd(&["EXISTS", "rw-alone"]);
    assert_eq!(exists, 0);
    // Next to a marked Java reader: the hash lives to that marker's TTL.
    let name = "rw-marked";
    let java = plant_unmarked_reader(&server, name);
    let marker = format!("{{{name}}}:{java}:rwlock_timeout:1");
    let _: () = server.cmd(&["SET", &marker, "1", "PX", "20000"]);
    read_then_unlock(&client, name);
    let pttl: i64 = server.cmd(&["PTTL", name]);
    assert!(pttl > 10_000 && pttl <= 20_000, "{pttl}");
    // The Java reader's marker expired and it is gone too: a writer gets in.
    let _: i64 = server.cmd(&["HDEL", name, java]);
    let _: i64 = server.cmd(&["DEL", &marker]);
    read_then_unlock(&client, name);
    let exists: i64 = server.cmd(&["EXISTS", name]);
    assert_eq!(exists, 0);
}

fn read_then_unlock(client: &Client, name: &str) {
    let read = client.read_write_lock(name).read_lock();
    read.lock().expect("read").unlock().expect("unlock");
}

/// The remaining queue deadline of a `lock()` waiter of a client of
/// `builder` on a fair lock held by another client.
fn fair_queue_deadline_ms(server: &RedisServer, builder: ClientBuilder, name: &str) -> i64 {
    fair_queue_deadline_ms_with(server, builder, name, None)
}

/// The same for a `try_lock_for(wait)` waiter when `wait` is given.
fn fair_queue_deadline_ms_with(
    server: &RedisServer,
    builder: ClientBuilder,
    name: &str,
    wait: Option<Duration>,
) -> i64 {
    let holder = builder_default(server);
    let waiting = builder.build().expect("client");
    let held = holder.fair_lock(name).lock().expect("lock");
    let waiter = match wait {
        Some(wait) => support::waiter::Waiter::try_lock_for(waiting.fair_lock(name), wait),
        None => support::waiter::Waiter::lock(waiting.fair_lock(name)),
    };
    assert!(support::eventually(Duration::from_secs(5), || {
        waiting.inspect(name).expect("inspect").queue.len() == 1
    }));
    let remaining = waiting.inspect(name).expect("inspect").queue[0]
        .remaining_ms
        .expect("a deadline");
    let released = std::time::Instant::now();
    held.unlock().expect("unlock");
    waiter.woken_within(released, Duration::from_secs(2), Duration::from_secs(10));
    remaining
}

fn builder_default(server: &RedisServer) -> Client {
    builder(server).build().expect("client")
}

#[test]
fn the_fair_lock_waits_5_s_for_redisson_up_to_3_13_2_unless_set() {
    let server = RedisServer::start();
    // The holder's lease (30 s) plus the waiter's wait.
    let old = fair_queue_deadline_ms(&server, builder(&server).redisson_compat("3.13.2"), "f-old");
    assert!((30_000..=36_000).contains(&old), "{old}");
    let new = fair_queue_deadline_ms(&server, builder(&server).redisson_compat("3.13.3"), "f-new");
    assert!(new > 300_000, "{new}");
    let set = fair_queue_deadline_ms(
        &server,
        builder(&server)
            .fair_lock_wait_timeout(Duration::from_secs(60))
            .redisson_compat("3.12.4"),
        "f-set",
    );
    assert!((60_000..=91_000).contains(&set), "{set}");

    // Before 3.13.3 a timed acquire queues with the wait timeout too, not
    // with its own wait (60 s here).
    let wait = Some(Duration::from_secs(60));
    let old = fair_queue_deadline_ms_with(
        &server,
        builder(&server).redisson_compat("3.13.2"),
        "f-old-timed",
        wait,
    );
    assert!((30_000..=36_000).contains(&old), "{old}");
    let new = fair_queue_deadline_ms_with(
        &server,
        builder(&server).redisson_compat("3.13.3"),
        "f-new-timed",
        wait,
    );
    assert!((60_000..=91_000).contains(&new), "{new}");
}
