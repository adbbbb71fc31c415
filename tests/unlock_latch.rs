//! The unlock latch (PROTOCOL §1.7): an unlock sent again with the same
//! request id returns the first outcome and never touches the lock again.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use redisson_lock::{LostReason, RequestId, UnlockOutcome};
use support::RedisServer;
use support::state::{exists, lock_twice, pttl};

const FOREIGN_FIELD: &str = "5d0b8f7e-1111-4222-8333-444455556666:1";

fn latch_key(name: &str, id: &RequestId) -> String {
    format!("redisson_unlock_latch:{{{name}}}:{}", id.as_str())
}

#[test]
fn request_ids_are_32_lowercase_hex_digits_and_unique() {
    let a = RequestId::new();
    let b = RequestId::new();
    assert_eq!(a.as_str().len(), 32);
    assert!(
        a.as_str()
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)),
        "{a}"
    );
    assert_ne!(a, b);
    assert_eq!(a.to_string(), a.as_str());
}

#[test]
fn replaying_a_partial_release_returns_still_held_without_releasing_again() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.lock("latched");
    let (first, second) = lock_twice(&lock);
    assert_eq!(lock.hold_count().expect("count"), 2);

    let id = RequestId::new();
    assert_eq!(
        lock.unlock_with_request_id(&id).expect("unlock"),
        UnlockOutcome::StillHeld
    );
    assert_eq!(lock.hold_count().expect("count"), 1);
    assert!(
        !first.is_lost() && !second.is_lost(),
        "a partial release leaves the thread's guards holding"
    );

    // The latch records the outcome "0" for the latch TTL.
    let latch = latch_key("latched", &id);
    let value: Option<String> = server.cmd(&["GET", &latch]);
    assert_eq!(value.as_deref(), Some("0"), "latch {latch}");
    let ttl = pttl(&server, &latch);
    assert!(ttl > 0, "the latch carries a PX TTL, got {ttl}");

    assert_eq!(
        lock.unlock_with_request_id(&id).expect("replay"),
        UnlockOutcome::StillHeld,
        "the replay reports the first outcome"
    );
    assert_eq!(
        lock.hold_count().expect("count"),
        1,
        "the replay did not release a second hold"
    );
    let state: HashMap<String, String> = server.cmd(&["HGETALL", "latched"]);
    assert_eq!(
        state,
        HashMap::from([(client.owner_field(), "1".to_string())])
    );

    // The guards' own account wins: a guard's release sets the count the
    // thread keeps by that account, and the last guard frees the lock.
    drop(second);
    let count: String = server.cmd(&["HGET", "latched", &client.owner_field()]);
    assert_eq!(count, "1");
    first.unlock().expect("last guard");
    assert!(!exists(&server, "latched"));
}

#[test]
fn replaying_a_final_release_returns_released_and_leaves_the_next_holder_alone() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.lock("handover");
    let guard = lock.lock().expect("lock");
    let id = RequestId::new();
    assert_eq!(
        lock.unlock_with_request_id(&id).expect("unlock"),
        UnlockOutcome::Released
    );
    let value: Option<String> = server.cmd(&["GET", &latch_key("handover", &id)]);
    assert_eq!(value.as_deref(), Some("1"));
    assert_eq!(
        guard.lost_reason(),
        Some(LostReason::Released),
        "the thread's guard holds nothing now"
    );

    // A Java client takes the lock next.
    let _: () = server.cmd(&["HSET", "handover", FOREIGN_FIELD, "1"]);
    let _: () = server.cmd(&["PEXPIRE", "handover", "30000"]);
    let mut subscriber = server.subscriber(&["redisson_lock__channel:{handover}"]);

    assert_eq!(
        lock.unlock_with_request_id(&id).expect("replay"),
        UnlockOutcome::Released,
        "the replay reports the first outcome"
    );
    let state: HashMap<String, String> = server.cmd(&["HGETALL", "handover"]);
    assert_eq!(
        state,
        HashMap::from([(FOREIGN_FIELD.to_string(), "1".to_string())]),
        "the new holder's field is intact"
    );
    let ttl = pttl(&server, "handover");
    assert!(ttl > 29_000, "the new holder's TTL is untouched: {ttl}");
    assert_eq!(
        subscriber.next_message(Duration::from_millis(300)),
        None,
        "a replay publishes nothing"
    );
    // The guard's own hold is gone; dropping it must not touch the new holder.
    assert!(guard.unlock().is_err());
    let state: HashMap<String, String> = server.cmd(&["HGETALL", "handover"]);
    assert_eq!(
        state,
        HashMap::from([(FOREIGN_FIELD.to_string(), "1".to_string())])
    );
}

