//! The exact Redis state and pub/sub traffic of acquire, reentry and release:
//! what a Redisson client (or an operator with redis-cli) sees.

mod support;

use std::collections::HashMap;
use std::thread;
use std::time::Duration;

use redisson_lock::Client;
use support::RedisServer;
use support::state::{exists, pttl};

fn hash(server: &RedisServer, name: &str) -> HashMap<String, String> {
    server.cmd(&["HGETALL", name])
}

fn one_field(field: &str, count: &str) -> HashMap<String, String> {
    HashMap::from([(field.to_string(), count.to_string())])
}

#[test]
fn acquire_writes_one_owner_field_with_count_one_and_the_watchdog_lease() {
    let (server, client) = RedisServer::start_with_client();
    let guard = client.lock("orders").lock().expect("lock");

    let field = format!("{}:{}", client.id(), Client::thread_id());
    assert_eq!(field, client.owner_field());
    assert_eq!(hash(&server, "orders"), one_field(&field, "1"));
    let key_type: String = server.cmd(&["TYPE", "orders"]);
    assert_eq!(key_type, "hash");
    let ttl = pttl(&server, "orders");
    assert!((29_000..=30_000).contains(&ttl), "PTTL {ttl}");

    guard.unlock().expect("unlock");
    assert!(
        !exists(&server, "orders"),
        "the final release deletes the key"
    );
}

#[test]
fn owner_field_is_the_client_uuid_and_a_per_thread_number() {
    let (server, client) = RedisServer::start_with_client();
    let id = client.id().to_string();
    assert_eq!(id.len(), 36);
    assert!(
        id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') && id == id.to_lowercase(),
        "lowercase hyphenated UUID: {id}"
    );
    let here = client.owner_field();
    let there = {
        let client = client.clone();
        thread::spawn(move || client.owner_field())
            .join()
            .expect("thread")
    };
    assert_ne!(here, there);
    for field in [&here, &there] {
        let (uuid, thread) = field.rsplit_once(':').expect("uuid:thread");
        assert_eq!(uuid, id);
        thread.parse::<u64>().expect("a decimal thread number");
    }
    let other = Client::open(server.url()).expect("second client");
    assert_ne!(other.id(), client.id(), "every client gets a fresh UUID");
}

#[test]
fn reentry_counts_two_then_partial_release_counts_one_then_final_release_deletes_the_key() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.lock("reentrant");
    let field = client.owner_field();

    let first = lock.lock().expect("lock");
    assert_eq!(hash(&server, "reentrant"), one_field(&field, "1"));
    assert_eq!(lock.hold_count().expect("count"), 1);

    let second = lock.lock().expect("reentry");
    assert_eq!(hash(&server, "reentrant"), one_field(&field, "2"));
    assert_eq!(lock.hold_count().expect("count"), 2);

    second.unlock().expect("partial release");
    assert_eq!(hash(&server, "reentrant"), one_field(&field, "1"));
    assert_eq!(lock.hold_count().expect("count"), 1);
    assert!(lock.is_held_by_current_thread().expect("held"));
    let ttl = pttl(&server, "reentrant");
    assert!(
        (29_000..=30_000).contains(&ttl),
        "partial release keeps the lease: {ttl}"
    );

    first.unlock().expect("final release");
    let keys: Vec<String> = server.cmd(&["KEYS", "reentrant*"]);
    assert!(keys.is_empty(), "left behind: {keys:?}");
    assert_eq!(lock.hold_count().expect("count"), 0);
    assert!(!lock.is_locked().expect("is_locked"));
}

#[test]
fn reentry_and_partial_release_reset_the_lease_instead_of_adding_to_it() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.lock("resets").with_lease(Duration::from_secs(10));

    let first = lock.lock().expect("lock");
    thread::sleep(Duration::from_millis(400));
    let aged = pttl(&server, "resets");
    assert!(aged <= 9_650, "the lease ran down: {aged}");

    let second = lock.lock().expect("reentry");
    let reset = pttl(&server, "resets");
    assert!(
        (9_700..=10_000).contains(&reset),
        "reentry resets the TTL to the lease, not lease + remaining: {reset}"
    );

    thread::sleep(Duration::from_millis(400));
    second.unlock().expect("partial release");
    let after_release = pttl(&server, "resets");
    assert!(
        (9_700..=10_000).contains(&after_release),
        "partial release resets the TTL to the lease: {after_release}"
    );
    first.unlock().expect("final release");
}

#[test]
fn watchdog_mode_reentry_resets_the_ttl_to_the_watchdog_timeout() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.lock("wd-reentry");
    let first = lock.lock().expect("lock");
    thread::sleep(Duration::from_millis(400));
    let aged = pttl(&server, "wd-reentry");
    assert!(aged <= 29_650, "the lease ran down: {aged}");
    let second = lock.lock().expect("reentry");
    let reset = pttl(&server, "wd-reentry");
    assert!((29_700..=30_000).contains(&reset), "PTTL {reset}");
    drop(second);
    drop(first);
    assert!(!exists(&server, "wd-reentry"));
}

