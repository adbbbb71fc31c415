//! The fenced lock's own behaviour (PROTOCOL §5): the token counter
//! `redisson_lock_token:{<name>}`. What every type shares is in
//! `tests/conformance.rs`.

mod support;

use std::thread;
use std::time::Duration;

use redisson_lock::{Client, FencedLock};
use support::RedisServer;
use support::proxy::Proxy;
use support::state::{assert_no_phantom_hold, pttl};

fn client(server: &RedisServer) -> Client {
    server.client()
}

fn stored_token(server: &RedisServer, name: &str) -> Option<u64> {
    server.cmd(&["GET", &format!("redisson_lock_token:{{{name}}}")])
}

fn assert_increasing(tokens: &[u64]) {
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "tokens do not strictly increase: {tokens:?}"
    );
}

/// Every acquisition, reentry included, by either of two clients and by
/// two threads, gets a greater token than all before it; `token()` is the
/// last guard's.
#[test]
fn tokens_strictly_increase_across_acquisitions_reentry_included() {
    let server = RedisServer::start();
    let a = client(&server);
    let b = client(&server);
    let lock_a = a.fenced_lock("ledger");
    let lock_b = b.fenced_lock("ledger");
    assert_eq!(lock_a.token().expect("token"), None, "no token before");
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let outer = lock_a.lock().expect("lock");
        let inner = lock_a.lock().expect("reentry");
        tokens.extend([outer.token(), inner.token()]);
        assert_eq!(lock_a.token().expect("token"), Some(inner.token()));
        drop(inner);
        drop(outer);
        let guard = lock_b
            .try_lock_for(Duration::from_secs(5))
            .expect("try_lock_for")
            .expect("free");
        tokens.push(guard.token());
        assert_eq!(lock_b.token().expect("token"), Some(guard.token()));
        guard.unlock().expect("unlock");
        let from_thread = thread::scope(|s| {
            s.spawn(|| {
                let guard = lock_a.lock().expect("lock");
                let token = guard.token();
                guard.unlock().expect("unlock");
                token
            })
            .join()
            .expect("thread")
        });
        tokens.push(from_thread);
    }
    assert_increasing(&tokens);
    assert_eq!(tokens.len(), 12);
    assert_eq!(stored_token(&server, "ledger"), tokens.last().copied());
    assert_eq!(lock_b.token().expect("token"), tokens.last().copied());
}

/// Force unlock deletes the hash, never the token: the next acquisition
/// continues the sequence.
#[test]
fn force_unlock_leaves_the_token() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.fenced_lock("forced");
    let guard = lock.lock().expect("lock");
    let before = guard.token();
    assert!(lock.force_unlock().expect("force unlock"));
    assert!(!lock.is_locked().expect("is_locked"));
    assert_eq!(lock.token().expect("token"), Some(before));
    assert_eq!(stored_token(&server, "forced"), Some(before));
    let ttl = pttl(&server, "redisson_lock_token:{forced}");
    assert_eq!(ttl, -1, "the token counter never expires");
    let next = lock.lock().expect("lock");
    assert!(next.token() > before);
    drop(next);
    drop(guard);
}

fn through_proxy(server: &RedisServer, name: &str) -> (Proxy, Client, FencedLock) {
    let proxy = Proxy::start(server.port());
    let client = proxy.client();
    let lock = client.fenced_lock(name);
    // Load the scripts first, so that the dropped reply is the acquire's.
    lock.lock().expect("warm-up").unlock().expect("warm-up");
    (proxy, client, lock)
}

/// A first acquisition whose reply is lost is sent again: the resend's
/// token is greater than every earlier one, the count is 1, the last
/// unlock frees the lock, and later tokens keep increasing.
#[test]
fn a_lost_acquire_reply_still_yields_increasing_tokens_and_count_one() {
    let server = RedisServer::start();
    let (proxy, _client, lock) = through_proxy(&server, "lost");
    let warm = lock.token().expect("token").expect("a token after warm-up");
    let guard = proxy.losing_the_reply_to("lost", || lock.lock().expect("lock"));
    assert!(guard.token() > warm);
    assert_eq!(lock.token().expect("token"), Some(guard.token()));
    assert_eq!(lock.hold_count().expect("count"), 1);
    let token = guard.token();
    guard.unlock().expect("unlock");
    assert_no_phantom_hold(&lock);
    let next = lock.lock().expect("lock");
    assert!(next.token() > token);
}

/// A reentry whose reply is lost: count 2, not 3, and a greater token.
#[test]
fn a_lost_reentry_reply_still_yields_increasing_tokens_and_counts_once() {
    let server = RedisServer::start();
    let (proxy, _client, lock) = through_proxy(&server, "lost-again");
    let outer = lock.lock().expect("lock");
    let inner = proxy.losing_the_reply_to("lost-again", || lock.lock().expect("reentry"));
    assert!(inner.token() > outer.token());
    assert_eq!(lock.token().expect("token"), Some(inner.token()));
    assert_eq!(lock.hold_count().expect("count"), 2);
    inner.unlock().expect("unlock");
    outer.unlock().expect("unlock");
    assert_no_phantom_hold(&lock);
}

#[test]
fn a_hold_token_names_the_holder_s_field_and_token_and_is_adopted_with_them() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.fenced_lock("fenced-token");
    let guard = lock.lock().expect("lock");
    let token = guard.hold_token();
    assert_eq!(token.owner_field(), client.owner_field());
    assert_eq!(token.fencing_token(), Some(guard.token()));
    assert!(guard.token() > 0);
    // Handed over for good: this side leaves it one lease, another client
    // takes it over under the same field, with the same token.
    guard.keep_for(Duration::from_secs(30)).expect("keep_for");
    let other = server.client();
    let adopted = other
        .fenced_lock("fenced-token")
        .adopt(&token)
        .expect("adopt");
    assert_eq!(adopted.token(), token.fencing_token().unwrap_or(0));
    adopted.unlock().expect("unlock");
    let exists: i64 = server.cmd(&["EXISTS", "fenced-token"]);
    assert_eq!(exists, 0);
}