#[test]
fn a_request_id_latch_is_kept_for_its_whole_ttl() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.lock("kept");
    let (_first, _second) = lock_twice(&lock);
    let id = RequestId::new();
    assert_eq!(
        lock.unlock_with_request_id(&id).expect("unlock"),
        UnlockOutcome::StillHeld
    );
    // Well after the reply: a caller
    // that replays its request id later still gets the first outcome.
    std::thread::sleep(Duration::from_millis(600));
    let ttl = pttl(&server, &latch_key("kept", &id));
    assert!(
        ttl > 0,
        "the caller's latch is kept for its TTL, PTTL {ttl}"
    );
    assert_eq!(
        lock.unlock_with_request_id(&id).expect("replay"),
        UnlockOutcome::StillHeld
    );
    assert_eq!(lock.hold_count().expect("count"), 1);
}

#[test]
fn guard_releases_write_no_latch() {
    let server = RedisServer::start();
    // Watch for any latch through keyspace events rather than racing reads.
    let _: () = server.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Kg$"]);
    let mut events = server.psubscriber(&["__keyspace@0__:redisson_unlock_latch:*"]);
    let client = server.client();
    let lock = client.lock("spent");
    let (first, second) = lock_twice(&lock);
    second.unlock().expect("partial release");
    first.unlock().expect("final release");
    let seen = events.messages_within(Duration::from_millis(300));
    assert!(seen.is_empty(), "latch events: {seen:?}");
    let left: Vec<String> = server.cmd(&["KEYS", "*"]);
    assert!(left.is_empty(), "nothing left behind: {left:?}");
}

#[test]
fn a_latched_partial_release_s_shorter_lease_moves_the_hold_s_deadline() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.lock("shortened").with_lease(Duration::from_secs(30));
    let (first, _second) = lock_twice(&lock);
    // The same thread's unlock through a handle with a 500 ms lease: the
    // hold it leaves has that TTL in Redis, and so locally.
    let short = client
        .lock("shortened")
        .with_lease(Duration::from_millis(500));
    assert_eq!(
        short
            .unlock_with_request_id(&RequestId::new())
            .expect("unlock"),
        UnlockOutcome::StillHeld
    );
    let ttl = pttl(&server, "shortened");
    assert!(ttl > 0 && ttl <= 500, "the unlock's lease: {ttl} ms");
    std::thread::sleep(Duration::from_millis(700));
    assert!(!exists(&server, "shortened"), "the key expired");
    assert_eq!(
        first.lost_reason(),
        Some(LostReason::LeaseExpired),
        "a guard reads as held past its key's expiry"
    );
}

#[test]
fn an_unlock_that_times_out_is_sent_again_as_many_times_as_configured() {
    let server = RedisServer::start();
    let proxy = support::proxy::Proxy::start(server.port());
    let client = redisson_lock::Client::builder(proxy.url())
        .response_timeout(Duration::from_millis(200))
        .unlock_retries(2, Duration::from_millis(50))
        .build()
        .expect("client");
    for (latched, name) in [(false, "paused"), (true, "paused-latched")] {
        let lock = client.lock(name);
        let guard = lock.lock().expect("lock");
        let before = proxy.requests_containing(name);
        // Writes held by the server for 1.5 s: every send times out.
        let _: String = server.cmd(&["CLIENT", "PAUSE", "1500", "WRITE"]);
        let result = if latched {
            lock.unlock_with_request_id(&RequestId::new()).map(drop)
        } else {
            guard.unlock()
        };
        assert!(result.is_err(), "latched {latched}: {result:?}");
        // The first send and its two retries, no more (a latched one's
        // within its latch's TTL).
        assert_eq!(
            proxy.requests_containing(name) - before,
            3,
            "latched {latched}: sends of an unlock with 2 retries"
        );
        let _: String = server.cmd(&["CLIENT", "UNPAUSE"]);
    }
}