#[test]
fn explicit_lease_becomes_the_ttl() {
    let (server, client) = RedisServer::start_with_client();
    for (name, lease_ms) in [("lease-2s", 2_000), ("lease-45s", 45_000)] {
        let guard = client
            .lock(name)
            .with_lease(Duration::from_millis(lease_ms))
            .lock()
            .expect("lock");
        let ttl = pttl(&server, name);
        assert!(
            ttl <= lease_ms as i64 && ttl > lease_ms as i64 - 1_000,
            "{name}: PTTL {ttl}"
        );
        assert_eq!(hash(&server, name), one_field(&client.owner_field(), "1"));
        guard.unlock().expect("unlock");
    }
}

#[test]
fn remaining_ttl_and_queries_mirror_the_key() {
    let (_server, client) = RedisServer::start_with_client();
    let lock = client.lock("queries");
    assert_eq!(lock.remaining_ttl().expect("ttl"), None);
    assert!(!lock.is_locked().expect("locked"));
    let guard = lock.lock().expect("lock");
    let ttl = lock.remaining_ttl().expect("ttl").expect("some ttl");
    assert!(ttl > Duration::from_secs(29) && ttl <= Duration::from_secs(30));
    assert!(lock.is_locked().expect("locked"));
    let other_thread = {
        let lock = lock.clone();
        thread::spawn(move || {
            (
                lock.is_locked().expect("locked"),
                lock.is_held_by_current_thread().expect("held"),
                lock.hold_count().expect("count"),
            )
        })
        .join()
        .expect("thread")
    };
    assert_eq!(other_thread, (true, false, 0));
    drop(guard);
    assert_eq!(lock.remaining_ttl().expect("ttl"), None);
}

#[test]
fn unlock_message_zero_is_published_on_the_final_release_only() {
    let (server, client) = RedisServer::start_with_client();
    let mut subscriber = server.subscriber(&["redisson_lock__channel:{announced}"]);
    let lock = client.lock("announced");
    let quiet = Duration::from_millis(250);

    let first = lock.lock().expect("lock");
    assert_eq!(
        subscriber.next_message(quiet),
        None,
        "acquire publishes nothing"
    );
    let second = lock.lock().expect("reentry");
    assert_eq!(
        subscriber.next_message(quiet),
        None,
        "reentry publishes nothing"
    );
    second.unlock().expect("partial release");
    assert_eq!(
        subscriber.next_message(quiet),
        None,
        "a partial release publishes nothing"
    );
    first.unlock().expect("final release");
    let messages = subscriber.messages_within(Duration::from_millis(500));
    assert_eq!(
        messages,
        vec![support::Message {
            channel: "redisson_lock__channel:{announced}".into(),
            payload: "0".into(),
        }],
        "exactly one message, \"0\", after the final release"
    );
}

#[test]
fn a_name_with_a_brace_publishes_on_the_verbatim_channel() {
    let (server, client) = RedisServer::start_with_client();
    let mut subscriber = server.psubscriber(&["redisson_lock__channel:*"]);
    client
        .lock("{user}:42")
        .lock()
        .expect("lock")
        .unlock()
        .expect("unlock");
    let messages = subscriber.messages_within(Duration::from_millis(500));
    assert_eq!(
        messages,
        vec![support::Message {
            channel: "redisson_lock__channel:{user}:42".into(),
            payload: "0".into(),
        }]
    );
}

#[test]
fn a_failed_unlock_of_someone_elses_lock_changes_nothing_and_publishes_nothing() {
    let (server, client) = RedisServer::start_with_client();
    let java_field = "7f1c2a3e-0000-4000-8000-00000000beef:1";
    let _: () = server.cmd(&["HSET", "theirs", java_field, "1"]);
    let _: () = server.cmd(&["PEXPIRE", "theirs", "30000"]);
    let mut subscriber = server.subscriber(&["redisson_lock__channel:{theirs}"]);

    let lock = client.lock("theirs");
    let err = lock
        .unlock_with_request_id(&redisson_lock::RequestId::new())
        .expect_err("not ours");
    match err {
        redisson_lock::Error::NotHeld {
            name,
            client_id,
            thread_id,
        } => {
            assert_eq!(name, "theirs");
            assert_eq!(client_id, client.id());
            assert_eq!(thread_id, Client::thread_id());
        }
        other => panic!("expected NotHeld, got {other:?}"),
    }
    assert_eq!(hash(&server, "theirs"), one_field(java_field, "1"));
    assert_eq!(subscriber.next_message(Duration::from_millis(300)), None);
    let latches: Vec<String> = server.cmd(&["KEYS", "redisson_unlock_latch*"]);
    assert!(latches.is_empty(), "a not-held unlock writes no latch");
}
